"""Threshold key backend of the FHAUC aggregator (OpenFHE, joint key; see
:mod:`~privfl.evaluation.fhauc.keys`).

The aggregator holds no key share: between the joins and the end of the first key round it
knows no key at all, afterwards the joint public key (it may encrypt, as a deviating
aggregator may) and the joint evaluation keys. Slots and rotations are those of the
``"fhauc"`` parameter set (every power-of-two rotation); the multiplier's range and form
come from the session's :class:`~privfl.evaluation.fhauc.threshold.plan.Plan`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy.typing as npt

from privfl.crypto.threshold import CiphertextHolder
from privfl.errors import ProtocolError
from privfl.evaluation.fhauc.ciphertext import HECiphertext
from privfl.evaluation.fhauc.layout import Layout
from privfl.evaluation.fhauc.messages import SessionConfig
from privfl.evaluation.fhauc.policy import Policy
from privfl.evaluation.fhauc.threshold import plan as tp
from privfl.evaluation.fhauc.threshold.ops import ThresholdCiphertext, fhauc_parameters

__all__ = ["ThresholdKeys"]


class ThresholdKeys:
    """Threshold backend: the joint public key once the parties' key round produced it."""

    keys = "threshold"

    def __init__(self) -> None:
        self._holder: CiphertextHolder | None = None

    @property
    def slots(self) -> int:
        return fhauc_parameters().batch_size

    def layout(self, config: SessionConfig, policy: Policy) -> Layout:
        """The session plan's layout (semi-honest AUC: T and F in one ciphertext)."""
        return tp.plan(config, policy).layout

    def missing_rotations(self, steps: Sequence[int]) -> list[int]:
        slots = self.slots
        return sorted(s for s in set(steps) if not (0 < s < slots and s & (s - 1) == 0))

    def session_multiplier(
        self, config: SessionConfig, policy: Policy
    ) -> tuple[tuple[float, float], int]:
        plan = tp.plan(config, policy)
        return plan.multiplier_bits, plan.multiplier_scale_bits

    def install(self, holder: CiphertextHolder | None) -> None:
        """The session's joint public key (``None``: a new session, no key yet)."""
        self._holder = holder

    def encrypt(self, values: npt.ArrayLike, scale_bits: float | None = None) -> HECiphertext:
        if self._holder is None:
            raise ProtocolError("no joint public key yet: the key round has not ended")
        return ThresholdCiphertext(self._holder.encrypt(values))
