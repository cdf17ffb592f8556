"""``privfl forest``: RevFRF, the revocable federated random forest."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.table import Table

from privfl.cli._kit import (
    AsJson,
    JsonOut,
    check_output_path,
    console,
    emit,
    err_console,
    guard,
    ints,
)
from privfl.cli._progress import Tracker
from privfl.cli.forest_keys import forest_keys_app
from privfl.cli.forest_local import forest_local
from privfl.errors import InputError

forest_app = typer.Typer(help="RevFRF: revocable federated random forest.", no_args_is_help=True)
forest_app.add_typer(forest_keys_app, name="keys")
forest_app.command("local")(forest_local)


@forest_app.command("run")
@guard
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
    key_bits: Annotated[
        int, typer.Option(help="DT-PKC modulus size |N| (2048 minimum; 3072 for 128-bit).")
    ] = 2048,
    insecure_key_bits: Annotated[
        bool, typer.Option(help="INSECURE: allow --key-bits 512..2046 (tests, paper's 1024).")
    ] = False,
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
    as_json: AsJson = False,
    json_out: JsonOut = None,
) -> None:
    """Effectiveness of RevFRF (RevFRF's Tables 2 and 3) against a non-federated forest,
    with 0..k participants revoked."""
    check_output_path(json_out, "--json-out")
    from privfl.crypto.dtpkc import MIN_KEY_BITS, check_key_bits
    from privfl.datasets import TABULAR_DATASETS, load_tabular
    from privfl.studies.revfrf import check_revocations, effectiveness

    if participants != "one-per-feature":
        raise InputError("--participants supports 'one-per-feature'")
    names = [d.strip() for d in dataset.split(",") if d.strip()]
    unknown = [d for d in names if d not in TABULAR_DATASETS]
    if unknown:
        raise InputError(f"unknown dataset(s) {unknown}; choose from {', '.join(TABULAR_DATASETS)}")
    counts = ints(revoke, "--revoke", minimum=0)
    for value, option, low in (
        (trees, "--trees", 1), (depth, "--depth", 1), (candidates, "--candidates", 1),
        (rho, "--rho", 2),
    ):  # fmt: skip
        if value < low:
            raise InputError(f"{option} must be at least {low}, got {value}")
    if level not in (1, 2):
        raise InputError(f"--level must be 1 or 2, got {level}")
    if key_bits < MIN_KEY_BITS and not insecure_key_bits:
        raise InputError(
            f"--key-bits {key_bits} is insecure (1024 bits is about 80-bit security); use "
            f">= {MIN_KEY_BITS}, or add --insecure-key-bits for tests and paper comparisons"
        )
    check_key_bits(key_bits, insecure_key_bits)
    datasets = [load_tabular(name, seed) for name in names]
    for data in datasets:  # before any forest is grown
        check_revocations(data, counts)
    results = []
    for data in datasets:
        with Tracker(
            f"{data.name}: growing {trees} trees with {key_bits}-bit DT-PKC", console=err_console
        ) as status:
            res = effectiveness(
                data, trees, depth, counts, key_bits, level, seed,
                progress=status.update, reuse_variant=reuse_variant, rho=rho,
                candidates=candidates, allow_insecure_key_bits=insecure_key_bits,
            )  # fmt: skip
        results.append(res)
        table = Table(
            title=f"{res.description}: {res.participants} participants (one feature "
            f"each), {trees} trees, depth {depth}, |N|={key_bits}, ϱ={rho}, ς={candidates}"
        )
        for col in ("model", "revoked", *res.metric_names):
            table.add_column(col, justify="right")
        for row in res.rows:
            cells = [f"{row.metrics[c]:.4f}" for c in res.metric_names]
            table.add_row(row.model, str(row.revoked), *cells)
        (err_console if as_json else console).print(table)
    emit({"datasets": results}, as_json, json_out)  # one JSON object, like every command
