"""RevFRF effectiveness study (RevFRF's Tables 2 and 3): one feature per participant, the
forest before and after revoking participants one by one, next to a non-federated
scikit-learn RandomForest with the same depth and number of trees."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from privfl._typing import FloatArray
from privfl.datasets import TabularDataset, load_tabular
from privfl.errors import InputError
from privfl.forest import ForestReport, RevFRF


@dataclass(frozen=True)
class EffectivenessRow:
    """One model's test metrics: accuracy/recall/F1 or MSE/MAE/R²."""

    model: str
    revoked: int
    metrics: Mapping[str, float]

    def to_dict(self) -> dict[str, Any]:
        return {"model": self.model, "revoked": self.revoked, **self.metrics}


@dataclass(frozen=True)
class EffectivenessResult:
    """The rows of one dataset's table, the settings and the final forest's report."""

    dataset: str
    description: str
    task: str
    participants: int
    train: int
    test: int
    trees: int
    depth: int
    key_bits: int
    rho: int
    candidates: int
    fit_seconds: float
    revoked_participants: tuple[str, ...]
    rows: tuple[EffectivenessRow, ...]
    report: ForestReport

    @property
    def metric_names(self) -> tuple[str, ...]:
        return (
            ("accuracy", "recall", "f1") if self.task == "classification" else ("mse", "mae", "r2")
        )

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["rows"] = [r.to_dict() for r in self.rows]
        out["report"] = self.report.to_dict()
        return out


def metrics(task: str, y_true: np.ndarray, y_pred: np.ndarray) -> dict[str, float]:
    """Accuracy, recall, F1 (binary: positive class; multi-class: macro) or MSE, MAE, R²."""
    from sklearn import metrics as m

    if task == "classification":
        average = "binary" if len(np.unique(y_true)) <= 2 else "macro"
        return {
            "accuracy": float(m.accuracy_score(y_true, y_pred)),
            "recall": float(m.recall_score(y_true, y_pred, average=average, zero_division=0)),
            "f1": float(m.f1_score(y_true, y_pred, average=average, zero_division=0)),
        }
    return {
        "mse": float(m.mean_squared_error(y_true, y_pred)),
        "mae": float(m.mean_absolute_error(y_true, y_pred)),
        "r2": float(m.r2_score(y_true, y_pred)),
    }


def one_feature_per_participant(x: FloatArray, features: Sequence[str]) -> dict[str, FloatArray]:
    return {f"p{i:02d}-{name}": x[:, i : i + 1] for i, name in enumerate(features)}


def check_revocations(data: TabularDataset, revoke: Sequence[int]) -> None:
    """Refuse revocation counts the dataset cannot serve (one participant per feature, and
    at least one must remain), naming the number of participants."""
    too_many = [k for k in revoke if k < 0 or k >= data.n_features]
    if too_many:
        raise InputError(
            f"--revoke: cannot revoke {too_many} of {data.name}'s {data.n_features} "
            f"participants (one per feature): choose counts from 0 to {data.n_features - 1}"
        )


def _row(data: TabularDataset, model: str, revoked: int, predicted: Any) -> EffectivenessRow:
    return EffectivenessRow(model, revoked, metrics(data.task, data.y_test, predicted))


def _sklearn_rows(
    data: TabularDataset, trees: int, depth: int, seed: int, diagnostics: bool
) -> list[EffectivenessRow]:
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    cls = RandomForestClassifier if data.task == "classification" else RandomForestRegressor
    ref = cls(n_estimators=trees, max_depth=depth, random_state=seed, n_jobs=1)
    ref.fit(data.x_train, data.y_train)
    rows = [_row(data, "scikit-learn RF (non-federated)", 0, ref.predict(data.x_test))]
    if diagnostics and data.task == "classification":  # RevFRF's trees vote; scikit-learn's
        votes = np.stack(  # forest averages their class probabilities
            [ref.classes_[t.predict(data.x_test).astype(int)] for t in ref.estimators_]
        )
        idx = np.searchsorted(ref.classes_, votes)
        hard = ref.classes_[[np.bincount(col, minlength=len(ref.classes_)).argmax()
                             for col in idx.T]]  # fmt: skip
        rows.append(_row(data, "scikit-learn RF, majority vote of the trees", 0, hard))
    if diagnostics:  # scikit-learn with RevFRF's ceil(sqrt(|F|)) features per split
        ref = cls(
            n_estimators=trees, max_depth=depth, random_state=seed, n_jobs=1, max_features="sqrt"
        )
        ref.fit(data.x_train, data.y_train)
        predicted = ref.predict(data.x_test)
        rows.append(_row(data, "scikit-learn RF, sqrt(|F|) features per split", 0, predicted))
    return rows


def effectiveness(
    dataset: str | TabularDataset,
    trees: int = 100,
    depth: int = 10,
    revoke: Sequence[int] = (0, 1, 2, 3, 4, 5),
    key_bits: int = 2048,
    level: int = 1,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
    reuse_variant: bool = False,
    rho: int = 32,
    candidates: int = 8,
    allow_insecure_key_bits: bool = False,
) -> EffectivenessResult:
    """Rows: scikit-learn's forest, then RevFRF with k = each value of ``revoke`` participants
    revoked (the first k participants, in column order, revoked one after another).
    ``rho`` / ``candidates`` are the participants' probe size ϱ and candidate count ς.
    ``reuse_variant`` adds diagnostic rows that locate the gap to scikit-learn: its forest
    with a majority vote of the trees (RevFRF's rule; scikit-learn averages probabilities),
    with sqrt(|F|) features per split, and RevFRF with features reusable on a path."""
    data = load_tabular(dataset, seed) if isinstance(dataset, str) else dataset
    check_revocations(data, revoke)
    train = one_feature_per_participant(data.x_train, data.features)
    test = one_feature_per_participant(data.x_test, data.features)
    rows = _sklearn_rows(data, trees, depth, seed, reuse_variant)
    start = time.perf_counter()
    settings: dict[str, Any] = {
        "task": data.task, "n_trees": trees, "max_depth": depth, "key_bits": key_bits,
        "seed": seed, "rho": rho, "candidates": candidates,
        "allow_insecure_key_bits": allow_insecure_key_bits,
    }  # fmt: skip
    model = RevFRF(**settings).fit(train, data.y_train)
    fit_seconds = time.perf_counter() - start
    names = list(train)
    if reuse_variant:
        variant = RevFRF(**settings, reuse_features=True).fit(train, data.y_train)
        predicted = variant.predict_plain(test)
        rows.append(_row(data, "RevFRF, features reusable on a path", 0, predicted))
    done = 0
    for k in sorted(set(revoke)):
        while done < k:
            if progress:
                progress(f"{data.name}: revoking {names[done]}")
            model.revoke(names[done], level=level)
            done += 1
        rest = {n: v for n, v in test.items() if n not in model.revoked}
        predicted = model.predict_plain(rest)
        rows.append(_row(data, "RevFRF", k, predicted))
    return EffectivenessResult(
        dataset=data.name, description=data.description, task=data.task,
        participants=len(names), train=len(data.y_train), test=len(data.y_test), trees=trees,
        depth=depth, key_bits=key_bits, rho=rho, candidates=candidates, fit_seconds=fit_seconds,
        revoked_participants=tuple(names[:done]), rows=tuple(rows), report=model.report(),
    )  # fmt: skip
