"""Private federated evaluation with scikit-learn's function shapes.

``parties`` is a list of ``(scores, labels)`` pairs, one per data holder, as for
:func:`privfl.federated_auc`. Every function also takes ``thresholds=`` (N decision points,
or an explicit decreasing array of interior thresholds), ``score_range=``, ``security=``
(``"semi-honest"``/``"malicious"``), ``keys=`` (``"single"``; ``"threshold"``, every party
holding its own share of a joint OpenFHE key, with every reveal; no sample weights yet),
``pos_label=``, ``sample_weight=`` (one array per party, or None) and ``reveal=``; the
protocol options of :class:`RunOptions`
(``splits``, ``executions``, ``max_samples_per_party``, ``min_pairs``, ...) pass through.

What each party learns is set by ``reveal`` and derived in
:mod:`privfl.evaluation.fhauc.reveal`; the aggregator learns nothing in every mode:

=========================  ==================  ===============================================
function                   reveal (default)    what every party learns
=========================  ==================  ===============================================
``roc_auc_score``          ``"auc"``           the AUC (``"curve"`` also accepted)
``roc_curve``              ``"curve"``         the normalised counts at all N points
``precision_recall_curve`` ``"curve"``         the same
``average_precision_score````"curve"``         the same
``threshold_metrics``      ``"metrics"``       c·(TP, FP, P, Q) at one threshold t
=========================  ==================  ===============================================

The AUC confidence interval (:meth:`Score.confidence_interval`) is Hanley–McNeil at lower
bounds of the class totals that a party holds (its own totals, sharpened by the prevalence
when the reveal gives it): conservative, computable from the reveal alone (no mode reveals
the global totals; pass ``class_totals=`` when they are public for the usual interval).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from privfl._typing import FloatArray
from privfl.errors import InputError, ProtocolError
from privfl.evaluation import curves
from privfl.evaluation.curves import ThresholdMetrics
from privfl.evaluation.federated import federated_auc
from privfl.evaluation.federated_curve import RunOptions, check_keys, describe, run_reveal
from privfl.evaluation.fhauc.reveal import Reveal, RevealedCurve
from privfl.evaluation.metric_reference import binned_reference, exact_scores, prepare
from privfl.evaluation.reference import PartyData
from privfl.evaluation.results import FloatLike
from privfl.evaluation.statistics import (
    DEFAULT_THRESHOLDS,
    ScoreRange,
    interior_thresholds,
    points_including,
)

__all__ = [
    "MetricsResult",
    "PRCurve",
    "ROCCurve",
    "RunOptions",
    "Score",
    "ThresholdMetrics",
    "average_precision_score",
    "binned_reference",
    "exact_scores",
    "precision_recall_curve",
    "roc_auc_score",
    "roc_curve",
    "threshold_metrics",
]


# ---------------------------------------------------------------------------- results
@dataclass(frozen=True, eq=False)
class Score(FloatLike):
    """A scalar result (AUC or average precision) that behaves like its value
    (:class:`~privfl.evaluation.results.FloatLike`: ``float(score)``, ``score > 0.5``,
    ``f"{score:.3f}"``).
    ``run``: the session's public facts (security, verified, precision bound, timings,
    bytes). ``bounds``: each party's lower bounds on the global class totals."""

    value: float
    reveal: str
    run: dict[str, Any] = field(repr=False)
    bounds: tuple[tuple[float, float], ...] = field(default=(), repr=False)

    def __float__(self) -> float:
        return self.value

    def confidence_interval(
        self, level: float = 0.95, class_totals: tuple[float, float] | None = None
    ) -> tuple[float, float]:
        """Hanley–McNeil interval for an AUC: at ``class_totals`` if given (public totals),
        else at the largest lower bounds any party holds (conservative; see
        :func:`privfl.evaluation.curves.hanley_mcneil_interval`)."""
        if class_totals is not None:
            return curves.hanley_mcneil_interval(self.value, *class_totals, level)
        if not self.bounds:
            raise InputError("no class-total bounds recorded: pass class_totals=(P, Q)")
        p = max(b[0] for b in self.bounds)
        q = max(b[1] for b in self.bounds)
        return curves.hanley_mcneil_interval(self.value, p, q, level)

    def to_dict(self) -> dict[str, Any]:
        out = {"value": self.value, "reveal": self.reveal, **self.run}
        if self.bounds:
            out["confidence_interval_95"] = list(self.confidence_interval())
        return out


@dataclass(frozen=True)
class _Curve:
    reveal: str
    curve: RevealedCurve = field(repr=False)
    decision_points: FloatArray = field(repr=False)  # N thresholds, +inf ... -inf
    run: dict[str, Any] = field(repr=False)
    score_range: ScoreRange = field(repr=False)

    @property
    def auc(self) -> float:
        return curves.binned_auc(self.curve.tp, self.curve.fp)

    @property
    def pr(self) -> tuple[FloatArray, FloatArray, FloatArray]:
        """(precision, recall, thresholds) in scikit-learn's layout."""
        return curves.precision_recall_arrays(self.curve.tp, self.curve.fp, self.decision_points)

    @property
    def average_precision(self) -> float:
        return curves.average_precision(self.curve.tp, self.curve.fp)

    def metrics_at(self, threshold: float) -> ThresholdMetrics:
        """Threshold metrics at one of the curve's decision points."""
        # exactly: a score equal to the threshold counts as positive only at that very value
        hits = np.flatnonzero(self.decision_points == threshold)
        if hits.size == 0:
            n = len(self.decision_points)
            fit = points_including(threshold, n, self.score_range)
            hint = f"thresholds={fit} includes it" if fit else "thresholds= that include it"
            raise InputError(
                f"{threshold} is not one of the curve's {n} decision points; use "
                f"threshold_metrics(parties, threshold=t) or {hint}"
            )
        n, c = int(hits[0]), self.curve
        return curves.metrics_at(c.tp[n], c.fp[n], c.tp[-1], c.fp[-1], threshold)


@dataclass(frozen=True)
class ROCCurve(_Curve):
    """``fpr, tpr, thresholds = roc_curve(...)`` (N points, thresholds from +inf to -inf)."""

    fpr: FloatArray = field(default_factory=lambda: np.zeros(0), repr=False)
    tpr: FloatArray = field(default_factory=lambda: np.zeros(0), repr=False)
    thresholds: FloatArray = field(default_factory=lambda: np.zeros(0), repr=False)

    def __iter__(self) -> Iterator[FloatArray]:
        return iter((self.fpr, self.tpr, self.thresholds))

    def __len__(self) -> int:
        return 3

    def __getitem__(self, index: int) -> FloatArray:
        """``roc[0]``, ``roc[1]``, ``roc[2]``: scikit-learn's tuple, indexed."""
        return (self.fpr, self.tpr, self.thresholds)[index]

    def to_dict(self) -> dict[str, Any]:
        return {
            "reveal": self.reveal, "auc": self.auc, "average_precision": self.average_precision,
            "prevalence": self.curve.prevalence, "fpr": self.fpr, "tpr": self.tpr,
            "roc_thresholds": self.thresholds, **self.run,
        }  # fmt: skip


@dataclass(frozen=True)
class PRCurve(_Curve):
    """``precision, recall, thresholds = precision_recall_curve(...)`` in scikit-learn's
    layout (thresholds increasing; a final (precision 1, recall 0) without threshold)."""

    precision: FloatArray = field(default_factory=lambda: np.zeros(0), repr=False)
    recall: FloatArray = field(default_factory=lambda: np.zeros(0), repr=False)
    thresholds: FloatArray = field(default_factory=lambda: np.zeros(0), repr=False)

    def __iter__(self) -> Iterator[FloatArray]:
        return iter((self.precision, self.recall, self.thresholds))

    def __len__(self) -> int:
        return 3

    def __getitem__(self, index: int) -> FloatArray:
        """``pr[0]``, ``pr[1]``, ``pr[2]``: scikit-learn's tuple, indexed."""
        return (self.precision, self.recall, self.thresholds)[index]

    def to_dict(self) -> dict[str, Any]:
        return {
            "reveal": self.reveal, "average_precision": self.average_precision,
            "pr_precision": self.precision, "pr_recall": self.recall,
            "pr_thresholds": self.thresholds, **self.run,
        }  # fmt: skip


@dataclass(frozen=True)
class MetricsResult:
    """``threshold_metrics`` output: the metrics and the session's public facts."""

    metrics: ThresholdMetrics
    run: dict[str, Any] = field(repr=False)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name in ("metrics", "run"):
            raise AttributeError(name)
        return getattr(self.metrics, name)

    def to_dict(self) -> dict[str, Any]:
        """The metrics and the session's facts; the session's bound on the error of its
        counts is ``error_bound`` (``precision`` is the classifier's precision here)."""
        run = {k: v for k, v in self.run.items() if k != "precision"}
        return {
            "reveal": Reveal.METRICS.value, **run, **self.metrics.to_dict(),
            "error_bound": self.run.get("precision"),
        }  # fmt: skip


def _curve_run(
    parties: Sequence[PartyData],
    thresholds: int | npt.ArrayLike,
    score_range: ScoreRange,
    pos_label: Any,
    sample_weight: Sequence[Any] | None,
    reveal: str | Reveal,
    options: RunOptions,
    allowed: tuple[Reveal, ...],
    what: str,
) -> tuple[RevealedCurve, FloatArray, dict[str, Any], tuple[tuple[float, float], ...]]:
    mode = Reveal.parse(reveal)
    if mode not in allowed:
        raise InputError(
            f"{what} needs reveal={' or '.join(repr(a.value) for a in allowed)} (got "
            f"{mode.value!r}): see privfl.evaluation.fhauc.reveal for what each discloses"
        )
    check_keys(options.keys, mode)
    data, weights = prepare(parties, score_range, pos_label, sample_weight)
    interior = interior_thresholds(thresholds, score_range)
    run = run_reveal(data, weights, interior, score_range, mode, options)
    curve = run.results[0].outcome.curve
    if curve is None:
        raise ProtocolError("the session revealed no curve")
    points = np.concatenate([[np.inf], interior, [-np.inf]])
    bounds = tuple(
        curves.class_total_lower_bounds(p, q, curve.prevalence) for p, q in run.own_totals
    )
    return curve, points, describe(run), bounds


# ---------------------------------------------------------------------------- API
def _options(options: RunOptions | None, kwargs: dict[str, Any]) -> RunOptions:
    """``options=`` or the protocol options as keywords (an unknown one is an InputError)."""
    if options is not None:
        if kwargs:
            raise InputError("give protocol options either as options= or as keywords")
        return options
    try:
        return RunOptions(**kwargs)
    except TypeError:
        known = ", ".join(RunOptions.__dataclass_fields__)
        raise InputError(f"unknown option(s) {sorted(kwargs)}; known: {known}") from None


def roc_auc_score(
    parties: Sequence[PartyData],
    thresholds: int | npt.ArrayLike = DEFAULT_THRESHOLDS,
    *,
    score_range: ScoreRange = (0.0, 1.0),
    pos_label: Any = None,
    sample_weight: Sequence[Any] | None = None,
    reveal: str = "auc",
    options: RunOptions | None = None,
    **kwargs: Any,
) -> Score:
    """Global ROC AUC. ``reveal="auc"``: :func:`privfl.federated_auc` (parties learn the AUC
    only; sample weights need ``"curve"``), with ``keys="single"`` or ``keys="threshold"``
    (every party holds its own key share; needs the ``[threshold]`` extra).
    ``reveal="curve"``: the AUC of the revealed curve (the same binned AUC; parties learn
    the curve; either key mode)."""
    opts = _options(options, kwargs)
    if Reveal.parse(reveal) is Reveal.AUC:
        if sample_weight is not None:
            raise InputError(
                "sample_weight needs reveal='curve' (the AUC-only protocol sums integer "
                "counts); the AUC is then computed from the revealed curve"
            )
        keys = check_keys(opts.keys, Reveal.AUC)
        data, _ = prepare(parties, score_range, pos_label, None)
        res = federated_auc(
            data, thresholds, score_range=score_range, security=opts.security,
            splits=opts.splits, aggregator=opts.aggregator,
            max_samples_per_party=opts.max_samples_per_party, executions=opts.executions,
            required_accuracy=opts.required_accuracy, min_pairs=opts.min_pairs,
            min_guarantee_bits=opts.min_guarantee_bits, params=opts.params,
            memory_limit=opts.memory_limit, force=opts.force, keys=keys,
            progress=opts.progress,
        )  # fmt: skip
        bounds = tuple((float(y.sum()), float(y.size - y.sum())) for _, y in data)
        run = {k: v for k, v in res.to_dict().items() if k != "auc"} | {"keys": keys}
        return Score(res.auc, Reveal.AUC.value, run, bounds)
    curve, _, run, bounds = _curve_run(
        parties, thresholds, score_range, pos_label, sample_weight, reveal, opts,
        (Reveal.CURVE,), "roc_auc_score",
    )  # fmt: skip
    return Score(curves.binned_auc(curve.tp, curve.fp), Reveal.CURVE.value, run, bounds)


def roc_curve(
    parties: Sequence[PartyData],
    thresholds: int | npt.ArrayLike = DEFAULT_THRESHOLDS,
    *,
    score_range: ScoreRange = (0.0, 1.0),
    pos_label: Any = None,
    sample_weight: Sequence[Any] | None = None,
    reveal: str = "curve",
    options: RunOptions | None = None,
    **kwargs: Any,
) -> ROCCurve:
    """``fpr, tpr, thresholds`` at the N decision points (parties learn the curve)."""
    curve, points, run, _ = _curve_run(
        parties, thresholds, score_range, pos_label, sample_weight, reveal,
        _options(options, kwargs), (Reveal.CURVE,), "roc_curve",
    )  # fmt: skip
    fpr, tpr = curves.roc_points(curve.tp, curve.fp)
    return ROCCurve(Reveal.CURVE.value, curve, points, run, score_range, fpr, tpr, points)


def precision_recall_curve(
    parties: Sequence[PartyData],
    thresholds: int | npt.ArrayLike = DEFAULT_THRESHOLDS,
    *,
    score_range: ScoreRange = (0.0, 1.0),
    pos_label: Any = None,
    sample_weight: Sequence[Any] | None = None,
    reveal: str = "curve",
    options: RunOptions | None = None,
    **kwargs: Any,
) -> PRCurve:
    """``precision, recall, thresholds`` in scikit-learn's layout (parties learn the curve)."""
    curve, points, run, _ = _curve_run(
        parties, thresholds, score_range, pos_label, sample_weight, reveal,
        _options(options, kwargs), (Reveal.CURVE,), "precision_recall_curve",
    )  # fmt: skip
    p, r, t = curves.precision_recall_arrays(curve.tp, curve.fp, points)
    return PRCurve(Reveal.CURVE.value, curve, points, run, score_range, p, r, t)


def average_precision_score(
    parties: Sequence[PartyData],
    thresholds: int | npt.ArrayLike = DEFAULT_THRESHOLDS,
    *,
    score_range: ScoreRange = (0.0, 1.0),
    pos_label: Any = None,
    sample_weight: Sequence[Any] | None = None,
    reveal: str = "curve",
    options: RunOptions | None = None,
    **kwargs: Any,
) -> Score:
    """scikit-learn's step-wise average precision of the revealed curve (the AP is not a
    polynomial in the counts, so it needs the curve)."""
    curve, _, run, _ = _curve_run(
        parties, thresholds, score_range, pos_label, sample_weight, reveal,
        _options(options, kwargs), (Reveal.CURVE,), "average_precision_score",
    )  # fmt: skip
    return Score(curves.average_precision(curve.tp, curve.fp), Reveal.CURVE.value, run)


def threshold_metrics(
    parties: Sequence[PartyData],
    threshold: float = 0.5,
    *,
    score_range: ScoreRange = (0.0, 1.0),
    pos_label: Any = None,
    sample_weight: Sequence[Any] | None = None,
    reveal: str = "metrics",
    options: RunOptions | None = None,
    **kwargs: Any,
) -> MetricsResult:
    """Accuracy, precision, recall/TPR, FPR, F1, balanced accuracy and MCC at ``score >=
    threshold`` (parties learn ``c·(TP, FP, P, Q)`` there, i.e. exactly these metrics)."""
    try:
        t = float(threshold)
    except (TypeError, ValueError):
        raise InputError(f"threshold must be a number, got {threshold!r}") from None
    curve, _, run, _ = _curve_run(
        parties, np.array([t]), score_range, pos_label, sample_weight, reveal,
        _options(options, kwargs), (Reveal.METRICS,), "threshold_metrics",
    )  # fmt: skip
    metrics = curves.metrics_at(curve.tp[1], curve.fp[1], curve.tp[-1], curve.fp[-1], t)
    return MetricsResult(metrics, run)
