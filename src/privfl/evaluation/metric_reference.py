"""Plaintext references for :mod:`privfl.evaluation.metrics`: input preparation
with scikit-learn's label and weight conventions, the binned curve the protocol reveals and
scikit-learn's exact values on the pooled data (non-private, for comparison)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from privfl.errors import InputError
from privfl.evaluation import curves
from privfl.evaluation.fhauc.reveal import RevealedCurve
from privfl.evaluation.reference import PartyData, validate_parties
from privfl.evaluation.statistics import (
    DEFAULT_THRESHOLDS,
    ScoreRange,
    interior_thresholds,
    validate_weights,
    weighted_counts,
)


def prepare(
    parties: Sequence[PartyData],
    score_range: ScoreRange,
    pos_label: Any,
    sample_weight: Sequence[Any] | None,
) -> tuple[list[tuple[Any, Any]], list[npt.NDArray[np.float64]] | None]:
    """Labels binarised by ``pos_label``, data and weights validated (InputError)."""
    if isinstance(parties, str | bytes) or len(parties) < 1:
        raise InputError("parties must be a non-empty list of (scores, labels) pairs")
    for i, item in enumerate(parties):
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise InputError(f"party {i} must be a (scores, labels) pair")
    labels = curves.binarize_labels([p[1] for p in parties], pos_label)
    data = validate_parties([(p[0], y) for p, y in zip(parties, labels, strict=True)], score_range)
    if sample_weight is None:
        return data, None
    if isinstance(sample_weight, str | bytes) or len(sample_weight) != len(data):
        raise InputError("sample_weight must be a list with one weight array per party")
    weights = [
        validate_weights(w, s.size, i)
        for i, (w, (s, _)) in enumerate(zip(sample_weight, data, strict=True))
    ]
    pos = sum(float(w[y.astype(bool)].sum()) for w, (_, y) in zip(weights, data, strict=True))
    neg = sum(float(w[~y.astype(bool)].sum()) for w, (_, y) in zip(weights, data, strict=True))
    if not (pos > 0 and neg > 0):
        raise InputError("the sample weights of the positives or of the negatives sum to 0")
    return data, weights


def binned_reference(
    parties: Sequence[PartyData],
    thresholds: int | npt.ArrayLike = DEFAULT_THRESHOLDS,
    *,
    score_range: ScoreRange = (0.0, 1.0),
    pos_label: Any = None,
    sample_weight: Sequence[Any] | None = None,
) -> RevealedCurve:
    """The plaintext curve the protocol reveals (pooled, normalised counts): the reference
    every revealed value is tested against."""
    data, weights = prepare(parties, score_range, pos_label, sample_weight)
    interior = interior_thresholds(thresholds, score_range)
    tp, fp = np.zeros(interior.size + 2), np.zeros(interior.size + 2)
    for i, (s, y) in enumerate(data):
        w = np.ones(s.size) if weights is None else weights[i]
        t, f = weighted_counts(s, y, w, interior)
        tp, fp = tp + t, fp + f
    total = tp[-1] + fp[-1]
    return RevealedCurve(tp / total, fp / total)


def exact_scores(
    parties: Sequence[PartyData],
    *,
    score_range: ScoreRange = (0.0, 1.0),
    pos_label: Any = None,
    sample_weight: Sequence[Any] | None = None,
) -> dict[str, float]:
    """scikit-learn's exact ``roc_auc_score`` and ``average_precision_score`` on the pooled
    data (a non-private reference, to report the binning error)."""
    from sklearn.metrics import average_precision_score, roc_auc_score

    data, weights = prepare(parties, score_range, pos_label, sample_weight)
    s = np.concatenate([d[0] for d in data])
    y = np.concatenate([d[1] for d in data])
    w = None if weights is None else np.concatenate(weights)
    return {
        "auc": float(roc_auc_score(y, s, sample_weight=w)),
        "average_precision": float(average_precision_score(y, s, sample_weight=w)),
    }
