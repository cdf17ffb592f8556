"""``privfl train``: federated MLP training with the last layers under threshold CKKS."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
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
    floats,
    fmt_bytes,
    guard,
    ints,
)
from privfl.errors import InputError

if TYPE_CHECKING:
    from privfl.training.result import RoundMetrics, TrainingResult


def encrypt_last_from(text: str, layers: list[int]) -> int:
    """``--encrypt-last``: a number of last layers, or a ``privfl audit recommend`` JSON file
    (its ``encrypt_layers`` must be a group of last layers of the same model)."""
    if text.strip().isdigit():
        return int(text)
    path = Path(text)
    if not path.is_file():
        raise InputError(f"--encrypt-last must be a number or a recommendation file, got {text!r}")
    try:
        rec = json.loads(path.read_text())
        chosen = [int(v) for v in rec["encrypt_layers"]]
        total = int(rec["layers"])
        sizes = rec.get("model_sizes")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise InputError(f"{path} is not a 'privfl audit recommend' result: {exc}") from None
    if sizes is not None and [int(s) for s in sizes] != layers:
        raise InputError(f"{path} recommends layers for the model {sizes}, not {layers}")
    if total != len(layers) - 1 or chosen != list(range(total - len(chosen) + 1, total + 1)):
        raise InputError(f"{path}: {chosen} is not a group of last layers of {total}")
    return len(chosen)


class _RoundProgress:
    """A rich bar with ETA on a terminal, plain lines (with rate and ETA) otherwise."""

    def __init__(self, rounds: int) -> None:
        self.rounds = rounds
        self.start = time.perf_counter()
        self.tty = sys.stderr.isatty()
        self.bar: Progress | None = None
        if self.tty:
            self.bar = Progress(
                TextColumn("training round"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total} {task.fields[info]}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=err_console,
                transient=True,
            )
            self.task = self.bar.add_task("train", total=rounds, info="")

    def __enter__(self) -> _RoundProgress:
        if self.bar is not None:
            self.bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.stop()

    def __call__(self, row: RoundMetrics) -> None:
        info = "" if row.accuracy is None else f"acc {row.accuracy:.3f} loss {row.loss:.3f}"
        if self.bar is not None:
            self.bar.update(self.task, completed=row.round, info=info)
            return
        elapsed = time.perf_counter() - self.start
        eta = elapsed / row.round * (self.rounds - row.round)
        err_console.print(
            f"round {row.round}/{self.rounds} {info} {row.seconds:.1f} s/round, "
            f"elapsed {elapsed:.0f} s, ETA {eta:.0f} s",
            markup=False,
            highlight=False,
        )


@guard
def train(
    dataset: Annotated[str, typer.Option(help="digits8x8 (scikit-learn digits, binarised).")] = (
        "digits8x8"
    ),
    parties: Annotated[int, typer.Option(help="Number of parties.")] = 3,
    per_party: Annotated[int, typer.Option(help="Training rows per party.")] = 30,
    encrypt_last: Annotated[
        str,
        typer.Option(
            help="How many last layers stay encrypted (0 = plain FedAvg), or the JSON file "
            "of 'privfl audit recommend --json-out'."
        ),
    ] = "1",
    epochs: Annotated[int, typer.Option(help="Training epochs.")] = 1,
    rounds: Annotated[
        int | None, typer.Option(help="Averaging rounds (default: one per epoch).")
    ] = None,
    layers: Annotated[str, typer.Option(help="Layer widths.")] = "64,30,20,10",
    batch_size: Annotated[int, typer.Option(help="Mini-batch size.")] = 10,
    learning_rate: Annotated[float, typer.Option(help="SGD learning rate.")] = 2.0,
    sigmoid_range: Annotated[
        str, typer.Option(help="Interval of the Chebyshev sigmoid 'low,high'.")
    ] = "-10,10",
    sigmoid_degree: Annotated[int, typer.Option(help="Chebyshev degree.")] = 13,
    parameters: Annotated[
        str, typer.Option(help="'secure' (ring 2^15, 128-bit) or 'test' (insecure, fast).")
    ] = "secure",
    reveal: Annotated[
        bool, typer.Option(help="Jointly decrypt the encrypted layers at the end.")
    ] = False,
    model_out: Annotated[
        Path | None,
        typer.Option("--model-out", help="Save the model (plaintext layers unless revealed)."),
    ] = None,
    test_rows: Annotated[
        int,
        typer.Option(
            help="Held-out rows for the test accuracy (the encrypted layer runs under the joint "
            "protocol, one joint decryption per 16 rows unless revealed; 0 = none)."
        ),
    ] = 160,
    seed: Annotated[int, typer.Option(help="Seed of the data split, model and batches.")] = 0,
    as_json: AsJson = False,
    json_out: JsonOut = None,
    plot: PlotOut = None,
) -> None:
    """Federated training of an MLP whose last layers stay encrypted under threshold CKKS
    (SmartCryptNN): no party and not the server can decrypt them alone. Settings are checked
    before key generation; --model-out saves what 'privfl audit membership --model' audits."""
    out = err_console if as_json else console
    for path, what in ((json_out, "--json-out"), (plot, "--plot"), (model_out, "--model-out")):
        check_output_path(path, what)
    sizes = ints(layers, "--layers", minimum=1)
    low_high = floats(sigmoid_range, "--sigmoid-range", positive=False)
    if len(low_high) != 2:
        raise InputError("--sigmoid-range must be 'low,high'")
    enc = encrypt_last_from(encrypt_last, sizes)
    if test_rows < 0:
        raise InputError("--test-rows must be >= 0")
    from privfl.training.data import federated_digits
    from privfl.training.federated import train_federated

    data = federated_digits(parties, per_party, seed, dataset)
    n_rounds = rounds if rounds is not None else epochs
    with _RoundProgress(n_rounds) as progress:
        res = train_federated(
            list(data.parties), sizes, enc, epochs, batch_size, learning_rate, rounds, seed,
            sigmoid_range=(low_high[0], low_high[1]), sigmoid_degree=sigmoid_degree,
            parameters=parameters, reveal=reveal, on_round=progress,
        )  # fmt: skip
    x_test, y_test = data.x_test[:test_rows], data.y_test[:test_rows]
    test_acc = float(np.mean(res.predict(x_test) == y_test)) if test_rows else float("nan")
    summary = {
        **res.to_dict(),
        "dataset": dataset,
        "test_rows": len(y_test),
        "test_accuracy": test_acc,
    }
    if model_out is not None:
        res.save(model_out, dataset, data.member_indices, data.test_indices)
        summary["model_file"] = str(model_out)
    if not as_json:
        _print(res, test_acc, len(y_test), out)
    emit(summary, as_json, json_out)
    if plot is not None:
        _plot(res, plot)
        err_console.print(f"figure written to {plot}")


def _print(res: TrainingResult, test_acc: float, test_rows: int, out: Any) -> None:
    rows = f" ({test_rows} rows)"
    s = res.schedule
    table = Table(title=f"MLP {'-'.join(map(str, s.sizes))}, last {s.secret_layers} encrypted")
    for c in ("round", "epoch", "loss", "accuracy", "max |u|", "seconds"):
        table.add_column(c, justify="right")
    for r in res.history:
        table.add_row(
            str(r.round),
            str(r.epoch),
            "-" if r.loss is None else f"{r.loss:.4f}",
            "-" if r.accuracy is None else f"{r.accuracy:.3f}",
            "-" if r.max_abs_u is None else f"{r.max_abs_u:.2f}",
            f"{r.seconds:.1f}",
        )
    out.print(table)
    pe = res.per_epoch()
    out.print(
        f"test accuracy {test_acc:.3f}{rows}; per party per epoch {pe['seconds_per_epoch']:.1f} s "
        f"and {fmt_bytes(pe['bytes_per_epoch'])}; key generation {res.setup_seconds:.1f} s, "
        f"{fmt_bytes(res.setup_bytes)}; wall {res.wall_seconds:.1f} s"
    )
    for w in res.warnings:
        out.print(f"warning: {w}", markup=False)


def _plot(res: TrainingResult, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in res.history if r.accuracy is not None]
    fig, ax = plt.subplots(figsize=(6, 4))
    epochs = [r.epoch for r in rows]
    ax.plot(epochs, [float(r.accuracy or 0.0) for r in rows], label="accuracy (train)")
    ax.plot(epochs, [float(r.loss or 0.0) for r in rows], label="loss")
    ax.set_xlabel("epoch")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
