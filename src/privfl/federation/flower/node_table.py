"""A node's two data columns (scores, labels) read without importing pandas.

A Flower ClientApp is a fresh process per message; importing pandas to read the node's
table cost 0.3-0.5 s of CPU in the first round of every FHAUC session (the later rounds
read the columns from the node-local state). A plain numeric CSV of at most 16 MiB
(``.csv``, ``.csv.gz``, ``.txt``, comma separated, one header line, every field a finite
number, every row as wide as the header) is read with numpy's C reader instead; anything
else (a larger file, Parquet, a column that is not numbers, a missing value, quotes, a
ragged row, a missing column) goes to :func:`privfl.datasets.read_table` exactly as before,
so every error and every non-numeric value is what pandas makes of it.

Runs on a party's node, on the party's own file; it learns nothing beyond that file.
"""

from __future__ import annotations

import gzip
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from privfl._typing import FloatArray
from privfl.errors import InputError

PLAIN_SUFFIXES = (".csv", ".csv.gz", ".txt")
# Above this size pandas' parser (about 4x faster per row than numpy's) repays its import:
# 10^6 rows (about 40 MB) took 0.48 s of CPU with numpy against 0.41 s with pandas, import
# included; 1,000 rows 0.02 s against 0.30 s (benchmarks/fhauc_node_load.py).
PLAIN_MAX_BYTES = 16 << 20
LINE_MAX_CHARS = 1 << 16  # the header and first row are read at most this long (a .gz expands)


def _header(path: Path) -> list[str] | None:
    """The first line's comma-separated names, or None when the file is not plainly
    readable (quotes, no data line, a first data line with another number of fields, which
    pandas would read as an index column, a line of ``LINE_MAX_CHARS`` or more, not UTF-8):
    the caller then lets pandas read it."""
    opener = gzip.open if path.name.lower().endswith(".gz") else open
    try:
        with opener(path, "rt", encoding="utf-8", newline="") as fh:
            line, first = fh.readline(LINE_MAX_CHARS), fh.readline(LINE_MAX_CHARS)
    except (OSError, UnicodeDecodeError, EOFError):
        return None
    if not line.endswith("\n") or len(first) >= LINE_MAX_CHARS:
        return None
    line, first = line.rstrip("\r\n"), first.rstrip("\r\n")
    if not line or not first or any(q in line + first for q in "\"'"):
        return None
    names = line.split(",")
    return names if first.count(",") == len(names) - 1 else None


def numeric_columns(
    path: str | Path, columns: tuple[str, str]
) -> tuple[FloatArray, FloatArray] | None:
    """``(scores, labels)`` of a plain numeric CSV as float64 arrays, or None when the file
    is not one (then :func:`privfl.datasets.read_table` reads it). The party validates the
    labels as numbers either way (0 or 1, whatever their dtype)."""
    p = Path(path)
    if not p.is_file() or not p.name.lower().endswith(PLAIN_SUFFIXES):
        return None
    if p.stat().st_size > PLAIN_MAX_BYTES:
        return None
    names = _header(p)
    if names is None or len(set(names)) != len(names):
        return None
    if any(col not in names for col in columns):
        return None
    use = (names.index(columns[0]), names.index(columns[1]))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # an empty file warns: let pandas say what it is
            table = np.loadtxt(
                p, delimiter=",", skiprows=1, comments=None, ndmin=2,
                dtype=np.float64, encoding="utf-8",
            )  # fmt: skip
    except (ValueError, OSError, UserWarning, UnicodeDecodeError, EOFError):
        return None
    if table.shape[0] == 0 or table.shape[1] != len(names) or not np.all(np.isfinite(table)):
        return None  # missing or odd values: pandas' reading (and its error) decides
    return np.ascontiguousarray(table[:, use[0]]), np.ascontiguousarray(table[:, use[1]])


def read_columns(
    path: str | Path, columns: tuple[str, str]
) -> tuple[npt.NDArray[Any], npt.NDArray[Any]]:
    """The node's ``(scores, labels)`` columns: numpy's reader for a plain numeric CSV,
    pandas (:func:`privfl.datasets.read_table`) for anything else."""
    fast = numeric_columns(path, columns)
    if fast is not None:
        return fast
    from privfl.datasets import read_table  # pandas: only when the plain reader declines

    df = read_table(path)
    for col in columns:
        if col not in df.columns:
            raise InputError(f"the data file has no column {col!r}")
    return df[columns[0]].to_numpy(), df[columns[1]].to_numpy()
