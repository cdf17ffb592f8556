"""``privfl auc`` and ``privfl demo``: FHAUC from the command line."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.table import Table

from privfl.cli import _metrics
from privfl.cli._kit import (
    AsJson,
    JsonOut,
    PlotOut,
    check_output_path,
    console,
    emit,
    err_console,
    fmt_bytes,
    guard,
    parse_score_range,
)
from privfl.cli._progress import Tracker, as_callback
from privfl.cli._tables import load_named_parties
from privfl.errors import InputError
from privfl.evaluation.curves import hanley_mcneil_interval
from privfl.evaluation.fhauc.policy import DEFAULT_GUARANTEE_BITS, DEFAULT_SPLITS


@guard
def auc(
    file: Annotated[Path, typer.Argument(help="CSV (.csv, .csv.gz) or Parquet file.")],
    score_column: Annotated[
        str, typer.Option("--score-column", "-s", help="Column of model scores.")
    ],
    label_column: Annotated[
        str,
        typer.Option("--label-column", "-l", help="Column of labels (0/1, -1/1, or two strings)."),
    ],
    party_column: Annotated[
        str | None, typer.Option(help="Column naming each row's party (one party per value).")
    ] = None,
    parties: Annotated[
        int | None, typer.Option(help="Deal rows at random to this many parties instead.")
    ] = None,
    thresholds: Annotated[int, typer.Option(help="Number N of decision points (>= 3).")] = 100,
    score_range: Annotated[str, typer.Option(help="Declared score range 'low,high'.")] = "0,1",
    seed: Annotated[int, typer.Option(min=0, help="Seed for dealing rows to parties.")] = 0,
    compare: Annotated[
        bool,
        typer.Option(help="Also compute the plaintext binned AUC and scikit-learn's exact AUC."),
    ] = False,
    max_samples_per_party: Annotated[
        int | None,
        typer.Option(
            help="Public bound on any party's sample count (semi-honest default 10^7; "
            "malicious default: the largest party rounded up to a power of two)."
        ),
    ] = None,
    security: Annotated[
        str,
        typer.Option(
            help="'semi-honest' or 'malicious' (masks, splits, permutation, --executions "
            "independent executions, three by default, and verification by the parties)."
        ),
    ] = "semi-honest",
    splits: Annotated[
        int | None,
        typer.Option(
            help="Additive splits S per position (malicious only, 2..16; default "
            f"{DEFAULT_SPLITS})."
        ),
    ] = None,
    executions: Annotated[
        int | None,
        typer.Option(
            help="Independent executions (malicious only; the paper uses 2, each extra one "
            "makes an undetected deviation about 2^5 to 2^10 times less likely). Default: the "
            "fewest from 3 up that meet the required accuracy and guarantee for this data."
        ),
    ] = None,
    min_guarantee_bits: Annotated[
        float | None,
        typer.Option(
            help="Refuse a verified AUC unless a deviation above 1e-6 would have been caught "
            f"except with probability 2^-BITS (malicious only; default {DEFAULT_GUARANTEE_BITS:g})."
        ),
    ] = None,
    force: Annotated[
        bool, typer.Option(help="Run even when the estimated memory exceeds 4 GiB.")
    ] = False,
    keys: Annotated[
        str,
        typer.Option(
            help="'single' (one CKKS key shared by the parties) or 'threshold' (every party "
            "holds its own share of a joint OpenFHE key; needs the \\[threshold] extra)."
        ),
    ] = "single",
    reveal: Annotated[
        str,
        typer.Option(
            help="What the parties learn: 'auc' (the AUC only), 'curve' (ROC and PR curves "
            "up to a common secret scale) or 'metrics' (the metrics at --metrics-at)."
        ),
    ] = "auc",
    metrics_at: Annotated[
        float | None,
        typer.Option(
            help="Also print accuracy, precision, recall, FPR, F1, balanced accuracy and MCC "
            "at score >= THRESHOLD: with --reveal metrics (that session), or --reveal curve "
            "when THRESHOLD is a decision point (read from the curve)."
        ),
    ] = None,
    pos_label: Annotated[
        str | None,
        typer.Option(help="The positive class (needed for string labels; default 1)."),
    ] = None,
    plot: PlotOut = None,
    as_json: AsJson = False,
    json_out: JsonOut = None,
) -> None:
    """Global ROC-AUC of scores held by several parties, computed under CKKS (FHAUC).

    Example: privfl auc scores.csv -s score -l label --parties 15 --compare

    Against a malicious aggregator: add --security malicious --splits 4 (the parties verify
    the result and refuse to output one if the aggregator deviated).

    Curves and metrics: --reveal curve --plot roc.png, --thresholds 101 --metrics-at 0.5
    (a decision point of the 101), --pos-label yes.
    """
    import privfl

    splits, min_guarantee_bits = malicious_options(security, splits, executions, min_guarantee_bits)
    check_output_path(json_out, "--json-out")
    check_output_path(plot, "--plot")
    rng = parse_score_range(score_range)
    _metrics.check_options(reveal, plot, metrics_at, thresholds, rng)
    named = load_named_parties(
        file, score_column, label_column, party_column, parties, seed, rng, pos_label
    )
    data = list(named.values())
    options = {
        "score_range": rng, "security": security, "splits": splits, "executions": executions,
        "max_samples_per_party": max_samples_per_party,
        "min_guarantee_bits": min_guarantee_bits, "force": force, "keys": keys,
    }  # fmt: skip
    label = f"FHAUC ({security}, {keys} keys, reveal {reveal}): protocol steps"
    with Tracker(label, console=err_console, lazy=True) as bar:
        on_step = as_callback(bar)
        options["progress"] = on_step
        if reveal != "auc":
            curve_main(file, data, thresholds, reveal, metrics_at, plot, compare, options,
                       as_json, json_out)  # fmt: skip
            return
        res = privfl.federated_auc(
            named,
            thresholds,
            score_range=rng,
            max_samples_per_party=max_samples_per_party,
            security=security,
            splits=splits,
            executions=executions,
            min_guarantee_bits=min_guarantee_bits,
            force=force,
            keys=keys,
            progress=on_step,
        )
    out = res.to_dict()
    if keys != "single":
        out["keys"] = keys
    bounds = [(float(y.sum()), float(y.size - y.sum())) for _, y in data]
    low = (max(b[0] for b in bounds), max(b[1] for b in bounds))
    out["confidence_interval_95"] = hanley_mcneil_interval(res.auc, *low)
    if compare:
        binned = privfl.binned_auc(data, thresholds, score_range=rng)
        exact = privfl.exact_auc(data, score_range=rng)
        out["compare"] = {
            "binned_auc": binned,
            "sklearn_auc": exact,
            "abs_error_vs_binned": abs(res.auc - binned),
            "abs_error_vs_sklearn": abs(res.auc - exact),
        }
    emit(out, as_json, json_out)
    if as_json:
        return
    table = Table(
        title=f"FHAUC ({res.security}) on {file.name}: {res.num_parties} parties, "
        f"N={res.thresholds}"
    )
    table.add_column("quantity")
    table.add_column("value", justify="right")
    table.add_row("FHAUC AUC", f"{res.auc:.8f}")
    ci = out["confidence_interval_95"]
    table.add_row("95% interval (Hanley-McNeil, conservative)", f"{ci[0]:.4f} .. {ci[1]:.4f}")
    if compare:
        table.add_row("plaintext binned AUC", f"{out['compare']['binned_auc']:.8f}")
        table.add_row("scikit-learn exact AUC", f"{out['compare']['sklearn_auc']:.8f}")
        table.add_row("|FHAUC - binned|", f"{out['compare']['abs_error_vs_binned']:.2e}")
        table.add_row("|FHAUC - exact|", f"{out['compare']['abs_error_vs_sklearn']:.2e}")
    if res.verified is not None:
        table.add_row(f"verified ({res.executions} executions agree)", str(res.verified))
        table.add_row("precision (honest error bound)", f"{res.precision:.1e}")
        table.add_row("log2 P(deviation > 1e-6 accepted)", f"{res.guarantee_log2:.1f}")
        table.add_row("paper's permutation bound log2 P", f"{res.cheat_probability_log2:.1f}")
    add_cost_rows(table, res.timings, res.bytes)
    console.print(table)


# The table rows of a run's timings and sizes; a key mode that does not produce one (a
# threshold session has no public context from a key holder) simply has no row.
TIMING_ROWS = (
    ("aggregator", "aggregator time"),
    ("party_keygen", "slowest party key share"),
    ("party_encrypt", "slowest party encrypt"),
    ("party_decrypt", "slowest party decrypt"),
)
BYTE_ROWS = (
    ("party_upload", "upload per party"),
    ("aggregator_reply", "reply per party"),
    ("setup_public_context", "aggregator public context"),
    ("party_setup_traffic", "key setup traffic per party"),
    ("party_session_traffic", "session traffic per party"),
)


def malicious_options(
    security: str, splits: int | None, executions: int | None, min_guarantee_bits: float | None
) -> tuple[int, float]:
    """``(splits, min_guarantee_bits)`` with their defaults; :class:`InputError` before any
    work when an option of the malicious variant is given to another (it would be ignored,
    and the run would look as if it had been used)."""
    options = {
        "--splits": splits, "--executions": executions, "--min-guarantee-bits": min_guarantee_bits
    }  # fmt: skip
    given = [name for name, value in options.items() if value is not None]
    if given and security != "malicious":
        raise InputError(
            f"{', '.join(given)} only apply to --security malicious (this run is {security!r})"
        )
    return (
        DEFAULT_SPLITS if splits is None else splits,
        DEFAULT_GUARANTEE_BITS if min_guarantee_bits is None else min_guarantee_bits,
    )


def add_cost_rows(table: Table, timings: Mapping[str, float], sizes: Mapping[str, float]) -> None:
    """Rows for the timings and byte counts the run recorded (whatever its key mode; a field
    that does not apply to the mode is absent or 0 and gets no row)."""
    for key, label in TIMING_ROWS:
        if timings.get(key):
            table.add_row(label, f"{timings[key]:.3f} s")
    for key, label in BYTE_ROWS:
        if sizes.get(key):
            table.add_row(label, fmt_bytes(int(sizes[key])))


def curve_main(
    file: Path,
    data: list[tuple[Any, Any]],
    thresholds: int,
    reveal: str,
    metrics_at: float | None,
    plot: Path | None,
    compare: bool,
    options: dict[str, Any],
    as_json: bool,
    json_out: Path | None,
) -> None:
    """``privfl auc --reveal curve|metrics``: the curve and/or the threshold metrics."""
    out: dict[str, Any] = {"reveal": reveal}
    curve = _metrics.run_curve(data, thresholds, options) if reveal == "curve" else None
    cmp = None
    if curve is not None:
        cmp = (
            _metrics.compare_curve(data, thresholds, curve, options["score_range"])
            if compare
            else None
        )
        out |= _metrics.curve_json(curve, cmp)
        if plot is not None:
            _metrics.plot_curves(curve, plot, f"{file.name}: {len(data)} parties, N={thresholds}")
    metrics = None
    if metrics_at is not None:
        metrics = _metrics.run_metrics(data, metrics_at, curve, options)
        out["metrics"] = metrics[0].to_dict() | {"reveal": metrics[1]}
    emit(out, as_json, json_out)
    if as_json:
        return
    # the metrics reveal counts at its one threshold: N = 3 decision points (+inf, t, -inf)
    points = thresholds if curve is not None else 3
    table = Table(title=f"FHAUC ({options['security']}, reveal={reveal}) on {file.name}: "
                  f"{len(data)} parties, N={points}")  # fmt: skip
    table.add_column("quantity")
    table.add_column("value", justify="right")
    if curve is not None:
        _metrics.add_curve_rows(table, curve, cmp)
    if metrics is not None:
        _metrics.add_metric_rows(table, *metrics)
    console.print(table)
    if plot is not None:
        console.print(f"ROC and precision-recall curves written to {plot}")


@guard
def demo(
    parties: Annotated[int, typer.Option(help="Number of parties to deal the test set to.")] = 15,
    thresholds: Annotated[int, typer.Option(help="Number N of decision points.")] = 100,
    as_json: AsJson = False,
    json_out: JsonOut = None,
) -> None:
    """Train a model on scikit-learn's breast-cancer data, deal the test set to parties,
    and compare FHAUC with the plaintext binned and exact AUCs."""
    import privfl
    from privfl.datasets import breast_cancer_scores, deal

    check_output_path(json_out, "--json-out")
    start = time.perf_counter()
    with Tracker("training a logistic regression on breast-cancer data", console=err_console):
        scores, labels = breast_cancer_scores()
    data = deal(scores, labels, parties, seed=0)
    with Tracker(f"running FHAUC with {parties} parties", console=err_console):
        res = privfl.federated_auc(data, thresholds)
    binned = privfl.binned_auc(data, thresholds)
    exact = privfl.exact_auc(data)
    out = res.to_dict() | {
        "dataset": "sklearn breast_cancer (test half, logistic regression scores)",
        "samples": int(labels.size),
        "binned_auc": binned,
        "sklearn_auc": exact,
        "wall_seconds": time.perf_counter() - start,
    }
    emit(out, as_json, json_out)
    if as_json:
        return
    table = Table(
        title=f"FHAUC demo: {labels.size} test samples of breast-cancer data, "
        f"{parties} parties, N={thresholds}"
    )
    for col in ("FHAUC AUC", "binned AUC", "sklearn AUC", "aggregator time", "bytes per party"):
        table.add_column(col, justify="right")
    table.add_row(
        f"{res.auc:.6f}",
        f"{binned:.6f}",
        f"{exact:.6f}",
        f"{res.timings['aggregator']:.3f} s",
        f"{fmt_bytes(res.bytes['party_upload'])} up / "
        f"{fmt_bytes(res.bytes['aggregator_reply'])} down",
    )
    console.print(table)
    console.print(
        f"|FHAUC - binned| = {abs(res.auc - binned):.1e}: the protocol computes the binned AUC "
        "exactly; the gap to scikit-learn comes only from the N decision points."
    )
