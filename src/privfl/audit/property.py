"""Property inference from batch gradients (Melis et al. 2019), gray-box.

An attacker who observes the gradient updates of the exposed layers (as a federated
aggregator does) and holds auxiliary data labelled with a property trains a random forest
(50 trees) on flattened batch gradients to tell batches *with* the property from batches
*without* it. The property here is a sensitive attribute that is not a model input: on UCI
Adult, "the batch contains women" (sex is removed from the model's inputs; the task is
income > 50K). A batch with the property holds ``fraction`` women, one without holds none.

Per exposed layer the report gives the forest's accuracy (baseline 0.5) and ROC AUC on held-out
batches, mean and max over the runs; gradients are taken at snapshots of the target model
during training, as the attacker sees updates over time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from privfl._typing import BoolArray, FloatArray, IntArray
from privfl.audit.membership import exposed_layers
from privfl.errors import InputError
from privfl.progress import Progress, Steps
from privfl.training.mlp import MLP, one_hot

PROPERTY_DESCRIPTION = (
    "UCI Adult, task income > 50K; property: the batch contains women (sex is not a model input)"
)


@dataclass(frozen=True)
class PropertyRow:
    """Property inference on one exposed layer: mean (and max) over the runs."""

    layer: int
    accuracy: float
    auc: float
    runs: int
    accuracy_max: float
    auc_max: float

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


def adult_property_data(rows: int = 6000, seed: int = 0) -> tuple[FloatArray, IntArray, BoolArray]:
    """Adult training rows as model inputs without ``sex`` (standardised numeric columns and
    one-hot categories), the income label and the property (sex == Female)."""
    import pandas as pd

    from privfl.datasets import load_adult

    df = load_adult("train").dropna()
    df = df.sample(n=min(rows, len(df)), random_state=seed)
    prop = (df["sex"] == "Female").to_numpy()
    numeric = ["age", "education_num", "capital_gain", "capital_loss", "hours_per_week"]
    num = df[numeric].astype(float)
    num[["capital_gain", "capital_loss"]] = np.log1p(num[["capital_gain", "capital_loss"]])
    num = (num - num.mean()) / num.std()
    cats = pd.get_dummies(
        df[["workclass", "marital_status", "occupation", "relationship", "race"]], dtype=float
    )
    x = np.hstack([num.to_numpy(), cats.to_numpy()])
    return x, df["income"].to_numpy(dtype=np.int64), prop


def batch_gradients(
    model: MLP,
    x: FloatArray,
    y: IntArray,
    batches: Sequence[IntArray],
    layers: Sequence[int],
) -> FloatArray:
    """Flattened mean weight and bias gradients of each batch, exposed layers only."""
    yo = one_hot(y, model.sizes[-1])
    out = []
    for idx in batches:
        gw, gb = model.gradients(x[idx], yo[idx])
        out.append(np.concatenate([np.r_[gw[i - 1].ravel(), gb[i - 1]] for i in layers]))
    return np.asarray(out)


def sample_batches(
    prop: BoolArray,
    count: int,
    size: int,
    fraction: float,
    rng: np.random.Generator,  # not secret: batch draws
) -> tuple[list[IntArray], IntArray]:
    """``count`` batches with the property (``fraction`` of the batch has it) and ``count``
    without; returns the batches and their property labels."""
    with_p, without = np.flatnonzero(prop), np.flatnonzero(~prop)
    k = max(1, round(fraction * size))
    if with_p.size < k or without.size < size:
        raise InputError("not enough rows with and without the property for the batches")
    batches = [
        np.r_[rng.choice(with_p, k, False), rng.choice(without, size - k, False)]
        for _ in range(count)
    ] + [rng.choice(without, size, False) for _ in range(count)]
    return batches, np.r_[np.ones(count, int), np.zeros(count, int)]


def _split(
    labels: IntArray,
    rng: np.random.Generator,  # not secret: batch split
) -> tuple[IntArray, IntArray]:
    """A random half of the batches (the forest's training set) and the other half, each with
    both classes: a half without one class is drawn again (the first draw is kept when it has
    both, so results of settings that never hit it are unchanged). Needs two rows per class,
    which ``batches >= 2`` gives."""
    if min(np.count_nonzero(labels), np.count_nonzero(labels == 0)) < 2:
        raise InputError("property inference needs at least 2 batches with and 2 without")
    while True:
        order = rng.permutation(labels.size)
        tr, te = order[: labels.size // 2], order[labels.size // 2 :]
        if len(set(labels[tr].tolist())) == 2 and len(set(labels[te].tolist())) == 2:
            return tr, te


def property_inference(
    snapshots: Sequence[tuple[int, MLP]],
    x: FloatArray,
    y: npt.ArrayLike,
    prop: npt.ArrayLike,
    layers: Sequence[int] | None = None,
    batches: int = 200,
    batch_size: int = 10,
    fraction: float = 0.5,
    runs: int = 4,
    seed: int = 0,
    progress: Progress | None = None,
) -> list[PropertyRow]:
    """Per exposed layer, a 50-tree random forest on batch gradients of every snapshot: half of
    the batches train it, the other half (fresh batches) measure accuracy and AUC.
    ``progress`` gets a :class:`~privfl.progress.ProgressEvent` (step ``"property"``) after
    each run."""
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.metrics import roc_auc_score

    if not snapshots:
        raise InputError("property_inference needs at least one (epoch, model) snapshot")
    if batches < 2:
        raise InputError("batches must be an integer >= 2 (two halves, each with both kinds)")
    x = np.asarray(x, dtype=np.float64)
    y_arr = np.asarray(y, dtype=np.int64)
    p = np.asarray(prop, dtype=bool)
    if not (x.shape[0] == y_arr.size == p.size):
        raise InputError("x, y and the property must have the same number of rows")
    layer_list = exposed_layers(layers, snapshots[0][1].layers)
    steps = Steps(progress, "property", len(layer_list) * runs)
    rows = []
    for layer in layer_list:
        res = []
        for run in range(runs):
            rng = np.random.default_rng(seed + 7919 * run + layer)  # not secret: batch draws
            feats, labels = [], []
            for _, model in snapshots:
                b, lab = sample_batches(p, batches, batch_size, fraction, rng)
                feats.append(batch_gradients(model, x, y_arr, b, [layer]))
                labels.append(lab)
            f, lab = np.vstack(feats), np.concatenate(labels)
            tr, te = _split(lab, rng)
            forest = RandomForestClassifier(n_estimators=50, random_state=seed + run, n_jobs=1)
            forest.fit(f[tr], lab[tr])
            score = forest.predict_proba(f[te])[:, 1]
            res.append((float(((score >= 0.5) == lab[te]).mean()), roc_auc_score(lab[te], score)))
            steps.tick()
        arr = np.asarray(res)
        rows.append(
            PropertyRow(
                layer,
                float(arr[:, 0].mean()),
                float(arr[:, 1].mean()),
                runs,
                float(arr[:, 0].max()),
                float(arr[:, 1].max()),
            )
        )
    return rows
