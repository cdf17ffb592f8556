"""Training data: the paper's federated setting on digits 8x8 (scikit-learn's bundled handwritten
digits, 1,797 images, binarised as in the audit: pixel >= 8 of 16, dealt to parties), and the
user's own per-party ``(X, y)`` checked and label-encoded by :func:`prepare_parties` (tables
in :mod:`privfl.training.table`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

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
        raise InputError(
            f"unknown dataset {name!r}; choose one of {DATASETS} (a model trained on your own "
            "table with --data records no rows of a built-in dataset to audit it against)"
        )
    from sklearn.datasets import load_digits

    d = load_digits()
    return (d.data >= 8).astype(np.float64), d.target.astype(np.int64)


def federated_digits(
    parties: int = 3, per_party: int = 30, seed: int = 0, name: str = "digits8x8"
) -> FederatedData:
    """``parties`` disjoint random sets of ``per_party`` rows; the rest is the test set."""
    x, y = load_rows(name)
    if parties < 1 or per_party < 1 or parties * per_party >= len(y):
        raise InputError(
            f"{parties} parties (--parties) x {per_party} rows (--per-party) do not fit in the "
            f"{len(y)} rows of {name} (at least one row must stay for the test set): lower "
            "--parties or --per-party"
        )
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


# ---------------------------------------------------------------------- the user's own data
Label = int | str
PartyRows = tuple[Any, Any]


@dataclass(frozen=True)
class PreparedData:
    """Validated training data: per party (``names[k]``) float features and labels encoded as
    ``0..C-1``, the index into ``classes`` (the original labels, the same mapping at every
    party)."""

    names: tuple[str, ...]
    parties: tuple[tuple[FloatArray, IntArray], ...]
    classes: tuple[Label, ...]

    @property
    def features(self) -> int:
        return int(self.parties[0][0].shape[1])

    def encode(self, labels: Any, where: str) -> IntArray:
        """``labels`` (original values) as indices into :attr:`classes` (InputError naming
        ``where`` and the unknown labels)."""
        kind, y = _label_kind(labels, where)
        if kind != _kind_of(self.classes):
            raise InputError(f"{where}: labels are {kind}s, the classes are not")
        return _encode(y, self.classes, where)


def prepare_parties(
    parties: Sequence[PartyRows] | Mapping[str, PartyRows],
    classes: Sequence[Label] | None = None,
    features: int | None = None,
    outputs: int | None = None,
) -> PreparedData:
    """Check each party's ``(X, y)`` and map the labels consistently across parties.

    ``X``: 2-D, numeric and finite, ``features`` columns (default: the first party's), one row
    per label, at least one row. ``y``: integers or strings, the same kind at every party.
    ``classes``: the agreed class list (in a deployment every node needs the same one); by
    default integer labels inside ``0..outputs-1`` are their own index, other labels are
    sorted. Every class must occur at some party. Errors name the party (its key in a mapping,
    else its position)."""
    items = list(parties.items()) if isinstance(parties, Mapping) else list(enumerate(parties))
    if not 1 <= len(items) <= 64:
        raise InputError(f"between 1 and 64 parties, got {len(items)}")
    names = tuple(f"party {k!r}" if isinstance(k, str) else f"party {k}" for k, _ in items)
    rows: list[tuple[FloatArray, Any]] = []
    kinds: list[str] = []
    for name, (_, pair) in zip(names, items, strict=True):
        if not isinstance(pair, tuple | list) or len(pair) != 2:
            raise InputError(f"{name}: give (X, y), got {type(pair).__name__}")
        x = _features(pair[0], name, features if features is not None else _width(rows))
        kind, y = _label_kind(pair[1], name)
        if y.shape != (x.shape[0],):
            raise InputError(f"{name}: {x.shape[0]} rows of X but {y.size} labels")
        if kinds and kind != kinds[0]:
            raise InputError(f"{name}: labels are {kind}s, {names[0]}'s are {kinds[0]}s")
        rows.append((x, y))
        kinds.append(kind)
    chosen = _classes(rows, kinds[0], classes, outputs)
    encoded = tuple((x, _encode(y, chosen, name)) for (x, y), name in zip(rows, names, strict=True))
    present = np.zeros(len(chosen), dtype=bool)
    for _, y in encoded:
        present[y] = True
    if not present.all():
        missing = [chosen[i] for i in np.flatnonzero(~present)]
        raise InputError(
            f"{'classes' if len(missing) > 1 else 'class'} {show_values(missing)} "
            f"{'occur' if len(missing) > 1 else 'occurs'} at no party: every class needs a "
            "sample somewhere (or leave it out of the class list)"
        )
    return PreparedData(tuple(str(k) for k, _ in items), encoded, chosen)


def _width(rows: list[tuple[FloatArray, Any]]) -> int | None:
    return int(rows[0][0].shape[1]) if rows else None


def _features(x: Any, name: str, width: int | None) -> FloatArray:
    try:
        arr = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InputError(f"{name}: X must be numeric ({exc})") from None
    if arr.ndim != 2 or arr.shape[0] < 1:
        raise InputError(f"{name}: X must be a 2-D array with at least one row, got {arr.shape}")
    if width is not None and arr.shape[1] != width:
        raise InputError(f"{name}: X has {arr.shape[1]} columns, expected {width}")
    bad = np.argwhere(~np.isfinite(arr))
    if len(bad):
        r, c = (int(v) for v in bad[0])
        raise InputError(
            f"{name}: X[{r}, {c}] = {arr[r, c]}; every feature must be a finite number "
            f"({len(bad)} are not)"
        )
    return arr


def _label_kind(y: Any, where: str) -> tuple[str, Any]:
    arr = np.asarray(y)
    if arr.ndim != 1:
        raise InputError(f"{where}: y must be one label per row (1-D), got shape {arr.shape}")
    if arr.dtype.kind in "iu":
        return "integer", arr.astype(np.int64)
    if arr.dtype.kind in "US" or (arr.dtype.kind == "O" and all(isinstance(v, str) for v in arr)):
        return "string", arr.astype(str)
    sample = ", ".join(repr(v) for v in arr[:3].tolist())
    raise InputError(
        f"{where}: class labels must be integers or strings, got {arr.dtype} ({sample}); "
        "a missing label reads as NaN"
    )


def _kind_of(classes: Sequence[Label]) -> str:
    return "string" if isinstance(classes[0], str) else "integer"


def _classes(
    rows: list[tuple[FloatArray, Any]],
    kind: str,
    given: Sequence[Label] | None,
    outputs: int | None,
) -> tuple[Label, ...]:
    if given is not None:
        chosen = tuple(str(c) if kind == "string" else _as_int(c) for c in given)
        if not chosen or len(set(chosen)) != len(chosen):
            raise InputError("classes must list each class once (at least one)")
        if any(isinstance(c, str) != (kind == "string") for c in given):
            raise InputError(f"the labels are {kind}s: list the classes as {kind}s")
        return chosen
    found = np.unique(np.concatenate([y for _, y in rows]))
    if kind == "integer":
        ints = [int(v) for v in found]
        if outputs is not None and ints[0] >= 0 and ints[-1] < outputs:
            return tuple(range(outputs))
        return tuple(ints)
    return tuple(str(v) for v in found)


def _as_int(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int | np.integer):
        raise InputError(f"the labels are integers: list the classes as integers, got {value!r}")
    return int(value)


def _encode(y: Any, classes: tuple[Label, ...], where: str) -> IntArray:
    table = np.asarray(classes)
    order = np.argsort(table, kind="stable")
    pos = np.clip(np.searchsorted(table[order], y), 0, len(table) - 1)
    unknown = table[order][pos] != y
    if np.any(unknown):
        bad = list(dict.fromkeys(np.asarray(y)[unknown].tolist()))
        raise InputError(
            f"{where}: label{'s' if len(bad) > 1 else ''} {show_values(bad)} not among the "
            f"{len(classes)} classes {show_values(list(classes))}"
        )
    return np.asarray(order[pos], dtype=np.int64)


def show_values(values: Sequence[Any], limit: int = 5) -> str:
    shown = ", ".join(repr(v) for v in values[:limit])
    return f"[{shown}{', ...' if len(values) > limit else ''}]"
