"""``privfl bench``: the studies that reproduce the papers' tables."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

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
from privfl.errors import InputError

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
    as_json: AsJson = False,
    json_out: JsonOut = None,
    plot: PlotOut = None,
) -> None:
    """FHAUC vs DPAUC accuracy (FHAUC's Table 1) and DPAUC's count leakage (Table 2);
    --plot writes |AUC - exact| against the size."""
    check_output_path(json_out, "--json-out")
    check_output_path(plot, "--plot")
    from rich.progress import Progress

    from privfl.datasets import deal
    from privfl.studies import fhauc_vs_dpauc as study

    if (dataset is None) == (data is None):
        raise InputError("give exactly one of --dataset adult or --data FILE")
    size_list, n_list = ints(sizes, "--sizes"), ints(thresholds, "--thresholds")
    eps_list, leak_eps = floats(epsilons, "--epsilons"), floats(leak_epsilons, "--leak-epsilons")
    if runs < 1 or parties < 1:
        raise InputError("--runs and --parties must be at least 1")
    if any(n < 3 for n in n_list):
        raise InputError("every N in --thresholds must be at least 3")
    if dataset is not None:
        if dataset != "adult":
            raise InputError(f"unknown dataset {dataset!r} (available: adult)")
        from privfl.datasets import adult_scores

        with console.status("training the Adult scorer (gradient boosting)...", spinner="dots"):
            scores, labels = adult_scores(seed)
        source = "adult: gradient-boosting scores on Adult's 16,281 test rows"
    else:
        import privfl
        from privfl.datasets import read_table

        assert data is not None
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
    with Progress(console=err_console, transient=True) as bar:
        task = bar.add_task("DPAUC runs", total=total)

        def advance(k: int) -> None:
            bar.advance(task, k)

        rows = study.accuracy_study(
            scores, labels, size_list, n_list, eps_list, parties, runs, iid, seed, progress=advance
        )
        leak_size = max([s for s in size_list if s <= 10_000] or [min(size_list)])
        sample = study.draw_sample(scores, labels, leak_size, seed + leak_size)
        party = deal(sample.scores, sample.labels, parties, seed, iid=iid)[0]
        leak = study.leakage_study(
            party[0], party[1], leak_eps, (25, 50, 100), runs, seed, progress=advance
        )
    _print_accuracy_tables(rows, leak, eps_list, source, parties, runs, iid, leak_size, party)
    emit(
        {
            "source": source,
            "parties": parties,
            "runs": runs,
            "split": "iid" if iid else "non-iid",
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


def _pm(stats: dict[str, float]) -> str:
    m, sd = stats["mean"], stats["std"]
    return f"{m:.3f}±{sd:.3f}" if abs(m) < 10 and sd < 10 else f"{m:.3g}±{sd:.3g}"


def _print_accuracy_tables(
    rows: Any,
    leak: Any,
    eps_list: list[float],
    source: str,
    parties: int,
    runs: int,
    iid: bool,
    leak_size: int,
    party: Any,
) -> None:
    split = "IID" if iid else "non-IID"
    t1 = Table(
        title=f"Table 1: AUC on {source}; {parties} parties ({split}); "
        f"DPAUC mean ± std over {runs} runs"
    )
    for col in ("size", "N", "scikit-learn", "FHAUC"):
        t1.add_column(col, justify="right")
    keys = [f"{m} eps={e:g}" for m in ("laplace", "rr") for e in eps_list]
    for k in keys:
        t1.add_column(
            k.replace("laplace eps=", "Lap ε=").replace("rr eps=", "RR ε="), justify="right"
        )
    for r in rows:
        size = f"{r.size}" + ("*" if r.with_replacement else "")
        t1.add_row(
            size,
            str(r.thresholds),
            f"{r.sklearn:.4f}",
            f"{r.fhauc:.4f}",
            *[_pm(r.dpauc[k]) for k in keys],
        )
    console.print(t1)
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
    for r in leak:
        t2.add_row(
            f"{r.epsilon:g}",
            str(r.thresholds),
            f"{r.total[0]:.1f} ± {r.total[1]:.1f}",
            f"{r.positives[0]:.1f} ± {r.positives[1]:.1f}",
            f"{r.negatives[0]:.1f} ± {r.negatives[1]:.1f}",
        )
    console.print(t2)
    console.print("FHAUC reveals none of these counts: the aggregator only sees ciphertexts.")
