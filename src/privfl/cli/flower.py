"""``privfl flower``: FHAUC over a real Flower deployment on this machine."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from privfl.cli._kit import (
    AsJson,
    JsonOut,
    check_input_file,
    check_output_dir,
    check_output_path,
    console,
    emit,
    err_console,
    guard,
)
from privfl.cli._progress import Tracker
from privfl.cli._tables import load_named_parties
from privfl.errors import InputError

flower_app = typer.Typer(
    help="FHAUC and encrypted training over Flower: local deployments from one data file.",
    no_args_is_help=True,
)


def _stop_on_sigterm() -> None:
    """Treat SIGTERM (kill, a CI runner's timeout) like Ctrl-C, so every process this command
    started is stopped on the way out."""
    import signal

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, interrupt)


@flower_app.command("local")
@guard
def local(
    file: Annotated[Path, typer.Argument(help="CSV (.csv, .csv.gz) or Parquet file.")],
    party_column: Annotated[
        str, typer.Option(help="Column naming each row's party: one SuperNode per value.")
    ],
    score_column: Annotated[
        str, typer.Option("--score-column", "-s", help="Column of model scores in [0, 1].")
    ],
    label_column: Annotated[
        str,
        typer.Option("--label-column", "-l", help="Column of labels (0/1, -1/1, or two values)."),
    ],
    security: Annotated[
        str, typer.Option(help="'semi-honest' or 'malicious' (provisioned and run).")
    ] = "semi-honest",
    thresholds: Annotated[int, typer.Option(help="Number N of decision points (>= 3).")] = 100,
    keys: Annotated[
        str,
        typer.Option(
            help="'single' (a key holder creates the CKKS key at provisioning) or 'threshold' "
            "(no key holder: every SuperNode generates its own key share; needs "
            "privfl\\[threshold])."
        ),
    ] = "single",
    reveal: Annotated[
        str,
        typer.Option(
            help="What the parties learn: 'auc', 'curve' (every decision point's normalised "
            "counts, written to each result file) or 'metrics'; every SuperNode consents to it."
        ),
    ] = "auc",
    workdir: Annotated[
        Path | None,
        typer.Option(
            help="New or empty folder for the data split, keys, results and logs (default: a "
            "fresh folder under the system's temporary directory)."
        ),
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds the whole Flower run may take.")] = 600,
    pos_label: Annotated[
        str | None,
        typer.Option(help="The positive class (needed unless labels are 0/1 or -1/1; default 1)."),
    ] = None,
    as_json: AsJson = False,
    json_out: JsonOut = None,
) -> None:
    """Split FILE by --party-column, provision one key folder per party, start a SuperLink
    and one SuperNode per party on free loopback ports, run the FHAUC app and print every
    party's result. Everything started is stopped at the end, also on failure or Ctrl-C.

    Example: privfl flower local scores.csv --party-column site -s score -l label
    [--keys threshold] [--security malicious] [--reveal curve]
    """
    from privfl.evaluation.fhauc.policy import Security
    from privfl.evaluation.fhauc.reveal import Reveal
    from privfl.federation.flower.quickstart import LocalRunFailed, check_workdir, run_local

    check_output_path(json_out, "--json-out")
    Security.parse(security)
    Reveal.parse(reveal)
    if thresholds < 3:
        raise InputError("--thresholds must be at least 3")
    if keys not in ("single", "threshold"):
        raise InputError(f"--keys must be 'single' or 'threshold', not {keys!r}")
    check_input_file(file, "FILE")
    if workdir is not None:
        check_workdir(workdir)
        check_output_dir(workdir, "--workdir")
    # the data checks of `privfl auc` (party names, labels, scores), before any process starts
    load_named_parties(
        file, score_column, label_column, party_column, None, 0, (0.0, 1.0), pos_label
    )
    _stop_on_sigterm()
    with Tracker("privfl flower local", console=err_console) as bar:
        try:
            res = run_local(
                file, party_column, score_column, label_column, security=security,
                thresholds=thresholds, workdir=workdir, timeout=timeout, progress=bar.update,
                keys=keys, pos_label=pos_label, reveal=reveal,
            )  # fmt: skip
        except LocalRunFailed as exc:
            emit(exc.run, as_json, json_out)
            raise
    emit(res, as_json, json_out)
    if as_json:
        return
    table = Table(
        title=f"FHAUC over Flower ({res.security}, N={res.thresholds}): "
        f"{len(res.parties)} SuperNodes, run {res.run_id}, {res.seconds:.0f} s"
    )
    for col in ("party", "AUC", "verified", "session"):
        table.add_column(col, justify="right")
    for name, r in res.parties.items():
        table.add_row(name, f"{r['auc']:.8f}", str(r.get("verified")), str(r["session"])[:12])
    console.print(table)
    console.print(f"data, keys, results and logs: {res.workdir}")


@flower_app.command("run")
@guard
def run(
    app: Annotated[Path, typer.Argument(help="Flower app folder (e.g. examples/flower-fhauc).")],
    connection: Annotated[
        str | None, typer.Argument(help="SuperLink connection (default: Flower's default).")
    ] = None,
    run_config: Annotated[
        str, typer.Option("--run-config", "-c", help="Run config overrides, as for flwr run.")
    ] = "",
    timeout: Annotated[float, typer.Option(help="Seconds the run may take.")] = 3600,
    as_json: AsJson = False,
    json_out: JsonOut = None,
) -> None:
    """`flwr run APP [CONNECTION] --stream` that exits with status 1 when the run failed.

    `flwr run` itself exits 0 whatever the ServerApp did (Flower 1.41); this command streams
    the same log (to stderr), then asks the SuperLink for the run's final status and exits 1
    with the ServerApp's error (which names the failing party) unless it is
    finished:completed. --json prints {run_id, status, errors}."""
    import sys

    from privfl.errors import ProtocolError
    from privfl.federation.flower.local import LocalFederation

    check_output_path(json_out, "--json-out")
    if not (app / "pyproject.toml").is_file():
        raise InputError(f"{app} is not a Flower app folder (no pyproject.toml)")
    fed = LocalFederation(Path.cwd(), connection=connection or "", private_home=False)
    outcome = fed.run(
        app.resolve(), run_config, timeout=timeout,
        on_line=lambda line: print(line, file=sys.stderr, flush=True),
    )  # fmt: skip
    result = {"run_id": outcome.run_id, "status": outcome.status, "errors": outcome.errors()}
    emit(result, as_json, json_out)
    if not outcome.ok:
        reason = "; ".join(outcome.errors()) or "see the log above"
        raise ProtocolError(f"run {outcome.run_id} ended {outcome.status}: {reason}")
    if not as_json:
        console.print(f"run {outcome.run_id}: {outcome.status}")


def _register_training() -> None:
    from privfl.cli.flower_train import train, train_node

    flower_app.command("train")(train)
    flower_app.command("train-node")(train_node)


_register_training()
