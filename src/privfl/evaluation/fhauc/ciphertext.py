"""The ciphertext operations FHAUC's aggregator uses, whatever the key backend.

SEAL's :class:`~privfl.crypto.ckks.Ciphertext` (single keys) and OpenFHE's
:class:`~privfl.evaluation.fhauc.threshold.ops.ThresholdCiphertext` (threshold keys) both
implement :class:`HECiphertext`, so :meth:`~privfl.evaluation.fhauc.Aggregator.aggregate`
and every deviating aggregator of the tamper suite is written once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy.typing as npt

from privfl.crypto import ckks
from privfl.crypto.ckks import Ciphertext
from privfl.errors import ProtocolError

__all__ = ["HECiphertext", "add_all", "as_seal"]


class HECiphertext(Protocol):
    """The operations the aggregator's computation uses on a ciphertext."""

    @property
    def scale(self) -> float: ...

    def __add__(self, other: Any) -> HECiphertext: ...

    def __sub__(self, other: Any) -> HECiphertext: ...

    def __mul__(self, other: Any) -> HECiphertext: ...

    def scale_by(self, factor: float, precision_bits: int = 30) -> HECiphertext: ...

    def scale_by_slots(self, factors: npt.ArrayLike, precision_bits: int = 30) -> HECiphertext:
        """Slot ``i`` times ``factors[i]`` (a plaintext product: one level)."""
        ...

    def rotate(self, steps: int) -> HECiphertext: ...

    def window_sum(self, window: int, stride: int = 1) -> HECiphertext: ...


def add_all(cts: Sequence[HECiphertext]) -> HECiphertext:
    """The sum of one or more ciphertexts: SEAL's ``add_many`` for SEAL ciphertexts, else
    left to right (threshold uploads then add as coefficient rows, without OpenFHE)."""
    if not cts:
        raise ValueError("nothing to add")
    seal_cts = [c for c in cts if isinstance(c, Ciphertext)]
    if len(seal_cts) == len(cts):
        return ckks.add_all(seal_cts)
    total = cts[0]
    for other in cts[1:]:
        total = total + other
    return total


def as_seal(ct: HECiphertext) -> Ciphertext:
    """``ct`` as a SEAL ciphertext (single-key sessions); a reply or upload holding any
    other ciphertext is a :class:`~privfl.errors.ProtocolError`."""
    if not isinstance(ct, Ciphertext):
        raise ProtocolError("a single-key session carries SEAL ciphertexts only")
    return ct
