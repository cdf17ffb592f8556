"""Model inversion (Fredrikson et al. 2015): reconstruct a class representative by gradient
descent on the input, maximising the model's confidence in that class.

The cost for class ``k`` is ``c(x) = 1 - f_k(x) + mean_{j != k} f_j(x)``: Fredrikson's
``1 - f_k`` on softmax outputs, and since this MLP's sigmoid outputs are not normalised, the
second term keeps the descent away from an input that every class accepts. Its gradient with
respect to ``x`` runs the backward pass through every layer down to layer 1's weight matrix,
so the attacker needs the first layer: with layer 1 encrypted (not in ``exposed``) the attack
reports "not possible in this setting" instead of running.

Starting from a uniform mid-gray input, the attack takes ``steps`` gradient steps whose
largest pixel change is ``lr`` (the gradient is normalised by its largest entry: sigmoid/MSE
gradients are tiny and vary by orders of magnitude between snapshots, so a fixed step would
stall or overshoot), clips pixels to [0, 1], and stops early when the cost has not improved
by ``tolerance`` for ``patience`` steps (Fredrikson's MI-FACE, without the denoising
post-processing).

Per epoch snapshot the report gives, for each attacked class, the root-mean-square distance
between the reconstruction and the class mean of the training images, the same distance from
the gray start (the baseline an attack must beat), their Pearson correlation, and whether
the reconstruction correlates best with its own class mean among all class means
("identified"; correlation ignores the overall brightness the descent drifts to).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from privfl._typing import FloatArray
from privfl.audit.membership import exposed_layers
from privfl.errors import InputError
from privfl.progress import Progress, Steps
from privfl.training.mlp import MLP

NOT_POSSIBLE = "not possible in this setting"


@dataclass(frozen=True)
class InversionResult:
    """One snapshot: per class, the reconstruction and its distances."""

    epoch: int
    classes: list[int]
    rmse: list[float]
    baseline_rmse: list[float]
    identified: list[bool]
    correlation: list[float]
    confidence: list[float]
    images: FloatArray = field(repr=False)

    def to_dict(self) -> dict[str, Any]:
        return {
            "epoch": self.epoch,
            "classes": self.classes,
            "rmse": self.rmse,
            "mean_rmse": float(np.mean(self.rmse)),
            "baseline_rmse": self.baseline_rmse,
            "mean_baseline_rmse": float(np.mean(self.baseline_rmse)),
            "identified": self.identified,
            "identification_rate": float(np.mean(self.identified)),
            "correlation": self.correlation,
            "mean_correlation": float(np.mean(self.correlation)),
            "confidence": self.confidence,
        }


def invert_class(
    model: MLP,
    label: int,
    steps: int = 2000,
    lr: float = 0.1,
    patience: int = 100,
    tolerance: float = 1e-6,
    start: FloatArray | None = None,
) -> tuple[FloatArray, float]:
    """MI-FACE for one class: the reconstructed input and the model's confidence in it."""
    if not 0 <= label < model.sizes[-1]:
        raise InputError(f"class must be in 0..{model.sizes[-1] - 1}")
    x = np.full((1, model.sizes[0]), 0.5) if start is None else np.array(start, dtype=float)[None]
    classes = model.sizes[-1]
    upstream = np.full((1, classes), 1.0 / max(1, classes - 1))  # d c / d a_L
    upstream[0, label] = -1.0
    best_x, best_cost, stale = x.copy(), np.inf, 0
    for _ in range(steps):
        out = model.predict_proba(x)[0]
        cost = 1.0 - out[label] + (out.sum() - out[label]) / max(1, classes - 1)
        if cost < best_cost - tolerance:
            best_x, best_cost, stale = x.copy(), cost, 0
        else:
            stale += 1
            if stale >= patience:
                break
        g = model.input_gradient(x, upstream)
        x = np.clip(x - lr * g / (np.abs(g).max() + 1e-12), 0.0, 1.0)
    return best_x[0], float(model.predict_proba(best_x)[0, label])


def model_inversion(
    snapshots: Sequence[tuple[int, MLP]],
    x_train: FloatArray,
    y_train: npt.ArrayLike,
    exposed: Sequence[int] | None = None,
    classes: Sequence[int] | None = None,
    steps: int = 2000,
    lr: float = 0.1,
    progress: Progress | None = None,
) -> list[InversionResult] | str:
    """Reconstruct each class (default: all) from every ``(epoch, model)`` snapshot.

    ``exposed`` lists the layers the attacker sees (1-based; default all): without layer 1 the
    result is the string :data:`NOT_POSSIBLE`. ``progress`` gets a
    :class:`~privfl.progress.ProgressEvent` (step ``"inversion"``) after each class of each
    snapshot."""
    if not snapshots:
        raise InputError("model_inversion needs at least one (epoch, model) snapshot")
    seen = exposed_layers(exposed, snapshots[0][1].layers)  # a layer the model lacks: refused
    x = np.asarray(x_train, dtype=np.float64)
    y = np.asarray(y_train, dtype=np.int64)
    labels = check_classes(classes, y)
    if 1 not in seen:
        return NOT_POSSIBLE
    means = {k: x[y == k].mean(axis=0) for k in sorted(set(y.tolist()))}
    keys = list(means)
    mean_matrix = np.stack([means[k] for k in keys])
    out = []
    reported = Steps(progress, "inversion", len(snapshots) * len(labels))
    for epoch, model in snapshots:
        images, rmse, base, ident, corr, conf = [], [], [], [], [], []
        for k in labels:
            img, c = invert_class(model, k, steps=steps, lr=lr)
            row = keys.index(k)
            images.append(img)
            rmse.append(float(np.sqrt(((mean_matrix[row] - img) ** 2).mean())))
            base.append(float(np.sqrt(((mean_matrix[row] - 0.5) ** 2).mean())))
            r = _correlations(mean_matrix, img)
            corr.append(float(r[row]))
            ident.append(bool(int(np.argmax(r)) == row))
            conf.append(c)
            reported.tick()
        out.append(InversionResult(epoch, labels, rmse, base, ident, corr, conf, np.stack(images)))
    return out


def check_classes(classes: Sequence[int] | None, y_train: npt.ArrayLike) -> list[int]:
    """The classes to reconstruct: all training classes (``None``) or distinct ones that have
    training images, else InputError naming the available range."""
    present = sorted(set(np.asarray(y_train).tolist()))
    if classes is None:
        return present
    wanted = list(dict.fromkeys(classes))
    if not wanted or any(isinstance(k, bool) or k not in present for k in wanted):
        raise InputError(
            f"classes must be training classes ({present[0]}..{present[-1]}); got {list(classes)}"
        )
    return [int(k) for k in wanted]


def _correlations(matrix: FloatArray, v: FloatArray) -> FloatArray:
    """Pearson correlation of ``v`` with every row of ``matrix`` (0 for a constant ``v``)."""
    a = matrix - matrix.mean(axis=1, keepdims=True)
    b = v - v.mean()
    den = np.linalg.norm(a, axis=1) * np.linalg.norm(b)
    return np.asarray(np.where(den > 0, a @ b / np.where(den > 0, den, 1.0), 0.0))


def plot_inversion(
    results: Sequence[InversionResult],
    class_means: FloatArray,
    shape: tuple[int, int],
    path: str,
    columns: int = 8,
) -> None:
    """Rows: the class means, then one row per snapshot (first ``columns`` classes)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    k = min(columns, len(results[0].classes))
    fig, axes = plt.subplots(
        len(results) + 1, k, figsize=(1.3 * k, 1.4 * (len(results) + 1)), squeeze=False
    )
    for j in range(k):
        axes[0, j].imshow(class_means[j].reshape(shape), cmap="gray", vmin=0, vmax=1)
        axes[0, j].set_title(f"class {results[0].classes[j]}", fontsize=7)
        for i, res in enumerate(results, start=1):
            axes[i, j].imshow(res.images[j].reshape(shape), cmap="gray", vmin=0, vmax=1)
            if j == 0:
                axes[i, j].set_ylabel(f"epoch {res.epoch}", fontsize=7)
    for ax in axes.ravel():
        ax.set_xticks([])
        ax.set_yticks([])
    axes[0, 0].set_ylabel("class mean", fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
