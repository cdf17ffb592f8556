"""Per-party counts at decision points (docs/architecture.md §4).

Decision points are ``t_0 = +inf > t_1 > ... > t_{N-2} > t_{N-1} = -inf``; a sample is
predicted positive at ``n`` when ``score >= t_n``. So ``TP^0 = FP^0 = 0`` and
``TP^{N-1}, FP^{N-1}`` are the party's numbers of positives and negatives.

Counting is ``O(samples · log N)``: each score is located among the interior thresholds with
``searchsorted`` and histogrammed per class with ``bincount``; no sort of the scores.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from privfl.errors import InputError

DEFAULT_THRESHOLDS = 100
ScoreRange = tuple[float, float]


@dataclass(frozen=True)
class PartyCounts:
    """Cumulative true/false-positive counts of one party at the N decision points."""

    tp: npt.NDArray[np.int64]  # shape (N,), tp[0] = 0, tp[-1] = positives
    fp: npt.NDArray[np.int64]  # shape (N,), fp[0] = 0, fp[-1] = negatives

    @property
    def positives(self) -> int:
        return int(self.tp[-1])

    @property
    def negatives(self) -> int:
        return int(self.fp[-1])


def interior_thresholds(
    thresholds: int | npt.ArrayLike = DEFAULT_THRESHOLDS,
    score_range: ScoreRange = (0.0, 1.0),
) -> npt.NDArray[np.float64]:
    """The N-2 interior thresholds, strictly decreasing, inside the score range.

    ``thresholds`` is either N, the number of decision points (an int, or a float with an
    integral value such as ``100.0``; interior thresholds ``t_n = (hi·(N-1-n) + lo·n) / (N-1)``
    for ``n = 1..N-2``), or an explicit strictly decreasing array of interior thresholds inside
    ``[lo, hi]`` (then N = len + 2). Anything else (a string, a bool, a fractional N, a
    threshold outside the range) is an :class:`InputError`: a loose argument must never turn
    into a silent wrong answer. N is capped at :data:`MAX_POINTS`.
    """
    lo, hi = _check_range(score_range)
    if thresholds is None:
        raise InputError(_THRESHOLDS_HELP + " (got None)")
    n = _point_count(thresholds)
    if n is not None:
        return _even_thresholds(n, lo, hi)
    try:
        arr = np.asarray(thresholds, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise InputError(_THRESHOLDS_HELP + f" (got {thresholds!r})") from None
    if arr.size < 1:
        raise InputError("an explicit threshold array needs at least 1 interior threshold")
    if arr.size + 2 > MAX_POINTS:
        raise InputError(f"at most {MAX_POINTS} decision points are supported (got {arr.size + 2})")
    if not np.all(np.isfinite(arr)):
        raise InputError("thresholds must be finite (the ±inf ends are implicit)")
    if arr.size > 1 and not np.all(np.diff(arr) < 0):
        raise InputError("thresholds must be strictly decreasing")
    if arr.min() < lo or arr.max() > hi:
        raise InputError(
            f"thresholds must lie inside the score range [{lo:g}, {hi:g}] (found "
            f"{arr.min():.6g}..{arr.max():.6g}); pass score_range=(low, high) "
            "(--score-range low,high on the command line) to match them"
        )
    return arr


MAX_POINTS = 1 << 22


def _even_thresholds(n: int, lo: float, hi: float) -> npt.NDArray[np.float64]:
    """``t_k = (hi·(N-1-k) + lo·k) / (N-1)`` for ``k = 1..N-2``: one rounding of an exact
    ratio where ``lo`` and ``hi`` are small integers, so every grid point a user writes is the
    threshold itself (``[0, 1]``, N = 101: ``t_70`` is ``0.3``, the double a score of 0.3 is;
    ``hi - (hi - lo)·k/(N-1)`` gave ``0.30000000000000004``, and a score of exactly 0.3 was
    counted below it). :class:`InputError` when the range is too narrow for N distinct
    doubles (never a silently repeated threshold)."""
    k = np.arange(1, n - 1, dtype=np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        out = (hi * (n - 1 - k) + lo * k) / (n - 1)
    if not np.all(np.isfinite(out)):
        raise InputError(f"the score range [{lo:.17g}, {hi:.17g}] is too wide to divide")
    if out.size > 1 and not np.all(np.diff(out) < 0):
        raise InputError(
            f"the score range [{lo:.17g}, {hi:.17g}] is too narrow for {n} distinct decision points"
        )
    return out


_THRESHOLDS_HELP = (
    "thresholds must be an integer N >= 3 (the number of decision points) or a strictly "
    "decreasing array of interior thresholds"
)


def points_including(threshold: float, points: int, score_range: tuple[float, float]) -> int:
    """The smallest number of decision points, at least ``points``, whose even thresholds
    include ``threshold`` exactly (0 when none up to ``MAX_POINTS`` does): ``t = hi - (hi - lo)
    k/(N-1)`` needs ``(hi - t)/(hi - lo)`` to be a fraction with a denominator dividing
    ``N - 1``."""
    from fractions import Fraction

    lo, hi = score_range
    if not lo < threshold < hi:
        return 0
    q = Fraction((hi - threshold) / (hi - lo)).limit_denominator(1 << 20).denominator
    n = -(-(points - 1) // q) * q + 1
    if n > MAX_POINTS:
        return 0
    try:
        grid = interior_thresholds(n, score_range)
    except InputError:  # a range too narrow for that many points: no suggestion
        return 0
    return n if np.any(grid == threshold) else 0  # exactly: scores equal to it count


def _point_count(thresholds: Any) -> int | None:
    """N when ``thresholds`` is a count (int or integral float), None for an array; raises
    for strings, bools and fractional or out-of-range counts."""
    if isinstance(thresholds, bool | np.bool_ | str | bytes):
        raise InputError(_THRESHOLDS_HELP + f" (got {thresholds!r})")
    if isinstance(thresholds, int | np.integer):
        n = int(thresholds)
    elif isinstance(thresholds, float | np.floating):
        if not (np.isfinite(thresholds) and float(thresholds).is_integer()):
            raise InputError(_THRESHOLDS_HELP + f" (got {thresholds!r})")
        n = int(thresholds)
    else:
        return None
    if n < 3:
        raise InputError(f"need at least 3 decision points, got thresholds={n}")
    if n > MAX_POINTS:
        raise InputError(f"at most {MAX_POINTS} decision points are supported (got {n})")
    return n


def _check_range(score_range: Sequence[float]) -> ScoreRange:
    if len(score_range) != 2:
        raise InputError("score_range must be (low, high)")
    lo, hi = float(score_range[0]), float(score_range[1])
    if not (np.isfinite(lo) and np.isfinite(hi) and lo < hi):
        raise InputError(f"score_range must be finite with low < high, got {score_range}")
    return lo, hi


def validate_party(
    scores: Any, labels: Any, score_range: ScoreRange, index: int | str = "?"
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int8]]:
    """Check one party's data and return it as arrays (raises InputError naming the party)."""
    lo, hi = _check_range(score_range)
    check_shapes(scores, labels, index)
    if _is_str_array(scores):
        raise InputError(f"party {index}: scores must be numbers")
    try:
        s = np.asarray(scores, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise InputError(f"party {index}: scores must be real numbers") from None
    y_raw = np.asarray(labels).ravel()
    if s.size == 0:
        raise InputError(f"party {index} has no samples")
    if y_raw.size != s.size:
        raise InputError(f"party {index}: {s.size} scores but {y_raw.size} labels")
    if not np.all(np.isfinite(s)):
        bad = int(np.count_nonzero(~np.isfinite(s)))
        raise InputError(f"party {index}: {bad} scores are NaN or infinite")
    if s.min() < lo or s.max() > hi:
        raise InputError(
            f"party {index}: scores must lie in the declared range [{lo}, {hi}] "
            f"(found {s.min():.6g}..{s.max():.6g}); pass score_range=(low, high) "
            "(--score-range low,high on the command line)"
        )
    try:
        y = y_raw.astype(np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"party {index}: labels must be 0 or 1") from exc
    if not np.all((y == 0) | (y == 1)):
        bad_vals = np.unique(y_raw[~((y == 0) | (y == 1))])[:5]
        raise InputError(f"party {index}: labels must be 0 or 1 (found {bad_vals.tolist()})")
    return s, y.astype(np.int8)


def check_shapes(scores: Any, labels: Any, index: int | str = "?") -> None:
    """Refuse score and label arrays that would only line up after a silent reshape.

    Scores must be one number per sample: a 1-D array (or a single ``(n, 1)`` column). A
    two-column ``predict_proba`` output ``(n, 2)`` is refused with the fix (pass the positive
    class's column, ``model.predict_proba(X)[:, 1]``) rather than flattened into 2n scores or
    guessed; complex scores are refused rather than cast to their real part. Labels must be
    1-D (or ``(n, 1)``) as well."""
    arr = np.asarray(scores) if not isinstance(scores, np.ndarray) else scores
    if arr.dtype.kind == "c":
        raise InputError(f"party {index}: scores are complex numbers; pass real scores")
    if arr.ndim == 2 and arr.shape[1] == 2:
        raise InputError(
            f"party {index}: scores have shape {arr.shape} (two columns, like predict_proba); "
            "pass one score per sample, the positive class's column: predict_proba(X)[:, 1]"
        )
    if arr.ndim > 1 and not (arr.ndim == 2 and arr.shape[1] == 1):
        raise InputError(
            f"party {index}: scores must be a 1-D array (one per sample), got shape {arr.shape}"
        )
    lab = np.asarray(labels) if not isinstance(labels, np.ndarray) else labels
    if lab.ndim > 1 and not (lab.ndim == 2 and lab.shape[1] == 1):
        raise InputError(
            f"party {index}: labels must be a 1-D array (one per sample), got shape {lab.shape}"
        )


def validate_bounded_party(
    scores: Any, labels: Any, score_range: ScoreRange, max_samples: int, name: str
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int8]]:
    """A party's own check of its local data before an FHAUC session (single-key or
    threshold): present, valid for the score range (:func:`validate_party`), and within the
    provisioned size bound that sizes the CKKS headroom and the masks."""
    if scores is None or labels is None:
        raise InputError(f"party {name} has no data")
    s, y = validate_party(scores, labels, score_range, name)
    if s.size > max_samples:
        raise InputError(
            f"party {name} has {s.size} samples, more than its provisioned "
            f"max_samples_per_party={max_samples}"
        )
    return s, y


def _is_str_array(x: Any) -> bool:
    arr = np.asarray(x)
    return arr.dtype.kind in "USO" and not _numeric_object(arr)


def _numeric_object(arr: npt.NDArray[Any]) -> bool:
    if arr.dtype.kind != "O":
        return False
    try:
        arr.astype(np.float64)
    except (TypeError, ValueError):
        return False
    return True


def party_counts(
    scores: npt.NDArray[np.float64],
    labels: npt.NDArray[np.int8],
    interior: npt.NDArray[np.float64],
) -> PartyCounts:
    """TP^n and FP^n for n = 0..N-1 (N = len(interior) + 2), vectorised.

    ``k = #{interior thresholds <= score}``; the sample is positive at every ``n >= N-1-k``.
    """
    n_points = interior.size + 2
    ascending = interior[::-1]
    k = np.searchsorted(ascending, scores, side="right")
    pos = labels.astype(bool)
    hist_pos = np.bincount(k[pos], minlength=n_points - 1)
    hist_neg = np.bincount(k[~pos], minlength=n_points - 1)
    # TP^n = sum_{k >= N-1-n} hist[k]  ->  reversed cumulative sum, then index by N-1-n
    tail_pos = np.concatenate([np.cumsum(hist_pos[::-1])[::-1], [0]])
    tail_neg = np.concatenate([np.cumsum(hist_neg[::-1])[::-1], [0]])
    idx = n_points - 1 - np.arange(n_points)
    return PartyCounts(tail_pos[idx].astype(np.int64), tail_neg[idx].astype(np.int64))


def numerator_vectors(counts: PartyCounts) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """``T^n = TP^n + TP^{n-1}`` and ``F^n = FP^n - FP^{n-1}`` for n = 1..N-1."""
    return counts.tp[1:] + counts.tp[:-1], counts.fp[1:] - counts.fp[:-1]


def validate_weights(weights: Any, size: int, index: int | str = "?") -> npt.NDArray[np.float64]:
    """One party's sample weights as floats: finite, >= 0, one per sample (InputError naming
    the party and the problem otherwise)."""
    if _is_str_array(weights):
        raise InputError(f"party {index}: sample weights must be numbers")
    try:
        w = np.asarray(weights, dtype=np.float64).ravel()
    except (TypeError, ValueError):
        raise InputError(f"party {index}: sample weights must be numbers") from None
    if w.size != size:
        raise InputError(f"party {index}: {size} samples but {w.size} sample weights")
    if np.any(np.isnan(w)):
        raise InputError(f"party {index}: {int(np.isnan(w).sum())} sample weights are NaN")
    if not np.all(np.isfinite(w)):
        raise InputError(f"party {index}: sample weights must be finite")
    if np.any(w < 0):
        raise InputError(
            f"party {index}: {int((w < 0).sum())} sample weights are negative "
            f"(smallest {w.min():.6g}); weights must be >= 0"
        )
    return w


def weighted_counts(
    scores: npt.NDArray[np.float64],
    labels: npt.NDArray[np.int8],
    weights: npt.NDArray[np.float64],
    interior: npt.NDArray[np.float64],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Sample-weighted ``TP^n``, ``FP^n`` for n = 0..N-1 (the sums of the weights of the
    positives/negatives scoring ``>= t_n``), as :func:`party_counts` with weights."""
    n_points = interior.size + 2
    k = np.searchsorted(interior[::-1], scores, side="right")
    pos = labels.astype(bool)
    hist_pos = np.bincount(k[pos], weights=weights[pos], minlength=n_points - 1)
    hist_neg = np.bincount(k[~pos], weights=weights[~pos], minlength=n_points - 1)
    tail_pos = np.concatenate([np.cumsum(hist_pos[::-1])[::-1], [0.0]])
    tail_neg = np.concatenate([np.cumsum(hist_neg[::-1])[::-1], [0.0]])
    idx = n_points - 1 - np.arange(n_points)
    return tail_pos[idx].astype(np.float64), tail_neg[idx].astype(np.float64)
