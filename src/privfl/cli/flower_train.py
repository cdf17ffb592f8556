"""``privfl flower train`` and ``privfl flower train-node``: encrypted training over Flower."""

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
from privfl.errors import InputError


@guard
def train(
    file: Annotated[Path, typer.Argument(help="CSV (.csv, .csv.gz) or Parquet file.")],
    party_column: Annotated[
        str, typer.Option(help="Column naming each row's party: one SuperNode per value.")
    ],
    label_column: Annotated[
        str, typer.Option("--label-column", "-l", help="Class labels (integers or strings).")
    ],
    feature_columns: Annotated[
        str | None,
        typer.Option(help="Comma-separated feature columns (default: every other column)."),
    ] = None,
    layers: Annotated[
        str | None,
        typer.Option(help="Model widths, e.g. 64,30,20,10 (default: features,30,20,classes)."),
    ] = None,
    encrypted_layers: Annotated[
        int, typer.Option(help="Last layers kept encrypted under threshold CKKS (0, 1 or 2).")
    ] = 1,
    epochs: Annotated[int, typer.Option(help="Training epochs (one averaging round each).")] = 30,
    batch_size: Annotated[int, typer.Option(help="Mini-batch size.")] = 10,
    learning_rate: Annotated[float, typer.Option(help="Learning rate.")] = 5.0,
    seed: Annotated[int, typer.Option(help="Seed of the initial model and batch order.")] = 0,
    parameters: Annotated[
        str,
        typer.Option(help="'secure' (ring 2^15, 128-bit) or 'test' (INSECURE small ring, demos)."),
    ] = "secure",
    evaluate_every: Annotated[
        int,
        typer.Option(help="Evaluate on the parties' own rows every k rounds (0 = never)."),
    ] = 1,
    reveal_to: Annotated[
        str | None,
        typer.Option(
            help="Give the encrypted layers at the end to this party (party-0, ...); every "
            "node consents here because one operator runs them all."
        ),
    ] = None,
    workdir: Annotated[
        Path | None,
        typer.Option(
            help="New or empty folder for the node folders, models, histories and logs "
            "(default: a fresh folder under the system's temporary directory)."
        ),
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds the whole Flower run may take.")] = 3600,
    as_json: AsJson = False,
    json_out: JsonOut = None,
) -> None:
    """Train a model on FILE over a local Flower deployment: one party process and one
    SuperNode per value of --party-column, a SuperLink, the training ServerApp. The parties
    generate the threshold key jointly (no dealer); the last --encrypted-layers stay
    encrypted. Each node writes model.npz and history.json in its folder under --workdir.
    Everything started is stopped at the end, also on failure or Ctrl-C; the processes' logs
    stay in the working folder.

    Example: privfl flower train data.csv --party-column site -l label --parameters test
    """
    from privfl.cli.flower import _stop_on_sigterm
    from privfl.federation.flower.quickstart import check_workdir
    from privfl.federation.flower.train_local import TrainRunFailed, run_train_local

    check_output_path(json_out, "--json-out")
    check_input_file(file, "FILE")
    if workdir is not None:
        check_workdir(workdir)
        check_output_dir(workdir, "--workdir")
    sizes = None
    if layers is not None:
        try:
            sizes = [int(s) for s in layers.split(",")]
        except ValueError:
            raise InputError(f"--layers takes comma-separated integers, got {layers!r}") from None
    columns = [c.strip() for c in feature_columns.split(",")] if feature_columns else None
    _stop_on_sigterm()
    with Tracker("privfl flower train", console=err_console) as bar:
        try:
            res = run_train_local(
                file, party_column, label_column, columns, layers=sizes,
                encrypted_layers=encrypted_layers, epochs=epochs, batch_size=batch_size,
                learning_rate=learning_rate, seed=seed, parameters=parameters,
                evaluate_every=evaluate_every,
                reveal_to=reveal_to, workdir=workdir, timeout=timeout, progress=bar.update,
            )  # fmt: skip
        except TrainRunFailed as exc:
            emit(exc.run.to_dict(), as_json, json_out)
            raise
    emit(res.to_dict(), as_json, json_out)
    if as_json:
        return
    server = res.server
    table = Table(
        title=f"Training over Flower: {len(res.parties)} SuperNodes, run {res.run_id}, "
        f"{server.get('flower_rounds')} Flower rounds, {res.seconds:.0f} s"
    )
    for col in ("round", "accuracy", "loss", "seconds"):
        table.add_column(col, justify="right")
    for row in server.get("history", []):
        acc, loss = row.get("accuracy"), row.get("loss")
        table.add_row(
            str(row["round"]), "-" if acc is None else f"{acc:.3f}",
            "-" if loss is None else f"{loss:.4f}", f"{row['seconds']:.1f}",
        )  # fmt: skip
    console.print(table)
    console.print(f"models and histories: {res.workdir}/nodes/<party>/")


@guard
def train_node(
    node_dir: Annotated[
        Path, typer.Argument(help="The node's own folder: data.npz, roster.json (see --help).")
    ],
    name: Annotated[
        str | None, typer.Option(help="The party this node plays (default: the folder's name).")
    ] = None,
    reveal_to: Annotated[
        str | None,
        typer.Option(help="Consent to giving the final encrypted layers to this party."),
    ] = None,
    parameters: Annotated[
        str,
        typer.Option(
            help="The parameter set this node accepts: 'secure', or 'test' (INSECURE small "
            "ring) only for demos; a session asking for another is refused."
        ),
    ] = "secure",
    idle_timeout: Annotated[
        float, typer.Option(help="Exit after this many seconds without a message.")
    ] = 3600,
    as_json: AsJson = False,
    json_out: JsonOut = None,
) -> None:
    """Run this party's long-lived process for one training session, next to its SuperNode
    (whose node config sets party-socket = NODE_DIR/party.sock). The folder holds data.npz
    (x: features, y: labels as 0..C-1 in the agreed class order) and roster.json (the
    parties' public identities this operator pins). On first start the process makes the
    party's identity key (identity.key, mode 0600) and writes its public half to
    identity.pub for the other operators to pin. At the end it writes model.npz and
    history.json and exits.
    """
    from privfl.federation.flower.train_party import PartyProcess

    check_output_path(json_out, "--json-out")
    if not node_dir.is_dir():
        raise InputError(f"{node_dir} is not a folder")
    if parameters not in ("secure", "test"):
        raise InputError(f"--parameters must be 'secure' or 'test', not {parameters!r}")
    proc = PartyProcess(node_dir, name or node_dir.name, reveal_to, parameters)
    err_console.print(f"{proc.name}: listening on {proc.socket_path}")
    proc.serve(idle_timeout)
    result = {"party": proc.name, "closed": proc.closed, "messages": proc.messages,
              "seconds": round(proc.seconds, 3)}  # fmt: skip
    emit(result, as_json, json_out)
    if not proc.closed:
        raise InputError(f"{proc.name}: no message for {idle_timeout:g} s; stopped")
