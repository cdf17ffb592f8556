"""DPAUC (Sun et al.): differentially private federated AUC, the baseline FHAUC beats.

Two mechanisms (docs/architecture.md §5):

* ``"laplace"`` (DPAUC_Lap): every party adds independent Laplace noise to TP, FP, TN and FN
  at each of the N decision points; the server sums them and takes the trapezoid area under
  ``(FP/(FP+TN), TP/(TP+FN))``.
* ``"rr"`` (DPAUC_RR): every label is flipped with probability ``ρ = 1/(1+e^ε)``; the server
  debiases the AUC of the noisy labels with ``a = P(y=0 | ỹ=1)``, ``b = P(y=1 | ỹ=0)`` (from ρ
  and the noisy prior): ``AUC = (AUC~ - (a + b)/2) / (1 - a - b)``, since true (pos, neg) pairs
  weigh ``(1-a)(1-b)`` and win with AUC, (neg, pos) pairs weigh ``ab`` and win with 1 - AUC,
  same-class pairs win half the time: ``AUC~ = AUC (1 - a - b) + (a + b)/2``.

``postprocess``: ``"none"`` (default; the FHAUC paper's reimplementation: no clipping, no
reordering, so small sizes can give AUCs outside [0, 1], flagged by
:attr:`DPAUCResult.noise_dominates`) or ``"dpauc-authors"`` (the DPAUC authors' code: every
*summed* count clipped at zero, a point with TP+FN or FP+TN then zero becomes (0, 0), points
sorted by FPR before the trapezoid, so the AUC lies in [0, 1]; a no-op on RR's exact counts).

``calibration`` of DPAUC_Lap (Laplace scale ``b`` on every count; docs/guide/dpauc.md):
``"total-budget"`` (default; ε for the whole release, sensitivity 1 per count, ε/(4N) per
count: ``b = 4N/ε``; docs/architecture.md §5, the DPAUC authors' accounting, FHAUC's Table 2);
``"per-count"`` (ε of each count, the authors' script's ``--dp_noise_epsilon``: ``b = 1/ε``,
total 4Nε); ``"sensitivity-2"`` (ε/(4N) per count but each charged the L1 sensitivity 2 of a
flip on one point's quadruple, TP<->FP or FN<->TN: ``b = 8N/ε``, a double count that
reproduces the spread of FHAUC's Table 1). All are ε-label-DP; the tight ``b`` is 2N/ε.

Noise comes from privfl's Laplace sampler (:mod:`privfl.evaluation.laplace`: a difference of
two exponentials of uniform doubles) fed by an AES-256-CTR stream keyed by :mod:`secrets`, or
by a hash of ``seed`` when a reproducible experiment is wanted (still a CSPRNG stream; numpy's
generator is never used).

:func:`infer_party_counts` is the server's attack: from one party's released counts it
estimates the party's numbers of positives and negatives (mean over the N points), which
FHAUC never reveals.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from privfl._typing import FloatArray, Int8Array
from privfl.datasets import check_seed
from privfl.errors import InputError
from privfl.evaluation.laplace import NoiseSource as NoiseSource
from privfl.evaluation.reference import Parties, party_items, validate_parties
from privfl.evaluation.results import FloatLike
from privfl.evaluation.statistics import (
    DEFAULT_THRESHOLDS,
    PartyCounts,
    ScoreRange,
    interior_thresholds,
    party_counts,
)

MECHANISMS = ("laplace", "rr")
POSTPROCESSING = ("none", "dpauc-authors")
CALIBRATIONS = ("total-budget", "per-count", "sensitivity-2")
# Decision points are capped so that a typo (N = 10^9) is refused before anything is allocated:
# every party releases 4N floats and draws 16N uniforms per run.
MAX_DECISION_POINTS = 100_000


def _choice(value: object, allowed: tuple[str, ...], what: str) -> str:
    if not isinstance(value, str) or value not in allowed:
        raise InputError(f"{what} must be one of {', '.join(allowed)}; got {value!r}")
    return value


def check_epsilon(epsilon: object) -> float:
    """ε as a float: a finite number > 0, else InputError."""
    value = math.nan
    if isinstance(epsilon, int | float | np.integer | np.floating) and not isinstance(
        epsilon, bool
    ):
        try:
            value = float(epsilon)
        except OverflowError:  # an int beyond the float range
            value = math.inf
    if not (math.isfinite(value) and value > 0):
        raise InputError(
            f"epsilon must be a finite number > 0 (the privacy budget); got {epsilon!r:.40}"
        )
    return value


def _check_points(n: int) -> int:
    if not 3 <= n <= MAX_DECISION_POINTS:
        raise InputError(
            f"DPAUC needs 3 <= N <= {MAX_DECISION_POINTS:,} decision points; got {n:,}"
        )
    return n


def dpauc_thresholds(n_points: int, score_range: ScoreRange = (0.0, 1.0)) -> FloatArray:
    """DPAUC's non-uniform grid of ``n_points - 2`` distinct interior thresholds, decreasing:
    half in the bottom fifth of the range, a quarter in [0.2, 0.5], a quarter in [0.5, 1]
    (the authors' three ``linspace`` calls also repeat 0.2 and 0.5 and include both ends)."""
    _check_points(n_points)
    k = n_points - 2
    lo, hi = float(score_range[0]), float(score_range[1])
    n1 = (k + 1) // 2
    n2 = (k - n1 + 1) // 2
    n3 = k - n1 - n2
    grid = np.concatenate(
        [
            0.2 * np.arange(1, n1 + 1) / n1,  # (0, 0.2]
            0.2 + 0.3 * np.arange(1, n2 + 1) / max(n2, 1),  # (0.2, 0.5]
            0.5 + 0.5 * np.arange(1, n3 + 1) / (n3 + 1),  # (0.5, 1)
        ]
    )[:k]
    return (lo + (hi - lo) * np.sort(grid))[::-1].copy()


def resolve_thresholds(thresholds: object, score_range: ScoreRange) -> FloatArray:
    """The interior thresholds: from an integer N (or an integral float) of uniform decision
    points, ``"dpauc"`` (DPAUC's grid, N = 100) / ``"dpauc:N"``, or an explicit strictly
    decreasing array inside the score range. Anything else is an InputError saying what to pass."""
    usage = "pass an integer N >= 3, 'dpauc', 'dpauc:N' or a decreasing array of thresholds"
    if thresholds is None:
        raise InputError(f"thresholds=None: {usage}")
    if isinstance(thresholds, str):
        name, sep, count = thresholds.partition(":")
        if name != "dpauc":
            raise InputError(f"unknown threshold grid {thresholds!r}: {usage}")
        if not sep:
            return dpauc_thresholds(DEFAULT_THRESHOLDS, score_range)
        if not count.strip().isdecimal():
            raise InputError(f"'dpauc:N' needs an integer N >= 3; got {thresholds!r}")
        return dpauc_thresholds(_check_points(int(count)), score_range)
    if isinstance(thresholds, bool):
        raise InputError(f"thresholds must not be a bool: {usage}")
    if isinstance(thresholds, float | np.floating):
        if not float(thresholds).is_integer():
            raise InputError(f"thresholds={thresholds!r} is not a whole number: {usage}")
        thresholds = int(thresholds)
    if isinstance(thresholds, int | np.integer):
        return interior_thresholds(_check_points(int(thresholds)), score_range)
    try:
        arr = np.asarray(thresholds, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"thresholds must be numbers: {usage}") from None
    if arr.ndim != 1:
        raise InputError(f"an explicit threshold array must be one-dimensional: {usage}")
    _check_points(arr.size + 2)
    interior = interior_thresholds(arr, score_range)
    lo, hi = score_range
    if interior.min() < lo or interior.max() > hi:
        raise InputError(
            f"thresholds must lie inside the score range [{lo}, {hi}] "
            f"(found {interior.min():.6g}..{interior.max():.6g})"
        )
    return interior


def laplace_scale(epsilon: float, n_points: int, calibration: str = "total-budget") -> float:
    """Scale ``b = sensitivity / ε_count`` of the Laplace noise on every count for the named
    calibration (module docstring)."""
    _choice(calibration, CALIBRATIONS, "calibration")
    eps_count = epsilon if calibration == "per-count" else epsilon / (4 * n_points)
    sensitivity = 2.0 if calibration == "sensitivity-2" else 1.0
    scale = sensitivity / eps_count if eps_count > 0 else math.inf
    if not (math.isfinite(scale) and scale > 0):
        raise InputError(f"epsilon={epsilon:g} is too small: the Laplace scale is not finite")
    return scale


@dataclass(frozen=True)
class NoisyCounts:
    """What one party releases to the server: arrays over the N decision points."""

    tp: FloatArray
    fp: FloatArray
    tn: FloatArray
    fn: FloatArray
    mechanism: str
    epsilon: float
    flip_probability: float = 0.0  # ρ for randomized response
    scale: float = 0.0  # b of the Laplace noise on every count


@dataclass(frozen=True, eq=False)
class DPAUCResult(FloatLike):
    """DPAUC's AUC, the per-party released counts and the settings; behaves like ``auc``
    where a number is expected (:class:`~privfl.evaluation.results.FloatLike`).
    ``party_names``: the parties of ``noisy_counts``, in order (a dict's keys, else
    ``party-0``, ``party-1``, ...)."""

    auc: float
    mechanism: str
    epsilon: float
    thresholds: int
    noisy_counts: tuple[NoisyCounts, ...] = field(repr=False)
    noisy_auc: float | None = None  # RR: the AUC of the noisy labels before debiasing
    postprocess: str = "none"
    calibration: str = "total-budget"
    party_names: tuple[str, ...] = ()

    def __float__(self) -> float:
        return self.auc

    @property
    def noise_dominates(self) -> bool:
        """The AUC is outside [0, 1] (or undefined): the noise swamps the counts."""
        return not 0.0 <= self.auc <= 1.0

    def to_dict(self) -> dict[str, Any]:
        return {
            "auc": self.auc,
            "noise_dominates": self.noise_dominates,
            "mechanism": self.mechanism,
            "epsilon": self.epsilon,
            "thresholds": self.thresholds,
            "parties": len(self.noisy_counts),
            "party_names": list(self.party_names),
            "postprocess": self.postprocess,
            "calibration": self.calibration,
            "noise_scale": self.noisy_counts[0].scale,  # Laplace's b (0 for RR)
            "flip_probability": self.noisy_counts[0].flip_probability,  # RR's ρ (0 for Laplace)
            "noisy_auc": self.noisy_auc,
        }


def trapezoid_auc(
    tp: FloatArray, fp: FloatArray, tn: FloatArray, fn: FloatArray, postprocess: str = "none"
) -> float:
    """Trapezoid area under (FPR, TPR) over the decision points, as the server computes it:
    as they come (``"none"``), or clipped, emptied to (0, 0) and sorted by FPR
    (``"dpauc-authors"``; the area then lies in [0, 1])."""
    authors = _choice(postprocess, POSTPROCESSING, "postprocess") == "dpauc-authors"
    if authors:
        tp, fp, tn, fn = (np.maximum(c, 0.0) for c in (tp, fp, tn, fn))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        tpr = tp / (tp + fn)
        fpr = fp / (fp + tn)
        if authors:
            empty = (tp + fn == 0) | (fp + tn == 0)
            tpr, fpr = np.where(empty, 0.0, tpr), np.where(empty, 0.0, fpr)
            order = np.argsort(fpr, kind="stable")
            tpr, fpr = tpr[order], fpr[order]
        area = float(np.sum((fpr[1:] - fpr[:-1]) * (tpr[1:] + tpr[:-1]) / 2.0))
    # exactly in [0, 1] after sorting; only rounding of the sum could step out by an ulp
    return min(max(area, 0.0), 1.0) if authors else area


def _full_counts(c: PartyCounts) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    tp = c.tp.astype(np.float64)
    fp = c.fp.astype(np.float64)
    return tp, fp, c.negatives - fp, c.positives - tp


def laplace_release(
    counts: PartyCounts, epsilon: float, noise: NoiseSource, calibration: str = "total-budget"
) -> NoisyCounts:
    """One party's DPAUC_Lap release: Lap(b) added to TP, FP, TN, FN at every point, with
    ``b`` from :func:`laplace_scale` (4N/ε by default)."""
    n = counts.tp.size
    scale = laplace_scale(epsilon, n, calibration)
    tp, fp, tn, fn = _full_counts(counts)
    z = noise.laplace(scale, 4 * n).reshape(4, n)
    return NoisyCounts(tp + z[0], fp + z[1], tn + z[2], fn + z[3], "laplace", epsilon, 0.0, scale)


def flip_probability(epsilon: float) -> float:
    """ρ = 1 / (1 + e^ε), computed as e^-ε / (1 + e^-ε) so that a large ε gives ρ -> 0
    instead of overflowing."""
    small = math.exp(-epsilon)
    return small / (1.0 + small)


def rr_release(
    scores: FloatArray, labels: Int8Array, interior: FloatArray, epsilon: float, noise: NoiseSource
) -> NoisyCounts:
    """One party's DPAUC_RR release: exact counts of labels flipped with probability ρ."""
    rho = flip_probability(epsilon)
    flips = noise.uniform(labels.size) < rho
    noisy = np.where(flips, 1 - labels, labels).astype(np.int8)
    tp, fp, tn, fn = _full_counts(party_counts(scores, noisy, interior))
    return NoisyCounts(tp, fp, tn, fn, "rr", epsilon, rho)


def debias_rr(noisy_auc: float, noisy_positive_rate: float, rho: float) -> float:
    """Debias the AUC of randomly flipped labels: (AUC~ - (a + b)/2) / (1 - a - b).

    NaN when it is undefined: every noisy label in one class, or ρ = 1/2 in floating point."""
    if not (0.0 < noisy_positive_rate < 1.0 and rho < 0.5 and math.isfinite(noisy_auc)):
        return math.nan
    prior = (noisy_positive_rate - rho) / (1.0 - 2.0 * rho)  # estimated P(y = 1)
    a = (1.0 - prior) * rho / noisy_positive_rate  # P(y=0 | ỹ=1)
    b = prior * rho / (1.0 - noisy_positive_rate)  # P(y=1 | ỹ=0)
    return (noisy_auc - (a + b) / 2.0) / (1.0 - a - b)


def aggregate(
    releases: Sequence[NoisyCounts], postprocess: str = "none"
) -> tuple[float, float | None]:
    """Server side: sum the releases and compute the AUC (debiased for RR); returns
    ``(auc, noisy-label AUC or None)``."""
    tp = np.sum([r.tp for r in releases], axis=0)
    fp = np.sum([r.fp for r in releases], axis=0)
    tn = np.sum([r.tn for r in releases], axis=0)
    fn = np.sum([r.fn for r in releases], axis=0)
    auc = trapezoid_auc(tp, fp, tn, fn, postprocess)
    if releases[0].mechanism == "laplace":
        return auc, None
    total = tp[-1] + fn[-1] + fp[-1] + tn[-1]
    rate = float((tp[-1] + fn[-1]) / total)
    return debias_rr(auc, rate, releases[0].flip_probability), auc


def dpauc(
    parties: Parties,
    thresholds: int | str | npt.ArrayLike = DEFAULT_THRESHOLDS,
    epsilon: float = 1.0,
    mechanism: str = "laplace",
    seed: int | None = None,
    *,
    score_range: ScoreRange = (0.0, 1.0),
    postprocess: str = "none",
    calibration: str = "total-budget",
    pos_label: Any = None,
) -> DPAUCResult:
    """DPAUC over ``parties`` (a list of ``(scores, labels)``, or a dict naming each party).
    Labels: ``{0, 1}`` or ``{-1, 1}``, or two other values and ``pos_label`` (the rule of
    :func:`privfl.evaluation.reference.validate_parties`).

    ``thresholds``: N (FHAUC's uniform decision points, the default), ``"dpauc"`` or
    ``"dpauc:N"`` (DPAUC's non-uniform grid), or an explicit decreasing array inside
    ``score_range``. ``seed``: ``None`` for fresh OS randomness, or a non-negative integer for
    a reproducible run. ``postprocess`` and ``calibration``: see the module docstring."""
    _choice(mechanism, MECHANISMS, "mechanism")
    _choice(postprocess, POSTPROCESSING, "postprocess")
    _choice(calibration, CALIBRATIONS, "calibration")
    eps = check_epsilon(epsilon)
    noise = NoiseSource(None if seed is None else check_seed(seed, "seed"))
    data = validate_parties(parties, score_range, pos_label)
    interior = resolve_thresholds(thresholds, score_range)
    res = run_dpauc(data, interior, eps, mechanism, noise, None, postprocess, calibration)
    return replace(res, party_names=tuple(name for name, _ in party_items(parties)))


def run_dpauc(
    data: Sequence[tuple[FloatArray, Int8Array]],
    interior: FloatArray,
    epsilon: float,
    mechanism: str,
    noise: NoiseSource,
    counts: Sequence[PartyCounts] | None = None,
    postprocess: str = "none",
    calibration: str = "total-budget",
) -> DPAUCResult:
    """DPAUC on validated data (``counts`` may be passed to skip recounting for Laplace).
    The result keeps every release, so :func:`aggregate` can post-process the same run again."""
    if mechanism == "laplace":
        cs = counts if counts is not None else [party_counts(s, y, interior) for s, y in data]
        releases = tuple(laplace_release(c, epsilon, noise, calibration) for c in cs)
    else:
        releases = tuple(rr_release(s, y, interior, epsilon, noise) for s, y in data)
    auc, noisy = aggregate(releases, postprocess)
    names = tuple(f"party-{i}" for i in range(len(releases)))  # dpauc() names them
    return DPAUCResult(
        auc,
        mechanism,
        epsilon,
        interior.size + 2,
        releases,
        noisy,
        postprocess,
        calibration,
        names,
    )


def infer_party_counts(released: NoisyCounts) -> tuple[float, float]:
    """The server's attack on one party: estimate (positives, negatives).

    TP+FN is the party's number of positives and FP+TN its negatives at *every* decision
    point, so the mean over the N points averages the noise away (Laplace); for randomized
    response the released noisy-label counts are debiased with ρ."""
    pos = float(np.mean(released.tp + released.fn))
    neg = float(np.mean(released.fp + released.tn))
    if released.mechanism == "rr":
        rho = released.flip_probability
        if rho >= 0.5:  # ε so small that ρ rounds to 1/2: the labels carry nothing
            return math.nan, math.nan
        total = pos + neg
        pos = (pos - rho * total) / (1.0 - 2.0 * rho)
        neg = total - pos
    return pos, neg
