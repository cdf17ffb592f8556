"""Which layers to encrypt (SmartCryptNN §V-E): the smallest contiguous group of last layers
such that every attack on the layers left exposed stays at or below a tolerated accuracy.

:func:`recommend_layers` works on attack rows of one model; :func:`recommend_from_results`
merges the JSON results of several ``privfl audit`` runs after checking that they describe
the same model (same layer sizes, same dataset) and that every row is well-formed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from privfl.errors import InputError


def check_max_leakage(max_leakage: object) -> float:
    """The tolerated attack accuracy: a number in (0.5, 1] (0.5 is chance), else InputError."""
    value = math.nan
    if isinstance(max_leakage, int | float) and not isinstance(max_leakage, bool):
        value = float(max_leakage)
    if not 0.5 < value <= 1.0:
        raise InputError(
            f"max_leakage is an attack accuracy and must be in (0.5, 1] (0.5 = chance); "
            f"got {max_leakage!r}"
        )
    return value


def worst_per_layer(rows: Sequence[Mapping[str, Any]], total: int) -> dict[int, float | None]:
    """The highest attack accuracy on each layer 1..total (None: the layer was not audited,
    i.e. no row for it or only rows whose accuracy is missing or NaN)."""
    out: dict[int, float | None] = {}
    for layer in range(1, total + 1):
        accs = [_accuracy(r) for r in rows if r["layer"] == layer]
        known = [a for a in accs if a is not None]
        out[layer] = max(known) if known else None
    return out


def _accuracy(row: Mapping[str, Any]) -> float | None:
    acc = row.get("accuracy")
    if acc is None or isinstance(acc, bool) or not isinstance(acc, int | float):
        return None
    return None if math.isnan(acc) else float(acc)


def unaudited_layers(worst: Mapping[int, float | None]) -> tuple[int, ...]:
    """The layers without an attack result: they are never counted as safe to expose."""
    return tuple(layer for layer, acc in sorted(worst.items()) if acc is None)


def recommend_layers(
    results: Sequence[Any], max_leakage: float = 0.55, layers: int | None = None
) -> list[int]:
    """Smallest contiguous group of last layers to encrypt so that every attack on the layers
    left exposed stays at or below ``max_leakage`` (accuracy; SmartCryptNN §V-E). A layer
    without a result (no row, or a missing/NaN accuracy) is never left exposed: nothing shows
    it is safe, so it and every layer after it are encrypted. Attack every layer you may
    want to leave exposed."""
    limit = check_max_leakage(max_leakage)
    rows = [r if isinstance(r, Mapping) else r.to_dict() for r in results]
    if not rows:
        raise InputError("no attack rows to recommend from")
    total = layers or max(int(r["layer"]) for r in rows)
    worst = worst_per_layer(rows, total)
    for k in range(0, total + 1):
        exposed = [worst[layer] for layer in range(1, total - k + 1)]
        if all(acc is not None and acc <= limit for acc in exposed):
            return list(range(total - k + 1, total + 1))
    return list(range(1, total + 1))  # pragma: no cover - k = total always succeeds


@dataclass(frozen=True)
class Recommendation:
    """The layers to encrypt, the tolerated accuracy and the worst attack per layer (None:
    not audited; such a layer is always among ``encrypt_layers``)."""

    encrypt_layers: tuple[int, ...]
    max_leakage: float
    layers: int
    worst_accuracy_per_layer: dict[int, float | None]
    model_sizes: tuple[int, ...] | None

    @property
    def exposed_layers(self) -> tuple[int, ...]:
        return tuple(range(1, self.layers - len(self.encrypt_layers) + 1))

    @property
    def unaudited_layers(self) -> tuple[int, ...]:
        return unaudited_layers(self.worst_accuracy_per_layer)

    def to_dict(self) -> dict[str, Any]:
        return {
            "encrypt_layers": list(self.encrypt_layers),
            "max_leakage": self.max_leakage,
            "layers": self.layers,
            "exposed_layers": list(self.exposed_layers),
            "unaudited_layers": list(self.unaudited_layers),
            "model_sizes": None if self.model_sizes is None else list(self.model_sizes),
            "worst_accuracy_per_layer": {
                str(k): v for k, v in self.worst_accuracy_per_layer.items()
            },
        }


def _model_of(name: str, result: Mapping[str, Any]) -> tuple[tuple[int, ...], str | None]:
    model = result.get("model")
    sizes = model.get("sizes") if isinstance(model, Mapping) else None
    if not (
        isinstance(sizes, list)
        and len(sizes) >= 2
        and all(isinstance(v, int) and v > 0 for v in sizes)
    ):
        raise InputError(
            f"{name} has no model sizes ('model': {{'sizes': [...]}}); use the JSON written by "
            "'privfl audit membership|property ... --json-out'"
        )
    dataset = result.get("dataset")
    return tuple(sizes), dataset if isinstance(dataset, str) else None


def _check_row(name: str, row: object, depth: int) -> Mapping[str, Any]:
    if not isinstance(row, Mapping):
        raise InputError(f"{name}: every entry of 'layers' must be an object")
    layer, acc = row.get("layer"), row.get("accuracy")
    if isinstance(layer, bool) or not isinstance(layer, int) or not 1 <= layer <= depth:
        raise InputError(f"{name}: a row's 'layer' must be an integer in 1..{depth}; got {layer!r}")
    if isinstance(acc, bool) or not isinstance(acc, int | float) or not 0.0 <= acc <= 1.0:
        raise InputError(f"{name}: a row's 'accuracy' must be a number in [0, 1]; got {acc!r}")
    return row


def recommend_from_results(
    results: Sequence[tuple[str, Mapping[str, Any]]],
    max_leakage: float = 0.55,
    features: Sequence[str] | None = None,
) -> Recommendation:
    """Merge ``(name, result)`` pairs of ``privfl audit`` JSON results of ONE model and
    recommend the layers to encrypt. ``features`` keeps only membership rows with those
    feature sets (rows without a feature set, e.g. property inference, are always kept).

    Refuses results of different models (layer sizes or dataset differ), malformed rows and a
    ``max_leakage`` outside (0.5, 1]."""
    limit = check_max_leakage(max_leakage)
    if not results:
        raise InputError("give at least one audit result")
    models = {}
    rows: list[Mapping[str, Any]] = []
    for name, res in results:
        if not isinstance(res, Mapping) or not isinstance(res.get("layers"), list):
            raise InputError(f"{name} has no 'layers' list (run 'privfl audit ... --json-out')")
        sizes, dataset = _model_of(name, res)
        models[name] = (sizes, dataset)
        rows += [_check_row(name, r, len(sizes) - 1) for r in res["layers"]]
    if len(set(models.values())) > 1:
        described = "; ".join(
            f"{n}: {'-'.join(map(str, s))} on {d or '?'}" for n, (s, d) in models.items()
        )
        raise InputError(
            f"the results come from different models ({described}); recommend for one model "
            "at a time"
        )
    if features is not None:
        keep = set(features)
        rows = [r for r in rows if "features" not in r or r["features"] in keep]
    if not rows:
        raise InputError("the results hold no layer rows (check --features)")
    sizes = next(iter(models.values()))[0]
    total = len(sizes) - 1
    chosen = recommend_layers(rows, limit, total)
    return Recommendation(tuple(chosen), limit, total, worst_per_layer(rows, total), sizes)
