"""``privfl.metrics``: private federated evaluation with scikit-learn's function shapes.

A facade over :mod:`privfl.evaluation.metrics` (see there, and
:mod:`privfl.evaluation.fhauc.reveal` for what each ``reveal`` mode discloses)::

    import privfl.metrics as pm
    pm.roc_auc_score(parties)                          # parties learn the AUC only
    fpr, tpr, thr = pm.roc_curve(parties, thresholds=100)
    pm.average_precision_score(parties, security="malicious")
    pm.threshold_metrics(parties, threshold=0.5).f1
"""

from privfl.evaluation.curves import ThresholdMetrics, hanley_mcneil_interval
from privfl.evaluation.fhauc.reveal import Reveal, RevealedCurve
from privfl.evaluation.metrics import (
    MetricsResult,
    PRCurve,
    ROCCurve,
    RunOptions,
    Score,
    average_precision_score,
    binned_reference,
    exact_scores,
    precision_recall_curve,
    roc_auc_score,
    roc_curve,
    threshold_metrics,
)

__all__ = [
    "MetricsResult",
    "PRCurve",
    "ROCCurve",
    "Reveal",
    "RevealedCurve",
    "RunOptions",
    "Score",
    "ThresholdMetrics",
    "average_precision_score",
    "binned_reference",
    "exact_scores",
    "hanley_mcneil_interval",
    "precision_recall_curve",
    "roc_auc_score",
    "roc_curve",
    "threshold_metrics",
]
