"""``privfl audit``: the gray-box privacy audit (SmartCryptNN, part 1) from the command line."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.table import Table

from privfl.cli._kit import (
    AsJson,
    JsonOut,
    PlotOut,
    check_output_path,
    console,
    emit,
    err_console,
    guard,
)
from privfl.errors import InputError

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


def _progress(label: str) -> tuple[Progress, Callable[[int], None], Callable[[int], None]]:
    bar = Progress(
        TextColumn(label),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
        transient=True,
    )
    task = bar.add_task(label, total=None)
    return (
        bar,
        lambda n: bar.advance(task, n),
        lambda total: bar.update(task, total=total),
    )


def _layer_table(title: str, rows: list[dict[str, Any]], extra: tuple[str, ...] = ()) -> Table:
    table = Table(title=title)
    cols = ("layer", *extra, "accuracy", "accuracy max", "auc", "auc max")
    for c in cols:
        table.add_column(c, justify="right")
    for r in rows:
        table.add_row(
            str(r["layer"]),
            *[str(r[e]) for e in extra],
            f"{r['accuracy']:.4f}",
            f"{r['accuracy_max']:.4f}",
            f"{r['auc']:.4f}",
            f"{r['auc_max']:.4f}",
        )
    return table


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
    as_json: AsJson = False,
    json_out: JsonOut = None,
    plot: PlotOut = None,
) -> None:
    """Layer-by-layer white-box membership inference (Nasr et al.) on SmartCryptNN's target
    model: per layer the output alone, then output + weight gradient + label (+ loss on the
    output layer). Accuracy baseline is 0.5."""
    out = err_console if as_json else console
    check_output_path(json_out, "--json-out")
    check_output_path(plot, "--plot")
    from privfl.studies.audit import membership_audit

    if runs < 1 or attack_epochs < 1:
        raise InputError("--runs and --attack-epochs must be positive")
    bar, advance, total = _progress(f"membership attacks on {dataset}")
    with bar:
        res = membership_audit(
            dataset, epochs_every, runs, attack_epochs, seed, advance, total, _layers(layers)
        )
    out.print(
        f"{res['description']}: MLP {'-'.join(map(str, res['model']['sizes']))}, "
        f"{res['members']} members / {res['non_members']} non-members, train accuracy "
        f"{res['train_accuracy']:.3f}, test accuracy {res['test_accuracy']:.3f}"
    )
    last = len(res["model"]["sizes"]) - 1
    table = Table(title=f"Membership inference per layer ({runs} runs; layer {last} = output)")
    for c in ("layer", "features", "accuracy", "acc. max", "auc", "auc max", "tpr@1%fpr"):
        table.add_column(c, justify="right")
    for r in res["layers"]:
        table.add_row(
            str(r["layer"]),
            r["features"],
            f"{r['accuracy']:.4f}",
            f"{r['accuracy_max']:.4f}",
            f"{r['auc']:.4f}",
            f"{r['auc_max']:.4f}",
            f"{r['tpr_at_1pct_fpr']:.4f}",
        )
    out.print(table)
    if res["over_training"]:
        over = Table(title="Across training (accuracy, mean over runs)")
        keys = sorted({(r["layer"], r["features"]) for r in res["over_training"]})
        over.add_column("epoch", justify="right")
        for layer, feats in keys:
            over.add_column(f"L{layer} {feats}", justify="right")
        for epoch in sorted({r["epoch"] for r in res["over_training"]}):
            acc = {
                (r["layer"], r["features"]): r["accuracy"]
                for r in res["over_training"]
                if r["epoch"] == epoch
            }
            over.add_row(str(epoch), *[f"{acc[k]:.3f}" for k in keys])
        out.print(over)
    out.print(f"{res['seconds']:.1f} s")
    emit(res, as_json, json_out)
    if plot is not None:
        _plot_membership(res, plot)


def _plot_membership(res: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    panels = 2 if res["over_training"] else 1
    fig, axes = plt.subplots(1, panels, figsize=(6 * panels, 4), squeeze=False)
    ax = axes[0, 0]
    rows = res["layers"]
    labels = [f"L{r['layer']}\n" + r["features"].replace("+", "+\n") for r in rows]
    ax.bar(range(len(rows)), [r["accuracy"] for r in rows], color="tab:blue", label="mean")
    ax.scatter(range(len(rows)), [r["accuracy_max"] for r in rows], color="k", label="max")
    ax.axhline(0.5, color="gray", linestyle="--", linewidth=1)
    ax.set_xticks(range(len(rows)), labels, fontsize=6)
    ax.set_ylim(0.4, 1.0)
    ax.set_ylabel("attack accuracy")
    ax.set_title(f"Membership inference per layer ({res['dataset']})")
    ax.legend(fontsize=7)
    if panels == 2:
        ax = axes[0, 1]
        keys = sorted({(r["layer"], r["features"]) for r in res["over_training"]})
        for key in keys:
            pts = [(r["epoch"], r["accuracy"]) for r in res["over_training"]
                   if (r["layer"], r["features"]) == key]  # fmt: skip
            ax.plot(*zip(*pts, strict=True), marker="o", markersize=3, label=f"L{key[0]} {key[1]}")
        ax.axhline(0.5, color="gray", linestyle="--", linewidth=1)
        ax.set_xlabel("training epoch")
        ax.set_ylabel("attack accuracy")
        ax.set_title("Across training")
        ax.legend(fontsize=6)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    err_console.print(f"figure written to {path}")


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
    from privfl.studies.audit import inversion_audit

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
        f"{res['description']}: MLP {'-'.join(map(str, res['model']['sizes']))}, train accuracy "
        f"{res['train_accuracy']:.3f}, test accuracy {res['test_accuracy']:.3f}"
    )
    if res["result"] != "ran":
        out.print(
            f"model inversion with exposed layers {res['exposed_layers']}: {res['result']} "
            "(the attack needs layer 1)"
        )
    else:
        table = Table(title="Model inversion per snapshot (mean over classes)")
        for c in ("epoch", "identified", "correlation", "rmse", "gray-start rmse", "confidence"):
            table.add_column(c, justify="right")
        for s in res["snapshots"]:
            table.add_row(
                str(s["epoch"]),
                f"{s['identification_rate']:.3f}",
                f"{s['mean_correlation']:.3f}",
                f"{s['mean_rmse']:.3f}",
                f"{s['mean_baseline_rmse']:.3f}",
                f"{sum(s['confidence']) / len(s['confidence']):.3f}",
            )
        out.print(table)
        out.print(
            "identified = the reconstruction correlates best with its own class mean "
            f"among {res['candidate_classes']} classes (chance {1 / res['candidate_classes']:.3f})"
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
    from privfl.studies.audit import property_audit

    if runs < 1 or batches < 2:
        raise InputError("--runs must be positive and --batches at least 2")
    bar, advance, total = _progress("property inference on adult")
    with bar:
        res = property_audit(epochs_every, _layers(layers), runs, batches, seed, advance, total)
    out.print(
        f"{res['description']}; MLP {'-'.join(map(str, res['model']['sizes']))}, "
        f"train accuracy {res['train_accuracy']:.3f}, snapshots at epochs {res['snapshots']}"
    )
    out.print(_layer_table(f"Property inference per layer ({runs} runs)", res["layers"]))
    emit(res, as_json, json_out)


@audit_app.command("recommend")
@guard
def recommend(
    results: Annotated[
        list[Path], typer.Argument(help="JSON results of 'audit membership' / 'audit property'.")
    ],
    max_leakage: Annotated[
        float, typer.Option(help="Highest attack accuracy tolerated on an exposed layer.")
    ] = 0.55,
    features: Annotated[
        str | None,
        typer.Option(
            help="Only count membership rows with these feature sets, e.g. 'output' when the "
            "adversary sees activations but no gradients (default: all rows)."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """The smallest group of last layers to encrypt so that every attack on the layers left
    exposed stays at or below --max-leakage (SmartCryptNN §V-E)."""
    from privfl.audit.membership import recommend_layers

    rows: list[dict[str, Any]] = []
    depth = set()
    for path in results:
        try:
            res = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read {path}: {exc}") from None
        if not isinstance(res, dict) or not isinstance(res.get("layers"), list):
            raise InputError(f"{path} has no 'layers' list (run 'privfl audit ... --json')")
        rows += res["layers"]
        if "model" in res:
            depth.add(len(res["model"]["sizes"]) - 1)
    if features is not None:
        keep = {f.strip() for f in features.split(",") if f.strip()}
        rows = [r for r in rows if r.get("features", "") in keep or "features" not in r]
    if not rows:
        raise InputError("the results hold no layer rows (check --features)")
    if len(depth) > 1:
        raise InputError("the results come from models with different numbers of layers")
    layers = depth.pop() if depth else None
    chosen = recommend_layers(rows, max_leakage, layers)
    total = layers or max(r["layer"] for r in rows)
    worst = {
        str(i): max((r["accuracy"] for r in rows if r["layer"] == i), default=None)
        for i in range(1, total + 1)
    }
    out = {"encrypt_layers": chosen, "max_leakage": max_leakage, "worst_accuracy_per_layer": worst}
    if as_json:
        console.print_json(json.dumps(out))
        return
    exposed = list(range(1, total - len(chosen) + 1))
    if not chosen:
        console.print(f"encrypt nothing: every attack stays at or below {max_leakage}")
    elif not exposed:
        console.print(
            f"encrypt all {total} layers: even layer 1 alone leaks more than {max_leakage} "
            f"(worst attack accuracy {worst['1']:.3f})"
        )
    else:
        console.print(
            f"encrypt layers {chosen} of {total}: every attack on layers {exposed} stays at or "
            f"below {max_leakage}"
        )
