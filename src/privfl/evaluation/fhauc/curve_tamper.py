"""Aggregators that deviate in the ``curve``/``metrics`` reveals (the tamper suite of issue
18). Against the malicious variant every one must make the parties raise
:class:`~privfl.errors.VerificationError`. The generic deviations of
:mod:`~privfl.evaluation.fhauc.tamper` (dropping, duplicating, swapping or replaying parties'
uploads) apply unchanged, since they call the honest aggregation on altered inputs."""

from __future__ import annotations

import numpy as np

from privfl.evaluation.fhauc.tamper import (
    DropParty,
    DuplicateParty,
    PerExecution,
    ReplayFirstExecution,
    SwapTwoPartiesBetweenExecutions,
)
from privfl.evaluation.fhauc.uploads import Reply, Upload

__all__ = [
    "CURVE_TAMPERS",
    "AddToOneSlot",
    "DoubleFalsePositives",
    "SwapTAndF",
]


class DoubleFalsePositives(PerExecution):
    """Multiplies the F ciphertexts by 2c and the T ones by c, consistently in every
    execution: with separately permuted vectors this doubled every FP undetected."""

    def tamper(self, uploads: list[Upload]) -> Reply:
        r = self.honest(uploads)
        k = len(r.extra) // 2
        extra = (*r.extra[:k], *(c * 2 for c in r.extra[k:]))
        return Reply(r.session, r.numerator, r.denominator * 2, r.execution, r.sender, extra)


class SwapTAndF(PerExecution):
    """Returns the F sums as T and the T sums as F (would swap TPR and FPR)."""

    def tamper(self, uploads: list[Upload]) -> Reply:
        r = self.honest(uploads)
        k = len(r.extra) // 2
        extra = (*r.extra[k:], *r.extra[:k])
        return Reply(r.session, r.denominator, r.numerator, r.execution, r.sender, extra)


class AddToOneSlot(PerExecution):
    """Adds a plaintext ``delta`` to slot 0 of the T sum (moves one share of one secret
    position)."""

    delta = 1e3

    def tamper(self, uploads: list[Upload]) -> Reply:
        r = self.honest(uploads)
        vec = np.zeros(self._ctx().params.slots)
        vec[0] = self.delta
        return Reply(r.session, r.numerator + vec, r.denominator, r.execution, r.sender, r.extra)


CURVE_TAMPERS = [
    DropParty,
    DuplicateParty,
    SwapTwoPartiesBetweenExecutions,
    ReplayFirstExecution,
    DoubleFalsePositives,
    SwapTAndF,
    AddToOneSlot,
]
