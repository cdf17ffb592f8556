"""Dataset loaders: scikit-learn's bundled data and the verified copies in ../shared/data.

Nothing is downloaded at run time. A missing file raises :class:`DatasetNotFoundError`
naming the path and the environment variable that overrides the data directory.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from privfl.errors import InputError

DATA_ENV = "PRIVFL_DATA_DIR"


class DatasetNotFoundError(InputError):
    """A dataset file is missing."""


def data_dir() -> Path:
    """``$PRIVFL_DATA_DIR`` or the ``shared/data`` folder next to the repository."""
    env = os.environ.get(DATA_ENV)
    if env:
        return Path(env)
    here = Path(__file__).resolve()
    for parent in here.parents:
        cand = parent.parent / "shared" / "data"
        if cand.is_dir():
            return cand
    return Path("shared") / "data"


def data_file(*parts: str) -> Path:
    path = data_dir().joinpath(*parts)
    if not path.is_file():
        raise DatasetNotFoundError(
            f"dataset file {path} not found; set {DATA_ENV} to the folder holding the "
            "privfl datasets (see shared/data/README.md)"
        )
    return path


def breast_cancer_scores(
    seed: int = 0, test_fraction: float = 0.5
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int8]]:
    """Scores of a logistic-regression model on the held-out part of scikit-learn's bundled
    Wisconsin breast-cancer data (569 samples): (test scores in [0, 1], test labels)."""
    from sklearn.datasets import load_breast_cancer
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    x, y = load_breast_cancer(return_X_y=True)
    xtr, xte, ytr, yte = train_test_split(
        x, y, test_size=test_fraction, random_state=seed, stratify=y
    )
    model = make_pipeline(StandardScaler(), LogisticRegression(C=0.05, max_iter=1000))
    model.fit(xtr, ytr)
    return model.predict_proba(xte)[:, 1].astype(np.float64), yte.astype(np.int8)


def deal(
    scores: npt.ArrayLike, labels: npt.ArrayLike, parties: int, seed: int = 0
) -> list[tuple[npt.NDArray[np.float64], npt.NDArray[np.int8]]]:
    """Deal rows to ``parties`` parties at random (seeded), as evenly as possible."""
    s = np.asarray(scores, dtype=np.float64)
    y = np.asarray(labels).astype(np.int8)
    if parties < 1:
        raise InputError("the number of parties must be at least 1")
    if parties > s.size:
        raise InputError(f"cannot deal {s.size} rows to {parties} parties (each needs a row)")
    order = np.random.default_rng(seed).permutation(s.size)  # not secret: a data split
    return [(s[idx], y[idx]) for idx in np.array_split(order, parties)]


def read_table(path: str | Path) -> Any:
    """Read a CSV or Parquet file into a pandas DataFrame (clear error otherwise)."""
    import pandas as pd

    p = Path(path)
    if not p.is_file():
        raise InputError(f"file not found: {p}")
    suffixes = "".join(p.suffixes).lower()
    try:
        if suffixes.endswith((".parquet", ".pq")):
            return pd.read_parquet(p)
        if suffixes.endswith((".csv", ".csv.gz", ".txt")):
            return pd.read_csv(p)
    except Exception as exc:
        raise InputError(f"cannot read {p}: {exc}") from exc
    raise InputError(f"{p}: unsupported format (use .csv, .csv.gz or .parquet)")
