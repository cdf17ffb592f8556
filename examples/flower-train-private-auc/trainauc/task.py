"""The model and the data: numpy logistic regression on UCI Adult (income > 50K).

Deterministic on purpose (full-batch gradient descent, a seeded partition), so a test can
replay the whole FedAvg run in process and compare every evaluated round's AUC.

Partitions: client ``k`` of ``K`` gets the k-th of K equal slices of a seeded permutation of
Adult's training rows (its local training set) and of its test rows (its local validation
set), each capped at ``max-rows``. Features are standardised with the training set's mean and
standard deviation; in this example those constants stand for scaling constants the
federation agreed on beforehand (public), not for data one client sees of another.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np


@dataclass(frozen=True)
class Partition:
    x_train: np.ndarray
    y_train: np.ndarray
    x_val: np.ndarray
    y_val: np.ndarray


@lru_cache(maxsize=1)
def _adult() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    from privfl.datasets import load_tabular

    data = load_tabular("adult")
    mean = data.x_train.mean(axis=0)
    std = data.x_train.std(axis=0) + 1e-12
    return (
        (data.x_train - mean) / std,
        data.y_train.astype(np.int8),
        (data.x_test - mean) / std,
        data.y_test.astype(np.int8),
    )


def load_partition(
    partition: int, partitions: int, max_rows: int = 2000, cache_dir: str | Path | None = None
) -> Partition:
    """Client ``partition`` of ``partitions`` (see the module docstring). With ``cache_dir``
    the partition is kept there as ``.npz`` (a ClientApp is a fresh process per message:
    parsing Adult each time would dominate a small model's round)."""
    if not 0 <= partition < partitions:
        raise ValueError(f"partition {partition} is not in 0..{partitions - 1}")
    cache = None
    if cache_dir is not None:
        cache = Path(cache_dir) / f"adult-{partition}-of-{partitions}-{max_rows}.npz"
        if cache.is_file():
            with np.load(cache) as z:
                return Partition(z["x_train"], z["y_train"], z["x_val"], z["y_val"])
    xtr, ytr, xte, yte = _adult()
    rng = np.random.default_rng(0)  # not secret: a reproducible data split
    tr = np.array_split(rng.permutation(len(ytr)), partitions)[partition][:max_rows]
    te = np.array_split(rng.permutation(len(yte)), partitions)[partition][:max_rows]
    part = Partition(xtr[tr], ytr[tr], xte[te], yte[te])
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        np.savez(cache, **part.__dict__)
    return part


def initial_weights(features: int) -> np.ndarray:
    return np.zeros(features + 1)


def predict(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Scores in [0, 1]: the sigmoid of x @ w[:-1] + w[-1]."""
    z = np.clip(x @ w[:-1] + w[-1], -30.0, 30.0)
    return 1.0 / (1.0 + np.exp(-z))


def train(w: np.ndarray, x: np.ndarray, y: np.ndarray, epochs: int, lr: float) -> np.ndarray:
    """Full-batch gradient descent on the logistic loss (deterministic)."""
    w = w.astype(np.float64).copy()
    for _ in range(epochs):
        err = predict(w, x) - y
        w[:-1] -= lr * (x.T @ err) / len(y)
        w[-1] -= lr * err.mean()
    return w


def log_loss(w: np.ndarray, x: np.ndarray, y: np.ndarray) -> float:
    p = np.clip(predict(w, x), 1e-12, 1 - 1e-12)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))
