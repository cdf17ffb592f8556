"""DT-PKC primitives (Liu et al. 2016) on gmpy2, as privfl's DT-PKC issue specifies them:
system generation (the KGC's maths; its secrets go to the caller), weak keys, encryption of
signed ``|m| < 2^ell``, weak decryption, PSDec1/PSDec2, ParHDec1, HReEnc, HEncRef (with a fresh
*refresh key*), same-key arithmetic, fixed point and byte encodings. HoAdd/HoLT live in
:mod:`privfl.forest.secure_ops`. |N| < 2048 bits is refused without ``allow_insecure_key_bits``
(3072 bits give 128-bit security). Wire integers are parsed with ``Reader.uint`` (bounded,
canonical; never a general deserialiser) and range-checked (units below N², |N|, the HoLT
condition on bit lengths) before any exponentiation. Randomness from :mod:`secrets`."""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass, field
from typing import Any

import gmpy2
from gmpy2 import mpz

from privfl.crypto import fixed_base
from privfl.errors import InputError, MalformedMessageError, ProtocolError
from privfl.messages import Reader, Writer

Mpz = Any  # a gmpy2.mpz (gmpy2 ships no type stubs)

MIN_KEY_BITS, INSECURE_MIN_KEY_BITS, MAX_KEY_BITS = 2048, 512, 8192
SIGMA_BITS, MIN_SIGMA_BITS, MIN_ELL_BITS = 80, 40, 64  # sigma: bits of HoLT's blinding factor
RANGE_MARGIN_BITS = 64  # a wrapped HoLT difference passes the CC's range check w.p. 2^-62
MR_ROUNDS, DEFAULT_FRACTION_BITS, FIXED_BASE_WINDOW, TABLE_AFTER_USES = 64, 32, 5, 4


def check_key_bits(bits: object, allow_insecure_key_bits: bool = False) -> int:
    """The key size |N| as an int, or InputError naming the accepted range."""
    if not isinstance(bits, int) or isinstance(bits, bool):
        raise InputError(f"key size |N| must be an integer number of bits, got {bits!r}")
    if bits < MIN_KEY_BITS and not allow_insecure_key_bits:
        raise InputError(
            f"{bits}-bit DT-PKC moduli are insecure (1024 bits ~ 80-bit): use >= {MIN_KEY_BITS} "
            "(3072: 128-bit), or allow_insecure_key_bits=True (--insecure-key-bits) for tests only"
        )
    lo = INSECURE_MIN_KEY_BITS if allow_insecure_key_bits else MIN_KEY_BITS
    if not lo <= bits <= MAX_KEY_BITS or bits % 2:
        raise InputError(f"key size |N| must be an even number of bits in [{lo}, {MAX_KEY_BITS}]")
    return bits


def _rand_range(lo: Mpz, hi: Mpz) -> Mpz:
    return mpz(lo) + mpz(secrets.randbelow(int(hi - lo + 1)))


def _check_unit(x: Mpz, n: Mpz, what: str) -> Mpz:
    """``x`` as an mpz if it is a unit modulo N² (0 < x < N², gcd(x, N) = 1)."""
    x = mpz(x)
    if not 0 < x < n * n:
        raise MalformedMessageError(f"{what} is outside Z_(N^2)")
    if gmpy2.gcd(x, n) != 1:
        raise MalformedMessageError(f"{what} is not invertible modulo N^2")
    return x


_BASE_USES: dict[tuple[Mpz, Mpz], int] = {}


def _pow_fixed(base: Mpz, e: Mpz, params: PublicParams) -> Mpz:
    """base^e mod N², 0 < e <= N/4: powmod for a base's first uses, then its window table."""
    key = (mpz(base), params.n2)
    if _BASE_USES.setdefault(key, 0) < TABLE_AFTER_USES:
        if len(_BASE_USES) > 4096:
            _BASE_USES.clear()
        _BASE_USES[key] = _BASE_USES.get(key, 0) + 1
        return gmpy2.powmod(base, e, params.n2)
    rows = fixed_base.table(key[0], params.n2, params.bits, FIXED_BASE_WINDOW)
    return fixed_base.power(rows, e, FIXED_BASE_WINDOW, params.n2)


@dataclass(frozen=True)
class PublicParams:
    """Modulus N, generator g, signed plaintexts ``|m| < 2^ell`` and HoLT blinding factors of
    ``sigma`` bits with ``2^sigma (2^(ell+2) + 1) < N/2``, checked on bit lengths before any
    computation (a forged ``sigma = 2^32-1`` costs nothing)."""

    n: Mpz
    g: Mpz
    sigma: int
    ell: int
    n2: Mpz = field(init=False, repr=False, compare=False)
    bits: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        bits = int(gmpy2.bit_length(self.n))
        if not INSECURE_MIN_KEY_BITS <= bits <= MAX_KEY_BITS or self.n % 2 == 0:
            raise InputError(f"DT-PKC modulus must be odd, of 512..{MAX_KEY_BITS} bits: {bits}")
        object.__setattr__(self, "bits", bits)
        object.__setattr__(self, "n2", mpz(self.n) * mpz(self.n))
        if not (self.sigma >= MIN_SIGMA_BITS and self.ell >= MIN_ELL_BITS):
            raise InputError(f"DT-PKC needs sigma >= {MIN_SIGMA_BITS}, ell >= {MIN_ELL_BITS}")
        # 2^sigma (2^(ell+2)+1) has sigma+ell+3 bits and N/2 has bits-1: compare lengths first
        if self.sigma + self.ell + 3 > bits - 1 or not (
            (mpz(1) << self.sigma) * ((mpz(1) << (self.ell + 2)) + 1) < self.n // 2
        ):
            msg = f"|N|={bits}, sigma={self.sigma}, ell={self.ell}"
            raise InputError(f"DT-PKC parameters violate 2^sigma (2^(ell+2)+1) < N/2 ({msg})")
        _check_unit(self.g, self.n, "generator g")

    @classmethod
    def for_modulus(cls, n: Mpz, g: Mpz) -> PublicParams:
        """sigma = 80 and ell = |N| - sigma - 3 - 64: the HoLT condition with 64 bits to spare,
        so that the CC's range check catches a wrapped (out-of-range) comparison."""
        bits = int(gmpy2.bit_length(n))
        return cls(mpz(n), mpz(g), SIGMA_BITS, bits - SIGMA_BITS - 3 - RANGE_MARGIN_BITS)

    @property
    def max_abs(self) -> int:
        return (1 << self.ell) - 1

    def encode(self, m: int) -> Mpz:
        """Signed integer -> Z_N (InputError outside |m| < 2^ell)."""
        if abs(int(m)) > self.max_abs:
            raise InputError(f"plaintext {m} outside the signed range |m| < 2^{self.ell}")
        return mpz(m) % self.n

    def decode(self, v: Mpz) -> int:
        """Z_N -> signed integer by the sign rule."""
        return int(v) if (v := mpz(v) % self.n) < self.n // 2 else int(v - self.n)

    def write(self, w: Writer) -> Writer:
        return w.uint(int(self.n)).uint(int(self.g)).u32(self.sigma).u32(self.ell)

    @classmethod
    def read(cls, r: Reader, allow_insecure_key_bits: bool = False) -> PublicParams:
        n = r.uint(MAX_KEY_BITS, "modulus N")
        g = r.uint(2 * MAX_KEY_BITS, "generator g")
        sigma, ell = r.u32(), r.u32()
        try:
            params = cls(mpz(n), mpz(g), sigma, ell)
        except InputError as exc:
            raise MalformedMessageError(f"invalid DT-PKC parameters: {exc}") from None
        if params.bits < (INSECURE_MIN_KEY_BITS if allow_insecure_key_bits else MIN_KEY_BITS):
            raise MalformedMessageError(f"refusing a weak {params.bits}-bit DT-PKC modulus")
        return params

    def read_unit(self, r: Reader, what: str) -> Mpz:
        """A unit modulo N² from the wire (bounded before conversion, then range-checked)."""
        return _check_unit(r.uint(2 * self.bits, what), self.n, what)


@dataclass(frozen=True)
class PublicKey:
    """A weak public key ``h = g^θ`` (or a product of such keys) with its parameters."""

    params: PublicParams
    h: Mpz

    def to_bytes(self) -> bytes:
        return self.params.write(Writer()).uint(int(self.h)).getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, allow_insecure_key_bits: bool = False) -> PublicKey:
        r = Reader(data, "DT-PKC public key")
        params = PublicParams.read(r, allow_insecure_key_bits)
        h = params.read_unit(r, "public key h")
        r.end()
        return cls(params, h)


@dataclass(frozen=True)
class SecretKey:
    """A weak secret key ``θ`` and its public key."""

    theta: Mpz
    public: PublicKey

    @classmethod
    def from_theta(cls, params: PublicParams, theta: int) -> SecretKey:
        """The key pair of a θ (from the KGC: checked to lie in [1, N/4])."""
        if not 1 <= theta <= params.n // 4:
            raise MalformedMessageError("weak secret key outside [1, N/4]")
        return cls(mpz(theta), PublicKey(params, gmpy2.powmod(params.g, theta, params.n2)))


@dataclass(frozen=True)
class StrongKeyShare:
    """One share (λ1 or λ2) of the strong key; alone it decrypts nothing."""

    params: PublicParams
    value: Mpz


@dataclass(frozen=True)
class SystemSecret:
    """The KGC's factorisation of N and λ = lcm(p-1, q-1)."""

    p: Mpz
    q: Mpz
    lam: Mpz


@dataclass(frozen=True)
class Ciphertext:
    """``(C1, C2)`` in ``Z*_{N²}``, and the key ``h`` it is under if known (never sent)."""

    params: PublicParams
    c1: Mpz
    c2: Mpz
    h: Mpz | None = None

    @property
    def public_key(self) -> PublicKey:
        if self.h is None:
            raise ProtocolError("this ciphertext's public key is not known")
        return PublicKey(self.params, self.h)

    def write(self, w: Writer) -> Writer:
        return w.uint(int(self.c1)).uint(int(self.c2))

    def to_bytes(self) -> bytes:
        return self.write(Writer()).getvalue()

    @classmethod
    def read(cls, r: Reader, params: PublicParams, key: PublicKey | None = None) -> Ciphertext:
        c1, c2 = params.read_unit(r, "ciphertext C1"), params.read_unit(r, "ciphertext C2")
        return cls(params, c1, c2, None if key is None else key.h)

    @classmethod
    def from_bytes(
        cls, params: PublicParams, data: bytes, key: PublicKey | None = None
    ) -> Ciphertext:
        r = Reader(data, "DT-PKC ciphertext")
        out = cls.read(r, params, key)
        r.end()
        return out


def _random_prime(bits: int) -> Mpz:
    while True:  # top two bits set: |pq| has exactly 2*bits bits
        cand = mpz(secrets.randbits(bits)) | (mpz(3) << (bits - 2)) | 1
        if gmpy2.is_prime(cand, MR_ROUNDS):
            return cand


def generate_system(
    bits: int = MIN_KEY_BITS, allow_insecure_key_bits: bool = False
) -> tuple[PublicParams, SystemSecret]:
    """The KGC's maths: p, q with gcd(λ, N) = 1, g = -a^(2N) mod N²; the caller keeps λ."""
    bits = check_key_bits(bits, allow_insecure_key_bits)
    while True:
        p, q = _random_prime(bits // 2), _random_prime(bits // 2)
        n, lam = p * q, gmpy2.lcm(p - 1, q - 1)
        if p != q and gmpy2.gcd(lam, n) == 1 and gmpy2.bit_length(n) == bits:
            break
    n2, a = n * n, mpz(0)
    while gmpy2.gcd(a, n) != 1:
        a = _rand_range(2, n2 - 1)
    return PublicParams.for_modulus(n, (-gmpy2.powmod(a, 2 * n, n2)) % n2), SystemSecret(p, q, lam)


def new_key_pair(params: PublicParams) -> SecretKey:
    """A fresh weak key pair: θ uniform in [1, N/4], h = g^θ."""
    return SecretKey.from_theta(params, int(_rand_range(1, params.n // 4)))


def split_strong_key(
    params: PublicParams, secret: SystemSecret
) -> tuple[StrongKeyShare, StrongKeyShare]:
    """λ1 uniform mod λN, λ2 = s - λ1; s ≡ 0 (λ), ≡ 1 (N); a unit's order divides λN."""
    lam, modulus = secret.lam, secret.lam * params.n
    s = (lam * gmpy2.invert(lam, params.n)) % modulus
    lam1 = mpz(secrets.randbelow(int(modulus)))
    return StrongKeyShare(params, lam1), StrongKeyShare(params, (s - lam1) % modulus)


def strong_decrypt(params: PublicParams, secret: SystemSecret, c: Ciphertext) -> int:
    """Decrypt with the full strong key λ (the KGC's; used to test the identities)."""
    m = (gmpy2.powmod(c.c1, secret.lam, params.n2) - 1) // params.n
    return params.decode(m * gmpy2.invert(secret.lam, params.n))


def joint_public_key(a: PublicKey, b: PublicKey) -> PublicKey:
    """Key of the joint secret θ_a + θ_b: h_a · h_b."""
    if a.params.n != b.params.n:
        raise ProtocolError("public keys of different DT-PKC systems")
    return PublicKey(a.params, (a.h * b.h) % a.params.n2)


Randomizer = tuple[Mpz, Mpz]  # (h^r, g^r) of one fresh r: one encryption's randomness


def randomizers(pk: PublicKey, count: int) -> list[Randomizer]:
    """(h^r, g^r) for ``count`` independent r uniform in [1, N/4] (:mod:`secrets`), each for
    exactly one :func:`encrypt` (``randomizer=``), computed ahead on the thread pool with
    fixed-base tables when ``count`` makes them cheaper (:func:`.fixed_base.pairs`): the
    same distribution as :func:`encrypt` draws."""
    prm = pk.params
    exponents = [_rand_range(1, prm.n // 4) for _ in range(count)]
    return fixed_base.pairs(pk.h, prm.g, prm.n2, prm.bits, exponents)


def encrypt(pk: PublicKey, m: int, randomizer: Randomizer | None = None) -> Ciphertext:
    """Enc_h(m) = (h^r (1 + mN), g^r) with r uniform in [1, N/4]; |m| < 2^ell. ``randomizer``:
    (h^r, g^r) from :func:`randomizers` for this ``pk``, used once (default: a fresh r)."""
    return encrypt_residue(pk, pk.params.encode(m), randomizer)


def encrypt_residue(pk: PublicKey, m: Mpz, randomizer: Randomizer | None = None) -> Ciphertext:
    """Encrypt any element of Z_N (no signed-range check: for uniform blinding values)."""
    prm = pk.params
    if randomizer is None:
        r = _rand_range(1, prm.n // 4)
        randomizer = (_pow_fixed(pk.h, r, prm), _pow_fixed(prm.g, r, prm))
    hr, gr = randomizer
    c1 = (hr * (1 + (mpz(m) % prm.n) * prm.n)) % prm.n2
    return Ciphertext(prm, c1, gr, pk.h)


def _strip(c: Ciphertext, theta: Mpz) -> Mpz:
    """C1 · (C2^θ)^{-1} mod N²."""
    return c.c1 * gmpy2.invert(gmpy2.powmod(c.c2, theta, c.params.n2), c.params.n2) % c.params.n2


def decrypt(sk: SecretKey, c: Ciphertext) -> int:
    """Weak decryption with θ: L(C1 (C2^θ)^{-1}), then the sign rule."""
    prm = sk.public.params
    return prm.decode((_strip(c, sk.theta) - 1) // prm.n)


def partial_decrypt_strong1(lam1: StrongKeyShare, c: Ciphertext) -> Mpz:
    """PSDec1 (CS): T = C1^λ1 mod N²."""
    return gmpy2.powmod(c.c1, lam1.value, c.params.n2)


def partial_decrypt_strong2(lam2: StrongKeyShare, c: Ciphertext, t: Mpz) -> int:
    """PSDec2 (CC): the signed plaintext L(T · C1^λ2 mod N²); T must be a unit mod N²."""
    prm = c.params
    t = _check_unit(t, prm.n, "partial decryption T")
    return prm.decode((t * gmpy2.powmod(c.c1, lam2.value, prm.n2) % prm.n2 - 1) // prm.n)


def add(a: Ciphertext, b: Ciphertext) -> Ciphertext:
    """Same-key addition: component-wise product."""
    if a.h is not None and b.h is not None and a.h != b.h:
        raise ProtocolError("homomorphic addition needs both ciphertexts under the same key")
    n2 = a.params.n2
    return Ciphertext(a.params, a.c1 * b.c1 % n2, a.c2 * b.c2 % n2, a.h if a.h is not None else b.h)


def scale(c: Ciphertext, k: int) -> Ciphertext:
    """Multiply the plaintext by an integer k (negative k allowed): C^k."""
    prm, e = c.params, mpz(k) % c.params.n
    return Ciphertext(prm, gmpy2.powmod(c.c1, e, prm.n2), gmpy2.powmod(c.c2, e, prm.n2), c.h)


def negate(c: Ciphertext) -> Ciphertext:
    """Enc(-m; -r) as the component-wise inverse: the spec's ``C^(N-1)`` times ``C^N`` (which
    only changes the randomness), for two inversions instead of two exponentiations."""
    n2 = c.params.n2
    return Ciphertext(c.params, gmpy2.invert(c.c1, n2), gmpy2.invert(c.c2, n2), c.h)


def reencrypt(sk_cs: SecretKey, c: Ciphertext) -> Ciphertext:
    """HReEnc (CS adds its key): C1' = C1 · C2^θ_CS, now under h · h_CS."""
    prm = c.params
    h = c.h * sk_cs.public.h % prm.n2 if c.h is not None else None
    return Ciphertext(prm, c.c1 * gmpy2.powmod(c.c2, sk_cs.theta, prm.n2) % prm.n2, c.c2, h)


def new_refresh_key(params: PublicParams) -> Mpz:
    """A fresh HEncRef key uniform in [1, N/4]."""
    return _rand_range(1, params.n // 4)


def refresh(c: Ciphertext, refresh_key: Mpz) -> Ciphertext:
    """HEncRef: C1' = C1 · C2^k, under h · g^k (once k is discarded, only the strong key)."""
    prm = c.params
    h = c.h * gmpy2.powmod(prm.g, refresh_key, prm.n2) % prm.n2 if c.h is not None else None
    return Ciphertext(prm, c.c1 * gmpy2.powmod(c.c2, refresh_key, prm.n2) % prm.n2, c.c2, h)


def joint_partial_decrypt(sk_u: SecretKey, c: Ciphertext) -> Ciphertext:
    """ParHDec1 by key holder u on a ciphertext under h_u · h_CS: remove θ_u, leaving a
    ciphertext under h_CS alone (which CS finishes by weak decryption, ParHDec2)."""
    prm = c.params
    h = c.h * gmpy2.invert(sk_u.public.h, prm.n2) % prm.n2 if c.h is not None else None
    return Ciphertext(prm, _strip(c, sk_u.theta), c.c2, h)


def to_fixed_point(
    x: float, fraction_bits: int = DEFAULT_FRACTION_BITS, params: PublicParams | None = None
) -> int:
    """round(x · 2^f), InputError when x is not finite or exceeds the plaintext range."""
    scaled = float(x) * float(1 << fraction_bits)
    if not math.isfinite(scaled):
        raise InputError(f"cannot encode {x} in fixed point at {fraction_bits} fraction bits")
    v = round(scaled)
    if params is not None and abs(v) > params.max_abs:
        raise InputError(f"{x} exceeds the DT-PKC plaintext range at {fraction_bits} fraction bits")
    return v


def from_fixed_point(v: int, fraction_bits: int = DEFAULT_FRACTION_BITS) -> float:
    return v / float(1 << fraction_bits)
