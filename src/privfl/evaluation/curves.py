"""Plaintext curve maths with scikit-learn's conventions, as pure functions.

Everything here works on cumulative (possibly weighted, possibly normalised) counts at the
N decision points ``t_0 = +inf > t_1 > ... > t_{N-1} = -inf`` (a sample is predicted
positive at ``n`` when ``score >= t_n``): the parties apply it to the curve they decrypt,
and the references apply it to the pooled plaintext counts. Every function is invariant to
a common scale of ``tp`` and ``fp``, which is why a party can use the scaled counts.

Labels follow scikit-learn: ``pos_label`` names the positive class; without it the labels
must be ``{0, 1}``, ``{-1, 1}``, ``{1}``, ``{0}`` or ``{-1}`` and 1 is positive (strings
need an explicit ``pos_label``). More than two classes, a ``pos_label`` absent from every
party, and sample weights that are negative, NaN or of the wrong length are
:class:`~privfl.errors.InputError` naming the problem.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist
from typing import Any

import numpy as np
import numpy.typing as npt

from privfl._typing import FloatArray
from privfl.errors import InputError

Int8Array = npt.NDArray[np.int8]


# ---------------------------------------------------------------------------- labels
def binarize_labels(labels: Sequence[Any], pos_label: Any = None) -> list[Int8Array]:
    """Every party's labels as 0/1 with scikit-learn's ``pos_label`` rule (global classes)."""
    arrays = [np.asarray(y).ravel() for y in labels]
    classes: set[Any] = set()
    for y in arrays:
        if y.dtype.kind == "f" and np.any(np.isnan(y)):
            raise InputError("labels contain NaN; every sample needs a label")
        classes |= {v.item() if hasattr(v, "item") else v for v in np.unique(y)}
    if len(classes) > 2:
        shown = sorted(map(str, classes))[:6]
        raise InputError(
            f"labels take {len(classes)} distinct values ({', '.join(shown)}); binary "
            "metrics need two classes: 0 or 1, -1 or 1, or two values and pos_label="
        )
    if pos_label is None:
        if not classes <= {0, 1} and not classes <= {-1, 1}:
            raise InputError(
                f"labels must be 0 or 1, -1 or 1, or two values with pos_label= naming the "
                f"positive class; found {sorted(map(str, classes))}: pass pos_label= "
                "(--pos-label on the command line) to say which class is positive (only "
                "{0, 1} and {-1, 1} default to pos_label=1)"
            )
        pos_label = 1  # one class only: the caller's class-balance check names the problem
    elif not any(_equal(c, pos_label) for c in classes):
        raise InputError(
            f"pos_label={pos_label!r} is not among the labels {sorted(map(str, classes))}"
        )
    return [_positives(y, pos_label) for y in arrays]


def _positives(y: npt.NDArray[Any], pos_label: Any) -> Int8Array:
    """1 where ``y`` equals ``pos_label`` (strings only equal strings), vectorised for
    numeric and boolean labels."""
    if y.dtype.kind in "biuf" and not isinstance(pos_label, str):
        return np.asarray(y == pos_label, dtype=np.int8)
    return np.asarray([_equal(v, pos_label) for v in y.tolist()], dtype=np.int8)


def _equal(a: Any, b: Any) -> bool:
    if isinstance(a, str) != isinstance(b, str):
        return False
    return bool(a == b)


# ---------------------------------------------------------------------------- curves
def roc_points(tp: FloatArray, fp: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(FPR, TPR) at every decision point, from +inf (0, 0) to -inf (1, 1)."""
    return fp / fp[-1], tp / tp[-1]


def binned_auc(tp: FloatArray, fp: FloatArray) -> float:
    """Trapezoidal area under the ROC points (docs/architecture.md §4's binned AUC)."""
    num = float(np.sum((tp[1:] + tp[:-1]) * (fp[1:] - fp[:-1])))
    return num / (2.0 * float(tp[-1]) * float(fp[-1]))


def pr_points(tp: FloatArray, fp: FloatArray) -> tuple[FloatArray, FloatArray]:
    """(precision, recall) at decision points 1..N-1 (decreasing threshold). Where nothing is
    predicted positive (``TP + FP = 0``) precision is 1, scikit-learn's end-point value."""
    t, f = tp[1:], fp[1:]
    predicted = t + f
    with np.errstate(invalid="ignore", divide="ignore"):
        precision = np.where(predicted > 0, t / np.where(predicted > 0, predicted, 1), 1.0)
    return precision, t / tp[-1]


def average_precision(tp: FloatArray, fp: FloatArray) -> float:
    """scikit-learn's step-wise AP: ``Σ_n (R_n - R_{n-1}) P_n`` (no interpolation)."""
    precision, recall = pr_points(tp, fp)
    steps = np.diff(np.concatenate([[0.0], recall]))
    return float(np.sum(steps * precision))


def precision_recall_arrays(
    tp: FloatArray, fp: FloatArray, thresholds: FloatArray
) -> tuple[FloatArray, FloatArray, FloatArray]:
    """scikit-learn's ``precision_recall_curve`` layout: thresholds increasing (decision
    points N-1..1), precision and recall with a final (1, 0) that has no threshold."""
    precision, recall = pr_points(tp, fp)
    return (
        np.concatenate([precision[::-1], [1.0]]),
        np.concatenate([recall[::-1], [0.0]]),
        thresholds[1:][::-1],
    )


@dataclass(frozen=True)
class ThresholdMetrics:
    """The metrics at one decision point (scikit-learn's definitions; an undefined ratio
    (0/0) is 0, as scikit-learn's ``zero_division`` default, and recorded in
    ``undefined``)."""

    threshold: float
    accuracy: float
    precision: float
    recall: float
    fpr: float
    f1: float
    balanced_accuracy: float
    mcc: float
    prevalence: float
    undefined: tuple[str, ...] = ()

    @property
    def tpr(self) -> float:
        return self.recall

    def to_dict(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold, "accuracy": self.accuracy,
            "precision": self.precision, "recall": self.recall, "tpr": self.recall,
            "fpr": self.fpr, "f1": self.f1, "balanced_accuracy": self.balanced_accuracy,
            "mcc": self.mcc, "prevalence": self.prevalence, "undefined": list(self.undefined),
        }  # fmt: skip


def metrics_at(tp: float, fp: float, p: float, q: float, threshold: float) -> ThresholdMetrics:
    """All threshold metrics from ``TP, FP`` at the threshold and the totals ``P, Q`` (any
    common scale)."""
    tp, fp, p, q = float(tp), float(fp), float(p), float(q)
    fn, tn = p - tp, q - fp
    undefined: list[str] = []

    def ratio(num: float, den: float, name: str) -> float:
        if den <= 0:
            undefined.append(name)
            return 0.0
        return num / den

    precision = ratio(tp, tp + fp, "precision")
    recall = ratio(tp, p, "recall")
    fpr = ratio(fp, q, "fpr")
    f1 = ratio(2 * tp, 2 * tp + fp + fn, "f1")
    mcc_den = (tp + fp) * p * q * (tn + fn)
    mcc = ratio(tp * q - fp * p, math.sqrt(max(mcc_den, 0.0)), "mcc")
    return ThresholdMetrics(
        threshold=float(threshold),
        accuracy=ratio(tp + tn, p + q, "accuracy"),
        precision=precision,
        recall=recall,
        fpr=fpr,
        f1=f1,
        balanced_accuracy=(recall + (1.0 - fpr)) / 2.0,
        mcc=mcc,
        prevalence=ratio(p, p + q, "prevalence"),
        undefined=tuple(undefined),
    )


# ---------------------------------------------------------------------------- AUC interval
def hanley_mcneil_interval(
    auc: float, positives: float, negatives: float, level: float = 0.95
) -> tuple[float, float]:
    """Hanley & McNeil (1982) Wald interval for the AUC from the AUC and the class totals.

    ``SE² = [A(1-A) + (P-1)(Q1-A²) + (Q-1)(Q2-A²)] / (P·Q)``, ``Q1 = A/(2-A)``,
    ``Q2 = 2A²/(1+A)``. ``∂SE²/∂P = A(A-1)/((2-A) P² Q) <= 0`` and likewise for ``Q``, so the
    SE at *lower bounds* of the totals is an upper bound of the SE at the true totals: an
    interval computed from lower bounds is conservative (never narrower). Clipped to [0, 1].
    """
    if not 0 < level < 1:
        raise InputError(f"confidence level must be in (0, 1), got {level}")
    if not (positives >= 1 and negatives >= 1):
        raise InputError("the interval needs at least one positive and one negative")
    a = min(1.0, max(0.0, auc))
    q1, q2 = a / (2 - a), 2 * a * a / (1 + a)
    var = (a * (1 - a) + (positives - 1) * (q1 - a * a) + (negatives - 1) * (q2 - a * a)) / (
        positives * negatives
    )
    z = NormalDist().inv_cdf(0.5 + level / 2)
    half = z * math.sqrt(max(var, 0.0))
    return max(0.0, a - half), min(1.0, a + half)


def class_total_lower_bounds(
    own_positives: float, own_negatives: float, prevalence: float | None
) -> tuple[float, float]:
    """Lower bounds on the global class totals from what one party holds: its own totals,
    and with a revealed prevalence ``π`` (``curve``/``metrics`` reveals) the implied
    ``T >= max(P_m/π, Q_m/(1-π))``, i.e. ``P >= π·T``, ``Q >= (1-π)·T``."""
    if prevalence is None or not 0 < prevalence < 1:
        return own_positives, own_negatives
    total = max(own_positives / prevalence, own_negatives / (1 - prevalence))
    return max(own_positives, prevalence * total), max(own_negatives, (1 - prevalence) * total)
