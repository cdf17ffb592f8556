"""``privfl forest local``: RevFRF over a real Flower deployment on this machine."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from privfl.cli._kit import (
    AsJson,
    JsonOut,
    check_input_file,
    check_output_path,
    console,
    emit,
    err_console,
    guard,
)
from privfl.cli._progress import Tracker


@guard
def forest_local(
    file: Annotated[Path, typer.Argument(help="CSV (.csv, .csv.gz) or Parquet file.")],
    label_column: Annotated[str, typer.Option("--label-column", "-l", help="The label column.")],
    participants: Annotated[
        int, typer.Option(help="Participants; the feature columns are split among them.")
    ] = 3,
    id_column: Annotated[
        str | None, typer.Option(help="Column of row ids (default: the row numbers).")
    ] = None,
    predict: Annotated[
        int, typer.Option(help="Last rows of FILE held out and predicted securely.")
    ] = 1,
    task: Annotated[str, typer.Option(help="'classification' or 'regression'.")] = (
        "classification"
    ),
    trees: Annotated[int, typer.Option(help="Number of trees.")] = 10,
    depth: Annotated[int, typer.Option(help="Maximum depth.")] = 10,
    key_bits: Annotated[
        int, typer.Option(help="DT-PKC modulus size |N| (2048 minimum; 3072 for 128-bit).")
    ] = 2048,
    insecure_key_bits: Annotated[
        bool, typer.Option(help="INSECURE: allow --key-bits 512..2046 (tests, demos).")
    ] = False,
    seed: Annotated[int, typer.Option(help="Seed of the bootstrap and feature subsets.")] = 0,
    workdir: Annotated[
        Path | None,
        typer.Option(
            help="New or empty folder for the data split, keys, results and logs (default: a "
            "fresh folder under the system's temporary directory)."
        ),
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds the whole Flower run may take.")] = 3600,
    as_json: AsJson = False,
    json_out: JsonOut = None,
) -> None:
    """Split FILE's feature columns over --participants, give the labels to the center
    server, provision every node, start a SuperLink and SuperNodes (participants, CC, a
    requester) on free loopback ports, grow the forest and predict the last --predict rows
    for the requester. Everything started is stopped at the end, also on failure or Ctrl-C;
    Flower's logs stay in the working folder.

    Example: privfl forest local adult.csv -l income --trees 2 --depth 3
    """
    from privfl.cli.flower import _stop_on_sigterm
    from privfl.crypto.dtpkc import check_key_bits
    from privfl.datasets import read_table
    from privfl.federation.flower.forest_local import (
        ForestSettings,
        check_table,
        run_forest_local,
    )
    from privfl.federation.flower.quickstart import check_workdir

    check_output_path(json_out, "--json-out")
    check_input_file(file, "FILE")
    settings = ForestSettings(
        label_column, participants, id_column, predict, task, trees, depth, key_bits,
        insecure_key_bits, seed,
    )  # fmt: skip
    settings.check()
    check_key_bits(key_bits, insecure_key_bits)
    check_table(read_table(file), settings)  # before any key or node
    if workdir is not None:
        check_workdir(workdir)
    _stop_on_sigterm()
    with Tracker("privfl forest local", console=err_console) as bar:
        res = run_forest_local(
            file, settings, workdir=workdir, timeout=timeout, progress=bar.update
        )
    emit(res, as_json, json_out)
    if as_json:
        return
    s = res.summary
    table = Table(title=f"RevFRF over Flower: predictions for the {predict} held-out row(s)")
    for col in ("row", "prediction"):
        table.add_column(col, justify="right")
    for i, value in enumerate(res.predictions):
        table.add_row(str(i), str(value))
    console.print(table)
    console.print(
        f"{participants} participants + CC + requester, {trees} trees of depth {depth} "
        f"({s.get('internal_nodes', '?')} tree nodes), |N|={key_bits}: run {res.run_id}, "
        f"{sum(res.rounds.values())} rounds, {res.seconds:.0f} s"
    )
    console.print(f"data, keys, results and logs: {res.workdir}")
