"""Aggregators that deviate from FHAUC, for robustness testing (the tamper suite).

Each class is a small :class:`~privfl.evaluation.fhauc.Aggregator` subclass; against the
malicious variant every one must make the parties raise
:class:`~privfl.errors.VerificationError`. Use them as templates for your own::

    from privfl.evaluation.tamper import DropParty
    privfl.federated_auc(parties, security="malicious", aggregator=DropParty())
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from privfl.evaluation.fhauc import curve
from privfl.evaluation.fhauc.aggregator import Aggregator, random_multiplier
from privfl.evaluation.fhauc.ciphertext import HECiphertext, add_all
from privfl.evaluation.fhauc.layout import CurveLayout
from privfl.evaluation.fhauc.reveal import Reveal
from privfl.evaluation.fhauc.uploads import Reply, Upload, summed_vectors

__all__ = [
    "TAMPERS",
    "AddEncryptedConstant",
    "AddToFalsePositiveHalf",
    "DeflateDenominator",
    "DropParty",
    "DuplicateParty",
    "ForgeAUC099",
    "PerExecution",
    "ReplayFirstExecution",
    "RotateSummedVector",
    "ScaleNumerator",
    "ScaleNumeratorEverywhere",
    "ScaleNumeratorInSecondExecutionOnly",
    "ShiftLanes",
    "SwapTwoPartiesBetweenExecutions",
]


class PerExecution(Aggregator):
    """Records the uploads of execution 0 so execution 1 can misuse them.

    :meth:`aggregate` runs once per ciphertext group (:attr:`Aggregator.execution`). Where the
    layout puts the executions side by side (``lanes > 1``, :mod:`~.layout`) the tampers that
    single out an execution act on its lane instead: :meth:`lanes` says so, and rotating a
    ciphertext by one slot gives every lane the next lane's values (execution ``e + 1``'s)."""

    def aggregate(self, uploads: list[Upload]) -> Reply:
        if self.execution == 0:
            self.first: list[Upload] = list(uploads)
        return self.tamper(uploads)

    def tamper(self, uploads: list[Upload]) -> Reply:
        return super().aggregate(uploads)

    def honest(self, uploads: list[Upload]) -> Reply:
        return Aggregator.aggregate(self, uploads)

    def lanes(self) -> bool:
        """Whether this session's executions share ciphertexts (one group holds several)."""
        return self._layout().lanes > 1

    def lane_step(self) -> int:
        """The rotation that gives every lane the next lane's values: one slot where the
        lanes are interleaved (the AUC's), one region where they sit side by side (the
        curve's, :class:`~.layout.CurveLayout`)."""
        layout = self._layout()
        return layout.region if isinstance(layout, CurveLayout) else 1

    def replayed(self, altered: list[Upload], uploads: list[Upload]) -> Reply:
        """The reply computed from ``altered`` in the group's used lanes but the last, and
        from the honest ``uploads`` in the last (whose next lane may be empty: zeros any check
        refuses, not the tested agreement)."""
        used = self._layout().lanes_used(self.execution, self.executions)
        if self._config().reveal is not Reveal.AUC:
            return self.curve_in_lanes(altered, uploads, used - 1)
        num, den = self.numerator_and_denominator(uploads)
        computed = self.numerator_and_denominator(altered)
        return self.in_lanes([(*computed, range(used - 1)), (num, den, [used - 1])])

    def curve_in_lanes(self, altered: list[Upload], uploads: list[Upload], first: int) -> Reply:
        """A curve reply whose lanes ``0..first-1`` come from ``altered`` and the rest from
        ``uploads``, both times one honest ``c`` (:func:`~.curve.aggregate`), joined by a
        plaintext 0/1 mask per region (the one level a malicious curve's upload spares)."""
        layout, slots = self._layout(), self._keys().slots
        if not isinstance(layout, CurveLayout):
            raise TypeError("curve lanes need the curve layout")
        c = random_multiplier(*self.multiplier_range)
        mask = np.zeros(slots)
        mask[: first * layout.region] = 1.0
        t_alt, f_alt, _ = curve.aggregate(altered, layout, c)
        t_own, f_own, _ = curve.aggregate(uploads, layout, c)
        t = t_alt.scale_by_slots(mask) + t_own.scale_by_slots(1.0 - mask)
        f = f_alt.scale_by_slots(mask) + f_own.scale_by_slots(1.0 - mask)
        return Reply(self.session_config.session, t, f, self.execution, self.name)

    def in_lanes(self, parts: Sequence[tuple[HECiphertext, HECiphertext, Sequence[int]]]) -> Reply:
        """A reply whose lanes come from different computations: each ``(numerator,
        denominator, lanes)`` gives its lanes, every slot times one multiplier ``c``, the
        largest the range allows (so the parties' bound on ``TP·FP`` lets the reply through
        and the executions' agreement is what is tested), applied as a plaintext product per
        part: the one level the honest multiplier takes."""
        layout, slots = self._layout(), self._keys().slots
        c = 2.0 ** (self.multiplier_range[1] - self.multiplier_scale_bits) * (1 - 2.0**-20)
        nums, dens = [], []
        for num, den, lanes in parts:
            mask = np.zeros(slots)
            for lane in lanes:
                mask[lane :: layout.lanes] = c
            nums.append(num.scale_by_slots(mask))
            dens.append(den.scale_by_slots(mask))
        return Reply(self.session_config.session, add_all(nums), add_all(dens), self.execution)

    def cycled(self, computed: tuple[HECiphertext, HECiphertext]) -> Reply:
        """``computed`` (numerator, denominator) with the group's used lanes cycled: lane
        ``g`` shows lane ``g + 1``'s result and the last used lane the first's (rotations by
        one slot and by ``slots - (K - 1)``, composed of the keys' powers of two)."""
        layout, slots = self._layout(), self._keys().slots
        used = layout.lanes_used(self.execution, self.executions)
        num, den = computed
        back = slots - (used - 1)
        return self.in_lanes([
            (num.rotate(1), den.rotate(1), range(used - 1)),
            (rotated(num, back, slots), rotated(den, back, slots), [used - 1]),
        ])  # fmt: skip


def rotated(ct: HECiphertext, steps: int, slots: int) -> HECiphertext:
    """``ct`` rotated left by ``steps`` (mod ``slots``) as rotations by powers of two."""
    steps %= slots
    bit = 1
    while steps:
        if steps & bit:
            ct, steps = ct.rotate(bit), steps - bit
        bit *= 2
    return ct


def next_lane(upload: Upload, step: int = 1) -> Upload:
    """``upload`` with every ciphertext rotated by ``step`` slots (:meth:`PerExecution.lane_step`):
    each lane then holds the next lane's values (the next execution's), the last lane the
    first's."""
    return Upload(
        upload.sender,
        upload.session,
        [c.rotate(step) for c in upload.t],
        [c.rotate(step) for c in upload.f],
        [c.rotate(step) for c in upload.d],
        upload.execution,
    )


class DropParty(PerExecution):
    def tamper(self, uploads: list[Upload]) -> Reply:
        return self.honest(uploads[1:])


class DuplicateParty(PerExecution):
    def tamper(self, uploads: list[Upload]) -> Reply:
        return self.honest([*uploads, uploads[0]])


class SwapTwoPartiesBetweenExecutions(PerExecution):
    """Execution 1 gets parties 0 and 1's uploads of execution 0 (in lanes: every execution
    but the group's last gets their uploads of the next one, the last its own)."""

    def tamper(self, uploads: list[Upload]) -> Reply:
        if self.lanes():
            step = self.lane_step()
            swapped = [next_lane(uploads[0], step), next_lane(uploads[1], step), *uploads[2:]]
            return self.replayed(swapped, uploads)
        if self.execution == 1:
            uploads = [self.first[0], self.first[1], *uploads[2:]]
        return self.honest(uploads)


class ReplayFirstExecution(SwapTwoPartiesBetweenExecutions):
    """Execution 1 gets execution 0's uploads (in lanes: every execution but the group's last
    gets the next one's)."""

    def tamper(self, uploads: list[Upload]) -> Reply:
        if self.lanes():
            return self.replayed([next_lane(u, self.lane_step()) for u in uploads], uploads)
        return self.honest(self.first if self.execution == 1 else uploads)


class ShiftLanes(PerExecution):
    """In lanes, every execution is shown another's result (the used lanes cycled,
    :meth:`PerExecution.cycled`); in one execution's ciphertext, the honest reply rotated by
    one slot (the denominator leaves its slot)."""

    def tamper(self, uploads: list[Upload]) -> Reply:
        if self.lanes():
            return self.cycled(self.numerator_and_denominator(uploads))
        reply = self.honest(uploads)
        return Reply(
            reply.session,
            reply.numerator.rotate(1),
            reply.denominator.rotate(1),
            reply.execution,
        )


class RotateSummedVector(PerExecution):
    def tamper(self, uploads: list[Upload]) -> Reply:
        layout, cfg = self._layout(), self.session_config
        ts, fs = summed_vectors(uploads, layout)
        t, f = ts[0].rotate(1), fs[0]
        num = (t * f).window_sum(layout.window, layout.lanes)
        den = t * f.rotate(layout.denominator_rotation)
        return Reply(cfg.session, num * 2**20, den * 2**20, self.execution)


class ScaleNumerator(PerExecution):
    """The numerator times 1.001 (every execution, or ``only_execution``; in lanes the factor
    is folded into the multiplier's plaintext product, so only that lane is scaled)."""

    only_execution: int | None = None

    def tamper(self, uploads: list[Upload]) -> Reply:
        if self.only_execution is not None and self.lanes():
            layout, slots = self._layout(), self._keys().slots
            num, den = self.numerator_and_denominator(uploads)
            c = random_multiplier(*self.multiplier_range) / 2.0**self.multiplier_scale_bits
            factors = np.full(slots, c)
            factors[self.only_execution :: layout.lanes] = c * 1.001
            return Reply(
                self.session_config.session,
                num.scale_by_slots(factors),
                den.scale_by_slots(np.full(slots, c)),
                self.execution,
            )
        reply = self.honest(uploads)
        if self.only_execution not in (None, self.execution):
            return reply
        return Reply(
            reply.session,
            reply.numerator.scale_by(1.001),
            reply.denominator.scale_by(1.0),
            reply.execution,
        )


class ScaleNumeratorInSecondExecutionOnly(ScaleNumerator):
    only_execution = 1


class AddEncryptedConstant(PerExecution):
    """Adds E(k) to the numerator. With k = 1e10 the AUC would move by ~5e-4 here; see
    test_undetectable_perturbations_are_harmless for a k too small to matter."""

    constant = 1e10

    def tamper(self, uploads: list[Upload]) -> Reply:
        reply = self.honest(uploads)
        keys = self._keys()
        const = keys.encrypt(np.full(keys.slots, self.constant), math.log2(reply.numerator.scale))
        return Reply(reply.session, reply.numerator + const, reply.denominator, reply.execution)


class AddToFalsePositiveHalf(PerExecution):
    """Adds ``E(constant)`` to every slot of the summed F vector only, then computes the
    reply honestly. In the joint layout (T and F in one ciphertext) F is the rotated sum,
    so this is the aggregator changing F's half independently of T's: no more than it can do
    to a separate F ciphertext in the folded layout, and caught the same way (the numerator
    moves by ``constant`` times a sum of T's slots, scaled differently in each execution by
    the secret multipliers)."""

    constant = 1.0

    def tamper(self, uploads: list[Upload]) -> Reply:
        layout, cfg, keys = self._layout(), self.session_config, self._keys()
        ts, fs = summed_vectors(uploads, layout)
        shift = keys.encrypt(np.full(keys.slots, self.constant), math.log2(fs[0].scale))
        t, f = ts[0], fs[0] + shift
        num = (t * f).window_sum(layout.window, layout.lanes)
        den = t * f.rotate(layout.denominator_rotation)
        c = random_multiplier(*self.multiplier_range)
        return Reply(
            cfg.session,
            self.times_multiplier(num, c),
            self.times_multiplier(den, c),
            self.execution,
            self.name,
        )


class ForgeAUC099(PerExecution):
    def tamper(self, uploads: list[Upload]) -> Reply:
        # fresh encryptions chosen so that the semi-honest formula X / (2Y) gives 0.99
        keys = self._keys()
        x = keys.encrypt(np.full(keys.slots, 1.98))
        y = keys.encrypt(np.full(keys.slots, 1.0))
        return Reply(self.session_config.session, x, y, self.execution)


PRECISION_BITS = 24


class ScaleNumeratorEverywhere(PerExecution):
    """Multiplies the numerator by ``1 + epsilon`` in every execution (the tolerance-abuse
    attack): the AUC moves by about ``epsilon (AUC + r1/(2 r0))``.
    The factor is encoded at scale ``2^24`` (what the ciphertexts' headroom allows), so
    ``epsilon`` is effectively rounded to a multiple of ``2^-24 = 6e-8``."""

    epsilon = 1e-6

    def __init__(self, epsilon: float | None = None) -> None:
        super().__init__()
        if epsilon is not None:
            self.epsilon = epsilon

    def tamper(self, uploads: list[Upload]) -> Reply:
        reply = self.honest(uploads)
        factor = reply.numerator.scale_by(1.0 + self.epsilon, precision_bits=PRECISION_BITS)
        return Reply(
            reply.session, factor, reply.denominator.scale_by(1.0, PRECISION_BITS), reply.execution
        )


class DeflateDenominator(ScaleNumeratorEverywhere):
    """Divides the denominator by ``1 + epsilon`` in every execution, which also lowers the
    parties' lower bound on TP·FP (a looser tolerance if it were trusted)."""

    def tamper(self, uploads: list[Upload]) -> Reply:
        reply = self.honest(uploads)
        factor = 1.0 / (1.0 + self.epsilon)
        return Reply(
            reply.session,
            reply.numerator.scale_by(1.0, PRECISION_BITS),
            reply.denominator.scale_by(factor, PRECISION_BITS),
            reply.execution,
        )


TAMPERS = [
    DropParty,
    DuplicateParty,
    SwapTwoPartiesBetweenExecutions,
    ReplayFirstExecution,
    RotateSummedVector,
    ScaleNumerator,
    AddEncryptedConstant,
    ForgeAUC099,
    ScaleNumeratorInSecondExecutionOnly,
    ShiftLanes,
]
