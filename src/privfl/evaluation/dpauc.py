"""DPAUC (Sun et al.): differentially private federated AUC, the baseline FHAUC beats.

Two mechanisms (ARCHITECTURE §5), implemented faithfully:

* ``"laplace"`` (DPAUC_Lap): every party adds independent ``Lap(1/ε')`` noise, ``ε' = ε/(4N)``
  (sensitivity 1, basic composition over the 4N released counts), to TP, FP, TN and FN at
  every one of the N decision points. The server sums the noisy counts, computes
  ``TPR = TP/(TP+FN)`` and ``FPR = FP/(FP+TN)`` per point and the trapezoid area. No clipping,
  no monotone repair.
* ``"rr"`` (DPAUC_RR): every label is flipped with probability ``ρ = 1/(1+e^ε)``; the parties
  release exact counts of the noisy labels; the server computes the AUC of the noisy labels
  and debiases it: with ``a = P(y=0 | ỹ=1)`` and ``b = P(y=1 | ỹ=0)`` estimated from ``ρ`` and
  the noisy class prior, ``AUC = (AUC~ - (a + b)/2) / (1 - a - b)``.

  Why ``(a + b)/2`` (ARCHITECTURE §5 writes ``(a + b - 2ab)/2``, which is biased): over the
  pairs (observed positive, observed negative), true (pos, neg) pairs have weight
  ``(1-a)(1-b)`` and win with probability AUC, (neg, pos) pairs weight ``ab`` and win with
  ``1 - AUC``, same-class pairs weight ``(1-a)b + a(1-b)`` and win with 1/2, so
  ``AUC~ = AUC (1 - a - b) + ab + (a + b - 2ab)/2 = AUC (1 - a - b) + (a + b)/2``; the ``ab``
  of the (neg, pos) pairs is what the architecture's formula drops.

Noise comes from diffprivlib's Laplace mechanism (its parameter checks and its 4-uniform
sampler, evaluated on arrays) fed by an AES-256-CTR stream: keyed by :mod:`secrets` by default,
or by a hash of ``seed`` when a reproducible experiment is wanted (still a CSPRNG stream;
numpy's generator is never used).

:func:`infer_party_counts` is the server's attack: from one party's released counts it
estimates the party's numbers of positives and negatives (mean over the N points), which
FHAUC never reveals.
"""

from __future__ import annotations

import hashlib
import math
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from privfl._typing import FloatArray
from privfl.crypto.prng import SharedRandomness
from privfl.errors import InputError
from privfl.evaluation.reference import PartyData, validate_parties
from privfl.evaluation.statistics import (
    DEFAULT_THRESHOLDS,
    PartyCounts,
    ScoreRange,
    interior_thresholds,
    party_counts,
)

MECHANISMS = ("laplace", "rr")


def dpauc_thresholds(n_points: int, score_range: ScoreRange = (0.0, 1.0)) -> FloatArray:
    """DPAUC's original non-uniform grid of ``n_points - 2`` interior thresholds (strictly
    decreasing): half of them in the bottom fifth of the range, a quarter in [0.2, 0.5] and a
    quarter in [0.5, 1] (in units of the range)."""
    if n_points < 3:
        raise InputError("need at least 3 decision points")
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


def resolve_thresholds(
    thresholds: int | str | npt.ArrayLike, score_range: ScoreRange
) -> FloatArray:
    """Interior thresholds from N, ``"dpauc"`` (with N=100) / ``"dpauc:N"``, or an array."""
    if isinstance(thresholds, str):
        name, _, count = thresholds.partition(":")
        if name != "dpauc":
            raise InputError(f"unknown threshold grid {thresholds!r} (use N, 'dpauc' or 'dpauc:N')")
        n = int(count) if count else DEFAULT_THRESHOLDS
        return dpauc_thresholds(n, score_range)
    return interior_thresholds(thresholds, score_range)


class NoiseSource:
    """Uniform floats for the mechanisms, from an AES-CTR keystream (a CSPRNG)."""

    def __init__(self, seed: int | None = None) -> None:
        if seed is None:
            key = secrets.token_bytes(32)
        else:
            key = hashlib.sha256(f"privfl-dpauc-seed:{int(seed)}".encode()).digest()
        self._stream = SharedRandomness(key, "dpauc-noise")

    def uniform(self, size: int) -> FloatArray:
        return self._stream.uniform(size)

    def laplace(self, scale: float, size: int) -> FloatArray:
        """Lap(scale) noise with diffprivlib's sampler (log(1-U1)cos(πU2) + log(1-U3)cos(πU4))."""
        from diffprivlib.mechanisms import Laplace

        u = self.uniform(4 * size).reshape(4, size)
        standard = Laplace._laplace_sampler(u[0], u[1], u[2], u[3])
        return np.asarray(-scale * standard, dtype=np.float64)


def laplace_scale(epsilon: float, n_points: int) -> float:
    """Scale of the per-count Laplace noise: sensitivity 1 / ε', ε' = ε / (4N), checked by
    diffprivlib's mechanism."""
    from diffprivlib.mechanisms import Laplace

    eps_prime = epsilon / (4 * n_points)
    mech = Laplace(epsilon=eps_prime, sensitivity=1.0, random_state=secrets.SystemRandom())
    return float(mech.sensitivity / (mech.epsilon - math.log(1 - mech.delta)))


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


@dataclass
class DPAUCResult:
    """DPAUC's AUC, the per-party released counts and the settings."""

    auc: float
    mechanism: str
    epsilon: float
    thresholds: int
    noisy_counts: list[NoisyCounts] = field(repr=False)
    noisy_auc: float | None = None  # RR: the AUC of the noisy labels before debiasing

    def to_dict(self) -> dict[str, Any]:
        return {
            "auc": self.auc,
            "mechanism": self.mechanism,
            "epsilon": self.epsilon,
            "thresholds": self.thresholds,
            "parties": len(self.noisy_counts),
            "noisy_auc": self.noisy_auc,
        }


def trapezoid_auc(tp: FloatArray, fp: FloatArray, tn: FloatArray, fn: FloatArray) -> float:
    """Trapezoid area under (FPR, TPR) over the decision points, as the server computes it."""
    with np.errstate(divide="ignore", invalid="ignore"):
        tpr = tp / (tp + fn)
        fpr = fp / (fp + tn)
    return float(np.sum((fpr[1:] - fpr[:-1]) * (tpr[1:] + tpr[:-1]) / 2.0))


def _full_counts(c: PartyCounts) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    tp = c.tp.astype(np.float64)
    fp = c.fp.astype(np.float64)
    return tp, fp, c.negatives - fp, c.positives - tp


def laplace_release(counts: PartyCounts, epsilon: float, noise: NoiseSource) -> NoisyCounts:
    """One party's DPAUC_Lap release: Lap(4N/ε) added to TP, FP, TN, FN at every point."""
    n = counts.tp.size
    scale = laplace_scale(epsilon, n)
    tp, fp, tn, fn = _full_counts(counts)
    z = noise.laplace(scale, 4 * n).reshape(4, n)
    return NoisyCounts(tp + z[0], fp + z[1], tn + z[2], fn + z[3], "laplace", epsilon)


def flip_probability(epsilon: float) -> float:
    """ρ = 1 / (1 + e^ε)."""
    return 1.0 / (1.0 + math.exp(epsilon))


def rr_release(
    scores: FloatArray,
    labels: npt.NDArray[np.int8],
    interior: FloatArray,
    epsilon: float,
    noise: NoiseSource,
) -> NoisyCounts:
    """One party's DPAUC_RR release: exact counts of labels flipped with probability ρ."""
    rho = flip_probability(epsilon)
    flips = noise.uniform(labels.size) < rho
    noisy = np.where(flips, 1 - labels, labels).astype(np.int8)
    tp, fp, tn, fn = _full_counts(party_counts(scores, noisy, interior))
    return NoisyCounts(tp, fp, tn, fn, "rr", epsilon, rho)


def debias_rr(noisy_auc: float, noisy_positive_rate: float, rho: float) -> float:
    """Debias the AUC of randomly flipped labels: (AUC~ - (a + b)/2) / (1 - a - b)."""
    prior = (noisy_positive_rate - rho) / (1.0 - 2.0 * rho)  # estimated P(y = 1)
    a = (1.0 - prior) * rho / noisy_positive_rate  # P(y=0 | ỹ=1)
    b = prior * rho / (1.0 - noisy_positive_rate)  # P(y=1 | ỹ=0)
    return (noisy_auc - (a + b) / 2.0) / (1.0 - a - b)


def aggregate(releases: Sequence[NoisyCounts]) -> tuple[float, float | None]:
    """Server side: sum the releases, compute the AUC (debiased for RR)."""
    tp = np.sum([r.tp for r in releases], axis=0)
    fp = np.sum([r.fp for r in releases], axis=0)
    tn = np.sum([r.tn for r in releases], axis=0)
    fn = np.sum([r.fn for r in releases], axis=0)
    auc = trapezoid_auc(tp, fp, tn, fn)
    if releases[0].mechanism == "laplace":
        return auc, None
    total = tp[-1] + fn[-1] + fp[-1] + tn[-1]
    rate = (tp[-1] + fn[-1]) / total
    return debias_rr(auc, rate, releases[0].flip_probability), auc


def dpauc(
    parties: Sequence[PartyData],
    thresholds: int | str | npt.ArrayLike = DEFAULT_THRESHOLDS,
    epsilon: float = 1.0,
    mechanism: str = "laplace",
    seed: int | None = None,
    *,
    score_range: ScoreRange = (0.0, 1.0),
) -> DPAUCResult:
    """DPAUC over ``parties`` (a list of ``(scores, labels)``).

    ``thresholds``: N (FHAUC's uniform decision points, the default), ``"dpauc"`` or
    ``"dpauc:N"`` (DPAUC's non-uniform grid), or an explicit decreasing array.
    ``seed``: ``None`` for fresh OS randomness, or an integer for a reproducible run."""
    if mechanism not in MECHANISMS:
        raise InputError(f"mechanism must be one of {MECHANISMS}, got {mechanism!r}")
    if not (isinstance(epsilon, int | float) and math.isfinite(epsilon) and epsilon > 0):
        raise InputError(f"epsilon must be a positive number, got {epsilon!r}")
    data = validate_parties(parties, score_range)
    interior = resolve_thresholds(thresholds, score_range)
    noise = NoiseSource(seed)
    return run_dpauc(data, interior, float(epsilon), mechanism, noise)


def run_dpauc(
    data: Sequence[tuple[FloatArray, npt.NDArray[np.int8]]],
    interior: FloatArray,
    epsilon: float,
    mechanism: str,
    noise: NoiseSource,
    counts: Sequence[PartyCounts] | None = None,
) -> DPAUCResult:
    """DPAUC on validated data (``counts`` may be passed to skip recounting for Laplace)."""
    if mechanism == "laplace":
        cs = counts if counts is not None else [party_counts(s, y, interior) for s, y in data]
        releases = [laplace_release(c, epsilon, noise) for c in cs]
    else:
        releases = [rr_release(s, y, interior, epsilon, noise) for s, y in data]
    auc, noisy = aggregate(releases)
    return DPAUCResult(auc, mechanism, epsilon, interior.size + 2, releases, noisy)


def infer_party_counts(released: NoisyCounts) -> tuple[float, float]:
    """The server's attack on one party: estimate (positives, negatives).

    TP+FN is the party's number of positives and FP+TN its negatives at *every* decision
    point, so the mean over the N points averages the noise away (Laplace); for randomized
    response the released noisy-label counts are debiased with ρ."""
    pos = float(np.mean(released.tp + released.fn))
    neg = float(np.mean(released.fp + released.tn))
    if released.mechanism == "rr":
        rho = released.flip_probability
        total = pos + neg
        pos = (pos - rho * total) / (1.0 - 2.0 * rho)
        neg = total - pos
    return pos, neg
