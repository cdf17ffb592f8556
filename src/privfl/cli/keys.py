"""``privfl keys``: provisioning a real deployment."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from privfl.cli._kit import console, fmt_bytes, guard, print_json
from privfl.errors import InputError

keys_app = typer.Typer(help="Provision keys for a real deployment.", no_args_is_help=True)


@keys_app.command("init")
@guard
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
    from privfl.federation.provisioning import provision

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
        print_json({"out": str(path), "files": sizes})
        return
    table = Table(title=f"provisioned {len(names)} parties in {path}")
    table.add_column("file")
    table.add_column("size", justify="right")
    for f in files:
        table.add_row(f, fmt_bytes(sizes[f]))
    console.print(table)
    console.print(
        "Give each party only its own folder; the aggregator gets 'aggregator/' "
        "(public material, it cannot decrypt)."
    )
