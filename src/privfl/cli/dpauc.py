"""``privfl dpauc``: the DPAUC baselines and their count leakage."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.table import Table

from privfl.cli._kit import console, guard, print_json
from privfl.cli.fhauc import load_parties


@guard
def dpauc(
    file: Annotated[Path, typer.Argument(help="CSV (.csv, .csv.gz) or Parquet file.")],
    score_column: Annotated[str, typer.Option("--score-column", "-s", help="Column of scores.")],
    label_column: Annotated[
        str, typer.Option("--label-column", "-l", help="Column of 0/1 labels.")
    ],
    party_column: Annotated[
        str | None, typer.Option(help="Column naming each row's party.")
    ] = None,
    parties: Annotated[int | None, typer.Option(help="Deal rows to this many parties.")] = None,
    thresholds: Annotated[
        str, typer.Option(help="N decision points, or 'dpauc' / 'dpauc:N' for DPAUC's grid.")
    ] = "100",
    epsilon: Annotated[float, typer.Option(help="Privacy budget epsilon (> 0).")] = 1.0,
    mechanism: Annotated[
        str, typer.Option(help="'laplace' or 'rr' (randomized response).")
    ] = "laplace",
    noise_seed: Annotated[
        int | None, typer.Option(help="Seed for a reproducible run (default: OS randomness).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed for dealing rows to parties.")] = 0,
    attack: Annotated[
        bool, typer.Option(help="Also run the server's count-inference attack on every party.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """DPAUC baseline: differentially private federated AUC (and what it leaks)."""
    import privfl
    from privfl.evaluation.dpauc import infer_party_counts

    data = load_parties(file, score_column, label_column, party_column, parties, seed, (0.0, 1.0))
    thr: Any = int(thresholds) if thresholds.isdigit() else thresholds
    res = privfl.dpauc(data, thr, epsilon, mechanism, noise_seed)
    out = res.to_dict() | {"sklearn_auc": privfl.exact_auc(data)}
    if attack:
        rows = []
        for k, rel in enumerate(res.noisy_counts):
            pos, neg = infer_party_counts(rel)
            y = np.asarray(data[k][1]).astype(int)
            rows.append(
                {
                    "party": k,
                    "positives": int(y.sum()),
                    "negatives": int(y.size - y.sum()),
                    "estimated_positives": pos,
                    "estimated_negatives": neg,
                }
            )
        out["attack"] = rows
    if as_json:
        print_json(out)
        return
    table = Table(title=f"DPAUC ({mechanism}, epsilon={epsilon:g}, N={res.thresholds})")
    table.add_column("quantity")
    table.add_column("value", justify="right")
    table.add_row("DPAUC AUC", f"{res.auc:.6f}")
    table.add_row("scikit-learn exact AUC", f"{out['sklearn_auc']:.6f}")
    table.add_row("|error|", f"{abs(res.auc - out['sklearn_auc']):.2e}")
    console.print(table)
    if attack:
        t2 = Table(title="server's inference of each party's class counts from its release")
        for col in ("party", "positives", "estimated", "negatives", "estimated "):
            t2.add_column(col, justify="right")
        for r in out["attack"]:
            t2.add_row(
                str(r["party"]),
                str(r["positives"]),
                f"{r['estimated_positives']:.1f}",
                str(r["negatives"]),
                f"{r['estimated_negatives']:.1f}",
            )
        console.print(t2)
