"""``privfl train``: federated MLP training with the last layers under threshold CKKS."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import dataclass
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
    check_input_file,
    check_output_path,
    console,
    emit,
    err_console,
    floats,
    fmt_bytes,
    guard,
    ints,
)
from privfl.cli._progress import Tracker
from privfl.errors import InputError
from privfl.training.config import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_ENCRYPTED_LAYERS,
    DEFAULT_EPOCHS,
    DEFAULT_HIDDEN,
    DEFAULT_LEARNING_RATE,
    DEFAULT_SIGMOID_DEGREE,
)

if TYPE_CHECKING:
    from privfl.training.result import RoundMetrics, TrainingResult


def encrypt_last_from(text: str, layers: list[int]) -> int:
    """``--encrypt-last``: a number of last layers, or a ``privfl audit recommend`` JSON file
    (its ``encrypt_layers`` must name a non-empty group of last layers of the same model: a
    file naming none is refused rather than read as "train plain FedAvg")."""
    takes = (
        "it takes a number of last layers or the JSON file of 'privfl audit recommend --json-out'"
    )
    if not text.strip():
        raise InputError(f"--encrypt-last is empty; {takes}")
    try:
        number = float(text)
    except ValueError:
        number = None
    if number is not None:
        if not number.is_integer() or number < 0:
            raise InputError(f"--encrypt-last must be a whole number >= 0, got {text!r} ({takes})")
        return int(number)
    path = Path(text)
    if path.is_dir():
        raise InputError(
            f"--encrypt-last {text} is a directory, not a recommendation file; {takes}"
        )
    if not path.is_file():
        raise InputError(f"--encrypt-last: the recommendation file {text} does not exist; {takes}")
    try:
        rec = json.loads(path.read_text())
        named = rec.get("encrypt_layers")
        total = int(rec["layers"])
        sizes = rec.get("model_sizes")
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InputError(f"{path} is not a 'privfl audit recommend' result: {exc}") from None
    if not isinstance(named, list) or not named:
        raise InputError(
            f"{path} names no layer to encrypt (encrypt_layers: {named!r}): the recommendation "
            "must come from an audit that covered the output layer; run 'privfl audit "
            "recommend' on such an audit, or pass --encrypt-last 0 to train plain FedAvg"
        )
    try:
        chosen = [int(v) for v in named]
    except (TypeError, ValueError):
        raise InputError(f"{path}: encrypt_layers must list layer numbers, got {named!r}") from None
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
        self.tty = sys.stderr.isatty() and not Tracker.quiet
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
        if Tracker.quiet:
            return
        elapsed = time.perf_counter() - self.start
        eta = elapsed / row.round * (self.rounds - row.round)
        err_console.print(
            f"round {row.round}/{self.rounds} {info} {row.seconds:.1f} s/round, "
            f"elapsed {elapsed:.0f} s, ETA {eta:.0f} s",
            markup=False,
            highlight=False,
        )


@dataclass(frozen=True)
class _Data:
    """What ``train`` trains on: per-party rows, an optional test set, and for the built-in
    dataset the row indices a saved model records for the membership audit."""

    name: str
    parties: dict[str, tuple[Any, Any]]
    x_test: Any
    y_test: Any
    members: Any = ()
    non_members: Any = ()


def _load(
    data: Path | None,
    dataset: str | None,
    party_column: str | None,
    label_column: str | None,
    feature_columns: str | None,
    test_data: Path | None,
    parties: int | None,
    per_party: int | None,
    seed: int,
) -> _Data:
    """The built-in dataset (``--dataset``) or the user's table (``--data``), checked."""
    if data is None:
        for given, flag in (
            (party_column, "--party-column"),
            (label_column, "--label-column"),
            (feature_columns, "--feature-columns"),
            (test_data, "--test-data"),
        ):
            if given is not None:
                raise InputError(f"{flag} goes with --data FILE")
        from privfl.training.data import federated_digits

        name = dataset or "digits8x8"
        for value, flag in ((parties, "--parties"), (per_party, "--per-party")):
            if value is not None and value < 1:
                raise InputError(f"{flag} must be at least 1, got {value}")
        parties = 3 if parties is None else parties
        built = federated_digits(parties, 30 if per_party is None else per_party, seed, name)
        dealt = {str(k): p for k, p in enumerate(built.parties)}
        return _Data(
            name, dealt, built.x_test, built.y_test, built.member_indices, built.test_indices
        )
    if dataset is not None or parties is not None or per_party is not None:
        raise InputError("--data FILE replaces --dataset, --parties and --per-party")
    if party_column is None or label_column is None:
        raise InputError("--data FILE needs --party-column and --label-column")
    check_input_file(data, "--data")
    if test_data is not None:
        check_input_file(test_data, "--test-data")
    from privfl.training.table import load_table

    columns = None
    if feature_columns is not None:
        columns = [c.strip() for c in feature_columns.split(",") if c.strip()]
    table = load_table(data, label_column, party_column, columns)
    classes = np.unique(np.concatenate([y for _, y in table.parties.values()]))
    if classes.size < 2:
        raise InputError(
            f"{data}: the label column {label_column!r} holds one class ({classes[0]!r}): a "
            "classifier needs at least 2"
        )
    x_test: Any = np.zeros((0, len(table.feature_columns)))
    y_test: Any = np.zeros(0, dtype=np.int64)
    if test_data is not None:
        test = load_table(test_data, label_column, None, table.feature_columns)
        x_test, y_test = test.parties["all"]
    return _Data(str(data), table.parties, x_test, y_test)


@guard
def train(
    data: Annotated[
        Path | None,
        typer.Option(
            help="Your training table (.csv, .csv.gz or .parquet): one row per sample, with "
            "--party-column and --label-column."
        ),
    ] = None,
    party_column: Annotated[
        str | None, typer.Option(help="Column naming the party that holds each row.")
    ] = None,
    label_column: Annotated[
        str | None, typer.Option(help="Class label column (integers or strings).")
    ] = None,
    feature_columns: Annotated[
        str | None,
        typer.Option(help="Comma-separated feature columns (default: all other columns)."),
    ] = None,
    test_data: Annotated[
        Path | None,
        typer.Option(help="A held-out table with the same feature and label columns."),
    ] = None,
    dataset: Annotated[
        str | None,
        typer.Option(help="Built-in dataset when no --data: digits8x8 (binarised digits)."),
    ] = None,
    parties: Annotated[
        int | None, typer.Option(help="Parties of the built-in dataset (default 3).")
    ] = None,
    per_party: Annotated[
        int | None, typer.Option(help="Rows per party of the built-in dataset (default 30).")
    ] = None,
    encrypt_last: Annotated[
        str,
        typer.Option(
            help="How many last layers stay encrypted (0 = plain FedAvg), or the JSON file "
            "of 'privfl audit recommend --json-out'."
        ),
    ] = str(DEFAULT_ENCRYPTED_LAYERS),
    epochs: Annotated[int, typer.Option(help="Training epochs.")] = DEFAULT_EPOCHS,
    rounds: Annotated[
        int | None, typer.Option(help="Averaging rounds (default: one per epoch).")
    ] = None,
    layers: Annotated[
        str | None,
        typer.Option(help="Layer widths (default: features,30,20,classes)."),
    ] = None,
    batch_size: Annotated[int, typer.Option(help="Mini-batch size.")] = DEFAULT_BATCH_SIZE,
    learning_rate: Annotated[
        float, typer.Option(help="SGD learning rate.")
    ] = DEFAULT_LEARNING_RATE,
    sigmoid_range: Annotated[
        str, typer.Option(help="Interval of the Chebyshev sigmoid 'low,high'.")
    ] = "-10,10",
    sigmoid_degree: Annotated[int, typer.Option(help="Chebyshev degree.")] = DEFAULT_SIGMOID_DEGREE,
    parameters: Annotated[
        str, typer.Option(help="'secure' (ring 2^15, 128-bit) or 'test' (insecure, fast).")
    ] = "secure",
    reveal: Annotated[
        bool, typer.Option(help="Jointly decrypt the encrypted layers at the end.")
    ] = False,
    model_out: Annotated[
        Path | None,
        typer.Option(
            "--model-out",
            help="Save the model (plaintext layers unless revealed) as .npz; 'privfl audit "
            "membership --model' audits it when trained on the built-in dataset (a model of "
            "your --data table records no rows to attack).",
        ),
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
    (SmartCryptNN), on your table (--data) or a built-in dataset. Data and settings are
    checked before key generation (exit 2 naming the party, column or limit). --model-out
    saves the model; 'privfl audit membership --model' can audit it only when it was trained
    on the built-in dataset, whose file records which rows were members and which were held
    out (a model of your --data table holds no rows to attack)."""
    out = err_console if as_json else console
    for path, what in ((json_out, "--json-out"), (plot, "--plot"), (model_out, "--model-out")):
        check_output_path(path, what)
    low_high = floats(sigmoid_range, "--sigmoid-range", positive=False)
    if len(low_high) != 2:
        raise InputError("--sigmoid-range must be 'low,high'")
    if test_rows < 0:
        raise InputError("--test-rows must be >= 0")
    src = _load(
        data, dataset, party_column, label_column, feature_columns, test_data, parties,
        per_party, seed,
    )  # fmt: skip
    from privfl.training.data import prepare_parties
    from privfl.training.federated import train_federated

    found = prepare_parties(src.parties)
    if len(src.y_test):
        found.encode(src.y_test, "--test-data")  # the same kind of labels, all known
    if layers is not None:
        sizes = ints(layers, "--layers", minimum=1)
        if sizes[0] != found.features:
            raise InputError(
                f"--layers {layers} starts with {sizes[0]} inputs but the data has "
                f"{found.features} feature columns: start --layers with {found.features}"
            )
    else:
        sizes = [found.features, *DEFAULT_HIDDEN, len(found.classes)]
    enc = encrypt_last_from(encrypt_last, sizes)
    n_rounds = rounds if rounds is not None else epochs
    with _RoundProgress(n_rounds) as progress:
        res = train_federated(
            src.parties, sizes, enc, epochs, batch_size, learning_rate, rounds, seed,
            sigmoid_range=(low_high[0], low_high[1]), sigmoid_degree=sigmoid_degree,
            parameters=parameters, reveal=reveal, on_round=progress,
        )  # fmt: skip
    x_test, y_test = src.x_test[:test_rows], src.y_test[:test_rows]
    test_acc = float(np.mean(res.predict_labels(x_test) == y_test)) if len(y_test) else None
    summary = {
        **res.to_dict(),
        "dataset": src.name,
        "test_rows": len(y_test),
        "test_accuracy": test_acc,
    }
    if model_out is not None:
        res.save(model_out, src.name, src.members, src.non_members)
        summary["model_file"] = str(model_out)
    if not as_json:
        _print(res, test_acc, len(y_test), out)
    emit(summary, as_json, json_out)
    if plot is not None:
        _plot(res, plot)
        err_console.print(f"figure written to {plot}")


def _print(res: TrainingResult, test_acc: float | None, test_rows: int, out: Any) -> None:
    acc = "no test rows" if test_acc is None else f"test accuracy {test_acc:.3f} ({test_rows} rows)"
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
        f"{acc}; per party per epoch {pe['seconds_per_epoch']:.1f} s "
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
