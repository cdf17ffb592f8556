"""RevFRF effectiveness study (RevFRF's Tables 2 and 3): one feature per participant, the
forest before and after revoking participants one by one, next to a non-federated
scikit-learn RandomForest with the same depth and number of trees."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from privfl.datasets import load_tabular
from privfl.forest.revfrf import RevFRF


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


def one_feature_per_participant(x: Any, features: Sequence[str]) -> dict[str, np.ndarray]:
    arr = np.asarray(x, dtype=np.float64)
    return {f"p{i:02d}-{name}": arr[:, i : i + 1] for i, name in enumerate(features)}


def effectiveness(
    dataset: str,
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
) -> dict[str, Any]:
    """Rows: scikit-learn's forest, then RevFRF with k = each value of ``revoke`` participants
    revoked (the first k participants, in column order, revoked one after another).
    ``rho`` / ``candidates`` are the participants' probe size ϱ and candidate count ς.
    ``reuse_variant`` adds diagnostic rows that locate the gap to scikit-learn: its forest
    with a majority vote of the trees (RevFRF's rule; scikit-learn averages probabilities),
    with sqrt(|F|) features per split, and RevFRF with features reusable on a path."""
    from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

    d = load_tabular(dataset, seed)
    task = d["task"]
    train = one_feature_per_participant(d["x_train"], d["features"])
    test = one_feature_per_participant(d["x_test"], d["features"])
    rows = []
    cls = RandomForestClassifier if task == "classification" else RandomForestRegressor
    ref = cls(n_estimators=trees, max_depth=depth, random_state=seed, n_jobs=1)
    ref.fit(np.asarray(d["x_train"], dtype=float), d["y_train"])
    rows.append(
        {
            "model": "scikit-learn RF (non-federated)",
            "revoked": 0,
            **metrics(task, d["y_test"], ref.predict(np.asarray(d["x_test"], dtype=float))),
        }
    )
    if reuse_variant and task == "classification":  # RevFRF's trees vote; scikit-learn's
        votes = np.stack(  # forest averages their class probabilities
            [ref.classes_[t.predict(np.asarray(d["x_test"], dtype=float)).astype(int)]
             for t in ref.estimators_]
        )  # fmt: skip
        idx = np.searchsorted(ref.classes_, votes)
        hard = ref.classes_[[np.bincount(col, minlength=len(ref.classes_)).argmax()
                             for col in idx.T]]  # fmt: skip
        rows.append(
            {
                "model": "scikit-learn RF, majority vote of the trees",
                "revoked": 0,
                **metrics(task, d["y_test"], hard),
            }
        )
    if reuse_variant:  # scikit-learn with RevFRF's ceil(sqrt(|F|)) features per split
        ref = cls(
            n_estimators=trees, max_depth=depth, random_state=seed, n_jobs=1, max_features="sqrt"
        )
        ref.fit(np.asarray(d["x_train"], dtype=float), d["y_train"])
        rows.append(
            {
                "model": "scikit-learn RF, sqrt(|F|) features per split",
                "revoked": 0,
                **metrics(task, d["y_test"], ref.predict(np.asarray(d["x_test"], dtype=float))),
            }
        )
    start = time.perf_counter()
    settings = {
        "task": task, "n_trees": trees, "max_depth": depth, "key_bits": key_bits, "seed": seed,
        "rho": rho, "candidates": candidates,
    }  # fmt: skip
    model = RevFRF(**settings).fit(train, d["y_train"])
    fit_seconds = time.perf_counter() - start
    names = list(train)
    if reuse_variant:
        variant = RevFRF(**settings, reuse_features=True).fit(train, d["y_train"])
        rows.append(
            {
                "model": "RevFRF, features reusable on a path",
                "revoked": 0,
                **metrics(task, d["y_test"], variant.predict_plain(test)),
            }
        )
    done = 0
    for k in sorted(set(revoke)):
        while done < k:
            if progress:
                progress(f"{dataset}: revoking {names[done]}")
            model.revoke(names[done], level=level)
            done += 1
        rest = {n: v for n, v in test.items() if n not in model.revoked}
        rows.append(
            {
                "model": "RevFRF",
                "revoked": k,
                **metrics(task, d["y_test"], model.predict_plain(rest)),
            }
        )
    return {
        "dataset": dataset,
        "description": d["description"],
        "task": task,
        "participants": len(names),
        "train": len(d["y_train"]),
        "test": len(d["y_test"]),
        "trees": trees,
        "depth": depth,
        "key_bits": key_bits,
        "rho": rho,
        "candidates": candidates,
        "fit_seconds": fit_seconds,
        "revoked_participants": names[:done],
        "rows": rows,
        "report": model.report(),
    }
