"""Array aliases shared by the whole package (one definition each)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]
Int8Array = npt.NDArray[np.int8]

__all__ = ["BoolArray", "FloatArray", "Int8Array", "IntArray"]
