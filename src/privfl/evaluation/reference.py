"""Plaintext references: the binned AUC FHAUC computes, and the exact AUC."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from privfl.datasets import check_party_names
from privfl.errors import InputError
from privfl.evaluation.curves import binarize_labels
from privfl.evaluation.statistics import (
    DEFAULT_THRESHOLDS,
    PartyCounts,
    ScoreRange,
    check_shapes,
    interior_thresholds,
    party_counts,
    validate_party,
)

PartyData = tuple[Any, Any]
Parties = Sequence[PartyData] | Mapping[str, PartyData]


def party_items(parties: Parties) -> list[tuple[str, PartyData]]:
    """``(name, (scores, labels))`` for every party: a mapping's keys name the parties, a
    list's parties are named ``party-0``, ``party-1``, ... (the names errors use)."""
    if isinstance(parties, Mapping):
        names = check_party_names(list(parties.keys()), minimum=1)
        items = list(zip(names, parties.values(), strict=True))
    elif isinstance(parties, str | bytes) or not isinstance(parties, Sequence):
        raise InputError(
            "parties must be a list of (scores, labels) pairs or a dict name -> (scores, labels)"
        )
    else:
        items = [(f"party-{i}", p) for i, p in enumerate(parties)]
    if not items:
        raise InputError("parties must be a non-empty list of (scores, labels) pairs")
    for name, item in items:
        if not isinstance(item, tuple | list) or len(item) != 2:
            raise InputError(f"party {name} must be a (scores, labels) pair")
    return items


def validate_parties(
    parties: Parties, score_range: ScoreRange, pos_label: Any = None
) -> list[tuple[npt.NDArray[np.float64], npt.NDArray[np.int8]]]:
    """Validate every party and the global class balance; returns arrays per party.

    Labels follow one rule at every entry point (scikit-learn's ``pos_label``, over the
    classes of all parties together): ``{0, 1}`` and ``{-1, 1}`` (also as bools or floats)
    default to ``pos_label=1``; any other two values (e.g. ``"yes"``/``"no"``) need
    ``pos_label``. Errors name the party (a dict's key, else ``party-i``)."""
    items = party_items(parties)
    for name, (scores, labels) in items:
        check_shapes(scores, labels, name)
    labels = binarize_labels([p[1] for _, p in items], pos_label)
    out = [
        validate_party(p[0], y, score_range, name)
        for (name, p), y in zip(items, labels, strict=True)
    ]
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
    parties: Parties,
    thresholds: int | npt.ArrayLike = DEFAULT_THRESHOLDS,
    score_range: ScoreRange = (0.0, 1.0),
    *,
    pos_label: Any = None,
) -> float:
    """The plaintext AUC at the given decision points: exactly what FHAUC computes."""
    data = validate_parties(parties, score_range, pos_label)
    interior = interior_thresholds(thresholds, score_range)
    g = global_counts([party_counts(s, y, interior) for s, y in data])
    return auc_from_counts(g.tp, g.fp)


def exact_auc(
    parties: Parties, score_range: ScoreRange = (0.0, 1.0), *, pos_label: Any = None
) -> float:
    """scikit-learn's exact ROC AUC on the pooled data (a non-private reference)."""
    from sklearn.metrics import roc_auc_score

    data = validate_parties(parties, score_range, pos_label)
    s = np.concatenate([d[0] for d in data])
    y = np.concatenate([d[1] for d in data])
    return float(roc_auc_score(y, s))
