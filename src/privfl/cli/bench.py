"""``privfl bench``: the studies that reproduce the papers' tables."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import numpy as np
import typer
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
    guard,
    ints,
)
from privfl.cli._progress import Tracker
from privfl.errors import InputError

if TYPE_CHECKING:
    from privfl._typing import FloatArray, Int8Array
    from privfl.studies.fhauc_vs_dpauc import AccuracyRow, DPStats, LeakageRow

bench_app = typer.Typer(help="Studies that reproduce the papers' tables.", no_args_is_help=True)


@bench_app.command("accuracy")
@guard
def bench_accuracy(
    dataset: Annotated[str | None, typer.Option(help="Built-in scored dataset: 'adult'.")] = None,
    data: Annotated[
        Path | None, typer.Option(help="CSV/Parquet file with scores and labels.")
    ] = None,
    score_column: Annotated[str, typer.Option(help="Score column of --data.")] = "score",
    label_column: Annotated[str, typer.Option(help="Label column of --data.")] = "label",
    sizes: Annotated[str, typer.Option(help="Global test sizes.")] = "100,1000,10000,100000",
    thresholds: Annotated[str, typer.Option(help="Numbers of decision points N.")] = "25,50,100",
    epsilons: Annotated[str, typer.Option(help="DPAUC privacy budgets.")] = "1,8",
    parties: Annotated[int, typer.Option(help="Number of parties.")] = 15,
    runs: Annotated[int, typer.Option(help="DPAUC runs per setting.")] = 100,
    iid: Annotated[
        bool, typer.Option("--iid/--non-iid", help="Random deal or score-sorted blocks.")
    ] = True,
    leak_epsilons: Annotated[str, typer.Option(help="Epsilons of the leakage table.")] = "1,2,4,8",
    seed: Annotated[int, typer.Option(help="Seed of the sampling and noise (reproducible).")] = 0,
    calibration: Annotated[
        str,
        typer.Option(
            help="DPAUC_Lap noise per count: 'total-budget' (4N/eps), 'per-count' (1/eps) or "
            "'sensitivity-2' (8N/eps, reproduces the spread of FHAUC's Table 1)."
        ),
    ] = "total-budget",
    as_json: AsJson = False,
    json_out: JsonOut = None,
    plot: PlotOut = None,
) -> None:
    """FHAUC vs DPAUC accuracy (FHAUC's Table 1) and DPAUC's count leakage (Table 2);
    --plot writes |AUC - exact| against the size.

    Every DPAUC setting is reported twice on the same noise: faithful (no post-processing, the
    FHAUC paper's reading) and with the DPAUC authors' post-processing (counts clipped at 0,
    points sorted by FPR)."""
    check_output_path(json_out, "--json-out")
    check_output_path(plot, "--plot")
    from privfl.datasets import check_seed, deal
    from privfl.evaluation.dpauc import CALIBRATIONS, MAX_DECISION_POINTS
    from privfl.studies import fhauc_vs_dpauc as study

    if (dataset is None) == (data is None):
        raise InputError("give exactly one of --dataset adult or --data FILE")
    size_list, n_list = ints(sizes, "--sizes"), ints(thresholds, "--thresholds")
    eps_list, leak_eps = floats(epsilons, "--epsilons"), floats(leak_epsilons, "--leak-epsilons")
    if runs < 1 or parties < 1:
        raise InputError("--runs and --parties must be at least 1")
    if any(not 3 <= n <= MAX_DECISION_POINTS for n in n_list):
        raise InputError(f"every N in --thresholds must be in 3..{MAX_DECISION_POINTS:,}")
    if min(size_list) < max(2, parties):
        raise InputError(
            f"every --sizes value must be at least 2 and at least --parties ({parties})"
        )
    if calibration not in CALIBRATIONS:
        raise InputError(f"--calibration must be one of {', '.join(CALIBRATIONS)}")
    check_seed(seed, "--seed")
    if dataset is not None:
        if dataset != "adult":
            raise InputError(f"unknown dataset {dataset!r} (available: adult)")
        from privfl.datasets import adult_scores

        with Tracker("training the Adult scorer (gradient boosting)", console=err_console):
            scores, labels = adult_scores(seed)
        source = "adult: gradient-boosting scores on Adult's 16,281 test rows"
    else:
        import privfl
        from privfl.datasets import read_table

        if data is None:  # checked above: exactly one of --dataset / --data
            raise InputError("give --data FILE")
        df = read_table(data)
        for col in (score_column, label_column):
            if col not in df.columns:
                raise InputError(f"unknown column {col!r}; columns are {list(df.columns)}")
        scores = df[score_column].to_numpy(dtype=float)
        labels = df[label_column].to_numpy()
        privfl.evaluation.reference.validate_parties([(scores, labels)], (0.0, 1.0))
        labels = labels.astype(np.int8)
        source = str(data)
    total = len(size_list) * len(n_list) * len(eps_list) * 2 * runs + len(leak_eps) * 3 * runs
    with Tracker("DPAUC runs", total, console=err_console) as bar:
        advance = bar.advance

        rows = study.accuracy_study(
            scores, labels, size_list, n_list, eps_list, parties, runs, iid, seed,
            progress=advance, calibration=calibration,
        )  # fmt: skip
        leak_size = max([s for s in size_list if s <= 10_000] or [min(size_list)])
        sample = study.draw_sample(scores, labels, leak_size, seed + leak_size)
        party = deal(sample.scores, sample.labels, parties, seed, iid=iid)[0]
        leak = study.leakage_study(
            party[0], party[1], leak_eps, (25, 50, 100), runs, seed, progress=advance,
            calibration=calibration,
        )  # fmt: skip
    if not as_json:
        _print_accuracy_tables(
            rows, leak, eps_list, f"{source}; {parties} parties ({'IID' if iid else 'non-IID'})",
            runs, calibration, leak_size, party,
        )  # fmt: skip
    emit(
        {
            "source": source,
            "parties": parties,
            "runs": runs,
            "split": "iid" if iid else "non-iid",
            "calibration": calibration,
            "accuracy": [r.to_dict() for r in rows],
            "leakage": {
                "party_samples": int(party[1].size),
                "global_size": leak_size,
                "rows": [r.to_dict() for r in leak],
            },
        },
        as_json,
        json_out,
    )
    if plot is not None:
        study.plot_errors(rows, str(plot))


def _pm(stats: DPStats) -> str:
    m, sd = stats.mean, stats.std
    cell = f"{m:.3f}±{sd:.3f}" if abs(m) < 10 and sd < 10 else f"{m:.3g}±{sd:.3g}"
    return cell + ("†" if stats.outside_unit_runs else "")


def _print_accuracy_tables(
    rows: Sequence[AccuracyRow],
    leak: Sequence[LeakageRow],
    eps_list: list[float],
    setting: str,
    runs: int,
    calibration: str,
    leak_size: int,
    party: tuple[FloatArray, Int8Array],
) -> None:
    from privfl.studies.fhauc_vs_dpauc import variant_key

    t1 = Table(
        title=f"Table 1: AUC on {setting}; DPAUC mean ± std over {runs} runs, "
        f"Laplace calibration {calibration}"
    )
    for col in ("size", "N", "scikit-learn", "FHAUC"):
        t1.add_column(col, justify="right")
    keys = [variant_key("laplace", e, pp) for e in eps_list for pp in ("none", "dpauc-authors")]
    keys += [variant_key("rr", e) for e in eps_list]
    for k in keys:
        label = k.replace("laplace eps=", "Lap ε=").replace("rr eps=", "RR ε=")
        t1.add_column(label.replace(" dpauc-authors", " authors"), justify="right")
    for r in rows:
        size = f"{r.size}" + ("*" if r.with_replacement else "")
        t1.add_row(
            size,
            str(r.thresholds),
            f"{r.sklearn:.4f}",
            f"{r.fhauc:.4f}",
            *[_pm(r.dpauc[k]) if k in r.dpauc else "" for k in keys],
        )
    console.print(t1)
    console.print(
        "authors = the DPAUC authors' post-processing of the same runs (counts clipped at 0, "
        "points sorted by FPR); on RR's exact noisy-label counts it changes nothing (JSON)."
    )
    if any(s.outside_unit_runs for r in rows for s in r.dpauc.values()):
        console.print("† some runs gave an AUC outside [0, 1]: noise dominates (count in JSON)")
    if any(r.with_replacement for r in rows):
        console.print(
            "* more examples than the data has: resampled with replacement from the real scores"
        )
    t2 = Table(
        title=f"Table 2: DPAUC_Lap count inference on one party ({party[1].size} of {leak_size} "
        f"samples; {int(party[1].sum())} positive); |error| in samples, mean ± std over {runs} runs"
    )
    for col in ("epsilon", "N", "total", "positives", "negatives"):
        t2.add_column(col, justify="right")
    for lr in leak:
        t2.add_row(
            f"{lr.epsilon:g}",
            str(lr.thresholds),
            f"{lr.total[0]:.1f} ± {lr.total[1]:.1f}",
            f"{lr.positives[0]:.1f} ± {lr.positives[1]:.1f}",
            f"{lr.negatives[0]:.1f} ± {lr.negatives[1]:.1f}",
        )
    console.print(t2)
    console.print("FHAUC reveals none of these counts: the aggregator only sees ciphertexts.")
