"""The membership audit of a model file written by ``privfl train``: only the layers the
file exposes (the plaintext ones, or all when the encrypted layers were revealed)."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from privfl.audit.membership import exposed_layers
from privfl.errors import InputError
from privfl.studies.audit import (
    Advance,
    Hyper,
    MembershipAudit,
    TargetModel,
    _accuracy,
    _check_count,
    ticks,
)


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
    from privfl.training.result import load_model

    start = time.perf_counter()
    _check_count("runs", runs)
    _check_count("attack_epochs", attack_epochs)
    saved = load_model(path)
    if saved.exposed_layers == 0:
        raise InputError(f"{path}: every layer is encrypted; there is nothing to audit")
    chosen = exposed_layers(layers, saved.exposed_layers)
    x, y = load_rows(saved.dataset)
    members = saved.members
    if not len(members) or len(saved.non_members) < len(members):
        raise InputError(f"{path} lacks member / non-member rows")
    non_members = saved.non_members[: len(members)]
    if max(members.max(), non_members.max()) >= len(y) or min(members.min(), non_members.min()) < 0:
        raise InputError(f"{path}: row indices outside the {saved.dataset} dataset")
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
