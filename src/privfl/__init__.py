"""privfl: privacy-preserving federated learning and evaluation with homomorphic encryption.

Quick start::

    import privfl
    res = privfl.federated_auc([(scores_a, labels_a), (scores_b, labels_b)], thresholds=100)
    res.auc, res.timings, res.bytes
    privfl.binned_auc(parties, thresholds=100)   # the plaintext value FHAUC reproduces
    fpr, tpr, thr = privfl.metrics.roc_curve(parties, reveal="curve")   # see privfl.metrics
"""

from privfl import metrics
from privfl.errors import (
    InputError,
    PrivflError,
    ProtocolError,
    VerificationError,
)
from privfl.evaluation.dpauc import DPAUCResult, dpauc
from privfl.evaluation.federated import AUCResult, federated_auc
from privfl.evaluation.reference import binned_auc, exact_auc
from privfl.training.federated import TrainingResult, train_federated

__version__ = "0.1.0"

__all__ = [
    "AUCResult",
    "DPAUCResult",
    "InputError",
    "PrivflError",
    "ProtocolError",
    "TrainingResult",
    "VerificationError",
    "__version__",
    "binned_auc",
    "dpauc",
    "exact_auc",
    "federated_auc",
    "metrics",
    "train_federated",
]
