"""DT-PKC: the distributed two-trapdoor public-key cryptosystem (Liu et al. 2016), on gmpy2.

Implements exactly the normative math of privfl's DT-PKC issue (which corrects the RevFRF
appendix):

* KGC: ``N = p q`` with ``gcd(λ, N) = 1``, ``λ = lcm(p-1, q-1)``; ``g = -a^{2N} mod N²``.
* Weak keys: ``θ ∈ [1, N/4]``, ``h = g^θ mod N²``; joint key of i and j: ``h_i h_j``.
* ``Enc_h(m) = (h^r (1 + mN), g^r) mod N²`` with ``r ∈ [1, N/4]``; signed plaintexts
  (``[0, N/2)`` non-negative, ``(N/2, N)`` encode ``m - N``).
* Weak decryption ``L(C1 (C2^θ)^{-1})``; strong ``L(C1^λ) λ^{-1}``; split strong key
  ``s = λ (λ^{-1} mod N²) mod λN²``, ``λ1`` uniform in ``[0, λN²)``, ``λ2 = s - λ1``;
  ``PSDec1 = C1^{λ1}``, ``PSDec2 = L(T · C1^{λ2})``.
* Joint weak partial decryption, re-encryption (``HReEnc``), refresh (``HEncRef``), same-key
  homomorphism, ``HoAdd`` across keys and ``HoLT`` (``[[2x+1]] = [[x]]² Enc(1)``; the
  provider tests ``l > N/2``, never a bit length).

Roles hold only their own secrets: :class:`KeyGenerationCenter` (p, q, λ; issues keys),
:class:`CenterServer` (``θ_CS``, ``λ1``), :class:`ComputationProvider` (``λ2``) and
:class:`KeyHolder` (a participant's ``θ_u``). Two-party protocols are request/response
methods exchanging serialised messages (``to_bytes``/``from_bytes`` with the project's
header), so they can cross a network; :func:`secure_add` and :func:`secure_less_than` run
them in one process.

Randomness comes from :mod:`secrets`; primes from gmpy2 with 64 Miller-Rabin rounds.
Protocol steps take the same path whatever the secret values (no early exits on secrets).
"""

from __future__ import annotations

import functools
import math
import secrets
from dataclasses import dataclass
from typing import Any

import gmpy2
from gmpy2 import mpz

from privfl.errors import InputError, MalformedMessageError
from privfl.messages import SESSION_ID_BYTES, Header, Reader, Writer, decode_message, encode_message

__all__ = [
    "CenterServer",
    "Ciphertext",
    "ComputationProvider",
    "KeyGenerationCenter",
    "KeyHolder",
    "PublicKey",
    "PublicParams",
    "SecretKey",
    "StrongKeyShare",
    "add",
    "decrypt",
    "encrypt",
    "from_fixed_point",
    "joint_partial_decrypt",
    "joint_public_key",
    "negate",
    "partial_decrypt_strong1",
    "partial_decrypt_strong2",
    "reencrypt",
    "refresh",
    "scale",
    "secure_add",
    "secure_less_than",
    "to_fixed_point",
]

PROTOCOL = "dtpkc"
VERSION = 1
MR_ROUNDS = 64
DEFAULT_FRACTION_BITS = 32


def _rand_below(n: Any) -> Any:
    """Uniform integer in [0, n) from the OS CSPRNG."""
    return mpz(secrets.randbelow(int(n)))


def _rand_range(lo: Any, hi: Any) -> Any:
    """Uniform integer in [lo, hi]."""
    return mpz(lo) + _rand_below(mpz(hi) - mpz(lo) + 1)


def _random_prime(bits: int) -> Any:
    while True:
        cand = mpz(secrets.randbits(bits)) | (mpz(1) << (bits - 1)) | 1
        cand |= mpz(1) << (bits - 2)  # top two bits set: |pq| has exactly 2*bits bits
        if gmpy2.is_prime(cand, MR_ROUNDS):
            return cand


def _L(x: Any, n: Any) -> Any:
    return (x - 1) // n


FIXED_BASE_WINDOW = 5


class _FixedBase:
    """Fixed-base exponentiation with a precomputed table (window w): base^e costs about
    |e|/w multiplications instead of |e| squarings. Encryption raises the same g and h to
    fresh random exponents, so this speeds it up ~4x (13,000 entries at |N| = 2048)."""

    def __init__(self, base: Any, modulus: Any, exponent_bits: int) -> None:
        w = FIXED_BASE_WINDOW
        self.modulus = modulus
        self.mask = (1 << w) - 1
        self.table: list[list[Any]] = []
        cur = mpz(base) % modulus
        for _ in range((exponent_bits + w - 1) // w):
            row = [mpz(1)]
            for _ in range(1, 1 << w):
                row.append(row[-1] * cur % modulus)
            self.table.append(row)
            cur = row[-1] * cur % modulus

    def pow(self, e: Any) -> Any:
        if gmpy2.bit_length(e) > len(self.table) * FIXED_BASE_WINDOW:
            raise ValueError("exponent too large for this table")
        r, w = mpz(1), FIXED_BASE_WINDOW
        e = mpz(e)
        # every window is processed whatever its digit (no exponent-dependent branching
        # in the loop count; a zero digit multiplies by 1)
        for row in self.table:
            r = r * row[int(e & self.mask)] % self.modulus
            e >>= w
        return r


@functools.lru_cache(maxsize=32)
def _fixed_base(base: Any, modulus: Any, exponent_bits: int) -> _FixedBase:
    return _FixedBase(base, modulus, exponent_bits)


_BASE_USES: dict[tuple[Any, Any], int] = {}
TABLE_AFTER_USES = 4


def _pow_fixed(base: Any, e: Any, params: PublicParams) -> Any:
    """base^e mod N² for e <= N/4: a plain powmod for the first few uses of a base, then a
    cached fixed-base table (a table costs about as much as 30 exponentiations to build)."""
    key = (mpz(base), params.n2)
    uses = _BASE_USES.get(key, 0) + 1
    if uses <= TABLE_AFTER_USES:
        if len(_BASE_USES) > 4096:
            _BASE_USES.clear()
        _BASE_USES[key] = uses
        return gmpy2.powmod(base, e, params.n2)
    return _fixed_base(key[0], params.n2, params.bits).pow(e)


# ============================================================================ public data
@dataclass(frozen=True)
class PublicParams:
    """The system's public parameters: modulus N, generator g and the plaintext bounds.

    ``ell``: plaintexts are signed integers with ``|m| < 2^ell``; ``sigma``: bits of the HoLT
    blinding factor. Checked at construction: ``2^sigma (2^(ell+2) + 1) < N/2``."""

    n: Any
    g: Any
    sigma: int
    ell: int

    def __post_init__(self) -> None:
        if not (mpz(2) ** self.sigma) * (mpz(2) ** (self.ell + 2) + 1) < self.n // 2:
            raise InputError(
                f"DT-PKC parameters violate 2^sigma (2^(ell+2)+1) < N/2 "
                f"(|N|={self.bits}, sigma={self.sigma}, ell={self.ell})"
            )

    @property
    def n2(self) -> Any:
        return self.n * self.n

    @property
    def bits(self) -> int:
        return int(gmpy2.bit_length(self.n))

    @property
    def max_abs(self) -> int:
        """Largest |m| a plaintext may have."""
        return int(mpz(2) ** self.ell) - 1

    def write(self, w: Writer) -> Writer:
        return (
            w.bytes_(gmpy2.to_binary(self.n))
            .bytes_(gmpy2.to_binary(self.g))
            .u32(self.sigma)
            .u32(self.ell)
        )

    @classmethod
    def read(cls, r: Reader) -> PublicParams:
        n = _from_binary(r.bytes_())
        g = _from_binary(r.bytes_())
        return cls(n, g, r.u32(), r.u32())

    @classmethod
    def for_modulus(cls, n: Any, g: Any) -> PublicParams:
        """Choose sigma and ell from |N|: sigma = 80 (statistical blinding of a comparison),
        ell = |N| - sigma - 8 (so the HoLT condition holds with margin)."""
        bits = int(gmpy2.bit_length(n))
        sigma = 80 if bits >= 512 else max(8, bits // 8)
        return cls(n, g, sigma, bits - sigma - 8)

    def encode(self, m: int) -> Any:
        """Signed integer -> Z_N (raises if out of range)."""
        if abs(int(m)) > self.max_abs:
            raise InputError(f"plaintext {m} outside the signed range |m| < 2^{self.ell}")
        return mpz(m) % self.n

    def decode(self, v: Any) -> int:
        """Z_N -> signed integer by the sign rule."""
        v = mpz(v) % self.n
        return int(v) if v < self.n // 2 else int(v - self.n)


def _from_binary(data: bytes) -> Any:
    try:
        return gmpy2.from_binary(data)
    except (ValueError, TypeError) as exc:
        raise MalformedMessageError("invalid big-integer encoding") from exc


@dataclass(frozen=True)
class PublicKey:
    """A weak public key ``h = g^θ`` (or a product of such keys) with its parameters."""

    params: PublicParams
    h: Any

    def __mul__(self, other: PublicKey) -> PublicKey:
        return joint_public_key(self, other)

    def to_bytes(self) -> bytes:
        return self.params.write(Writer()).bytes_(gmpy2.to_binary(self.h)).getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> PublicKey:
        r = Reader(data, "DT-PKC public key")
        params = PublicParams.read(r)
        h = _from_binary(r.bytes_())
        r.end()
        _check_unit(h, params, "public key")
        return cls(params, h)


@dataclass(frozen=True)
class SecretKey:
    """A weak secret key ``θ`` and its public key."""

    theta: Any
    public: PublicKey

    @property
    def params(self) -> PublicParams:
        return self.public.params


@dataclass(frozen=True)
class StrongKeyShare:
    """One share (λ1 or λ2) of the strong key; alone it decrypts nothing."""

    params: PublicParams
    value: Any


@dataclass(frozen=True)
class Ciphertext:
    """``(C1, C2)`` in ``Z*_{N²}``, with the public key ``h`` it is under when known
    (public information, tracked through re-encryption and refresh)."""

    params: PublicParams
    c1: Any
    c2: Any
    h: Any = None

    @property
    def public_key(self) -> PublicKey:
        if self.h is None:
            raise InputError("this ciphertext's public key is not known")
        return PublicKey(self.params, self.h)

    def to_bytes(self) -> bytes:
        w = Writer().bytes_(gmpy2.to_binary(self.c1)).bytes_(gmpy2.to_binary(self.c2))
        return w.bytes_(gmpy2.to_binary(self.h) if self.h is not None else b"").getvalue()

    @classmethod
    def from_bytes(cls, params: PublicParams, data: bytes) -> Ciphertext:
        r = Reader(data, "DT-PKC ciphertext")
        c1, c2 = _from_binary(r.bytes_()), _from_binary(r.bytes_())
        raw_h = r.bytes_()
        r.end()
        h = _from_binary(raw_h) if raw_h else None
        if h is not None:
            _check_unit(h, params, "ciphertext key")
        return cls.checked(params, c1, c2, h)

    @classmethod
    def checked(cls, params: PublicParams, c1: Any, c2: Any, h: Any = None) -> Ciphertext:
        """Build a ciphertext after checking both parts are units modulo N²."""
        _check_unit(c1, params, "ciphertext C1")
        _check_unit(c2, params, "ciphertext C2")
        return cls(params, mpz(c1), mpz(c2), h)

    def __add__(self, other: Ciphertext) -> Ciphertext:
        return add(self, other)

    def __neg__(self) -> Ciphertext:
        return negate(self)


def _check_unit(x: Any, params: PublicParams, what: str) -> None:
    if not isinstance(x, int | type(mpz(0))):
        raise MalformedMessageError(f"{what} must be an integer")
    if not 0 < x < params.n2:
        raise MalformedMessageError(f"{what} is outside Z_(N^2)")
    if gmpy2.gcd(x, params.n) != 1:
        raise MalformedMessageError(f"{what} is not invertible modulo N^2")


# ============================================================================ KGC
class KeyGenerationCenter:
    """Creates the system (p, q, λ, g), issues weak key pairs and splits the strong key.

    The KGC knows the factorisation; it must be trusted and offline after setup."""

    def __init__(self, bits: int = 2048) -> None:
        if bits < 64 or bits % 2:
            raise InputError("key size |N| must be an even number of bits >= 64")
        half = bits // 2
        while True:
            p, q = _random_prime(half), _random_prime(half)
            if p == q:
                continue
            n = p * q
            lam = gmpy2.lcm(p - 1, q - 1)
            if gmpy2.gcd(lam, n) == 1 and gmpy2.bit_length(n) == bits:
                break
        n2 = n * n
        while True:
            a = _rand_range(2, n2 - 1)
            if gmpy2.gcd(a, n) == 1:
                break
        g = (-gmpy2.powmod(a, 2 * n, n2)) % n2
        self._p, self._q, self._lambda = p, q, lam
        self.params = PublicParams.for_modulus(n, g)

    def new_key_pair(self) -> tuple[SecretKey, PublicKey]:
        """A fresh weak key pair: θ uniform in [1, N/4], h = g^θ."""
        prm = self.params
        theta = _rand_range(1, prm.n // 4)
        pk = PublicKey(prm, gmpy2.powmod(prm.g, theta, prm.n2))
        return SecretKey(theta, pk), pk

    def strong_key_shares(self) -> tuple[StrongKeyShare, StrongKeyShare]:
        """Split λ: s = λ (λ^{-1} mod N²) mod λN², λ1 uniform in [0, λN²), λ2 = s - λ1."""
        prm, lam = self.params, self._lambda
        modulus = lam * prm.n2
        s = (lam * gmpy2.invert(lam, prm.n2)) % modulus
        lam1 = _rand_below(modulus)
        lam2 = (s - lam1) % modulus
        return StrongKeyShare(prm, lam1), StrongKeyShare(prm, lam2)

    def strong_decrypt(self, c: Ciphertext) -> int:
        """Decrypt with the full strong key λ (KGC only; used to test the identities)."""
        prm = self.params
        m = _L(gmpy2.powmod(c.c1, self._lambda, prm.n2), prm.n) * gmpy2.invert(self._lambda, prm.n)
        return prm.decode(m % prm.n)


# ============================================================================ primitives
def joint_public_key(a: PublicKey, b: PublicKey) -> PublicKey:
    """Key of the joint secret θ_a + θ_b: h_a · h_b."""
    if a.params.n != b.params.n:
        raise InputError("public keys of different DT-PKC systems")
    return PublicKey(a.params, (a.h * b.h) % a.params.n2)


def encrypt(pk: PublicKey, m: int) -> Ciphertext:
    """Enc_h(m) = (h^r (1 + mN), g^r) with r uniform in [1, N/4]."""
    return _encrypt_raw(pk, pk.params.encode(m))


def _encrypt_raw(pk: PublicKey, m: Any) -> Ciphertext:
    """Encrypt an element of Z_N (no signed-range check: used for uniform blinding)."""
    prm = pk.params
    r = _rand_range(1, prm.n // 4)
    c1 = (_pow_fixed(pk.h, r, prm) * (1 + (mpz(m) % prm.n) * prm.n)) % prm.n2
    return Ciphertext(prm, c1, _pow_fixed(prm.g, r, prm), pk.h)


def _strip(c: Ciphertext, theta: Any) -> Any:
    """C1 · (C2^θ)^{-1} mod N²."""
    prm = c.params
    return (c.c1 * gmpy2.invert(gmpy2.powmod(c.c2, theta, prm.n2), prm.n2)) % prm.n2


def decrypt(sk: SecretKey, c: Ciphertext) -> int:
    """Weak decryption with θ: L(C1 (C2^θ)^{-1}), then the sign rule."""
    prm = sk.params
    return prm.decode(_L(_strip(c, sk.theta), prm.n))


def partial_decrypt_strong1(lam1: StrongKeyShare, c: Ciphertext) -> Any:
    """PSDec1 (CS): T = C1^λ1 mod N²."""
    return gmpy2.powmod(c.c1, lam1.value, c.params.n2)


def partial_decrypt_strong2(lam2: StrongKeyShare, c: Ciphertext, t: Any) -> int:
    """PSDec2 (CC): m = L(T · C1^λ2 mod N²), signed."""
    return c.params.decode(_psdec2_raw(lam2, c, t))


def _psdec2_raw(lam2: StrongKeyShare, c: Ciphertext, t: Any) -> Any:
    prm = c.params
    _check_unit(t, prm, "partial decryption")
    return _L((t * gmpy2.powmod(c.c1, lam2.value, prm.n2)) % prm.n2, prm.n) % prm.n


def add(a: Ciphertext, b: Ciphertext) -> Ciphertext:
    """Same-key addition: component-wise product."""
    prm = a.params
    if a.h is not None and b.h is not None and a.h != b.h:
        raise InputError("homomorphic addition needs both ciphertexts under the same key")
    h = a.h if a.h is not None else b.h
    return Ciphertext(prm, (a.c1 * b.c1) % prm.n2, (a.c2 * b.c2) % prm.n2, h)


def scale(c: Ciphertext, k: int) -> Ciphertext:
    """Multiply the plaintext by an integer k (negative k allowed): C^k."""
    prm = c.params
    e = mpz(k) % prm.n
    return Ciphertext(prm, gmpy2.powmod(c.c1, e, prm.n2), gmpy2.powmod(c.c2, e, prm.n2), c.h)


def negate(c: Ciphertext) -> Ciphertext:
    """An encryption of -m under the same key.

    Computed as the component-wise inverse ``(C1^-1, C2^-1) = Enc(-m; -r)``. It equals the
    specification's ``C^(N-1) = C^-1 · C^N`` up to the factor ``C^N = (h^{rN}, g^{rN})``,
    which only changes the encryption randomness (``(1 + mN)^N = 1 mod N²``), and costs two
    inversions instead of two |N|-bit exponentiations."""
    prm = c.params
    return Ciphertext(prm, gmpy2.invert(c.c1, prm.n2), gmpy2.invert(c.c2, prm.n2), c.h)


def negate_by_power(c: Ciphertext) -> Ciphertext:
    """The specification's literal negation C^(N-1) (kept to test the identity)."""
    prm = c.params
    return Ciphertext(
        prm, gmpy2.powmod(c.c1, prm.n - 1, prm.n2), gmpy2.powmod(c.c2, prm.n - 1, prm.n2), c.h
    )


def rerandomize(c: Ciphertext) -> Ciphertext:
    """Multiply by a fresh encryption of 0 under the same key."""
    return add(c, encrypt(c.public_key, 0))


def reencrypt(sk_cs: SecretKey, c: Ciphertext) -> Ciphertext:
    """HReEnc (CS adds its key): C1' = C1 · C2^θ_CS, now under h · h_CS."""
    prm = c.params
    h = (c.h * sk_cs.public.h) % prm.n2 if c.h is not None else None
    return Ciphertext(prm, (c.c1 * gmpy2.powmod(c.c2, sk_cs.theta, prm.n2)) % prm.n2, c.c2, h)


def refresh(c: Ciphertext, rho: Any) -> Ciphertext:
    """HEncRef with random ρ: C1' = C1 · C2^ρ (now needs θ + ρ; with ρ discarded, only the
    strong key opens it). The new public key h · g^ρ is recorded."""
    prm = c.params
    h = (c.h * gmpy2.powmod(prm.g, rho, prm.n2)) % prm.n2 if c.h is not None else None
    return Ciphertext(prm, (c.c1 * gmpy2.powmod(c.c2, rho, prm.n2)) % prm.n2, c.c2, h)


def new_refresh_key(params: PublicParams) -> Any:
    """A fresh ρ uniform in [1, N/4]."""
    return _rand_range(1, params.n // 4)


def joint_partial_decrypt(sk_u: SecretKey, c: Ciphertext) -> Ciphertext:
    """ParHDec1 by the key holder u on a ciphertext under h_u · h_CS: remove θ_u, leaving a
    ciphertext under h_CS only (which CS finishes with ParHDec2)."""
    prm = c.params
    h = (c.h * gmpy2.invert(sk_u.public.h, prm.n2)) % prm.n2 if c.h is not None else None
    return Ciphertext(prm, _strip(c, sk_u.theta), c.c2, h)


def to_fixed_point(
    x: float, fraction_bits: int = DEFAULT_FRACTION_BITS, params: PublicParams | None = None
) -> int:
    """round(x · 2^f) with a clear error when the value cannot be represented."""
    if not math.isfinite(x):
        raise InputError(f"cannot encode {x} in fixed point")
    v = round(x * (1 << fraction_bits))
    if params is not None and abs(v) > params.max_abs:
        raise InputError(f"{x} exceeds the DT-PKC plaintext range at {fraction_bits} fraction bits")
    return v


def from_fixed_point(v: int, fraction_bits: int = DEFAULT_FRACTION_BITS) -> float:
    return v / float(1 << fraction_bits)


# ============================================================================ messages
def _encode(step: str, session: bytes, sender: str, payload: bytes) -> bytes:
    return encode_message(Header(PROTOCOL, VERSION, step, session, sender), payload)


def _decode(data: bytes, step: str, session: bytes) -> Reader:
    _, payload = decode_message(
        data, protocol=PROTOCOL, version=VERSION, step=step, session=session
    )
    return Reader(payload, f"dtpkc {step}")


def _write_ct(w: Writer, c: Ciphertext) -> Writer:
    return w.bytes_(c.to_bytes())


def _read_ct(r: Reader, params: PublicParams) -> Ciphertext:
    return Ciphertext.from_bytes(params, r.bytes_())


# ============================================================================ roles
class KeyHolder:
    """A participant holding a weak secret θ_u (runs ParHDec1)."""

    def __init__(self, sk: SecretKey, name: str = "participant") -> None:
        self.sk = sk
        self.name = name

    @property
    def public_key(self) -> PublicKey:
        return self.sk.public

    def partial_decrypt(self, c: Ciphertext) -> Ciphertext:
        return joint_partial_decrypt(self.sk, c)


class ComputationProvider:
    """CC: holds λ2 only. Completes strong decryptions inside HoAdd and HoLT; learns the
    blinded sum ``x + y + α1 + α2`` (uniform) and the blinded difference ``±r(2x+1-2y)``."""

    name = "CC"

    def __init__(self, lam2: StrongKeyShare) -> None:
        self.lam2 = lam2
        self.params = lam2.params

    def hoadd_respond(self, request: bytes, session: bytes) -> bytes:
        """HoAdd step 2: S = PSDec2(X) + PSDec2(Y) mod N, returned as Enc_t(S)."""
        prm = self.params
        r = _decode(request, "hoadd-request", session)
        x, y = _read_ct(r, prm), _read_ct(r, prm)
        tx, ty = _from_binary(r.bytes_()), _from_binary(r.bytes_())
        target = PublicKey(prm, _from_binary(r.bytes_()))
        r.end()
        _check_unit(target.h, prm, "target key")
        s = (_psdec2_raw(self.lam2, x, tx) + _psdec2_raw(self.lam2, y, ty)) % prm.n
        out = _encrypt_raw(target, s)
        return _encode("hoadd-response", session, self.name, _write_ct(Writer(), out).getvalue())

    def holt_respond(self, request: bytes, session: bytes) -> bytes:
        """HoLT step 2: u' = 1 iff l > N/2 (l negative), returned as Enc(u') under the
        result key."""
        prm = self.params
        r = _decode(request, "holt-request", session)
        cl = _read_ct(r, prm)
        t = _from_binary(r.bytes_())
        result_key = PublicKey(prm, _from_binary(r.bytes_()))
        r.end()
        _check_unit(result_key.h, prm, "result key")
        l_raw = _psdec2_raw(self.lam2, cl, t)
        u = 1 if l_raw > prm.n // 2 else 0
        out = encrypt(result_key, u)
        return _encode("holt-response", session, self.name, _write_ct(Writer(), out).getvalue())


class CenterServer:
    """CS: holds its weak key θ_CS and the strong-key share λ1."""

    name = "CS"

    def __init__(self, sk_cs: SecretKey, pk_cs: PublicKey, lam1: StrongKeyShare) -> None:
        self.sk = sk_cs
        self.public_key = pk_cs
        self.lam1 = lam1
        self.params = pk_cs.params

    # -- HoAdd ---------------------------------------------------------------------------
    def hoadd_request(
        self, ca: Ciphertext, cb: Ciphertext, target: PublicKey, session: bytes
    ) -> tuple[bytes, Any]:
        """HoAdd step 1: blind both inputs with α1, α2 and partially decrypt them."""
        prm = self.params
        a1, a2 = _rand_below(prm.n), _rand_below(prm.n)
        x = add(ca, _encrypt_raw(ca.public_key, a1))  # [[x]]_a · Enc_a(α1)
        y = add(cb, _encrypt_raw(cb.public_key, a2))  # [[y]]_b · Enc_b(α2)
        w = Writer()
        _write_ct(w, x)
        _write_ct(w, y)
        w.bytes_(gmpy2.to_binary(partial_decrypt_strong1(self.lam1, x)))
        w.bytes_(gmpy2.to_binary(partial_decrypt_strong1(self.lam1, y)))
        w.bytes_(gmpy2.to_binary(target.h))
        return _encode("hoadd-request", session, self.name, w.getvalue()), (a1 + a2, target)

    def hoadd_finish(self, state: Any, response: bytes, session: bytes) -> Ciphertext:
        """HoAdd step 3: Enc_t(S) · Enc_t(α1 + α2)^(N-1) = Enc_t(x + y)."""
        alpha, target = state
        r = _decode(response, "hoadd-response", session)
        s = _read_ct(r, self.params)
        r.end()
        unblind = _encrypt_raw(target, alpha)
        return add(s, negate(unblind))

    # -- HoLT ----------------------------------------------------------------------------
    def holt_request(
        self,
        cx: Ciphertext,
        cy: Ciphertext,
        result_key: PublicKey,
        session: bytes,
        add_runner: Any,
    ) -> tuple[bytes, int]:
        """HoLT step 1 (needs one HoAdd with CC, run through ``add_runner``)."""
        prm = self.params
        two_x_plus_1 = add(scale(cx, 2), encrypt(cx.public_key, 1))  # [[x]]^2 · Enc(1)
        two_y = scale(cy, 2)
        c = secrets.randbits(1)
        r_blind = mpz(secrets.randbits(prm.sigma)) | 1  # r != 0
        first, second = (two_x_plus_1, two_y) if c == 1 else (two_y, two_x_plus_1)
        diff = add_runner(first, negate(second), self.public_key)
        cl = scale(diff, int(r_blind))
        w = Writer()
        _write_ct(w, cl)
        w.bytes_(gmpy2.to_binary(partial_decrypt_strong1(self.lam1, cl)))
        w.bytes_(gmpy2.to_binary(result_key.h))
        return _encode("holt-request", session, self.name, w.getvalue()), c

    def holt_finish(
        self, coin: int, response: bytes, result_key: PublicKey, session: bytes
    ) -> Ciphertext:
        """HoLT step 3: Enc(u') if c = 1, else Enc(1) · Enc(u')^(N-1)."""
        r = _decode(response, "holt-response", session)
        u = _read_ct(r, self.params)
        r.end()
        flipped = add(encrypt(result_key, 1), negate(u))
        # constant shape: both branches are computed, one is selected
        return u if coin == 1 else flipped

    # -- ParHDec2 ------------------------------------------------------------------------
    def finish_decrypt(self, partial: Ciphertext) -> int:
        """ParHDec2: finish a ciphertext left under h_CS alone by the key holder."""
        return decrypt(self.sk, partial)


def _session() -> bytes:
    return secrets.token_bytes(SESSION_ID_BYTES)


def secure_add(
    cs: CenterServer,
    cc: ComputationProvider,
    ca: Ciphertext,
    cb: Ciphertext,
    target_public_key: PublicKey,
) -> Ciphertext:
    """HoAdd between CS and CC in one process (real message bytes): Enc_target(x + y)."""
    session = _session()
    request, state = cs.hoadd_request(ca, cb, target_public_key, session)
    return cs.hoadd_finish(state, cc.hoadd_respond(request, session), session)


def secure_less_than(
    cs: CenterServer,
    cc: ComputationProvider,
    cx: Ciphertext,
    cy: Ciphertext,
    holder_public_key: PublicKey,
) -> Ciphertext:
    """HoLT between CS and CC: an encryption of [x < y] under h_CS · h_u."""
    session = _session()
    result_key = joint_public_key(cs.public_key, holder_public_key)

    def run_add(a: Ciphertext, b: Ciphertext, target: PublicKey) -> Ciphertext:
        return secure_add(cs, cc, a, b, target)

    request, coin = cs.holt_request(cx, cy, result_key, session, add_runner=run_add)
    return cs.holt_finish(coin, cc.holt_respond(request, session), result_key, session)
