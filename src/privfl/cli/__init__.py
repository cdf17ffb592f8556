"""The ``privfl`` command line: one module per command group, the only place that prints.

Conventions for every command (``tests/test_cli_conventions.py`` checks them over all
commands): ``--json`` prints one JSON object to stdout, ``--json-out FILE`` writes it to a
file (the path is checked before any long work); progress on stderr (plain lines with rate and
ETA when stderr is not a terminal; ``privfl --quiet COMMAND`` prints none); bad input exits
with code 2 and a one-line reason, a failed protocol run with code 1; ``privfl --version``.
"""

from __future__ import annotations

from typing import Annotated

import typer

from privfl.cli._progress import Tracker
from privfl.cli.audit import audit_app
from privfl.cli.bench import bench_app
from privfl.cli.dpauc import dpauc
from privfl.cli.fhauc import auc, demo
from privfl.cli.flower import flower_app
from privfl.cli.forest import forest_app
from privfl.cli.keys import keys_app
from privfl.cli.train import train

app = typer.Typer(
    help="privfl: privacy-preserving federated evaluation and learning with homomorphic "
    "encryption. Every command takes --json (one JSON object on stdout, nothing else there) "
    "and --json-out FILE (the same object written to FILE, checked before the work starts); "
    "progress goes to stderr, as plain lines with rate and ETA when not on a terminal "
    "(privfl --quiet COMMAND: none). "
    "Bad input exits with code 2 and a one-line reason; a failed protocol run with code 1.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _version(value: bool) -> None:
    if value:
        from privfl import __version__

        typer.echo(f"privfl {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet",
            "-q",
            help="No progress bars or progress lines on stderr (errors and results unchanged).",
        ),
    ] = False,
) -> None:
    """privfl's command line (see --help of each command)."""
    Tracker.quiet = quiet


app.command()(auc)
app.command()(dpauc)
app.command()(demo)
app.command()(train)
app.add_typer(keys_app, name="keys")
app.add_typer(bench_app, name="bench")
app.add_typer(forest_app, name="forest")
app.add_typer(audit_app, name="audit")
app.add_typer(flower_app, name="flower")

__all__ = ["app"]
