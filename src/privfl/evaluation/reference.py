"""Plaintext references: the binned AUC FHAUC computes, and the exact AUC."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from privfl.errors import InputError
from privfl.evaluation.statistics import (
    DEFAULT_THRESHOLDS,
    PartyCounts,
    ScoreRange,
    interior_thresholds,
    party_counts,
    validate_party,
)

PartyData = tuple[Any, Any]


def validate_parties(
    parties: Sequence[PartyData], score_range: ScoreRange
) -> list[tuple[npt.NDArray[np.float64], npt.NDArray[np.int8]]]:
    """Validate every party and the global class balance; returns arrays per party."""
    if isinstance(parties, str | bytes) or len(parties) < 1:
        raise InputError("parties must be a non-empty list of (scores, labels) pairs")
    out = []
    for i, item in enumerate(parties):
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise InputError(f"party {i} must be a (scores, labels) pair")
        out.append(validate_party(item[0], item[1], score_range, i))
    positives = sum(int(y.sum()) for _, y in out)
    total = sum(y.size for _, y in out)
    if positives == 0:
        raise InputError("no positive labels across all parties: the AUC is undefined")
    if positives == total:
        raise InputError("no negative labels across all parties: the AUC is undefined")
    return out


def auc_from_counts(tp: npt.NDArray[np.int64], fp: npt.NDArray[np.int64]) -> float:
    """Binned AUC from global cumulative counts (exact integer arithmetic)."""
    t = [int(v) for v in tp]
    f = [int(v) for v in fp]
    num = sum((t[n] + t[n - 1]) * (f[n] - f[n - 1]) for n in range(1, len(t)))
    denom = 2 * t[-1] * f[-1]
    if denom == 0:
        raise InputError("both classes must be present to compute an AUC")
    return num / denom


def global_counts(counts: Sequence[PartyCounts]) -> PartyCounts:
    """Sum of the parties' counts."""
    return PartyCounts(
        np.sum([c.tp for c in counts], axis=0), np.sum([c.fp for c in counts], axis=0)
    )


def binned_auc(
    parties: Sequence[PartyData],
    thresholds: int | npt.ArrayLike = DEFAULT_THRESHOLDS,
    score_range: ScoreRange = (0.0, 1.0),
) -> float:
    """The plaintext AUC at the given decision points: exactly what FHAUC computes."""
    data = validate_parties(parties, score_range)
    interior = interior_thresholds(thresholds, score_range)
    g = global_counts([party_counts(s, y, interior) for s, y in data])
    return auc_from_counts(g.tp, g.fp)


def exact_auc(parties: Sequence[PartyData], score_range: ScoreRange = (0.0, 1.0)) -> float:
    """scikit-learn's exact ROC AUC on the pooled data (a non-private reference)."""
    from sklearn.metrics import roc_auc_score

    data = validate_parties(parties, score_range)
    s = np.concatenate([d[0] for d in data])
    y = np.concatenate([d[1] for d in data])
    return float(roc_auc_score(y, s))
