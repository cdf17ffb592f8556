"""Result objects that behave like the number they carry.

:class:`FloatLike` is a mixin for a result whose main value is one float (an AUC, an
average precision): ``float(r)``, comparisons (``r > 0.5``, ``0.5 < r``, ``r1 < r2``),
formatting (``f"{r:.3f}"``), ``round(r, 3)``, ``abs(r)`` and arithmetic with numbers all use
that value, so code written for scikit-learn's float results keeps working. Equality with a
number compares the value (``r == 0.75``); two results are equal only if they are the same
object (their value may coincide while their runs differ); the hash is the value's, as Python
requires of objects equal to numbers. The result's other fields stay attributes.
"""

from __future__ import annotations

from numbers import Real
from typing import Any


class FloatLike:
    """Mixin: the object acts as ``float(self)`` wherever a number is expected. Subclasses
    define ``__float__``; dataclasses using it pass ``eq=False`` so this ``__eq__`` is kept."""

    def __float__(self) -> float:
        raise NotImplementedError

    def _other(self, other: Any) -> float | None:
        if isinstance(other, FloatLike):
            return float(other)
        if isinstance(other, Real) and not isinstance(other, bool):
            return float(other)
        return None

    def __eq__(self, other: object) -> bool:
        if self is other:
            return True
        if isinstance(other, FloatLike):
            return False
        value = self._other(other)
        return value is not None and float(self) == value

    def __hash__(self) -> int:
        return hash(float(self))

    def __lt__(self, other: Any) -> bool:
        value = self._other(other)
        if value is None:
            return NotImplemented
        return float(self) < value

    def __le__(self, other: Any) -> bool:
        value = self._other(other)
        if value is None:
            return NotImplemented
        return float(self) <= value

    def __gt__(self, other: Any) -> bool:
        value = self._other(other)
        if value is None:
            return NotImplemented
        return float(self) > value

    def __ge__(self, other: Any) -> bool:
        value = self._other(other)
        if value is None:
            return NotImplemented
        return float(self) >= value

    def __format__(self, spec: str) -> str:
        return format(float(self), spec)

    def __round__(self, ndigits: int | None = None) -> float:
        return round(float(self), ndigits if ndigits is not None else 0)

    def __abs__(self) -> float:
        return abs(float(self))

    def __neg__(self) -> float:
        return -float(self)

    def __add__(self, other: Any) -> float:
        value = self._other(other)
        return NotImplemented if value is None else float(self) + value

    def __radd__(self, other: Any) -> float:
        return self.__add__(other)

    def __sub__(self, other: Any) -> float:
        value = self._other(other)
        return NotImplemented if value is None else float(self) - value

    def __rsub__(self, other: Any) -> float:
        value = self._other(other)
        return NotImplemented if value is None else value - float(self)

    def __mul__(self, other: Any) -> float:
        value = self._other(other)
        return NotImplemented if value is None else float(self) * value

    def __rmul__(self, other: Any) -> float:
        return self.__mul__(other)

    def __truediv__(self, other: Any) -> float:
        value = self._other(other)
        return NotImplemented if value is None else float(self) / value

    def __rtruediv__(self, other: Any) -> float:
        value = self._other(other)
        return NotImplemented if value is None else value / float(self)
