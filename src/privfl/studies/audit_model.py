"""The membership audit of a model file written by ``privfl train``: only the layers the
file exposes (the plaintext ones, or all when the encrypted layers were revealed)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from privfl.audit.membership import exposed_layers
from privfl.errors import InputError
from privfl.studies.audit import (
    Advance,
    Hyper,
    MembershipAudit,
    TargetModel,
    _accuracy,
    check_count,
    ticks,
)

if TYPE_CHECKING:
    from privfl.training.result import SavedModel


def auditable_model(path: str, layers: Sequence[int] | None = None) -> tuple[SavedModel, list[int]]:
    """The model file and the layers to attack, checked before any attack: a model of a
    built-in dataset (its file records which rows were members and which were held out; a
    model trained on the user's own table keeps no rows, so there is nothing to attack it
    with), at least one exposed layer, and ``layers`` among the exposed ones."""
    from privfl.training.data import DATASETS, load_rows
    from privfl.training.result import load_model

    saved = load_model(path)
    if saved.dataset not in DATASETS:
        raise InputError(
            f"{path} was trained on your own table ({saved.dataset or 'no dataset recorded'}): "
            "'privfl audit membership --model' audits only models trained on the built-in "
            f"dataset ({', '.join(DATASETS)}), whose file records which of its rows were members "
            "and which were held out; a model file keeps no rows of your table to attack"
        )
    if not len(saved.members) or len(saved.non_members) < len(saved.members):
        raise InputError(f"{path} lacks member / non-member rows")
    rows = len(load_rows(saved.dataset)[1])
    every = np.concatenate([saved.members, saved.non_members])
    if every.min() < 0 or every.max() >= rows:
        raise InputError(f"{path}: row indices outside the {rows} rows of {saved.dataset}")
    if len(np.unique(every)) != len(every):
        raise InputError(
            f"{path}: a row is listed twice among its members and held-out rows (each row is "
            "one or the other, once): the file is damaged"
        )
    if saved.exposed_layers == 0:
        raise InputError(f"{path}: every layer is encrypted; there is nothing to audit")
    total, exposed = len(saved.sizes) - 1, saved.exposed_layers
    hidden = [v for v in layers or () if exposed < v <= total]
    if hidden:
        raise InputError(
            f"--layers {','.join(map(str, layers or ()))}: layer(s) {hidden} of {path} stay "
            f"encrypted (its last {saved.encrypted_layers} of {total} layers were not "
            f"revealed); attack layers 1..{exposed}"
        )
    try:
        return saved, exposed_layers(layers, exposed, "--layers")
    except InputError:
        given = ",".join(map(str, layers or ()))
        raise InputError(
            f"--layers {given}: {path} exposes layers 1..{exposed} of {total} (1-based, "
            f"{total} = output)"
        ) from None


def membership_audit_of_model(
    path: str,
    runs: int = 4,
    attack_epochs: int = 100,
    seed: int = 0,
    progress: Advance | None = None,
    on_total: Callable[[int], None] | None = None,
    layers: Sequence[int] | None = None,
) -> MembershipAudit:
    """The membership attack on a model file of ``privfl train``: only its exposed layers
    (the plaintext ones, or all when the encrypted layers were revealed). On plaintext layers
    alone the attacker sees the layer outputs; per-example gradients, the label's effect and
    the loss need the encrypted layers, so only the ``output`` rows are computed then."""
    from privfl.audit.membership import membership_inference
    from privfl.training.data import load_rows

    start = time.perf_counter()
    check_count("runs", runs)
    check_count("attack_epochs", attack_epochs)
    saved, chosen = auditable_model(path, layers)
    x, y = load_rows(saved.dataset)
    members = saved.members
    non_members = saved.non_members[: len(members)]
    model = saved.exposed_model()
    features = ("output", "gradient", "label", "loss") if saved.revealed else ("output",)
    per_attack = 1 if not saved.revealed else 2
    if on_total:
        on_total(per_attack * len(chosen) * runs + (saved.revealed and model.layers in chosen))
    # without the encrypted layers the labels are no attack feature (the truncated model has
    # no class outputs): pass a placeholder the plaintext layers accept
    ym, yn = (y[members], y[non_members]) if saved.revealed else (0 * members, 0 * non_members)
    rows = membership_inference(
        model,
        (x[members], ym),
        (x[non_members], yn),
        layers=chosen,
        features=features,
        runs=runs,
        epochs=attack_epochs,
        seed=seed,
        progress=ticks(progress),
    )
    nan = float("nan")
    exposed = "all layers (revealed)" if saved.revealed else f"layers 1..{saved.exposed_layers}"
    return MembershipAudit(
        saved.dataset,
        f"model file {path} ({saved.encrypted_layers} encrypted layers; exposed: {exposed})",
        TargetModel(saved.sizes, Hyper(saved.sizes[1:-1], 0, 0, 0.0)),
        len(members),
        len(non_members),
        _accuracy(model, x[members], y[members]) if saved.revealed else nan,
        _accuracy(model, x[non_members], y[non_members]) if saved.revealed else nan,
        attack_epochs,
        tuple(rows),
        (),
        time.perf_counter() - start,
    )
