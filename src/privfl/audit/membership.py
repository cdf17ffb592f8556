"""Layer-by-layer white-box membership inference (Nasr et al. 2019, supervised), gray-box:
the attacker sees only the exposed layer ``i``.

For layer ``i`` the attack model gets (a) layer ``i``'s output alone, or (b) the output, the
gradient of layer ``i``'s weight matrix and the one-hot label, plus (c) the loss for the output
layer. Architecture as in Nasr et al.: a dense branch (->64) per output, a branch over the
weight gradient whose kernel spans one row of output units (100 filters, written as the
equivalent shared dense map; then dense 512->256->64), dense branches for the label and the
loss, combined by 256->128->64->1 (a logit; its sigmoid is the membership probability);
Adam (lr 1e-3), 100 epochs, balanced member/non-member batches. The attacker knows half of the
members and as many non-members; results are on the held-out half: accuracy (baseline 0.5),
ROC AUC and TPR at 1% FPR, mean and max over the runs.

PyTorch is needed only here (extra ``privfl[audit]``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from privfl._typing import FloatArray, IntArray
from privfl.audit.recommend import recommend_layers
from privfl.errors import InputError
from privfl.progress import Progress, Steps
from privfl.training.mlp import MLP, one_hot

__all__ = [
    "FEATURE_SETS",
    "MembershipRow",
    "attack_once",
    "exposed_layers",
    "layer_features",
    "membership_inference",
    "recommend_layers",  # moved to privfl.audit.recommend; kept importable from here
]


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise InputError("the audit needs PyTorch: pip install 'privfl[audit]'") from exc
    return torch


def exposed_layers(
    layers: Sequence[int] | None, depth: int, option: str | None = None
) -> list[int]:
    """The layers to attack in a model with ``depth`` weight layers: ``None`` means all of
    them; otherwise a non-empty list of distinct 1-based integer layers (``depth`` = the
    output layer), in the given order. ``option``: the command-line option that gave them,
    named in the error."""
    if layers is None:
        return list(range(1, depth + 1))
    chosen = list(dict.fromkeys(layers))
    if not chosen or any(
        isinstance(i, bool) or not isinstance(i, int | np.integer) or not 1 <= i <= depth
        for i in chosen
    ):
        given = "" if option is None else f"{option} {','.join(map(str, layers))}: "
        raise InputError(f"{given}layers must be in 1..{depth} (1-based, {depth} = output)")
    return [int(i) for i in chosen]


@dataclass(frozen=True)
class MembershipRow:
    """One attack setting on one layer: mean (and max) over the runs."""

    layer: int
    features: str
    accuracy: float
    auc: float
    tpr_at_1pct_fpr: float
    runs: int
    accuracy_max: float
    auc_max: float

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


def layer_features(
    model: MLP, x: FloatArray, y: npt.ArrayLike, layer: int
) -> dict[str, FloatArray]:
    """What an attacker with white-box access to layer ``layer`` (1-based) observes."""
    yo = one_hot(y, model.sizes[-1])
    acts = model.forward(x)
    return {
        "output": acts[layer],
        "gradient": model.example_gradients(x, yo, layer),
        "label": yo,
        "loss": model.losses(x, yo)[:, None],
    }


def _build(shapes: dict[str, tuple[int, ...]]) -> Any:
    torch = _torch()
    nn = torch.nn

    class Attack(nn.Module):  # type: ignore[misc,name-defined]
        def __init__(self) -> None:
            super().__init__()
            self.branches = nn.ModuleDict()
            for name, shape in shapes.items():
                if name == "gradient":
                    out_units, in_units = shape
                    # Nasr et al.'s Conv2d(1, 100, kernel (1, in_units)) slides a kernel over the
                    # rows of the gradient; with the kernel as wide as a row that is one dense
                    # map in_units -> 100 shared by all rows, which PyTorch runs ~1.5x faster.
                    self.branches[name] = nn.Sequential(
                        nn.Linear(in_units, 100),
                        nn.ReLU(),
                        nn.Flatten(),
                        nn.Dropout(0.2),
                        nn.Linear(100 * out_units, 512),
                        nn.ReLU(),
                        nn.Linear(512, 256),
                        nn.ReLU(),
                        nn.Linear(256, 64),
                        nn.ReLU(),
                    )
                else:
                    self.branches[name] = nn.Sequential(
                        nn.Linear(shape[0], 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU()
                    )
            self.encoder = nn.Sequential(
                nn.Linear(64 * len(shapes), 256),
                nn.ReLU(),
                nn.Linear(256, 128),
                nn.ReLU(),
                nn.Linear(128, 64),
                nn.ReLU(),
                nn.Linear(64, 1),  # the logit; the membership probability is its sigmoid
            )

        def forward(self, inputs: dict[str, Any]) -> Any:
            parts = []
            for name, branch in self.branches.items():
                t = inputs[name]
                parts.append(branch(t))
            return self.encoder(torch.cat(parts, dim=1)).squeeze(1)

    return Attack()


def _tpr_at_fpr(labels: FloatArray, scores: FloatArray, fpr_max: float = 0.01) -> float:
    from sklearn.metrics import roc_curve

    fpr, tpr, _ = roc_curve(labels, scores)
    ok = fpr <= fpr_max
    return float(tpr[ok].max()) if ok.any() else 0.0


def attack_once(
    feats_in: dict[str, FloatArray],
    feats_out: dict[str, FloatArray],
    names: Sequence[str],
    seed: int,
    epochs: int = 100,
    batch: int = 32,
) -> tuple[float, float, float]:
    """Train on half of each group, evaluate on the other half: (accuracy, AUC, TPR@1%FPR)."""
    torch = _torch()
    from sklearn.metrics import roc_auc_score

    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)  # not secret: which half the attacker knows
    n_in = next(iter(feats_in.values())).shape[0]
    n_out = next(iter(feats_out.values())).shape[0]
    pin, pout = rng.permutation(n_in), rng.permutation(n_out)
    k = min(n_in, n_out) // 2
    tr_in, te_in, tr_out, te_out = pin[:k], pin[k : 2 * k], pout[:k], pout[k : 2 * k]

    data = {
        n: torch.tensor(np.concatenate([feats_in[n], feats_out[n]]), dtype=torch.float32)
        for n in names
    }
    truth = torch.tensor(np.r_[np.ones(n_in), np.zeros(n_out)], dtype=torch.float32)

    def tensors(idx_in: IntArray, idx_out: IntArray) -> tuple[dict[str, Any], Any]:
        idx = torch.as_tensor(np.concatenate([idx_in, n_in + idx_out]))
        return {n: t[idx] for n, t in data.items()}, truth[idx]

    shapes = {n: tuple(feats_in[n].shape[1:]) for n in names}
    model = _build(shapes)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = torch.nn.BCEWithLogitsLoss()
    half = max(1, batch // 2)
    for _ in range(epochs):
        model.train()
        a, b = rng.permutation(tr_in), rng.permutation(tr_out)
        for s in range(0, k, half):  # balanced batches: as many members as non-members
            x, y = tensors(a[s : s + half], b[s : s + half])
            opt.zero_grad()
            loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
    model.eval()
    with torch.no_grad():
        x, y = tensors(te_in, te_out)
        # rank by logits: float32 sigmoids saturate at 1.0 for confident members *and*
        # non-members, and those ties hide the low-FPR end of the ROC curve
        scores = model(x).double().numpy()
    labels = y.numpy()
    acc = float(((scores >= 0.0) == (labels == 1)).mean())
    return acc, float(roc_auc_score(labels, scores)), _tpr_at_fpr(labels, scores)


FEATURE_SETS = {
    "output": ("output",),
    "output+gradient+label": ("output", "gradient", "label"),
    "output+gradient+label+loss": ("output", "gradient", "label", "loss"),
}


def membership_inference(
    model: MLP,
    members: tuple[FloatArray, npt.ArrayLike],
    non_members: tuple[FloatArray, npt.ArrayLike],
    layers: Sequence[int] | None = None,
    features: Sequence[str] = ("output", "gradient", "label", "loss"),
    runs: int = 4,
    epochs: int = 100,
    seed: int = 0,
    progress: Progress | None = None,
) -> list[MembershipRow]:
    """Per exposed layer: the attack with the output alone, then with output, gradient and
    label (and the loss on the output layer), restricted to ``features``. ``progress`` gets a
    :class:`~privfl.progress.ProgressEvent` (step ``"membership"``) after each attack run."""
    torch = _torch()
    torch.set_num_threads(1)  # these attack models are small: threads cost more than they save
    layer_list = exposed_layers(layers, model.layers)
    plan = {layer: _feature_sets(layer == model.layers, features) for layer in layer_list}
    steps = Steps(progress, "membership", sum(map(len, plan.values())) * runs)
    rows = []
    for layer in layer_list:
        fin = layer_features(model, np.asarray(members[0], float), members[1], layer)
        fout = layer_features(model, np.asarray(non_members[0], float), non_members[1], layer)
        for key in plan[layer]:
            names = list(FEATURE_SETS[key])
            res = []
            for r in range(runs):
                res.append(attack_once(fin, fout, names, seed + 1000 * r + layer, epochs))
                steps.tick()
            arr = np.asarray(res)
            rows.append(
                MembershipRow(
                    layer,
                    key,
                    float(arr[:, 0].mean()),
                    float(arr[:, 1].mean()),
                    float(arr[:, 2].mean()),
                    runs,
                    float(arr[:, 0].max()),
                    float(arr[:, 1].max()),
                )
            )
    return rows


def _feature_sets(output_layer: bool, features: Sequence[str]) -> list[str]:
    """The feature sets attacked at a layer: output alone, output + gradient + label, and
    on the output layer also with the loss; only those whose features are all allowed."""
    sets = ["output", "output+gradient+label"] + (["output+gradient+label+loss"] * output_layer)
    return [k for k in sets if all(n in features for n in FEATURE_SETS[k])]
