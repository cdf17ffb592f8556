"""``privfl dpauc``: the DPAUC baselines and their count leakage."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import numpy as np
import typer
from rich.table import Table

from privfl.cli._kit import (
    AsJson,
    JsonOut,
    check_output_path,
    console,
    emit,
    guard,
    parse_score_range,
)
from privfl.cli._tables import load_named_parties

if TYPE_CHECKING:
    from privfl.evaluation.dpauc import DPAUCResult

NOISE_NOTE = "outside [0, 1]: noise dominates"


def parse_thresholds(text: str) -> int | str:
    """``--thresholds``: an integer N, or a grid name (``dpauc``, ``dpauc:N``) that the library
    checks and refuses with a one-line reason."""
    try:
        return int(text)
    except ValueError:
        return text.strip()


@guard
def dpauc(
    file: Annotated[Path, typer.Argument(help="CSV (.csv, .csv.gz) or Parquet file.")],
    score_column: Annotated[str, typer.Option("--score-column", "-s", help="Column of scores.")],
    label_column: Annotated[
        str,
        typer.Option("--label-column", "-l", help="Column of labels (0/1, -1/1, or two values)."),
    ],
    party_column: Annotated[
        str | None, typer.Option(help="Column naming each row's party.")
    ] = None,
    parties: Annotated[int | None, typer.Option(help="Deal rows to this many parties.")] = None,
    thresholds: Annotated[
        str, typer.Option(help="N decision points, or 'dpauc' / 'dpauc:N' for DPAUC's grid.")
    ] = "100",
    score_range: Annotated[str, typer.Option(help="Declared score range 'low,high'.")] = "0,1",
    epsilon: Annotated[float, typer.Option(help="Privacy budget epsilon (> 0).")] = 1.0,
    mechanism: Annotated[
        str, typer.Option(help="'laplace' or 'rr' (randomized response).")
    ] = "laplace",
    postprocess: Annotated[
        str,
        typer.Option(
            help="'none' (FHAUC paper's reimplementation) or 'dpauc-authors' (counts clipped at "
            "0, points sorted by FPR: the AUC stays in [0, 1])."
        ),
    ] = "none",
    calibration: Annotated[
        str,
        typer.Option(
            help="Laplace scale per count: 'total-budget' (4N/eps), 'per-count' (1/eps, the "
            "DPAUC authors' script) or 'sensitivity-2' (8N/eps, FHAUC's Table 1 spread)."
        ),
    ] = "total-budget",
    noise_seed: Annotated[
        int | None, typer.Option(help="Seed for a reproducible run (default: OS randomness).")
    ] = None,
    seed: Annotated[int, typer.Option(help="Seed for dealing rows to parties.")] = 0,
    attack: Annotated[
        bool, typer.Option(help="Also run the server's count-inference attack on every party.")
    ] = False,
    pos_label: Annotated[
        str | None,
        typer.Option(help="The positive class (needed unless labels are 0/1 or -1/1; default 1)."),
    ] = None,
    as_json: AsJson = False,
    json_out: JsonOut = None,
) -> None:
    """DPAUC baseline: differentially private federated AUC (and what it leaks).

    Example: privfl dpauc scores.csv -s score -l label --parties 15 --epsilon 1 --attack
    """
    import privfl
    from privfl.evaluation.dpauc import infer_party_counts

    check_output_path(json_out, "--json-out")
    rng = parse_score_range(score_range)
    named = load_named_parties(
        file, score_column, label_column, party_column, parties, seed, rng, pos_label
    )
    data = list(named.values())
    res = privfl.dpauc(
        named,
        parse_thresholds(thresholds),
        epsilon,
        mechanism,
        noise_seed,
        score_range=rng,
        postprocess=postprocess,
        calibration=calibration,
    )
    out = res.to_dict() | {"sklearn_auc": privfl.exact_auc(data, score_range=rng)}
    if attack:
        rows = []
        for k, (name, rel) in enumerate(zip(named, res.noisy_counts, strict=True)):
            pos, neg = infer_party_counts(rel)
            y = np.asarray(data[k][1]).astype(int)
            rows.append(
                {
                    "party": name,
                    "positives": int(y.sum()),
                    "negatives": int(y.size - y.sum()),
                    "estimated_positives": pos,
                    "estimated_negatives": neg,
                }
            )
        out["attack"] = rows
    if not as_json:
        _print_tables(res, out, epsilon, attack)
    emit(out, as_json, json_out)


def _print_tables(res: DPAUCResult, out: dict[str, Any], epsilon: float, attack: bool) -> None:
    table = Table(
        title=f"DPAUC ({res.mechanism}, epsilon={epsilon:g}, N={res.thresholds}, "
        f"post-processing {res.postprocess})"
    )
    table.add_column("quantity")
    table.add_column("value", justify="right")
    note = f"  ({NOISE_NOTE})" if res.noise_dominates else ""
    table.add_row("DPAUC AUC", f"{res.auc:.6f}{note}")
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
