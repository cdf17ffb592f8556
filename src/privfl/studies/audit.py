"""Whole audits as the CLI runs them: train the target model with SmartCryptNN's settings
(keeping snapshots), run one attack per exposed layer, return a JSON-ready dict."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from privfl.audit import data as audit_data
from privfl.errors import InputError
from privfl.training.mlp import MLP

Progress = Callable[[int], None]


def train_with_snapshots(
    sizes: list[int],
    x: np.ndarray,
    y: np.ndarray,
    epochs: int,
    batch_size: int,
    lr: float,
    every: int = 0,
    seed: int = 0,
    init_range: float | None = 1.0,
) -> tuple[MLP, list[tuple[int, MLP]]]:
    """Train an MLP; snapshots ``(epoch, copy)`` every ``every`` epochs (and the last)."""
    if every < 0:
        raise InputError("the snapshot interval must be >= 0 (0 = final model only)")
    snaps: list[tuple[int, MLP]] = []

    def keep(epoch: int, model: MLP) -> None:
        if (every and epoch % every == 0) or epoch == epochs:
            snaps.append((epoch, model.copy()))

    model = MLP(sizes, seed=seed, init_range=init_range)
    model.train(x, y, epochs, batch_size, lr, shuffle_seed=seed, on_epoch=keep)
    return model, snaps


def _accuracy(model: MLP, x: np.ndarray, y: np.ndarray) -> float:
    return float((model.predict(x) == y).mean())


def membership_audit(
    dataset: str = "digits8x8",
    every: int = 0,
    runs: int = 4,
    attack_epochs: int = 100,
    seed: int = 0,
    progress: Progress | None = None,
    on_total: Callable[[int], None] | None = None,
    layers: list[int] | None = None,
) -> dict[str, Any]:
    """Per-layer membership table of the trained model (``layers``) and, with ``every``,
    the same attack on snapshots every ``every`` epochs (``over_training``). ``layers``
    restricts the attack to those exposed layers (1-based; default all)."""
    from privfl.audit.membership import exposed_layers, membership_inference

    start = time.perf_counter()
    s = audit_data.setting(dataset, seed)
    chosen = exposed_layers(layers, len(s.sizes) - 1)  # checked before the long training
    model, snaps = train_with_snapshots(
        s.sizes, s.x_members, s.y_members, s.epochs, s.batch_size, s.lr, every, seed
    )
    per_model = (2 * len(chosen) + (model.layers in chosen)) * runs
    targets = snaps if every else [(s.epochs, model)]
    if on_total:
        on_total(per_model * len(targets))
    over = []
    for epoch, snap in targets:
        rows = membership_inference(
            snap,
            (s.x_members, s.y_members),
            (s.x_non_members, s.y_non_members),
            layers=chosen,
            runs=runs,
            epochs=attack_epochs,
            seed=seed,
            progress=progress,
        )
        over += [{"epoch": epoch, **r.to_dict()} for r in rows]
    final = [r for r in over if r["epoch"] == s.epochs]
    return {
        "attack": "membership inference (Nasr et al. 2019, supervised white-box, per layer)",
        "dataset": dataset,
        "description": s.description,
        "model": {"sizes": s.sizes, "epochs": s.epochs, "batch": s.batch_size, "lr": s.lr},
        "members": len(s.y_members),
        "non_members": len(s.y_non_members),
        "train_accuracy": _accuracy(model, s.x_members, s.y_members),
        "test_accuracy": _accuracy(model, s.x_non_members, s.y_non_members),
        "attack_epochs": attack_epochs,
        "layers": [{k: v for k, v in r.items() if k != "epoch"} for r in final],
        "over_training": over if every else [],
        "seconds": time.perf_counter() - start,
    }


@dataclass(frozen=True)
class Hyper:
    """A target model's hidden layers and training hyper-parameters."""

    hidden: tuple[int, ...]
    epochs: int
    batch: int
    lr: float


# sigmoid/MSE on 4096 inputs needs 1/sqrt(fan_in) initialisation and single-example steps
FACES = Hyper((100,), 50, 1, 0.3)
FACES_TRAIN_PER_PERSON = 7
ADULT = Hyper((32, 16), 30, 10, 0.5)
ADULT_ROWS = 6000


def inversion_audit(
    dataset: str = "faces",
    every: int = 10,
    classes: list[int] | None = None,
    exposed: list[int] | None = None,
    steps: int = 300,
    seed: int = 0,
    plot: str | None = None,
    progress: Progress | None = None,
    on_total: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Model inversion per epoch snapshot on Olivetti faces (MLP 4096-100-40, 7 images per
    person for training, batch 1, lr 0.3, 50 epochs) or on the digits setting."""
    from privfl.audit.inversion import model_inversion, plot_inversion

    start = time.perf_counter()
    if dataset == "faces":
        x, y = audit_data.load_faces()
        train = np.concatenate([np.flatnonzero(y == k)[:FACES_TRAIN_PER_PERSON] for k in range(40)])
        test = np.setdiff1d(np.arange(y.size), train)
        xtr, ytr, xte, yte = x[train], y[train], x[test], y[test]
        sizes = [x.shape[1], *FACES.hidden, 40]
        epochs, batch, lr = FACES.epochs, FACES.batch, FACES.lr
        shape, init, desc = (64, 64), None, "AT&T / Olivetti faces, 40 people"
    elif dataset in audit_data.SETTINGS:
        s = audit_data.setting(dataset, seed)
        xtr, ytr, xte, yte = s.x_members, s.y_members, s.x_non_members, s.y_non_members
        sizes, epochs, batch, lr, init = s.sizes, s.epochs, s.batch_size, s.lr, 1.0
        side = round(float(np.sqrt(sizes[0])))
        shape, desc = (side, side), s.description
    else:
        raise InputError("inversion dataset must be 'faces' or one of the membership settings")
    model, snaps = train_with_snapshots(sizes, xtr, ytr, epochs, batch, lr, every, seed, init)
    wanted = classes if classes is not None else sorted(set(ytr.tolist()))
    if on_total:
        on_total(len(snaps) * len(wanted))
    res = model_inversion(
        snaps, xtr, ytr, exposed=exposed, classes=wanted, steps=steps, progress=progress
    )
    out: dict[str, Any] = {
        "attack": "model inversion (Fredrikson et al. 2015, MI-FACE)",
        "dataset": dataset,
        "description": desc,
        "model": {"sizes": sizes, "epochs": epochs, "batch": batch, "lr": lr},
        "train_accuracy": _accuracy(model, xtr, ytr),
        "test_accuracy": _accuracy(model, xte, yte),
        "exposed_layers": exposed or list(range(1, model.layers + 1)),
        "candidate_classes": len(set(ytr.tolist())),
    }
    if isinstance(res, str):
        out |= {"result": res, "snapshots": []}
    else:
        out |= {"result": "ran", "snapshots": [r.to_dict() for r in res]}
        if plot and shape[0] * shape[1] == sizes[0]:
            means = np.stack([xtr[ytr == k].mean(axis=0) for k in wanted])
            plot_inversion(res, means, shape, plot)
    out["seconds"] = time.perf_counter() - start
    return out


def property_audit(
    every: int = 10,
    layers: list[int] | None = None,
    runs: int = 4,
    batches: int = 200,
    seed: int = 0,
    progress: Progress | None = None,
    on_total: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Property inference on Adult (MLP in-32-16-2, batch 10, lr 0.5, 30 epochs)."""
    from privfl.audit.property import PROPERTY_DESCRIPTION, adult_property_data, property_inference

    start = time.perf_counter()
    x, y, prop = adult_property_data(ADULT_ROWS, seed)
    sizes = [x.shape[1], *ADULT.hidden, 2]
    model, snaps = train_with_snapshots(
        sizes, x, y, ADULT.epochs, ADULT.batch, ADULT.lr, every, seed
    )
    layer_list = layers or list(range(1, model.layers + 1))
    if on_total:
        on_total(len(layer_list) * runs)
    rows = property_inference(
        snaps, x, y, prop, layers=layer_list, batches=batches, runs=runs, seed=seed,
        progress=progress,
    )  # fmt: skip
    return {
        "attack": "property inference (Melis et al. 2019, random forest on batch gradients)",
        "dataset": "adult",
        "description": PROPERTY_DESCRIPTION,
        "model": {"sizes": sizes, "epochs": ADULT.epochs, "batch": ADULT.batch, "lr": ADULT.lr},
        "rows": ADULT_ROWS,
        "train_accuracy": _accuracy(model, x, y),
        "snapshots": [e for e, _ in snaps],
        "layers": [r.to_dict() for r in rows],
        "seconds": time.perf_counter() - start,
    }
