"""Where each value sits in the CKKS slots, and what a session costs before it runs.

With ``L`` terms per vector (``N-1`` semi-honest, ``S·N`` malicious) and ``slots`` slots:

* *folded* when ``W = next_pow2(2(L+1)) <= slots``: in each period of ``W`` slots, T holds
  ``T^1..T^L`` then ``TP`` at slot ``L``; F holds ``F^1..F^L`` then ``FP`` at slot
  ``L + W/2``; the period is replicated over all slots. ``T ⊙ F`` contains exactly the
  numerator terms, so a rotate-and-sum over ``W`` puts ``num`` in *every* slot (no partial
  sum is ever exposed). ``T ⊙ rot(F, W/2)`` is zero except ``TP·FP`` at slot ``L``.
  Two ciphertexts per party, ``log2 W`` Galois keys (8 at N = 100).
* *joint* (``2W <= slots``; semi-honest, or malicious from
  :data:`~privfl.evaluation.fhauc.malicious.JOINT_MIN_PARTIES` parties with single keys and
  where :func:`~privfl.evaluation.fhauc.threshold.plan.joint_pays` with threshold keys):
  as folded, but T and F share one ciphertext: each period of ``2W`` slots holds T's
  period then F's. The aggregator sums the parties' joint ciphertexts ``X`` and takes
  ``T = X``, ``F = rot(X, W)``:
  ``T ⊙ F`` has period ``W`` and holds exactly the numerator terms (in both halves),
  ``T ⊙ rot(F, W/2)`` is zero except ``TP·FP`` at slot ``L`` (the other half meets zeros),
  so the replies decrypt exactly as in the folded layout. One ciphertext per party and
  execution (half the upload, half the loads at the aggregator) for one more rotation, by
  ``W`` after the sum, and one more Galois key. The rotation adds key-switching noise to F
  (about 6.6 times a fresh encryption's std at any scale, once, not per party;
  ``benchmarks/fhauc_scale.py --rotation-noise --scale-bits 40,28``): harmless to the
  semi-honest AUC; the malicious variant's noise model covers it
  (:meth:`~privfl.evaluation.fhauc.malicious.Sizes.sigma_products`), and uses the joint
  layout only where it widens that bound by at most ``sqrt 2`` (``ρ_rot² <= M``). With
  threshold keys (OpenFHE) the product ``T ⊙ rot(X, W)`` also has a coherent encoding
  error, since T and F are one polynomial
  (:func:`~privfl.evaluation.fhauc.threshold.noise.coherent_error`). The curve reveals have
  their own joint layout (:class:`CurveLayout`, threshold keys).
* *lanes* (malicious, threshold keys; the choice is
  :func:`~privfl.evaluation.fhauc.threshold.plan.malicious_layout`'s, from public sizes and
  bounds, never the number of executions): the folded two-ciphertext layout
  for ``lanes = slots / W`` executions at once, or the joint one for ``slots / 2W`` where
  four or more such lanes fit and the joint layout pays. Each execution's folded vectors are
  built
  on ``slots / lanes`` slots (one period, no replication when ``lanes`` is the most that
  fit) and *interleaved*: execution ``g``'s slot ``i`` sits at ``i·lanes + g``. Every
  rotation of the folded layout becomes a rotation by ``lanes`` times as many slots (still a
  power of two, so the same Galois keys), which moves each lane's values within the lane:
  the joint layout's rotation by ``W`` (F under T), the products, the rotate-and-sum and the
  denominator's rotation give every execution its own ``num`` (in every slot of its lane)
  and ``TP·FP`` (at its lane's slot ``L``), exactly as in separate ciphertexts. The parties
  upload, the aggregator computes and the parties decrypt ``ceil(K / lanes)`` ciphertext
  groups instead of ``K`` executions (at 100 parties, N = 100 and 4 splits on the
  ``"fhauc"`` set's 8,192 slots: one joint ciphertext of 4 lanes instead of three joint
  ones, and one joint decryption instead of three). Executions in a group share the
  aggregator's multiplier ``c``, which cancels in each execution's ``X/Y`` as before. The
  joint layout's coherent product error in lanes was measured within its one-lane model
  (``benchmarks/threshold_product_noise.py --layouts jlanes``).
* *chunked* otherwise: T and F are cut into ``ceil(L/slots)`` ciphertexts each, and a third
  ciphertext ``D`` holds ``TP`` at slot 0 and ``FP`` at slot ``slots/2``; the aggregator sums
  the chunk products, rotate-and-sums over ``slots`` and computes ``D ⊙ rot(D, slots/2)``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from privfl._typing import FloatArray
from privfl.crypto.ckks import CKKSParameters, window_steps
from privfl.errors import InputError

# the most executions a layout puts in one ciphertext (MAX_EXECUTIONS' next power of two)
MAX_LANES = 64


def next_pow2(x: int) -> int:
    return 1 << max(0, (x - 1).bit_length())


@dataclass(frozen=True)
class Layout:
    """Slot layout of one session (see the module docstring)."""

    terms: int
    slots: int
    folded: bool
    window: int
    chunks: int
    joint: bool = False
    lanes: int = 1

    @classmethod
    def for_terms(cls, terms: int, slots: int, joint: bool = False) -> Layout:
        """The layout of ``terms`` terms per vector; ``joint``: T and F in one ciphertext
        when they fit (``2W <= slots``; the single-key backend asks for it)."""
        window = next_pow2(2 * (terms + 1))
        if window <= slots:
            return cls(terms, slots, True, window, 1, joint and 2 * window <= slots)
        return cls(terms, slots, False, slots, math.ceil(terms / slots))

    @classmethod
    def in_lanes(cls, terms: int, slots: int, joint: bool = False) -> Layout:
        """The folded layout with as many lanes as fit (at most :data:`MAX_LANES`): two
        ciphertexts of ``slots / W`` lanes, or with ``joint`` one ciphertext of
        ``slots / 2W`` lanes, each lane T's period then F's (one lane when only one fits:
        the joint layout); the plain layout when the terms do not fold."""
        base = cls.for_terms(terms, slots, joint)
        if not base.folded:
            return base
        lanes = min(MAX_LANES, slots // (base.window * (2 if base.joint else 1)))
        return cls(terms, slots, True, base.window, 1, base.joint, lanes)

    @property
    def lane_slots(self) -> int:
        """Slots of one execution's vectors (all the slots with one lane)."""
        return self.slots // self.lanes

    @property
    def rotation_steps(self) -> list[int]:
        """Galois keys needed: rotations by 1, 2, ..., window/2 (and by window when joint,
        to bring F under T), each times the lanes."""
        steps = [s * self.lanes for s in window_steps(self.window)]
        return [*steps, self.f_rotation] if self.joint else steps

    @property
    def f_rotation(self) -> int:
        """Joint layout: the rotation of the parties' sum that brings F under T's slots."""
        return self.window * self.lanes

    @property
    def denominator_rotation(self) -> int:
        """The rotation of F that brings FP under TP (folded: half a window, in every lane)."""
        return self.window // 2 * self.lanes if self.folded else self.slots // 2

    def groups(self, executions: int) -> int:
        """Ciphertext groups (uploads, replies, joint decryptions) ``executions`` take."""
        return -(-executions // self.lanes)

    def lanes_used(self, group: int, executions: int) -> int:
        """Executions in ciphertext group ``group`` (the last one may be partly empty)."""
        return min(self.lanes, executions - group * self.lanes)

    def slot(self, position: int, lane: int) -> int:
        """The ciphertext slot of a lane's slot ``position``."""
        return position * self.lanes + lane

    def interleave(self, vectors: Sequence[FloatArray]) -> FloatArray:
        """One ciphertext's slot vector from up to ``lanes`` executions' vectors of
        :attr:`lane_slots` slots: execution ``g``'s slot ``i`` at ``i·lanes + g``, missing
        lanes zero."""
        if not 1 <= len(vectors) <= self.lanes:
            raise InputError(f"{len(vectors)} vectors for {self.lanes} lane(s)")
        if self.lanes == 1:
            return vectors[0]
        out = np.zeros((self.lane_slots, self.lanes))
        for lane, v in enumerate(vectors):
            out[:, lane] = v
        return out.reshape(-1)

    @property
    def f_ciphertexts(self) -> int:
        """F-vector ciphertexts a party uploads per execution (none when joint: F rides
        in the T ciphertext)."""
        return 0 if self.joint else self.chunks

    @property
    def ciphertexts_per_upload(self) -> int:
        """Ciphertexts a party uploads per execution."""
        return self.chunks + self.f_ciphertexts + self.denominator_ciphertexts

    @property
    def denominator_slot(self) -> int:
        """Slot of the reply's denominator ciphertext that holds c·TP·FP."""
        return self.terms if self.folded else 0

    @property
    def denominator_ciphertexts(self) -> int:
        """Extra ciphertexts (``D``) a party uploads per execution."""
        return 0 if self.folded else 1

    def pack(
        self, t: FloatArray, f: FloatArray, tp: float, fp: float
    ) -> tuple[list[FloatArray], list[FloatArray], list[FloatArray]]:
        """Slot vectors (T chunks, F chunks, D list) for one party and one execution."""
        if t.size != self.terms or f.size != self.terms:
            raise InputError(f"expected {self.terms} terms per vector, got {t.size}/{f.size}")
        if self.folded:
            half = self.window // 2
            tv = np.zeros(self.window)
            fv = np.zeros(self.window)
            tv[: self.terms] = t
            fv[: self.terms] = f
            tv[self.terms] = tp
            fv[self.terms + half] = fp
            if self.joint:
                reps = self.lane_slots // (2 * self.window)
                return [np.tile(np.concatenate([tv, fv]), reps)], [], []
            reps = self.lane_slots // self.window
            return [np.tile(tv, reps)], [np.tile(fv, reps)], []
        tchunks, fchunks = [], []
        for c in range(self.chunks):
            lo, hi = c * self.slots, min((c + 1) * self.slots, self.terms)
            tv = np.zeros(self.slots)
            fv = np.zeros(self.slots)
            tv[: hi - lo] = t[lo:hi]
            fv[: hi - lo] = f[lo:hi]
            tchunks.append(tv)
            fchunks.append(fv)
        d = np.zeros(self.slots)
        d[0] = tp
        d[self.slots // 2] = fp
        return tchunks, fchunks, [d]


@dataclass(frozen=True)
class CurveLayout(Layout):
    """The ``curve``/``metrics`` reveals' vectors (:mod:`~privfl.evaluation.fhauc.curve`): T
    and F of ``terms`` slots each, chunked; no rotations, no D ciphertext.

    ``joint`` (threshold keys, :mod:`~privfl.evaluation.fhauc.threshold.plan`): T and F in
    one ciphertext when ``2 H <= slots`` with ``H = next_pow2(terms)`` (:attr:`f_rotation`):
    T at slots ``0..terms-1``, F at ``H..H+terms-1``, zeros elsewhere. The aggregator's
    reply is unchanged: two ciphertexts, the parties' sum (T in its first ``terms`` slots)
    and the sum rotated by ``H`` (F there), each times ``c``
    (:func:`~privfl.evaluation.fhauc.uploads.summed_vectors`), so the same two ciphertexts
    per execution are decrypted and the same first ``terms`` slots of each revealed. Half
    the upload, for one rotation per execution.

    ``lanes`` (joint, threshold keys, malicious: several executions): the executions side by
    side, execution ``g`` of a group in the :attr:`region` ``[2Hg, 2H(g+1))`` (T at its
    start, F at ``H`` into it), up to ``slots / 2H`` of them
    (:meth:`interleave`). The aggregator's reply per group is the joint one above, whose
    rotation by ``H`` brings every region's F under its own T (and the next region's T,
    never revealed, under its F): one upload ciphertext and two reply ciphertexts, hence two
    joint decryptions, per group instead of per execution (at 100 parties, N = 100 and 4
    splits: one group of the 3 executions). No product and no other rotation, so each
    execution's values stay in its region; the lead reveals each region's ``terms`` T and F
    slots, as for separate ciphertexts."""

    @classmethod
    def for_curve(
        cls, terms: int, slots: int, joint: bool = False, lanes: bool = False
    ) -> CurveLayout:
        """The layout of ``terms`` terms per vector; ``joint``: T and F in one ciphertext
        when they fit; ``lanes``: also the executions side by side where two regions fit."""
        joint = joint and 2 * next_pow2(terms) <= slots
        count = min(MAX_LANES, slots // (2 * next_pow2(terms))) if joint and lanes else 1
        return cls(terms, slots, False, slots, math.ceil(terms / slots), joint, count)

    @property
    def region(self) -> int:
        """Slots of one execution's T and F in the lanes layout (``2H``)."""
        return 2 * self.f_rotation

    def interleave(self, vectors: Sequence[FloatArray]) -> FloatArray:
        """One ciphertext's slot vector from up to ``lanes`` executions' joint vectors
        (:meth:`vectors`): execution ``g``'s first :attr:`region` slots at
        ``[g·region, (g+1)·region)``, missing lanes zero (side by side, not interleaved:
        the curve's reply has no rotation that needs the lanes apart slot by slot)."""
        if not 1 <= len(vectors) <= self.lanes:
            raise InputError(f"{len(vectors)} vectors for {self.lanes} lane(s)")
        if self.lanes == 1:
            return vectors[0]
        out = np.zeros(self.slots)
        for lane, v in enumerate(vectors):
            out[lane * self.region : (lane + 1) * self.region] = v[: self.region]
        return out

    @property
    def rotation_steps(self) -> list[int]:
        return [self.f_rotation] if self.joint else []

    @property
    def f_rotation(self) -> int:
        return next_pow2(self.terms)

    @property
    def denominator_ciphertexts(self) -> int:
        return 0

    def chunk(self, v: FloatArray) -> list[FloatArray]:
        out = np.zeros(self.chunks * self.slots)
        out[: v.size] = v
        return list(out.reshape(self.chunks, self.slots))

    def vectors(self, t: FloatArray, f: FloatArray) -> tuple[list[FloatArray], list[FloatArray]]:
        """One party's T and F ciphertext vectors (joint: one vector, F at :attr:`f_rotation`)."""
        if t.size != self.terms or f.size != self.terms:
            raise InputError(f"expected {self.terms} terms per vector, got {t.size}/{f.size}")
        if not self.joint:
            return self.chunk(t), self.chunk(f)
        v = np.zeros(self.slots)
        v[: self.terms] = t
        v[self.f_rotation : self.f_rotation + self.terms] = f
        return [v], []


# Sizes of one ciphertext at the top level: serialised (seeded: one polynomial plus a seed,
# zstd-compressed by SEAL, measured 184 KB at ring 8192) and in memory (two polynomials).
def fresh_ciphertext_bytes(params: CKKSParameters) -> int:
    primes = len(params.coeff_mod_bit_sizes) - 1
    return primes * params.poly_modulus_degree * 8 * 3 // 4


def loaded_ciphertext_bytes(params: CKKSParameters) -> int:
    primes = len(params.coeff_mod_bit_sizes) - 1
    return 2 * primes * params.poly_modulus_degree * 8


DEFAULT_MEMORY_LIMIT = 4 << 30


@dataclass(frozen=True)
class Cost:
    """What a session will cost, estimated before it runs (within a factor ~1.5)."""

    upload_bytes_per_party: int
    aggregator_memory_bytes: int

    def check(self, limit: int = DEFAULT_MEMORY_LIMIT, force: bool = False) -> None:
        """Refuse a session whose aggregator would hold more than ``limit`` bytes of
        ciphertexts, unless ``force``."""
        if self.aggregator_memory_bytes > limit and not force:
            raise InputError(
                f"this session needs about {self.aggregator_memory_bytes / 2**30:.1f} GiB of "
                f"ciphertexts at the aggregator and {self.upload_bytes_per_party / 1e6:.0f} MB "
                f"of upload per party (limit {limit / 2**30:.1f} GiB); use fewer decision "
                "points or parties, or force it (force=True / --force)"
            )


def estimate_cost(
    params: CKKSParameters, points: int, parties: int, splits: int, executions: int
) -> Cost:
    """Upload per party and the aggregator's peak ciphertext memory for a session with
    ``points`` decision points (``splits`` > 1 means the malicious variant)."""
    terms = splits * points if splits > 1 else points - 1
    layout = Layout.for_terms(terms, params.slots, joint=splits <= 1)
    per_execution = layout.ciphertexts_per_upload
    upload = executions * per_execution * fresh_ciphertext_bytes(params)
    # every upload's bytes, plus one execution's loaded ciphertexts and their sums
    memory = parties * upload + (parties + 2) * per_execution * loaded_ciphertext_bytes(params)
    return Cost(upload, memory)
