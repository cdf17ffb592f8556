"""Aggregators that deviate in the ``curve``/``metrics`` reveals (the tamper suite of issue
18). Against the malicious variant every one must make the parties raise
:class:`~privfl.errors.VerificationError`. The generic deviations of
:mod:`~privfl.evaluation.fhauc.tamper` (dropping, duplicating, swapping or replaying parties'
uploads) apply unchanged, since they call the honest aggregation on altered inputs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from privfl.evaluation.fhauc import curve
from privfl.evaluation.fhauc.aggregator import Aggregator, random_multiplier
from privfl.evaluation.fhauc.ciphertext import HECiphertext
from privfl.evaluation.fhauc.tamper import (
    PRECISION_BITS,
    DropParty,
    DuplicateParty,
    PerExecution,
    ReplayFirstExecution,
    SwapTwoPartiesBetweenExecutions,
    rotated,
)
from privfl.evaluation.fhauc.uploads import Reply, Result, Upload

__all__ = [
    "CURVE_TAMPERS",
    "EPSILON_TAMPERS",
    "AddToOneSlot",
    "AddToOneSlotEverywhere",
    "CycleLanes",
    "DoubleFalsePositives",
    "RotateTSum",
    "ScaleFalsePositivesEverywhere",
    "SwapExecutions",
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
        vec = np.zeros(self._keys().slots)
        vec[0] = self.delta
        return Reply(r.session, r.numerator + vec, r.denominator, r.execution, r.sender, r.extra)


class SwapExecutions(Aggregator):
    """Returns the honest replies of executions 0 and 1 swapped, each labelled as the
    other: every reply is a genuine aggregate, of the wrong execution."""

    def handle_uploads(self, uploads: Mapping[str, bytes]) -> bytes:
        cfg = self._config()
        res = Result.from_bytes(super().handle_uploads(uploads), self._ctx(), cfg.session)
        r = res.replies
        swapped = (replace(r[1], execution=0), replace(r[0], execution=1), *r[2:])
        return Result(res.session, swapped, res.sender).to_bytes()


class RotateTSum(PerExecution):
    """Rotates the T sum by one slot (shifts every decision point by one if the slots
    were in order)."""

    def tamper(self, uploads: list[Upload]) -> Reply:
        r = self.honest(uploads)
        return Reply(
            r.session, r.numerator.rotate(1), r.denominator, r.execution, r.sender, r.extra
        )


class ScaleFalsePositivesEverywhere(PerExecution):
    """Multiplies the F ciphertexts by ``1 + epsilon`` (encoded at scale ``2^24``) and the T
    ones by 1, in every execution: ``DoubleFalsePositives`` at any size."""

    epsilon = 1e-6

    def __init__(self, epsilon: float | None = None) -> None:
        super().__init__()
        if epsilon is not None:
            self.epsilon = epsilon

    def tamper(self, uploads: list[Upload]) -> Reply:
        r = self.honest(uploads)
        k = len(r.extra) // 2
        up = [c.scale_by(1.0 + self.epsilon, PRECISION_BITS) for c in (r.denominator, *r.extra[k:])]
        same = [c.scale_by(1.0, PRECISION_BITS) for c in (r.numerator, *r.extra[:k])]
        return Reply(r.session, same[0], up[0], r.execution, r.sender, (*same[1:], *up[1:]))


class AddToOneSlotEverywhere(ScaleFalsePositivesEverywhere):
    """Adds ``epsilon·c·total`` to slot 0 of the T sum in every execution (``c`` its own
    multiplier; ``total``, the federation's sample count, given to it as an oracle): one
    share of one secret position moves by ``epsilon`` of the normalised scale. In the lanes
    layout, slot 0 of every used lane's region."""

    total = 1.0

    def tamper(self, uploads: list[Upload]) -> Reply:
        layout = self._layout()
        c = random_multiplier(*self.multiplier_range)
        t0, f0, extra = curve.aggregate(uploads, layout, c)
        vec = np.zeros(self._keys().slots)
        used = layout.lanes_used(self.execution, self.executions)
        region = layout.region if isinstance(layout, curve.CurveLayout) else 0
        vec[[lane * region for lane in range(used)]] = self.epsilon * c * self.total
        cfg = self._config()
        return Reply(cfg.session, t0 + vec, f0, self.execution, self.name, extra)


class CycleLanes(PerExecution):
    """In the lanes layout (:class:`~privfl.evaluation.fhauc.layout.CurveLayout`) every
    execution is shown another's reply: the group's used lanes cycled (lane ``g`` shows lane
    ``g + 1``'s values, the last used lane the first's), genuine aggregates of the wrong
    execution, as :class:`SwapExecutions` with one ciphertext per execution. Without lanes,
    the honest reply rotated by one slot."""

    def tamper(self, uploads: list[Upload]) -> Reply:
        r = self.honest(uploads)
        layout, slots = self._layout(), self._keys().slots
        if not self.lanes():
            t, f = r.numerator.rotate(1), r.denominator.rotate(1)
            return Reply(r.session, t, f, r.execution, r.sender, r.extra)
        used = layout.lanes_used(self.execution, self.executions)
        region = layout.region if isinstance(layout, curve.CurveLayout) else 1
        ahead, last = np.zeros(slots), np.zeros(slots)
        ahead[: (used - 1) * region] = 1.0
        last[(used - 1) * region : used * region] = 1.0
        back = slots - (used - 1) * region

        def cycled(ct: HECiphertext) -> HECiphertext:
            return rotated(ct, region, slots).scale_by_slots(ahead) + rotated(
                ct, back, slots
            ).scale_by_slots(last)

        return Reply(r.session, cycled(r.numerator), cycled(r.denominator), r.execution, r.sender)


EPSILON_TAMPERS = [ScaleFalsePositivesEverywhere, AddToOneSlotEverywhere]

CURVE_TAMPERS = [
    DropParty,
    DuplicateParty,
    SwapTwoPartiesBetweenExecutions,
    ReplayFirstExecution,
    DoubleFalsePositives,
    SwapTAndF,
    AddToOneSlot,
    SwapExecutions,
    RotateTSum,
    CycleLanes,
]  # the EPSILON_TAMPERS take a size (and AddToOneSlotEverywhere an oracle): see their tests
