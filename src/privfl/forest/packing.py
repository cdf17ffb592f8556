"""Slot arithmetic of packed HoLT comparisons (RevFRF, batched FRF-Predict): pure functions,
no key, no randomness; the protocol steps that use them are in :mod:`.packed_holt`.

A pack holds ``n`` comparisons in one DT-PKC plaintext ``l = sum_i 2^(k i) (s_i + 2^(k-1))``,
slot ``i`` of ``k`` bits carrying the blinded difference ``s_i = ±r_i (2 x_i + 1 - 2 y_i)``
offset by ``2^(k-1)`` so that every honest slot is a non-negative ``k``-bit number and no
slot borrows from or carries into its neighbour.

**Range.** Packed comparisons take inputs ``|x|, |y| < 2^PACK_VALUE_BITS`` (fixed-point
values, 96 bits: ``|x| < 2^64`` at the default 32 fraction bits). Then ``|s_i| < 2^(sigma + 98)``
(``r_i < 2^sigma``), the *slot range*. The slot width adds ``PACK_MARGIN_BITS`` of headroom:
``k = sigma + PACK_VALUE_BITS + 3 + PACK_MARGIN_BITS``, so an honest slot never reaches
``2^(k-1)`` and a slot whose chunk is garbage (a neighbour spilled into it, or a deviating
CS put anything there) lands in the slot range with probability about ``2^-PACK_MARGIN_BITS``
if it is spread out; it is then answered with a fresh random bit, as an out-of-range HoLT.
``n = floor((|N| - 1) / k)`` so that ``l < 2^(n k) <= N``: the residue mod N *is* the
integer (9 slots at |N| = 2048, 4 at 1024, 2 at 512).

**Per-slot decision.** :func:`slot_answer` reads one chunk only: whether a slot is in range
and its sign depend on that slot's ``k`` bits alone, never on another slot.
"""

from __future__ import annotations

from collections.abc import Sequence

from privfl.crypto import dtpkc
from privfl.errors import InputError

PACK_VALUE_BITS = 96
"""Inputs of a packed comparison are fixed-point values below ``2^96`` in magnitude."""
PACK_MARGIN_BITS = 40
"""Headroom of a slot above its range (a garbage chunk looks in range w.p. ~2^-40)."""


def slot_bits(prm: dtpkc.PublicParams) -> int:
    """k: the width of one slot for these parameters."""
    return prm.sigma + PACK_VALUE_BITS + 3 + PACK_MARGIN_BITS


def slot_count(prm: dtpkc.PublicParams) -> int:
    """n: how many comparisons one DT-PKC plaintext holds (``n k <= |N| - 1``), at least 1;
    an :class:`InputError` if even one slot does not fit or exceeds the plaintext range."""
    k = slot_bits(prm)
    n = (prm.bits - 1) // k
    if n < 1 or prm.ell < PACK_VALUE_BITS:
        raise InputError(f"|N| = {prm.bits} bits has no room for a {k}-bit comparison slot")
    return n


def slot_range_bits(prm: dtpkc.PublicParams) -> int:
    """An honest slot value has ``|s| < 2^(sigma + PACK_VALUE_BITS + 2)``."""
    return prm.sigma + PACK_VALUE_BITS + 2


def offset(k: int, n: int) -> int:
    """``sum_i 2^(k i) 2^(k-1)``: the public offset that makes every honest slot non-negative."""
    return sum(1 << (k * i + k - 1) for i in range(n))


def pack(values: Sequence[int], k: int) -> int:
    """``sum_i 2^(k i) (values[i] + 2^(k-1))``; each ``|values[i]| < 2^(k-1)`` (else
    :class:`ValueError`: a slot would spill)."""
    out = 0
    for i, v in enumerate(values):
        if not -(1 << (k - 1)) <= v < 1 << (k - 1):
            raise ValueError(f"slot {i} value does not fit in {k} bits")
        out |= (v + (1 << (k - 1))) << (k * i)
    return out


def chunk(packed: int, i: int, k: int) -> int:
    """The ``k`` bits of slot ``i`` of a non-negative packed value, minus the offset."""
    return ((packed >> (k * i)) & ((1 << k) - 1)) - (1 << (k - 1))


def unpack(packed: int, n: int, k: int) -> list[int]:
    """The ``n`` slot values of ``packed`` (inverse of :func:`pack` for in-range values)."""
    return [chunk(packed, i, k) for i in range(n)]


def slot_answer(value: int, range_bits: int) -> tuple[bool, bool]:
    """(in range, negative) of one slot's value: in range iff ``0 < |value| < 2^range_bits``
    (the same rule as one HoLT); the CC answers an out-of-range slot with a random bit."""
    return value != 0 and abs(value) < 1 << range_bits, value < 0


def pack_bits(bits: Sequence[int]) -> int:
    """``sum_i 2^i bits[i]``: the CC's answer to a pack, one plaintext."""
    return sum((b & 1) << i for i, b in enumerate(bits))


def unpack_bits(value: int, n: int) -> list[int]:
    """The ``n`` bits of :func:`pack_bits`; :class:`ValueError` if ``value`` is not such a
    number (a holder or the CC returned something else)."""
    if not 0 <= value < 1 << n:
        raise ValueError(f"{value} is not {n} packed bits")
    return [(value >> i) & 1 for i in range(n)]
