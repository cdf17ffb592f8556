"""Bounded, structure-checked transport of OpenFHE objects (no OpenFHE parsing of peer bytes).

OpenFHE's (cereal) binary deserialisers trust their input: a vector length read from the
bytes is passed to ``std::vector::resize`` (unbounded allocation), a tower modulus read from
the bytes ends up in Barrett reductions (a zero modulus is a division by zero), a crafted
crypto context makes OpenFHE precompute tables for whatever ring it names. privfl therefore
never hands a peer's bytes to OpenFHE. On the wire an OpenFHE object is only its coefficient
vectors (``u64`` little-endian, NTT form), in the order OpenFHE serialises them; everything
else (crypto context, ring and tower parameters, vector lengths, key tags, levels, scaling
factors) comes from a **layout**: a serialisation this process made itself from an object of
the same shape (:func:`scan_layout`). The receiver

1. checks the payload's length against the layout (``vectors * N * 8`` bytes) before reading,
2. checks every coefficient against its tower's modulus (``c < q``), vectorised, and
3. writes the coefficients into a copy of the layout's bytes (:func:`splice`).

OpenFHE then deserialises bytes that differ from its own output only in in-range
coefficients, i.e. a valid object of the expected shape. This is what makes every
``from_bytes`` in :mod:`privfl.crypto.threshold.messages` safe to fuzz in-process.

What OpenFHE 1.5.1 does with crafted bytes (measured; why nothing above is optional)
-----------------------------------------------------------------------------------
Take a decryption share serialised with ``Serialize(share, BINARY)`` (ring 4096, two towers):

* set the ``u64`` length before the first coefficient vector to ``2^31``:
  ``DeserializeCiphertextString`` tries to allocate 16 GiB (``MemoryError: std::bad_alloc``
  under a 4 GiB address-space limit; without a limit the process may be OOM-killed);
* set the ``u64`` tower modulus after the first vector to ``0``: deserialisation *succeeds*,
  and the next ``MultipartyDecryptFusion([share])`` aborts the whole process
  (``terminate called after throwing lbcrypto::OpenFHEException ... ComputeMu: Divide by
  zero``, SIGABRT: no Python exception to catch).

Neither can happen here: a peer's bytes never reach an OpenFHE deserialiser, only
coefficients below the layout's moduli do (``tests/test_threshold_fuzz.py`` writes zeros,
``2^50 - 1`` and random in-range values into every message kind and runs the consuming step).

On the wire every coefficient takes 60 bits, not 64 (:func:`pack60`, :func:`unpack60`: two
coefficients in 15 bytes); every modulus of a privfl context is below ``2^60`` (checked when
the context is built), so this loses nothing and saves 6.25 % of every message.

Common reference polynomials (the uniformly random ``a`` parts of public keys, key-switching
keys and the interactive-bootstrapping element) are expanded from a public seed with
AES-256-CTR (:func:`uniform_coefficients`), so they never travel.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from privfl.crypto.prng import SharedRandomness
from privfl.errors import MalformedMessageError

__all__ = [
    "PACKED_BITS",
    "Layout",
    "add_mod",
    "add_mod_into",
    "check_coefficients",
    "check_rows",
    "extract",
    "loose_moduli",
    "pack60",
    "packed_bytes",
    "scan_layout",
    "seed_for",
    "splice",
    "sub_mod",
    "uniform_coefficients",
    "unpack60",
    "unpack60_array",
]

U64 = np.dtype("<u8")
PACKED_BITS = 60
_LOW60 = np.uint64((1 << PACKED_BITS) - 1)
_SHIFT60, _SHIFT56 = np.uint64(PACKED_BITS), np.uint64(56)
_SHIFT4 = np.uint64(64 - PACKED_BITS)


def packed_bytes(count: int) -> int:
    """Wire size of ``count`` coefficients (``count`` even) at 60 bits each."""
    return count * PACKED_BITS // 8


def pack60(payload: bytes) -> bytes:
    """``payload`` (an even number of ``u64`` coefficients, each below ``2^60``) at 60 bits
    per coefficient: each pair ``(x, y)`` becomes the 120-bit little-endian ``x | y << 60``
    in 15 bytes. Only for this process's own objects (a larger value is a ValueError)."""
    values = np.frombuffer(payload, dtype=U64)
    if values.size % 2:
        raise ValueError("an even number of coefficients is packed")
    if values.size and int(values.max()) >> PACKED_BITS:
        raise ValueError(f"a coefficient is not below 2^{PACKED_BITS}")
    even, odd = values[0::2], values[1::2]
    pairs = values.size // 2
    out = bytearray(packed_bytes(values.size))
    if not pairs:
        return b""
    # bytes 7..14 of each 15-byte record, then bytes 0..7 (byte 7 is written twice, equal)
    high = np.ndarray((pairs,), dtype=U64, buffer=out, offset=7, strides=(15,))
    high[:] = (odd << _SHIFT4) | (even >> _SHIFT56)
    low = np.ndarray((pairs,), dtype=U64, buffer=out, offset=0, strides=(15,))
    low[:] = even | (odd << _SHIFT60)
    return bytes(out)


def unpack60(data: bytes | memoryview, count: int, what: str) -> bytes:
    """The ``u64`` payload of ``count`` coefficients packed by :func:`pack60`;
    :class:`MalformedMessageError` when ``data`` is not exactly their packed size (any
    bytes of the right size unpack to values below ``2^60``: the caller checks the moduli)."""
    return unpack60_array(data, count, what).tobytes()


def unpack60_array(data: bytes | memoryview, count: int, what: str) -> npt.NDArray[np.uint64]:
    """:func:`unpack60` as a new array of ``count`` coefficients (no copy into ``bytes``:
    what a holder that only adds the rows needs)."""
    if count % 2 or len(data) != packed_bytes(count):
        raise MalformedMessageError(
            f"{what}: {len(data)} coefficient bytes, expected {packed_bytes(count)}"
        )
    pairs = count // 2
    out = np.empty(count, dtype=U64)
    if pairs:
        low = np.ndarray((pairs,), dtype=U64, buffer=data, offset=0, strides=(15,))
        high = np.ndarray((pairs,), dtype=U64, buffer=data, offset=7, strides=(15,))
        even, odd = out[0::2], out[1::2]
        np.bitwise_and(low, _LOW60, out=even)
        # bytes 7..14 hold record bits 56..119, so ``high >> 4`` is bits 60..119: ``y``
        np.right_shift(high, _SHIFT4, out=odd)
    return out


@dataclass(frozen=True, eq=False)
class Layout:
    """Where the coefficient vectors and key tags sit in one OpenFHE serialisation."""

    template: bytes
    ring: int
    offsets: tuple[int, ...]  # byte offset of each vector's first coefficient
    moduli: npt.NDArray[np.uint64]  # the modulus of each vector
    tag_offsets: tuple[int, ...]  # byte offsets of the 32-character key tags

    @property
    def vectors(self) -> int:
        return len(self.offsets)

    @property
    def payload_bytes(self) -> int:
        """Size of the coefficient payload this layout expects."""
        return self.vectors * self.ring * U64.itemsize


def _vector_at(data: bytes, start: int, ring: int, moduli: frozenset[int] | None) -> int | None:
    """The modulus of a length-``ring`` coefficient vector starting at ``start`` (after its
    ``u64`` length), or None when the bytes there are not one. ``moduli=None`` accepts any
    odd modulus in ``(2^20, 2^62)``."""
    end = start + ring * U64.itemsize
    if end + 8 > len(data):
        return None
    modulus = int.from_bytes(data[end : end + 8], "little")
    if moduli is None:
        if not (1 << 20 < modulus < 1 << 62 and modulus % 2 == 1):
            return None
    elif modulus not in moduli:
        return None
    values = np.frombuffer(data, dtype=U64, count=ring, offset=start)
    return modulus if int(values.max()) < modulus else None


def _scan(data: bytes, ring: int, moduli: frozenset[int] | None) -> list[tuple[int, int]]:
    """All coefficient vectors of a serialisation made by this process: each is
    ``u64 ring | ring * u64 | u64 modulus`` (OpenFHE's NativeVector in a binary archive)."""
    marker = ring.to_bytes(8, "little")
    found: list[tuple[int, int]] = []
    pos = 0
    while True:
        i = data.find(marker, pos)
        if i < 0:
            return found
        start = i + 8
        modulus = _vector_at(data, start, ring, moduli)
        if modulus is None:
            pos = i + 1
            continue
        found.append((start, modulus))
        pos = start + ring * U64.itemsize + 8


def loose_moduli(data: bytes, ring: int) -> list[int]:
    """The modulus of each coefficient vector of a serialisation made by this process, found
    without knowing the moduli (used once per context to learn its RNS basis)."""
    return [m for _, m in _scan(data, ring, None)]


def scan_layout(data: bytes, ring: int, moduli: frozenset[int], tag: str) -> Layout:
    """The layout of ``data``, an OpenFHE serialisation this process made itself; ``tag`` is
    the object's key tag (every occurrence outside the vectors is patched by :func:`splice`)."""
    found = _scan(data, ring, moduli)
    if not found:
        raise ValueError("no coefficient vectors found in the reference object")
    tag_offsets: list[int] = []
    if tag:
        needle = tag.encode("ascii")
        pos = 0
        while (i := data.find(needle, pos)) >= 0:
            if not any(s <= i < s + ring * 8 for s, _ in found):
                tag_offsets.append(i)
            pos = i + 1
    return Layout(
        template=bytes(data),
        ring=ring,
        offsets=tuple(s for s, _ in found),
        moduli=np.array([m for _, m in found], dtype=np.uint64),
        tag_offsets=tuple(tag_offsets),
    )


def extract(layout: Layout, data: bytes, moduli: frozenset[int]) -> bytes:
    """The coefficient payload of ``data`` (this process's own serialisation of an object of
    ``layout``'s shape). The bytes around the vectors may differ from the layout's (OpenFHE
    shares parameter objects differently after different computations); the vectors' count
    and moduli may not."""
    found = _scan(data, layout.ring, moduli)
    if len(found) != layout.vectors or any(
        m != int(lm) for (_, m), lm in zip(found, layout.moduli, strict=True)
    ):
        raise ValueError(
            f"object has {len(found)} coefficient vectors, its layout expects {layout.vectors}"
        )
    n = layout.ring * U64.itemsize
    return b"".join(data[s : s + n] for s, _ in found)


def check_coefficients(
    moduli: npt.NDArray[np.uint64], ring: int, payload: bytes, what: str
) -> npt.NDArray[np.uint64]:
    """The payload as a ``(vectors, ring)`` array; :class:`MalformedMessageError` when its size
    is not ``len(moduli) * ring * 8`` or a coefficient is ``>=`` its vector's modulus."""
    expected = len(moduli) * ring * U64.itemsize
    if len(payload) != expected:
        raise MalformedMessageError(
            f"{what}: {len(payload)} coefficient bytes, expected {expected}"
        )
    return check_rows(moduli, ring, np.frombuffer(payload, dtype=U64), what)


def check_rows(
    moduli: npt.NDArray[np.uint64], ring: int, values: npt.NDArray[np.uint64], what: str
) -> npt.NDArray[np.uint64]:
    """:func:`check_coefficients` on ``len(moduli) * ring`` coefficients already in an array."""
    if values.size != len(moduli) * ring:
        raise MalformedMessageError(
            f"{what}: {values.size} coefficients, expected {len(moduli) * ring}"
        )
    values = values.reshape(len(moduli), ring)
    if bool((values >= moduli[:, None]).any()):
        raise MalformedMessageError(f"{what}: a coefficient is not reduced modulo its prime")
    return values


def add_mod(
    a: npt.NDArray[np.uint64], b: npt.NDArray[np.uint64], moduli: npt.NDArray[np.uint64]
) -> npt.NDArray[np.uint64]:
    """``(a + b) mod q`` per vector for reduced inputs (moduli below 2^63: no overflow).

    ``s = a + b < 2q``; ``s - q`` wraps around ``2^64`` exactly when ``s < q``, and is then
    larger than ``s``: ``min(s, s - q)`` is the reduced sum (two passes, no mask array)."""
    s = a + b
    np.minimum(s, s - moduli[:, None], out=s)
    return s


def add_mod_into(
    acc: npt.NDArray[np.uint64], b: npt.NDArray[np.uint64], moduli: npt.NDArray[np.uint64]
) -> None:
    """``acc = (acc + b) mod q`` in place (:func:`add_mod` without a new array), for a
    running sum this process owns (``acc`` reduced and writable)."""
    np.add(acc, b, out=acc)
    np.minimum(acc, acc - moduli[:, None], out=acc)


def sub_mod(
    a: npt.NDArray[np.uint64], b: npt.NDArray[np.uint64], moduli: npt.NDArray[np.uint64]
) -> npt.NDArray[np.uint64]:
    """``(a - b) mod q`` per vector for reduced inputs: ``a - b`` wraps around ``2^64``
    exactly when ``a < b``, and adding ``q`` then wraps it back below ``q``."""
    d = a - b
    np.minimum(d, d + moduli[:, None], out=d)
    return d


def splice(layout: Layout, payload: bytes, tag: str) -> bytes:
    """The layout's bytes with ``payload``'s vectors (already checked) and key tag ``tag``."""
    out = bytearray(layout.template)
    n = layout.ring * U64.itemsize
    for k, off in enumerate(layout.offsets):
        out[off : off + n] = payload[k * n : (k + 1) * n]
    if layout.tag_offsets:
        raw = tag.encode("ascii")
        if len(raw) != 32:
            raise ValueError("key tags are 32 characters")
        for off in layout.tag_offsets:
            out[off : off + 32] = raw
    return bytes(out)


def seed_for(session: bytes, purpose: str) -> bytes:
    """A public 256-bit seed for the common reference polynomials of ``session``."""
    return hashlib.sha256(b"privfl-threshold-crp|" + purpose.encode() + b"|" + session).digest()


def uniform_coefficients(
    seed: bytes, label: str, moduli: npt.NDArray[np.uint64], ring: int
) -> bytes:
    """Uniform coefficients modulo each of ``moduli`` (one vector of ``ring`` per modulus),
    expanded from ``seed`` with AES-256-CTR; rejection sampling on the modulus' bit length,
    so there is no bias. In NTT form a uniform vector is a uniform polynomial."""
    stream = SharedRandomness(seed, label)
    out = np.empty((len(moduli), ring), dtype=U64)
    for k, q in enumerate(moduli.tolist()):
        shift = np.uint64(64 - int(q).bit_length())
        filled = 0
        while filled < ring:
            need = ring - filled
            draw = np.frombuffer(stream.bytes(8 * (2 * need + 16)), dtype=U64) >> shift
            good = draw[draw < np.uint64(q)][:need]
            out[k, filled : filled + good.size] = good
            filled += good.size
    return out.tobytes()
