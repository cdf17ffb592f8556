"""The paper's federated setting on digits 8x8: scikit-learn's bundled handwritten digits
(1,797 images), binarised as in the audit (pixel >= 8 of 16), dealt to parties."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privfl._typing import FloatArray, IntArray
from privfl.errors import InputError

DATASETS = ("digits8x8",)


@dataclass(frozen=True)
class FederatedData:
    """Each party's (X, y), a held-out test set, and the row indices into the dataset."""

    name: str
    parties: tuple[tuple[FloatArray, IntArray], ...]
    x_test: FloatArray
    y_test: IntArray
    member_indices: IntArray
    test_indices: IntArray


def load_rows(name: str) -> tuple[FloatArray, IntArray]:
    """All rows of a dataset (features, labels)."""
    if name != "digits8x8":
        raise InputError(f"unknown dataset {name!r}; choose one of {DATASETS}")
    from sklearn.datasets import load_digits

    d = load_digits()
    return (d.data >= 8).astype(np.float64), d.target.astype(np.int64)


def federated_digits(
    parties: int = 3, per_party: int = 30, seed: int = 0, name: str = "digits8x8"
) -> FederatedData:
    """``parties`` disjoint random sets of ``per_party`` rows; the rest is the test set."""
    x, y = load_rows(name)
    if parties < 1 or per_party < 1 or parties * per_party >= len(y):
        raise InputError(f"{parties} parties x {per_party} rows do not fit in {len(y)} rows")
    order = np.random.default_rng(seed).permutation(len(y))  # not secret: data split
    used = parties * per_party
    dealt = tuple(
        (
            x[order[k * per_party : (k + 1) * per_party]],
            y[order[k * per_party : (k + 1) * per_party]],
        )
        for k in range(parties)
    )
    rest = order[used:]
    return FederatedData(name, dealt, x[rest], y[rest], order[:used], rest)
