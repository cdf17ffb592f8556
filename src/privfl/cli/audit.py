"""``privfl audit``: the gray-box privacy audit (SmartCryptNN, part 1) from the command line."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import numpy as np
import typer
from rich.table import Table

from privfl.cli._kit import (
    AsJson,
    JsonOut,
    PlotOut,
    check_input_file,
    check_output_path,
    console,
    emit,
    err_console,
    guard,
)
from privfl.cli._progress import Tracker
from privfl.errors import InputError

if TYPE_CHECKING:
    from privfl.audit.property import PropertyRow
    from privfl.audit.recommend import Recommendation

audit_app = typer.Typer(
    help="Gray-box privacy audit of an MLP: which layers leak membership, reconstructions "
    "or properties, and which to encrypt.",
    no_args_is_help=True,
)

Every = Annotated[
    int,
    typer.Option(
        "--epochs-every",
        help="Also attack snapshots of the model every this many training epochs "
        "(0 = the trained model only).",
    ),
]
Runs = Annotated[int, typer.Option(help="Attack repetitions (mean and max are reported).")]
Seed = Annotated[int, typer.Option(help="Seed of the data split, model and attacks.")]


def _progress(label: str) -> tuple[Tracker, Callable[[int], None], Callable[[int], None]]:
    """A tracker on stderr (stdout stays for tables or the one JSON object): a bar on a
    terminal, plain lines with rate and ETA otherwise."""
    bar = Tracker(label, console=err_console)
    return bar, bar.advance, bar.set_total


def _layer_table(title: str, rows: Sequence[PropertyRow]) -> Table:
    table = Table(title=title)
    for c in ("layer", "accuracy", "accuracy max", "auc", "auc max"):
        table.add_column(c, justify="right")
    for r in rows:
        table.add_row(
            str(r.layer),
            f"{r.accuracy:.4f}",
            f"{r.accuracy_max:.4f}",
            f"{r.auc:.4f}",
            f"{r.auc_max:.4f}",
        )
    return table


def _acc(value: float) -> str:
    """An accuracy for a header; a model file whose last layers stay encrypted cannot be
    evaluated in plaintext, so its accuracy is not known (never printed as 'nan')."""
    if np.isfinite(value):
        return f"{value:.3f}"
    return "not known (encrypted layers)"


def _layers(text: str | None) -> list[int] | None:
    """Parse a comma-separated list of layers or classes (None = the default)."""
    if text is None:
        return None
    try:
        chosen = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        chosen = []
    if not chosen:
        raise InputError(f"expected comma-separated integers such as 2,3; got {text!r}")
    return chosen


@audit_app.command("membership")
@guard
def membership(
    dataset: Annotated[str, typer.Option(help="digits8x8 or location.")] = "digits8x8",
    epochs_every: Every = 0,
    runs: Runs = 4,
    attack_epochs: Annotated[int, typer.Option(help="Training epochs of the attack model.")] = 100,
    seed: Seed = 0,
    layers: Annotated[
        str | None,
        typer.Option(
            help="Comma-separated layers to attack (1-based, the last is the output layer); "
            "default all.",
        ),
    ] = None,
    model: Annotated[
        Path | None,
        typer.Option(
            "--model",
            help="Audit this model file of 'privfl train --model-out' instead of training "
            "one: only its exposed (plaintext) layers, on its own members. Only a model "
            "trained on the built-in dataset records its member and held-out rows; a model "
            "of your own --data table cannot be audited.",
        ),
    ] = None,
    as_json: AsJson = False,
    json_out: JsonOut = None,
    plot: PlotOut = None,
) -> None:
    """Layer-by-layer white-box membership inference (Nasr et al.) on SmartCryptNN's target
    model: per layer the output alone, then output + weight gradient + label (+ loss on the
    output layer). Accuracy baseline is 0.5. With --model, the attack sees only the layers
    the model file exposes (the encrypted layers of 'privfl train' stay hidden); it must be
    a model of the built-in dataset (its file names the member and held-out rows)."""
    out = err_console if as_json else console
    check_output_path(json_out, "--json-out")
    check_output_path(plot, "--plot")
    from privfl.studies.audit import check_count, membership_audit, plot_membership
    from privfl.studies.audit_model import auditable_model, membership_audit_of_model

    check_count("runs (--runs)", runs)  # before the progress line, as every other refusal
    check_count("attack_epochs (--attack-epochs)", attack_epochs)

    if model is not None and epochs_every:
        raise InputError("--epochs-every needs training snapshots; a --model file has none")
    if model is not None:  # a file that is no auditable model is refused before any work
        check_input_file(model, "--model")
        auditable_model(str(model), _layers(layers))
    bar, advance, total = _progress(f"membership attacks on {model or dataset}")
    with bar:
        if model is not None:
            res = membership_audit_of_model(
                str(model), runs, attack_epochs, seed, advance, total, _layers(layers)
            )
        else:
            res = membership_audit(
                dataset, epochs_every, runs, attack_epochs, seed, advance, total, _layers(layers)
            )
    out.print(
        f"{res.description}: MLP {'-'.join(map(str, res.model.sizes))}, "
        f"{res.members} members / {res.non_members} non-members, train accuracy "
        f"{_acc(res.train_accuracy)}, test accuracy {_acc(res.test_accuracy)}"
    )
    last = res.model.layers
    table = Table(title=f"Membership inference per layer ({runs} runs; layer {last} = output)")
    for c in ("layer", "features", "accuracy", "acc. max", "auc", "auc max", "tpr@1%fpr"):
        table.add_column(c, justify="right")
    for r in res.layers:
        table.add_row(
            str(r.layer),
            r.features,
            f"{r.accuracy:.4f}",
            f"{r.accuracy_max:.4f}",
            f"{r.auc:.4f}",
            f"{r.auc_max:.4f}",
            f"{r.tpr_at_1pct_fpr:.4f}",
        )
    out.print(table)
    if res.over_training:
        over = Table(title="Across training (accuracy, mean over runs)")
        keys = sorted({(r.layer, r.features) for _, r in res.over_training})
        over.add_column("epoch", justify="right")
        for layer, feats in keys:
            over.add_column(f"L{layer} {feats}", justify="right")
        for epoch in sorted({e for e, _ in res.over_training}):
            acc = {(r.layer, r.features): r.accuracy for e, r in res.over_training if e == epoch}
            over.add_row(str(epoch), *[f"{acc[k]:.3f}" for k in keys])
        out.print(over)
    out.print(f"{res.seconds:.1f} s")
    emit(res, as_json, json_out)
    if plot is not None:
        plot_membership(res, str(plot))
        err_console.print(f"figure written to {plot}")


@audit_app.command("inversion")
@guard
def inversion(
    dataset: Annotated[
        str, typer.Option(help="faces (AT&T/Olivetti), digits8x8 or location.")
    ] = "faces",
    epochs_every: Every = 10,
    exposed: Annotated[
        str | None,
        typer.Option(help="Layers the attacker sees, e.g. '2,3' (default: all)."),
    ] = None,
    classes: Annotated[
        str | None, typer.Option(help="Classes to reconstruct (default: all).")
    ] = None,
    steps: Annotated[int, typer.Option(help="Gradient steps per reconstruction.")] = 300,
    seed: Seed = 0,
    as_json: AsJson = False,
    json_out: JsonOut = None,
    plot: PlotOut = None,
) -> None:
    """Model inversion (Fredrikson et al.): per snapshot, reconstruct each class by gradient
    descent on the input. Needs the first layer; without it: "not possible in this setting"."""
    out = err_console if as_json else console
    check_output_path(json_out, "--json-out")
    check_output_path(plot, "--plot")
    from privfl.studies.audit import check_count, inversion_audit

    check_count("steps (--steps)", steps)
    bar, advance, total = _progress(f"model inversion on {dataset}")
    with bar:
        res = inversion_audit(
            dataset,
            epochs_every,
            _layers(classes),
            _layers(exposed),
            steps,
            seed,
            str(plot) if plot else None,
            advance,
            total,
        )
    out.print(
        f"{res.description}: MLP {'-'.join(map(str, res.model.sizes))}, train accuracy "
        f"{res.train_accuracy:.3f}, test accuracy {res.test_accuracy:.3f}"
    )
    if res.result != "ran":
        out.print(
            f"model inversion with exposed layers {list(res.exposed_layers)}: {res.result} "
            "(the attack needs layer 1)"
        )
    else:
        table = Table(title="Model inversion per snapshot (mean over classes)")
        for c in ("epoch", "identified", "correlation", "rmse", "gray-start rmse", "confidence"):
            table.add_column(c, justify="right")
        for snap in res.snapshots:
            table.add_row(
                str(snap.epoch),
                f"{np.mean(snap.identified):.3f}",
                f"{np.mean(snap.correlation):.3f}",
                f"{np.mean(snap.rmse):.3f}",
                f"{np.mean(snap.baseline_rmse):.3f}",
                f"{np.mean(snap.confidence):.3f}",
            )
        out.print(table)
        out.print(
            "identified = the reconstruction correlates best with its own class mean "
            f"among {res.candidate_classes} classes (chance {1 / res.candidate_classes:.3f})"
        )
        if plot:
            out.print(f"figure written to {plot}")
    emit(res, as_json, json_out)


@audit_app.command("property")
@guard
def property_(
    epochs_every: Every = 10,
    layers: Annotated[
        str | None, typer.Option(help="Exposed layers to attack, e.g. '2,3' (default: all).")
    ] = None,
    runs: Runs = 4,
    batches: Annotated[
        int, typer.Option(help="Batches with and without the property per snapshot.")
    ] = 200,
    seed: Seed = 0,
    as_json: AsJson = False,
    json_out: JsonOut = None,
) -> None:
    """Property inference (Melis et al.): a 50-tree random forest on batch gradients of the
    exposed layers tells batches containing women from batches without (UCI Adult, sex not a
    model input)."""
    out = err_console if as_json else console
    check_output_path(json_out, "--json-out")
    from privfl.studies.audit import check_count, property_audit

    check_count("runs (--runs)", runs)
    check_count("batches (--batches)", batches, 2)
    bar, advance, total = _progress("property inference on adult")
    with bar:
        res = property_audit(epochs_every, _layers(layers), runs, batches, seed, advance, total)
    out.print(
        f"{res.description}; MLP {'-'.join(map(str, res.model.sizes))}, "
        f"train accuracy {res.train_accuracy:.3f}, snapshots at epochs {list(res.snapshots)}"
    )
    out.print(_layer_table(f"Property inference per layer ({runs} runs)", res.layers))
    emit(res, as_json, json_out)


@audit_app.command("recommend")
@guard
def recommend(
    results: Annotated[
        list[Path], typer.Argument(help="JSON results of 'audit membership' / 'audit property'.")
    ],
    max_leakage: Annotated[
        float,
        typer.Option(help="Highest attack accuracy tolerated on an exposed layer, in (0.5, 1]."),
    ] = 0.55,
    features: Annotated[
        str | None,
        typer.Option(
            help="Only count membership rows with these feature sets, e.g. 'output' when the "
            "adversary sees activations but no gradients (default: all rows)."
        ),
    ] = None,
    as_json: AsJson = False,
    json_out: JsonOut = None,
) -> None:
    """The smallest group of last layers to encrypt so that every attack on the layers left
    exposed stays at or below --max-leakage (SmartCryptNN §V-E). All results must come from
    the same model (same layer sizes and dataset)."""
    from privfl.audit.recommend import check_max_leakage, recommend_from_results

    check_output_path(json_out, "--json-out")
    check_max_leakage(max_leakage)
    loaded = []
    for path in results:
        check_input_file(path, "result file")
        try:
            loaded.append((str(path), json.loads(path.read_text())))
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read {path}: {exc}") from None
    keep = None if features is None else [f.strip() for f in features.split(",") if f.strip()]
    rec = recommend_from_results(loaded, max_leakage, keep)
    if not as_json:
        _print_recommendation(rec)
    emit(rec, as_json, json_out)


def _print_recommendation(rec: Recommendation) -> None:
    chosen, total, limit = list(rec.encrypt_layers), rec.layers, rec.max_leakage
    if rec.unaudited_layers:
        console.print(
            f"layers {list(rec.unaudited_layers)} have no attack result: they are never "
            "counted as safe and stay encrypted (audit them with 'privfl audit membership "
            "--layers ...' to know whether they leak)"
        )
    if not chosen:
        console.print(f"encrypt nothing: every attack stays at or below {limit}")
    elif not rec.exposed_layers:
        worst = rec.worst_accuracy_per_layer[1]
        why = (
            "layer 1 was not audited"
            if worst is None
            else f"even layer 1 alone leaks more than {limit} (worst attack accuracy {worst:.3f})"
        )
        console.print(f"encrypt all {total} layers: {why}")
    else:
        console.print(
            f"encrypt layers {chosen} of {total}: every attack on layers "
            f"{list(rec.exposed_layers)} stays at or below {limit}"
        )
