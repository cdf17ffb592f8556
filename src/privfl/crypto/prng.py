"""Common randomness derived from a 256-bit shared seed (AES-256-CTR keystream).

All parties holding the same seed derive the same values for the same ``label``; the
aggregator, without the seed, cannot predict them. Each purpose (masks, multipliers,
permutation, bits, ...) uses its own label, so streams are independent.

Conversions are unbiased: integers by rejection sampling on the smallest power-of-two
range, floats from 53 random bits, permutations by Fisher-Yates with unbiased indices.
"""

from __future__ import annotations

import secrets

import numpy as np
import numpy.typing as npt
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

SEED_BYTES = 32


def new_seed() -> bytes:
    """A fresh 256-bit seed from the OS CSPRNG."""
    return secrets.token_bytes(SEED_BYTES)


class SharedRandomness:
    """Deterministic keystream for one (seed, label) pair."""

    def __init__(self, seed: bytes, label: str | bytes) -> None:
        if len(seed) != SEED_BYTES:
            raise ValueError(f"seed must be {SEED_BYTES} bytes")
        info = label.encode() if isinstance(label, str) else label
        key = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"privfl-prng-v1", info=info).derive(
            seed
        )
        self._enc = Cipher(algorithms.AES(key), modes.CTR(b"\x00" * 16)).encryptor()
        self._buf: list[int] = []

    def bytes(self, n: int) -> bytes:
        """The next ``n`` keystream bytes."""
        return self._enc.update(b"\x00" * n)

    def _uint64(self, n: int) -> npt.NDArray[np.uint64]:
        return np.frombuffer(self.bytes(8 * n), dtype="<u8").astype(np.uint64)

    def integers(self, low: int, high: int, size: int) -> list[int]:
        """``size`` independent uniform integers in ``[low, high)`` (any width, unbiased)."""
        span = high - low
        if span <= 0:
            raise ValueError("empty range")
        bits = max(1, (span - 1).bit_length())
        nbytes = (bits + 7) // 8
        mask = (1 << bits) - 1
        out: list[int] = []
        while len(out) < size:
            need = size - len(out)
            # expected acceptance >= 1/2; draw a little more than needed
            raw = self.bytes(nbytes * (2 * need + 8))
            for i in range(0, len(raw), nbytes):
                v = int.from_bytes(raw[i : i + nbytes], "little") & mask
                if v < span:
                    out.append(low + v)
                    if len(out) == size:
                        break
        return out

    def integer(self, low: int, high: int) -> int:
        """One uniform integer in ``[low, high)``."""
        return self.integers(low, high, 1)[0]

    def uniform_bits(self, bits: int, size: int) -> npt.NDArray[np.int64]:
        """``size`` uniform integers in ``[0, 2^bits)`` (``bits <= 62``), vectorised; a
        power-of-two range needs no rejection, so there is no bias."""
        if not 1 <= bits <= 62:
            raise ValueError("bits must be in 1..62")
        raw = self._uint64(size) >> np.uint64(64 - bits)
        return raw.astype(np.int64)

    def signed_bits(self, bits: int, size: int) -> npt.NDArray[np.int64]:
        """``size`` uniform integers in ``[-2^bits, 2^bits)``."""
        return self.uniform_bits(bits + 1, size) - (1 << bits)

    def uniform(self, size: int) -> npt.NDArray[np.float64]:
        """``size`` uniform floats in ``[0, 1)`` with 53 random bits each."""
        return (self._uint64(size) >> np.uint64(11)).astype(np.float64) / float(1 << 53)

    def bits(self, size: int) -> npt.NDArray[np.int8]:
        """``size`` uniform bits."""
        raw = np.frombuffer(self.bytes((size + 7) // 8), dtype=np.uint8)
        return np.unpackbits(raw, bitorder="little")[:size].astype(np.int8)

    def permutation(self, n: int) -> npt.NDArray[np.int64]:
        """A uniform permutation of ``range(n)``: Fisher-Yates with unbiased indices."""
        perm = np.arange(n, dtype=np.int64)
        if n < 2:
            return perm
        # one unbiased index per step, drawn in bulk by rejection on 32-bit words
        for i in range(n - 1, 0, -1):
            j = self._index(i + 1)
            perm[i], perm[j] = perm[j], perm[i]
        return perm

    def _index(self, bound: int) -> int:
        """Uniform integer in [0, bound) for bound <= 2^32 (rejection, buffered)."""
        limit = (1 << 32) - ((1 << 32) % bound)
        while True:
            if not self._buf:
                self._buf = np.frombuffer(self.bytes(4096), dtype="<u4").tolist()
            v = self._buf.pop()
            if v < limit:
                return v % bound
