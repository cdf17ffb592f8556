"""privfl: privacy-preserving federated learning and evaluation with homomorphic encryption.

Quick start::

    import privfl
    res = privfl.federated_auc([(scores_a, labels_a), (scores_b, labels_b)], thresholds=100)
    res.auc, res.timings, res.bytes
    privfl.binned_auc(parties, thresholds=100)   # the plaintext value FHAUC reproduces
    fpr, tpr, thr = privfl.metrics.roc_curve(parties, reveal="curve")   # see privfl.metrics

The names below are imported on first use (PEP 562), so that importing a submodule (a
Flower ClientApp that only relays bytes, for one) does not load every protocol.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
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

_LAZY = {
    "metrics": "privfl.metrics",
    "InputError": "privfl.errors",
    "PrivflError": "privfl.errors",
    "ProtocolError": "privfl.errors",
    "VerificationError": "privfl.errors",
    "DPAUCResult": "privfl.evaluation.dpauc",
    "dpauc": "privfl.evaluation.dpauc",
    "AUCResult": "privfl.evaluation.federated",
    "federated_auc": "privfl.evaluation.federated",
    "binned_auc": "privfl.evaluation.reference",
    "exact_auc": "privfl.evaluation.reference",
    "TrainingResult": "privfl.training.federated",
    "train_federated": "privfl.training.federated",
}

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


def __getattr__(name: str) -> Any:
    """The public name ``name``, imported from its module on first use."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'privfl' has no attribute {name!r}")
    value = import_module(module) if name == "metrics" else getattr(import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])
