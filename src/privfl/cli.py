"""The ``privfl`` command line.

Bad input exits with code 2 and a one-line reason on stderr; a failed protocol run exits
with code 1. Every command that produces results accepts ``--json``.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.table import Table

from privfl.audit.cli import audit_app
from privfl.clikit import console, err_console
from privfl.clikit import guard as _guard
from privfl.clikit import print_json as _print_json
from privfl.errors import InputError

app = typer.Typer(
    help="privfl: privacy-preserving federated evaluation and learning with homomorphic "
    "encryption.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
keys_app = typer.Typer(help="Provision keys for a real deployment.", no_args_is_help=True)
app.add_typer(keys_app, name="keys")
bench_app = typer.Typer(help="Studies that reproduce the papers' tables.", no_args_is_help=True)
app.add_typer(bench_app, name="bench")
forest_app = typer.Typer(help="RevFRF: revocable federated random forest.", no_args_is_help=True)
app.add_typer(forest_app, name="forest")
app.add_typer(audit_app, name="audit")


def _parse_range(text: str) -> tuple[float, float]:
    try:
        lo, hi = (float(v) for v in text.split(","))
    except ValueError:
        raise InputError(f"--score-range must be 'low,high', got {text!r}") from None
    return lo, hi


def _fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1000
    return f"{n:.2f} GB"


# ------------------------------------------------------------------------------ auc
@app.command()
@_guard
def auc(
    file: Annotated[Path, typer.Argument(help="CSV (.csv, .csv.gz) or Parquet file.")],
    score_column: Annotated[
        str, typer.Option("--score-column", "-s", help="Column of model scores.")
    ],
    label_column: Annotated[
        str, typer.Option("--label-column", "-l", help="Column of 0/1 labels.")
    ],
    party_column: Annotated[
        str | None, typer.Option(help="Column naming each row's party (one party per value).")
    ] = None,
    parties: Annotated[
        int | None, typer.Option(help="Deal rows at random to this many parties instead.")
    ] = None,
    thresholds: Annotated[int, typer.Option(help="Number N of decision points (>= 3).")] = 100,
    score_range: Annotated[str, typer.Option(help="Declared score range 'low,high'.")] = "0,1",
    seed: Annotated[int, typer.Option(help="Seed for dealing rows to parties.")] = 0,
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
            help="'semi-honest' or 'malicious' (masks, splits, permutation, two executions, "
            "verification by the parties)."
        ),
    ] = "semi-honest",
    splits: Annotated[
        int, typer.Option(help="Additive splits S per position (malicious only, 2..16).")
    ] = 4,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Global ROC-AUC of scores held by several parties, computed under CKKS (FHAUC).

    Example: privfl auc scores.csv -s score -l label --parties 15 --compare

    Against a malicious aggregator: add --security malicious --splits 4 (the parties verify
    the result and refuse to output one if the aggregator deviated).
    """
    import privfl

    rng = _parse_range(score_range)
    data = _load_parties(file, score_column, label_column, party_column, parties, seed, rng)
    if security not in ("semi-honest", "malicious"):
        raise InputError("--security must be 'semi-honest' or 'malicious'")
    res = privfl.federated_auc(
        data,
        thresholds,
        score_range=rng,
        max_samples_per_party=max_samples_per_party,
        security=security,
        splits=splits,
    )
    out = res.to_dict()
    if compare:
        binned = privfl.binned_auc(data, thresholds, score_range=rng)
        exact = privfl.exact_auc(data, score_range=rng)
        out["compare"] = {
            "binned_auc": binned,
            "sklearn_auc": exact,
            "abs_error_vs_binned": abs(res.auc - binned),
            "abs_error_vs_sklearn": abs(res.auc - exact),
        }
    if as_json:
        _print_json(out)
        return
    table = Table(
        title=f"FHAUC ({res.security}) on {file.name}: {res.num_parties} parties, "
        f"N={res.thresholds}"
    )
    table.add_column("quantity")
    table.add_column("value", justify="right")
    table.add_row("FHAUC AUC", f"{res.auc:.8f}")
    if compare:
        table.add_row("plaintext binned AUC", f"{out['compare']['binned_auc']:.8f}")
        table.add_row("scikit-learn exact AUC", f"{out['compare']['sklearn_auc']:.8f}")
        table.add_row("|FHAUC - binned|", f"{out['compare']['abs_error_vs_binned']:.2e}")
        table.add_row("|FHAUC - exact|", f"{out['compare']['abs_error_vs_sklearn']:.2e}")
    if res.verified is not None:
        table.add_row("verified (two executions agree)", str(res.verified))
        table.add_row("cheating bound log2 P", f"{res.cheat_probability_log2:.1f}")
    table.add_row("aggregator time", f"{res.timings['aggregator']:.3f} s")
    table.add_row("slowest party encrypt", f"{res.timings['party_encrypt']:.3f} s")
    table.add_row("upload per party", _fmt_bytes(res.bytes["party_upload"]))
    table.add_row("reply per party", _fmt_bytes(res.bytes["aggregator_reply"]))
    table.add_row("aggregator public context", _fmt_bytes(res.bytes["setup_public_context"]))
    console.print(table)


def _load_parties(
    file: Path,
    score_column: str,
    label_column: str,
    party_column: str | None,
    parties: int | None,
    seed: int,
    score_range: tuple[float, float],
) -> list[tuple[Any, Any]]:
    """Read a CSV/Parquet file and split it into parties (by column or dealt at random)."""
    import privfl
    from privfl.datasets import deal, read_table

    if (party_column is None) == (parties is None):
        raise InputError("give exactly one of --party-column or --parties K")
    df = read_table(file)
    for col in (score_column, label_column, party_column):
        if col is not None and col not in df.columns:
            raise InputError(f"unknown column {col!r}; columns are {list(df.columns)}")
    if party_column is not None:
        groups = [g for _, g in df.groupby(party_column, sort=True)]
        return [(g[score_column].to_numpy(), g[label_column].to_numpy()) for g in groups]
    assert parties is not None
    s = df[score_column].to_numpy()
    y = df[label_column].to_numpy()
    privfl.evaluation.reference.validate_parties([(s, y)], score_range)
    return deal(s, y, parties, seed)  # type: ignore[return-value]


# ------------------------------------------------------------------------------ dpauc
@app.command()
@_guard
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

    data = _load_parties(file, score_column, label_column, party_column, parties, seed, (0.0, 1.0))
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
        _print_json(out)
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


def _ints(text: str, what: str) -> list[int]:
    try:
        vals = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise InputError(f"{what} must be comma-separated integers, got {text!r}") from None
    if not vals:
        raise InputError(f"{what} is empty")
    return vals


def _floats(text: str, what: str) -> list[float]:
    try:
        vals = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise InputError(f"{what} must be comma-separated numbers, got {text!r}") from None
    if not vals or any(v <= 0 for v in vals):
        raise InputError(f"{what} must be positive numbers")
    return vals


@bench_app.command("accuracy")
@_guard
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
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write all results as JSON.")
    ] = None,
    plot: Annotated[
        Path | None, typer.Option(help="Write |AUC - exact| vs size to this PNG.")
    ] = None,
) -> None:
    """FHAUC vs DPAUC accuracy (FHAUC's Table 1) and DPAUC's count leakage (Table 2)."""
    from rich.progress import Progress

    from privfl.evaluation import study

    if (dataset is None) == (data is None):
        raise InputError("give exactly one of --dataset adult or --data FILE")
    size_list, n_list = _ints(sizes, "--sizes"), _ints(thresholds, "--thresholds")
    eps_list, leak_eps = _floats(epsilons, "--epsilons"), _floats(leak_epsilons, "--leak-epsilons")
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
        party = study.split_parties(sample, parties, iid, seed)[0]
        leak = study.leakage_study(
            party[0], party[1], leak_eps, (25, 50, 100), runs, seed, progress=advance
        )
    _print_accuracy_tables(rows, leak, eps_list, source, parties, runs, iid, leak_size, party)
    if json_out is not None:
        json_out.write_text(
            json.dumps(
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
                indent=2,
                default=float,
            )
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


@forest_app.command("run")
@_guard
def forest_run(
    dataset: Annotated[
        str,
        typer.Option(help="Comma-separated: adult, bank, wine, drug, appliances, coil2000, bike."),
    ] = "adult",
    participants: Annotated[
        str, typer.Option(help="Partition of the columns (only 'one-per-feature').")
    ] = "one-per-feature",
    trees: Annotated[int, typer.Option(help="Number of trees.")] = 100,
    depth: Annotated[int, typer.Option(help="Maximum depth.")] = 10,
    revoke: Annotated[
        str, typer.Option(help="Numbers of revoked participants to evaluate.")
    ] = "0,1,2,3,4,5",
    level: Annotated[int, typer.Option(help="Revocation level (1 or 2).")] = 1,
    key_bits: Annotated[int, typer.Option(help="DT-PKC modulus size |N|.")] = 2048,
    seed: Annotated[int, typer.Option(help="Seed of the split and the forests.")] = 0,
    rho: Annotated[
        int, typer.Option(help="ϱ: samples a participant probes for a feature's min and max.")
    ] = 32,
    candidates: Annotated[
        int, typer.Option(help="ς: candidate splits per feature, evenly inside (min, max).")
    ] = 8,
    reuse_variant: Annotated[
        bool,
        typer.Option(
            "--diagnostics",
            "--reuse-variant",
            help="Add rows that locate the gap to scikit-learn: its forest with a majority "
            "vote of the trees (as RevFRF votes), with sqrt(|F|) features per split, and "
            "RevFRF with features reusable below the node that used them.",
        ),
    ] = False,
    json_out: Annotated[
        Path | None, typer.Option("--json", help="Write the results as JSON.")
    ] = None,
) -> None:
    """Effectiveness of RevFRF (RevFRF's Tables 2 and 3) against a non-federated forest,
    with 0..k participants revoked."""
    from privfl.datasets import TABULAR_DATASETS
    from privfl.forest.study import effectiveness

    if participants != "one-per-feature":
        raise InputError("--participants supports 'one-per-feature'")
    names = [d.strip() for d in dataset.split(",") if d.strip()]
    unknown = [d for d in names if d not in TABULAR_DATASETS]
    if unknown:
        raise InputError(f"unknown dataset(s) {unknown}; choose from {', '.join(TABULAR_DATASETS)}")
    counts = _ints(revoke, "--revoke")
    if min(counts) < 0 or trees < 1 or depth < 1 or rho < 2 or candidates < 1:
        raise InputError(
            "--revoke values must be >= 0, --trees, --depth and --candidates >= 1, --rho >= 2"
        )
    results = []
    for name in names:
        with console.status(
            f"{name}: growing {trees} trees with {key_bits}-bit DT-PKC..."
        ) as status:
            res = effectiveness(
                name,
                trees,
                depth,
                counts,
                key_bits,
                level,
                seed,
                progress=lambda msg: status.update(msg),
                reuse_variant=reuse_variant,
                rho=rho,
                candidates=candidates,
            )
        results.append(res)
        task = res["task"]
        cols = ["accuracy", "recall", "f1"] if task == "classification" else ["mse", "mae", "r2"]
        table = Table(
            title=f"{res['description']}: {res['participants']} participants (one feature "
            f"each), {trees} trees, depth {depth}, |N|={key_bits}, ϱ={rho}, ς={candidates}"
        )
        for col in ("model", "revoked", *cols):
            table.add_column(col, justify="right")
        for row in res["rows"]:
            table.add_row(row["model"], str(row["revoked"]), *[f"{row[c]:.4f}" for c in cols])
        console.print(table)
    if json_out is not None:
        json_out.write_text(json.dumps(results, indent=2, default=float))


# ------------------------------------------------------------------------------ demo
@app.command()
@_guard
def demo(
    parties: Annotated[int, typer.Option(help="Number of parties to deal the test set to.")] = 15,
    thresholds: Annotated[int, typer.Option(help="Number N of decision points.")] = 100,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Train a model on scikit-learn's breast-cancer data, deal the test set to parties,
    and compare FHAUC with the plaintext binned and exact AUCs."""
    import privfl
    from privfl.datasets import breast_cancer_scores, deal

    start = time.perf_counter()
    with console.status("training a logistic regression on breast-cancer data...", spinner="dots"):
        scores, labels = breast_cancer_scores()
    data = deal(scores, labels, parties, seed=0)
    with console.status(f"running FHAUC with {parties} parties...", spinner="dots"):
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
    if as_json:
        _print_json(out)
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
        f"{_fmt_bytes(res.bytes['party_upload'])} up / "
        f"{_fmt_bytes(res.bytes['aggregator_reply'])} down",
    )
    console.print(table)
    console.print(
        f"|FHAUC - binned| = {abs(res.auc - binned):.1e}: the protocol computes the binned AUC "
        "exactly; the gap to scikit-learn comes only from the N decision points."
    )


# ------------------------------------------------------------------------------ keys
@keys_app.command("init")
@_guard
def keys_init(
    parties: Annotated[str, typer.Option(help="Comma-separated party names, e.g. site-a,site-b.")],
    out: Annotated[Path, typer.Option(help="Directory to write one folder per node into.")],
    key_holder: Annotated[
        str | None, typer.Option(help="Party that generates the CKKS keys (default: the first).")
    ] = None,
    max_thresholds: Annotated[
        int | None,
        typer.Option(help="Largest N to support (fewer Galois keys); default: every N."),
    ] = None,
    max_splits: Annotated[
        int, typer.Option(help="Largest S the malicious variant will use with --max-thresholds.")
    ] = 1,
    force: Annotated[bool, typer.Option(help="Overwrite a non-empty directory.")] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print what was written as JSON.")
    ] = False,
) -> None:
    """Provision FHAUC: identity keys, the wrapped CKKS secret and seed for every party,
    and the aggregator's public context."""
    from privfl.evaluation.provisioning import provision

    names = parties.split(",")
    if max_thresholds is not None and max_thresholds < 3:
        raise InputError("--max-thresholds must be at least 3")
    path = provision(
        names,
        out,
        key_holder=key_holder,
        max_points=max_thresholds,
        max_splits=max_splits,
        overwrite=force,
    )
    files = sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())
    sizes = {f: (path / f).stat().st_size for f in files}
    if as_json:
        _print_json({"out": str(path), "files": sizes})
        return
    table = Table(title=f"provisioned {len(names)} parties in {path}")
    table.add_column("file")
    table.add_column("size", justify="right")
    for f in files:
        table.add_row(f, _fmt_bytes(sizes[f]))
    console.print(table)
    console.print(
        "Give each party only its own folder; the aggregator gets 'aggregator/' "
        "(public material, it cannot decrypt)."
    )


def main() -> None:  # pragma: no cover
    app()


if __name__ == "__main__":  # pragma: no cover
    np.seterr(all="ignore")
    main()
