"""Validation of what a RevFRF participant or requester is given: names and feature matrices."""

from __future__ import annotations

import numpy as np

from privfl._typing import FloatArray
from privfl.errors import InputError
from privfl.forest.messages import RESERVED_NAMES


def check_name(name: object, what: str) -> str:
    if not isinstance(name, str) or not name or name in RESERVED_NAMES or len(name) > 200:
        raise InputError(f"{what} name {name!r} is empty, too long or reserved (CS, CC, KGC)")
    return name


def check_matrix(values: object, what: str, rows: int | None = None) -> FloatArray:
    """A finite 2-D float matrix (a 1-D vector is one column), InputError otherwise."""
    try:
        arr = np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        raise InputError(f"{what}: features must be numbers") from None
    arr = arr[:, None] if arr.ndim == 1 else arr
    if arr.ndim != 2 or arr.shape[1] == 0 or arr.shape[0] == 0:
        raise InputError(f"{what}: feature matrix must be 2-D with at least one row and column")
    if rows is not None and arr.shape[0] != rows:
        raise InputError(f"{what}: {arr.shape[0]} rows, expected {rows}")
    if not np.all(np.isfinite(arr)):
        raise InputError(f"{what}: features contain NaN or infinite values")
    return arr
