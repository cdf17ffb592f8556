"""The user's training table (CSV or Parquet): one row per sample, a column naming the party
that holds it, a label column, numeric feature columns.

In a deployment each node reads only its own rows; :func:`split_table` is what
``privfl train --data`` runs in one process to simulate the parties from one file. Errors name
the column, the party and the row (1-based data row, the header not counted).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from privfl.datasets import read_table
from privfl.errors import InputError


@dataclass(frozen=True)
class Table:
    """The rows of each party (in order of first appearance) and the feature columns used."""

    parties: dict[str, tuple[Any, Any]]
    feature_columns: tuple[str, ...]
    label_column: str


def load_table(
    path: str | Path,
    label_column: str,
    party_column: str | None = None,
    feature_columns: Sequence[str] | None = None,
) -> Table:
    """Read ``path`` (``.csv``, ``.csv.gz`` or ``.parquet``) and split it by ``party_column``
    (None: one party named ``"all"``, e.g. a test file)."""
    return split_table(read_table(path), label_column, party_column, feature_columns, str(path))


def split_table(
    frame: Any,
    label_column: str,
    party_column: str | None = None,
    feature_columns: Sequence[str] | None = None,
    source: str = "the table",
) -> Table:
    """Per party ``(X, y)`` from a pandas DataFrame. Features: ``feature_columns`` or every
    column but the party and label columns; each must be numeric without missing values."""
    import pandas as pd

    columns = [str(c) for c in frame.columns]
    frame = frame.set_axis(columns, axis=1)
    named = [c for c in (label_column, party_column) if c is not None]
    for c in [*named, *(feature_columns or ())]:
        if c not in columns:
            raise InputError(f"{source} has no column {c!r} (columns: {_list(columns)})")
    if party_column is not None and party_column == label_column:
        raise InputError("the party column and the label column must differ")
    if feature_columns is None:
        features = [c for c in columns if c not in named]
    else:
        features = list(dict.fromkeys(feature_columns))
        clash = [c for c in features if c in named]
        if clash:
            raise InputError(f"{clash[0]!r} is the party or label column, not a feature")
    if not features:
        raise InputError(f"{source} has no feature column")
    if not len(frame):
        raise InputError(f"{source} has no rows")
    for c in features:
        if not pd.api.types.is_numeric_dtype(frame[c]):
            first = next((v for v in frame[c] if not _is_number(v)), None)
            raise InputError(
                f"{source}: feature column {c!r} is not numeric (e.g. {first!r}); encode it "
                "as numbers or leave it out with --feature-columns"
            )
    labels = frame[label_column]
    owners = (
        frame[party_column].astype(str)
        if party_column is not None
        else pd.Series(["all"] * len(frame), index=frame.index)
    )
    _no_missing(frame, party_column, label_column, features, owners, source)
    x_all = frame[features].to_numpy(dtype=np.float64)
    y_all = _label_array(labels)
    parties: dict[str, tuple[Any, Any]] = {}
    for name in pd.unique(owners):
        mask = (owners == name).to_numpy()
        parties[str(name)] = (x_all[mask], y_all[mask])
    return Table(parties, tuple(features), label_column)


def _no_missing(
    frame: Any,
    party_column: str | None,
    label_column: str,
    features: list[str],
    owners: Any,
    source: str,
) -> None:
    if party_column is not None:
        gaps = np.flatnonzero(frame[party_column].isna().to_numpy())
        if len(gaps):
            raise InputError(f"{source}: row {gaps[0] + 1} has no party ({party_column!r} empty)")
    for c in [label_column, *features]:
        gaps = np.flatnonzero(frame[c].isna().to_numpy())
        if len(gaps):
            r = int(gaps[0])
            what = "label" if c == label_column else f"value in feature column {c!r}"
            raise InputError(
                f"{source}: party {owners.iloc[r]!r}, row {r + 1} has no {what} "
                f"({len(gaps)} {'rows lack' if len(gaps) > 1 else 'row lacks'} one); fill or "
                "drop them before training"
            )


def _label_array(labels: Any) -> Any:
    """Integer labels as int64 (also when stored as integral floats), strings as str."""
    import pandas as pd

    if pd.api.types.is_bool_dtype(labels.dtype):
        return labels.to_numpy()
    if pd.api.types.is_integer_dtype(labels.dtype):
        return labels.to_numpy(dtype=np.int64)
    if pd.api.types.is_float_dtype(labels.dtype):
        values = labels.to_numpy(dtype=np.float64)
        if np.all(values == np.round(values)):
            return values.astype(np.int64)
        return values
    return np.asarray([v if isinstance(v, str) else repr(v) for v in labels], dtype=object)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float | np.number) and not isinstance(value, bool)


def _list(columns: Sequence[str], limit: int = 8) -> str:
    head = ", ".join(columns[:limit])
    return head + (f", ... ({len(columns)} in all)" if len(columns) > limit else "")
