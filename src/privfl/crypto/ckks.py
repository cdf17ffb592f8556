"""CKKS backend on TenSEAL's bundled Microsoft SEAL API (``tenseal.sealapi``).

Why the SEAL layer of TenSEAL rather than ``tenseal.CKKSVector``: the high-level vector
serialises symmetric ciphertexts without their seed (364 KB instead of 184 KB at ring 8192),
always generates all 24 power-of-two Galois keys (a 37 MB public context), and always
rescales after a multiplication. FHAUC needs none of that, so this module exposes exactly
the operations the protocols use, on SEAL objects that TenSEAL ships.

Parameters (:data:`DEFAULT_PARAMETERS`) and why
------------------------------------------------
* Ring degree ``n = 8192`` (4096 slots) with coefficient modulus primes of
  ``53 + 53 + 52`` bits plus a ``60``-bit special (key-switching) prime: 218 bits in total,
  the largest modulus the HomomorphicEncryption.org standard allows at ``n = 8192`` for
  128-bit classical security with ternary secrets (SEAL enforces this, ``sec_level=TC128``).
* Scale ``Δ = 2^40``. Fresh encryption and encoding noise is a few hundred units in the
  coefficient domain, i.e. an absolute error of about ``2^-31`` per slot after decoding; it
  does not depend on the magnitude of the encrypted value.
* **No rescaling.** FHAUC does one ciphertext-ciphertext multiplication. Instead of dividing
  the product by the last prime (which would leave ``106`` bits at scale ``2^40`` or a
  smaller scale) the product stays at scale ``Δ² = 2^80`` over the full ``157``-bit data
  modulus. A value ``x`` decrypts correctly while ``|x| · 2^80 < 2^156`` (one bit of sign,
  plus margin for noise), so the result may reach ``2^75``.
* **Integer multipliers at scale 1.** The aggregator's random multiplier ``c`` is an integer
  encoded as the constant polynomial ``c`` (scale 1), so multiplying by it consumes no
  modulus level; it only multiplies value and noise alike.
* Largest value in FHAUC: the numerator ``Σ_n (TP^n+TP^{n-1})(FP^n-FP^{n-1}) ≤ 2·P·Q`` with
  ``P + Q`` samples in total, at most ``(P+Q)^2 / 2``. For 1000 parties × 10^7 samples
  (10^10 samples) that is ``2^65.4``, which leaves ``2^9.6`` for ``c``; the protocol derives
  the range of ``c`` from the declared maximum sample count (see ``fhauc``).
* Parties hold the secret key and use SEAL's **seeded symmetric encryption**: the second
  polynomial of each fresh ciphertext is replaced by a 64-byte PRNG seed, halving uploads.

Serialisation goes through SEAL's own ``save``/``load`` (with its header checks and
zstd compression) into an in-memory file; every load error is turned into
:class:`~privfl.errors.MalformedMessageError`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt
import tenseal.sealapi as seal

from privfl.crypto.ckks_ciphertext import Ciphertext, add_all
from privfl.crypto.seal_io import (
    DEFAULT_PARAMETERS,
    MAX_CIPHERTEXT_BYTES,
    CKKSParameters,
    load,
    save,
    seal_objects,
    window_steps,
)
from privfl.errors import DecryptionNotPermittedError, MalformedMessageError
from privfl.messages import Reader, Writer

__all__ = [
    "DEFAULT_PARAMETERS",
    "FRESH_NOISE_BOUND",
    "CKKSContext",
    "CKKSParameters",
    "Ciphertext",
    "add_all",
    "window_steps",
]

# Largest absolute error of one freshly encrypted slot at scale 2^40: the measured maximum
# over 20 x 4096 slots was 1152 / 2^40 = 2^-29.8 (std 274 / 2^40); one bit of margin.
FRESH_NOISE_BOUND = 2.0**-29
_PUBLIC_MAGIC = b"PFLCKKSP"
_SECRET_MAGIC = b"PFLCKKSS"


class CKKSContext:
    """Encryption parameters plus whatever keys this role holds.

    A *secret* context (parties) holds the secret key and can encrypt (seeded symmetric
    encryption) and decrypt. A *public* context (aggregator) holds only evaluation keys
    (relinearisation, the chosen Galois keys) and a public key; :meth:`decrypt` raises
    :class:`DecryptionNotPermittedError` because there is no secret key to use.
    """

    def __init__(
        self,
        params: CKKSParameters,
        *,
        secret_key: Any | None = None,
        public_key: Any | None = None,
        relin_keys: Any | None = None,
        galois_keys: Any | None = None,
        rotation_steps: Sequence[int] = (),
    ) -> None:
        self.params = params
        self.seal_context, self.encoder, self.evaluator = seal_objects(params)
        self._secret_key = secret_key
        self.public_key = public_key
        self.relin_keys = relin_keys
        self.galois_keys = galois_keys
        self.rotation_steps = tuple(sorted(set(rotation_steps)))
        self._encryptor: Any | None = None
        self._decryptor: Any | None = None
        self._public_bytes: bytes | None = None
        if secret_key is not None:
            self._encryptor = seal.Encryptor(self.seal_context, secret_key)
            self._decryptor = seal.Decryptor(self.seal_context, secret_key)
        elif public_key is not None:
            self._encryptor = seal.Encryptor(self.seal_context, public_key)

    # ----------------------------------------------------------------- construction
    @classmethod
    def generate(
        cls,
        params: CKKSParameters = DEFAULT_PARAMETERS,
        rotation_steps: Iterable[int] = (),
    ) -> CKKSContext:
        """Fresh secret key plus evaluation keys for the given rotation steps (key holder)."""
        ctx = cls(params)
        keygen = seal.KeyGenerator(ctx.seal_context)
        return cls._with_keys(params, keygen.secret_key(), rotation_steps)

    @classmethod
    def _with_keys(
        cls, params: CKKSParameters, secret_key: Any, rotation_steps: Iterable[int]
    ) -> CKKSContext:
        """Secret context whose evaluation keys exist only in seeded serialised form.

        SEAL's ``Serializable`` keys replace half of every key polynomial by a PRNG seed, so
        the public context is about half the size; the key holder never evaluates, so it
        does not need them loaded."""
        ctx = cls(params, secret_key=secret_key)
        keygen = seal.KeyGenerator(ctx.seal_context, secret_key)
        steps = sorted(set(int(s) for s in rotation_steps))
        ctx.rotation_steps = tuple(steps)
        w = Writer().bytes_(params.to_bytes())
        public_key = seal.PublicKey()  # TenSEAL does not bind the seeded public key form
        keygen.create_public_key(public_key)
        w.bytes_(save(public_key))
        w.bytes_(save(keygen.create_relin_keys()))
        w.u32(len(steps))
        for s in steps:
            w.u32(s)
        w.bytes_(save(keygen.create_galois_keys(ctx.galois_elements(steps))) if steps else b"")
        ctx._public_bytes = _PUBLIC_MAGIC + w.getvalue()
        return ctx

    def galois_elements(self, steps: Sequence[int]) -> list[int]:
        """SEAL Galois elements for left rotations by ``steps`` (3^step mod 2n)."""
        m = 2 * self.params.poly_modulus_degree
        out = []
        for s in steps:
            s = int(s) % self.params.slots
            if s == 0:
                raise ValueError("rotation step 0 needs no key")
            out.append(pow(3, s, m))
        return out

    @property
    def is_private(self) -> bool:
        """True when this context holds the secret key."""
        return self._secret_key is not None

    def serialize_public(self) -> bytes:
        """Parameters, public key, relinearisation key and Galois keys (no secret key).

        Available on the key holder's freshly generated context and on any context that was
        itself loaded from public bytes."""
        if self._public_bytes is None:
            raise ValueError("this context has no public evaluation keys to export")
        return self._public_bytes

    def serialize_secret(self) -> bytes:
        """Parameters, secret key and rotation steps: all a party needs. Evaluation keys are
        deterministic given the secret key only up to randomness, so they are not included;
        a party never evaluates."""
        if self._secret_key is None:
            raise DecryptionNotPermittedError("this context holds no secret key")
        w = Writer().bytes_(self.params.to_bytes()).bytes_(save(self._secret_key))
        w.u32(len(self.rotation_steps))
        for s in self.rotation_steps:
            w.u32(s)
        return _SECRET_MAGIC + w.getvalue()

    @classmethod
    def deserialize(cls, data: bytes) -> CKKSContext:
        """Inverse of :meth:`serialize_public` / :meth:`serialize_secret`; any malformed
        input is a :class:`MalformedMessageError` (never a SEAL or Python exception)."""
        try:
            return cls._deserialize(bytes(data))
        except MalformedMessageError:
            raise
        except (ValueError, TypeError, RuntimeError, OverflowError, MemoryError) as exc:
            raise MalformedMessageError(f"invalid CKKS context ({exc})") from None

    @classmethod
    def _deserialize(cls, data: bytes) -> CKKSContext:
        if data[:8] not in (_PUBLIC_MAGIC, _SECRET_MAGIC):
            raise MalformedMessageError("not a privfl CKKS context")
        secret = data[:8] == _SECRET_MAGIC
        r = Reader(data[8:], "CKKS context")
        params = CKKSParameters.read(Reader(r.bytes_(256), "CKKS parameters"))
        if params.poly_modulus_degree not in (4096, 8192, 16384, 32768):
            raise MalformedMessageError("CKKS context: unsupported ring degree")
        if not 2 <= len(params.coeff_mod_bit_sizes) <= 16 or not all(
            17 <= b <= 60 for b in params.coeff_mod_bit_sizes
        ):
            raise MalformedMessageError("CKKS context: unsupported coefficient modulus")
        if not 10 <= params.scale_bits <= 60:
            raise MalformedMessageError("CKKS context: unsupported scale")
        probe = cls(params)
        sc = probe.seal_context
        if secret:
            sk = load(seal.SecretKey, sc, r.bytes_(), "CKKS secret key")
            steps = [r.u32() for _ in range(r.count(64, "rotation steps"))]
            r.end()
            return cls(params, secret_key=sk, rotation_steps=steps)
        pk_bytes = r.bytes_()
        pk = load(seal.PublicKey, sc, pk_bytes, "CKKS public key") if pk_bytes else None
        rk = load(seal.RelinKeys, sc, r.bytes_(), "CKKS relinearisation key")
        steps = [r.u32() for _ in range(r.count(64, "rotation steps"))]
        gk_bytes = r.bytes_()
        gk = load(seal.GaloisKeys, sc, gk_bytes, "CKKS Galois keys") if gk_bytes else None
        r.end()
        ctx = cls(params, public_key=pk, relin_keys=rk, galois_keys=gk, rotation_steps=steps)
        ctx._public_bytes = data
        return ctx

    # ----------------------------------------------------------------- encrypt / decrypt
    def encrypt(self, values: npt.ArrayLike, scale_bits: float | None = None) -> Ciphertext:
        """Encrypt up to ``slots`` reals (zero-padded) at scale Δ (or ``2^scale_bits``).

        With the secret key this is SEAL's seeded symmetric encryption, whose serialised form
        carries a seed instead of the second polynomial; otherwise public-key encryption.
        """
        if self._encryptor is None:
            raise DecryptionNotPermittedError(
                "this context holds neither a secret nor a public key"
            )
        vec = np.asarray(values, dtype=np.float64).ravel()
        if vec.size > self.params.slots:
            raise ValueError(f"{vec.size} values do not fit in {self.params.slots} slots")
        if not np.all(np.isfinite(vec)):
            raise ValueError("cannot encrypt NaN or infinite values")
        plain = seal.Plaintext()
        bits = self.params.scale_bits if scale_bits is None else scale_bits
        self.encoder.encode(vec.tolist(), float(2.0**bits), plain)
        if self._secret_key is not None:
            serializable = self._encryptor.encrypt_symmetric(plain)
            data = save(serializable)
            return Ciphertext(self, None, data)
        ct = seal.Ciphertext()
        self._encryptor.encrypt(plain, ct)
        return Ciphertext(self, ct)

    def decrypt(self, ct: Ciphertext) -> npt.NDArray[np.float64]:
        """Decrypt and decode all slots (parties only)."""
        return np.asarray(self._decode(ct, self.encoder.decode_double), dtype=np.float64)

    def decrypt_complex(self, ct: Ciphertext) -> npt.NDArray[np.complex128]:
        """Decrypt and decode all slots with their imaginary parts (parties only: what a
        decryption shows, for a check that nothing was put there)."""
        return np.asarray(self._decode(ct, self.encoder.decode_complex), dtype=np.complex128)

    def _decode(self, ct: Ciphertext, decode: Any) -> Any:
        if self._decryptor is None:
            raise DecryptionNotPermittedError(
                "this CKKS context holds no secret key and cannot decrypt"
            )
        plain = seal.Plaintext()
        try:
            self._decryptor.decrypt(ct.seal, plain)
            return decode(plain)
        except (ValueError, RuntimeError) as exc:
            raise MalformedMessageError(f"ciphertext cannot be decrypted ({exc})") from None

    def ciphertext_from_bytes(self, data: bytes) -> Ciphertext:
        """Load a ciphertext serialised under these parameters (validated by SEAL), and refuse
        what SEAL's validation lets through but its evaluator and decryptor reject: other
        than 2 or 3 parts, not in NTT form, a scale that is not a finite positive number below
        the modulus."""
        if len(data) > MAX_CIPHERTEXT_BYTES:
            raise MalformedMessageError(f"ciphertext of {len(data)} bytes is too large")
        raw = load(seal.Ciphertext, self.seal_context, data, "ciphertext")
        scale = float(raw.scale)
        if not 2 <= raw.size() <= 3 or not raw.is_ntt_form():
            raise MalformedMessageError("ciphertext is not a two- or three-part NTT ciphertext")
        if not (math.isfinite(scale) and 1.0 <= scale < 2.0**self.params.data_modulus_bits):
            raise MalformedMessageError("ciphertext has an impossible scale")
        return Ciphertext(self, raw)

    def fresh_ciphertext_from_bytes(self, data: bytes, scale_bits: float) -> Ciphertext:
        """Load a ciphertext that must be freshly encrypted: two polynomials, at the top
        modulus level, not transparent, at scale ``2^scale_bits``. Anything else (another
        scale or level, a three-part ciphertext) is a :class:`MalformedMessageError`."""
        ct = self.ciphertext_from_bytes(data)
        raw = ct.seal
        if raw.size() != 2 or raw.is_transparent():
            raise MalformedMessageError("ciphertext is not a fresh two-part ciphertext")
        if raw.parms_id() != self.seal_context.first_parms_id():
            raise MalformedMessageError("ciphertext is not at the top modulus level")
        if not math.isclose(raw.scale, 2.0**scale_bits, rel_tol=1e-9):
            raise MalformedMessageError(
                f"ciphertext is at scale 2^{math.log2(raw.scale):.2f}, expected 2^{scale_bits:g}"
            )
        return ct
