"""The ``privfl`` command line: one module per command group, the only place that prints.

Conventions for every command: ``--json`` prints one JSON object to stdout, ``--json-out
FILE`` writes it to a file (the path is checked before any long work); bad input exits with
code 2 and a one-line reason, a failed protocol run with code 1.
"""

from __future__ import annotations

import typer

from privfl.cli.audit import audit_app
from privfl.cli.bench import bench_app
from privfl.cli.dpauc import dpauc
from privfl.cli.fhauc import auc, demo
from privfl.cli.forest import forest_app
from privfl.cli.keys import keys_app
from privfl.cli.train import train

app = typer.Typer(
    help="privfl: privacy-preserving federated evaluation and learning with homomorphic "
    "encryption. Every command that produces results takes --json (one JSON object on "
    "stdout) and, where a file is useful, --json-out FILE (checked before the work starts). "
    "Bad input exits with code 2 and a one-line reason; a failed protocol run with code 1.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)
app.command()(auc)
app.command()(dpauc)
app.command()(demo)
app.command()(train)
app.add_typer(keys_app, name="keys")
app.add_typer(bench_app, name="bench")
app.add_typer(forest_app, name="forest")
app.add_typer(audit_app, name="audit")

__all__ = ["app"]
