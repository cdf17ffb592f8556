"""``privfl forest keys``: provisioning a RevFRF deployment (the KGC's setup, run once)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from privfl.cli._kit import (
    AsJson,
    JsonOut,
    check_output_dir,
    check_output_path,
    guard,
    names,
    report_provisioned,
)
from privfl.errors import InputError

forest_keys_app = typer.Typer(help="Provision RevFRF node folders.", no_args_is_help=True)


@forest_keys_app.command("init")
@guard
def forest_keys_init(
    participants: Annotated[
        str, typer.Option(help="Comma-separated participant (feature owner) names.")
    ],
    columns: Annotated[
        str, typer.Option(help="Comma-separated feature-column counts, one per participant.")
    ],
    out: Annotated[Path, typer.Option(help="Directory to write one folder per node into.")],
    requesters: Annotated[
        str, typer.Option(help="Comma-separated requester names (FRF-Predict), may be empty.")
    ] = "",
    trees: Annotated[int, typer.Option(help="Number of trees.")] = 10,
    depth: Annotated[int, typer.Option(help="Maximum depth.")] = 10,
    rho: Annotated[int, typer.Option(help="ϱ: samples probed for a feature's range.")] = 32,
    candidates: Annotated[int, typer.Option(help="ς: candidate splits per feature.")] = 8,
    key_bits: Annotated[
        int, typer.Option(help="DT-PKC modulus size |N| (2048 minimum; 3072 for 128-bit).")
    ] = 2048,
    insecure_key_bits: Annotated[
        bool, typer.Option(help="INSECURE: allow --key-bits 512..2046 (tests only).")
    ] = False,
    force: Annotated[bool, typer.Option(help="Overwrite a non-empty directory.")] = False,
    as_json: AsJson = False,
    json_out: JsonOut = None,
) -> None:
    """Run the KGC once: folders for CS, CC, every participant and requester, each holding
    only that node's keys (p, q and λ are never written)."""
    from privfl.federation.revfrf_keys import provision_revfrf

    check_output_path(json_out, "--json-out")
    check_output_dir(out, "--out")
    owners = names(participants, "participant")
    asking = names(requesters, "requester", minimum=0)
    try:
        counts = [int(c) for c in columns.split(",")]
    except ValueError:
        raise InputError("--columns must be comma-separated integers, e.g. 4,4,3") from None
    path = provision_revfrf(
        owners, counts, out, requesters=asking, key_bits=key_bits,
        allow_insecure_key_bits=insecure_key_bits, n_trees=trees, max_depth=depth, rho=rho,
        candidates=candidates, overwrite=force,
    )  # fmt: skip
    report_provisioned(
        path,
        f"provisioned RevFRF nodes in {path}",
        "Give each node only its own folder (CS/, CC/, one per participant and requester); "
        "the KGC kept nothing.",
        {},
        as_json,
        json_out,
    )
