"""Whole audits as the CLI runs them: train the target model with SmartCryptNN's settings
(keeping snapshots), run one attack per exposed layer, return a frozen result with
``to_dict()`` for JSON. Every argument (layers, classes, seeds) is checked before training."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from privfl._typing import FloatArray, IntArray
from privfl.audit import data as audit_data
from privfl.audit.inversion import InversionResult
from privfl.audit.membership import MembershipRow, exposed_layers
from privfl.audit.property import PropertyRow
from privfl.datasets import check_seed
from privfl.errors import InputError
from privfl.progress import ProgressEvent
from privfl.training.mlp import MLP

Advance = Callable[[int], None]  # the CLI's bar: called with the steps just finished


def ticks(advance: Advance | None) -> Callable[[ProgressEvent], None] | None:
    """An audit function's :class:`~privfl.progress.ProgressEvent` callback that advances
    the CLI's bar by one step per event (the bar's total is set from the whole study)."""
    if advance is None:
        return None
    return lambda _event: advance(1)


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


@dataclass(frozen=True)
class TargetModel:
    """The audited MLP: layer sizes (input, hidden..., classes) and training settings."""

    sizes: tuple[int, ...]
    hyper: Hyper

    @classmethod
    def of(cls, inputs: int, hyper: Hyper, classes: int) -> TargetModel:
        return cls((inputs, *hyper.hidden, classes), hyper)

    @property
    def layers(self) -> int:
        return len(self.sizes) - 1

    def to_dict(self) -> dict[str, Any]:
        """The sizes and the training settings; the settings are ``None`` when not known (a
        model file records only its layers), never a placeholder 0."""
        h = self.hyper
        if h.batch == 0:
            return {"sizes": list(self.sizes), "epochs": None, "batch": None, "lr": None}
        return {"sizes": list(self.sizes), "epochs": h.epochs, "batch": h.batch, "lr": h.lr}


@dataclass(frozen=True)
class MembershipAudit:
    """Per-layer membership inference on the trained model, and on snapshots across training
    (``over_training``: ``(epoch, row)`` pairs; empty unless snapshots were asked for)."""

    dataset: str
    description: str
    model: TargetModel
    members: int
    non_members: int
    train_accuracy: float
    test_accuracy: float
    attack_epochs: int
    layers: tuple[MembershipRow, ...]
    over_training: tuple[tuple[int, MembershipRow], ...]
    seconds: float
    attack: str = "membership inference (Nasr et al. 2019, supervised white-box, per layer)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "attack": self.attack,
            "dataset": self.dataset,
            "description": self.description,
            "model": self.model.to_dict(),
            "members": self.members,
            "non_members": self.non_members,
            "train_accuracy": self.train_accuracy,
            "test_accuracy": self.test_accuracy,
            "attack_epochs": self.attack_epochs,
            "layers": [r.to_dict() for r in self.layers],
            "over_training": [{"epoch": e, **r.to_dict()} for e, r in self.over_training],
            "seconds": self.seconds,
        }


@dataclass(frozen=True)
class InversionAudit:
    """Model inversion per snapshot; ``result`` is "ran" or why it could not run."""

    dataset: str
    description: str
    model: TargetModel
    train_accuracy: float
    test_accuracy: float
    exposed_layers: tuple[int, ...]
    candidate_classes: int
    result: str
    snapshots: tuple[InversionResult, ...]
    seconds: float
    attack: str = "model inversion (Fredrikson et al. 2015, MI-FACE)"

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in vars(self).items() if k not in ("model", "snapshots")}
        return out | {
            "model": self.model.to_dict(),
            "exposed_layers": list(self.exposed_layers),
            "snapshots": [s.to_dict() for s in self.snapshots],
        }


@dataclass(frozen=True)
class PropertyAudit:
    """Property inference per exposed layer over the training snapshots."""

    dataset: str
    description: str
    model: TargetModel
    rows: int
    train_accuracy: float
    snapshots: tuple[int, ...]
    layers: tuple[PropertyRow, ...]
    seconds: float
    attack: str = "property inference (Melis et al. 2019, random forest on batch gradients)"

    def to_dict(self) -> dict[str, Any]:
        out = {k: v for k, v in vars(self).items() if k not in ("model", "layers", "snapshots")}
        return out | {
            "model": self.model.to_dict(),
            "snapshots": list(self.snapshots),
            "layers": [r.to_dict() for r in self.layers],
        }


def train_with_snapshots(
    sizes: Sequence[int],
    x: FloatArray,
    y: IntArray,
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

    model = MLP(list(sizes), seed=seed, init_range=init_range)
    model.train(x, y, epochs, batch_size, lr, shuffle_seed=seed, on_epoch=keep)
    return model, snaps


def _accuracy(model: MLP, x: FloatArray, y: IntArray) -> float:
    return float((model.predict(x) == y).mean())


def check_count(name: str, value: int, low: int = 1) -> None:
    """:class:`InputError` unless ``value`` is an integer of at least ``low`` (the audits
    check their counts first; the CLI before its progress line)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        raise InputError(f"{name} must be an integer >= {low}; got {value!r}")


def membership_audit(
    dataset: str = "digits8x8",
    every: int = 0,
    runs: int = 4,
    attack_epochs: int = 100,
    seed: int = 0,
    progress: Advance | None = None,
    on_total: Callable[[int], None] | None = None,
    layers: Sequence[int] | None = None,
) -> MembershipAudit:
    """Per-layer membership table of the trained model (``layers``, 1-based; default all)
    and, with ``every``, the same attack on snapshots every ``every`` epochs."""
    from privfl.audit.membership import membership_inference

    start = time.perf_counter()
    check_count("runs", runs)
    check_count("attack_epochs", attack_epochs)
    s = audit_data.setting(dataset, check_seed(seed))
    chosen = exposed_layers(
        layers, len(s.sizes) - 1, "--layers"
    )  # checked before the long training
    model, snaps = train_with_snapshots(
        s.sizes, s.x_members, s.y_members, s.epochs, s.batch_size, s.lr, every, seed
    )
    per_model = (2 * len(chosen) + (model.layers in chosen)) * runs
    targets = snaps if every else [(s.epochs, model)]
    if on_total:
        on_total(per_model * len(targets))
    over: list[tuple[int, MembershipRow]] = []
    for epoch, snap in targets:
        rows = membership_inference(
            snap,
            (s.x_members, s.y_members),
            (s.x_non_members, s.y_non_members),
            layers=chosen,
            runs=runs,
            epochs=attack_epochs,
            seed=seed,
            progress=ticks(progress),
        )
        over += [(epoch, r) for r in rows]
    return MembershipAudit(
        dataset,
        s.description,
        TargetModel(tuple(s.sizes), Hyper(s.hidden, s.epochs, s.batch_size, s.lr)),
        len(s.y_members),
        len(s.y_non_members),
        _accuracy(model, s.x_members, s.y_members),
        _accuracy(model, s.x_non_members, s.y_non_members),
        attack_epochs,
        tuple(r for e, r in over if e == s.epochs),
        tuple(over) if every else (),
        time.perf_counter() - start,
    )


def inversion_audit(
    dataset: str = "faces",
    every: int = 10,
    classes: Sequence[int] | None = None,
    exposed: Sequence[int] | None = None,
    steps: int = 300,
    seed: int = 0,
    plot: str | None = None,
    progress: Advance | None = None,
    on_total: Callable[[int], None] | None = None,
) -> InversionAudit:
    """Model inversion per epoch snapshot on Olivetti faces (MLP 4096-100-40, 7 images per
    person for training, batch 1, lr 0.3, 50 epochs) or on a membership setting. Exposed
    layers and classes are checked against the model and the data before training."""
    from privfl.audit.inversion import check_classes, model_inversion, plot_inversion

    start = time.perf_counter()
    check_count("steps", steps)
    check_seed(seed)
    if dataset == "faces":
        x, y = audit_data.load_faces()
        train = np.concatenate([np.flatnonzero(y == k)[:FACES_TRAIN_PER_PERSON] for k in range(40)])
        test = np.setdiff1d(np.arange(y.size), train)
        xtr, ytr, xte, yte = x[train], y[train], x[test], y[test]
        target = TargetModel.of(x.shape[1], FACES, 40)
        shape, init, desc = (64, 64), None, "AT&T / Olivetti faces, 40 people"
    elif dataset in audit_data.SETTINGS:
        s = audit_data.setting(dataset, seed)
        xtr, ytr, xte, yte = s.x_members, s.y_members, s.x_non_members, s.y_non_members
        hyper = Hyper(s.hidden, s.epochs, s.batch_size, s.lr)
        target, init = TargetModel(tuple(s.sizes), hyper), 1.0
        side = round(float(np.sqrt(target.sizes[0])))
        shape, desc = (side, side), s.description
    else:
        raise InputError("inversion dataset must be 'faces' or one of the membership settings")
    seen = tuple(
        exposed_layers(exposed, target.layers, "--exposed")
    )  # before the training, not after
    wanted = check_classes(classes, ytr)
    h = target.hyper
    model, snaps = train_with_snapshots(
        target.sizes, xtr, ytr, h.epochs, h.batch, h.lr, every, seed, init
    )
    if on_total:
        on_total(len(snaps) * len(wanted))
    res = model_inversion(
        snaps, xtr, ytr, exposed=list(seen), classes=wanted, steps=steps, progress=ticks(progress)
    )
    snapshots: tuple[InversionResult, ...] = () if isinstance(res, str) else tuple(res)
    if snapshots and plot and shape[0] * shape[1] == target.sizes[0]:
        means = np.stack([xtr[ytr == k].mean(axis=0) for k in wanted])
        plot_inversion(snapshots, means, shape, plot)
    return InversionAudit(
        dataset,
        desc,
        target,
        _accuracy(model, xtr, ytr),
        _accuracy(model, xte, yte),
        seen,
        len(set(ytr.tolist())),
        res if isinstance(res, str) else "ran",
        snapshots,
        time.perf_counter() - start,
    )


def property_audit(
    every: int = 10,
    layers: Sequence[int] | None = None,
    runs: int = 4,
    batches: int = 200,
    seed: int = 0,
    progress: Advance | None = None,
    on_total: Callable[[int], None] | None = None,
) -> PropertyAudit:
    """Property inference on Adult (MLP in-32-16-2, batch 10, lr 0.5, 30 epochs); ``layers``
    is checked against the model before training."""
    from privfl.audit.property import PROPERTY_DESCRIPTION, adult_property_data, property_inference

    start = time.perf_counter()
    check_count("runs", runs)
    check_count("batches", batches, 2)
    x, y, prop = adult_property_data(ADULT_ROWS, check_seed(seed))
    target = TargetModel.of(x.shape[1], ADULT, 2)
    layer_list = exposed_layers(layers, target.layers, "--layers")
    model, snaps = train_with_snapshots(
        target.sizes, x, y, ADULT.epochs, ADULT.batch, ADULT.lr, every, seed
    )
    if on_total:
        on_total(len(layer_list) * runs)
    rows = property_inference(
        snaps, x, y, prop, layers=layer_list, batches=batches, runs=runs, seed=seed,
        progress=ticks(progress),
    )  # fmt: skip
    return PropertyAudit(
        "adult",
        PROPERTY_DESCRIPTION,
        target,
        ADULT_ROWS,
        _accuracy(model, x, y),
        tuple(e for e, _ in snaps),
        tuple(rows),
        time.perf_counter() - start,
    )


def plot_membership(audit: MembershipAudit, path: str) -> None:
    """Bar chart of the per-layer attack accuracy (mean and max) and, with snapshots, the
    accuracy of every (layer, features) attack across training."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = 2 if audit.over_training else 1
    fig, axes = plt.subplots(1, panels, figsize=(6 * panels, 4), squeeze=False)
    ax = axes[0, 0]
    rows = audit.layers
    labels = [f"L{r.layer}\n" + r.features.replace("+", "+\n") for r in rows]
    ax.bar(range(len(rows)), [r.accuracy for r in rows], color="tab:blue", label="mean")
    ax.scatter(range(len(rows)), [r.accuracy_max for r in rows], color="k", label="max")
    ax.axhline(0.5, color="gray", linestyle="--", linewidth=1)
    ax.set_xticks(range(len(rows)), labels, fontsize=6)
    ax.set_ylim(0.4, 1.0)
    ax.set_ylabel("attack accuracy")
    ax.set_title(f"Membership inference per layer ({audit.dataset})")
    ax.legend(fontsize=7)
    if panels == 2:
        ax = axes[0, 1]
        for key in sorted({(r.layer, r.features) for _, r in audit.over_training}):
            pts = [(e, r.accuracy) for e, r in audit.over_training if (r.layer, r.features) == key]
            ax.plot(*zip(*pts, strict=True), marker="o", markersize=3, label=f"L{key[0]} {key[1]}")
        ax.axhline(0.5, color="gray", linestyle="--", linewidth=1)
        ax.set_xlabel("training epoch")
        ax.set_ylabel("attack accuracy")
        ax.set_title("Across training")
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
