"""``privfl flower train``: encrypted training over a real local Flower deployment, from one
data file.

:func:`run_train_local` splits the table by its party column (party ``k`` = the ``k``-th party
value in order of first appearance, named ``party-k``; labels mapped to one class order for
all), starts one party process per party (``privfl flower train-node``: each makes its own
identity key in its own folder; the public halves are pinned in every node's
``roster.json``), a SuperLink and one SuperNode per party on free loopback ports
(:class:`~privfl.federation.flower.local.LocalFederation`), runs the training app (setup with
the joint key generation, then the rounds) and collects each node's model and history.
Everything lives in one working folder (default: a fresh folder under the system's temporary
directory)::

    WORKDIR/nodes/party-k/   data.npz identity.key identity.pub roster.json model.npz history.json
    WORKDIR/server/history-<run>.json   # the server's history (rounds, accuracy, exchanges)
    WORKDIR/app/pyproject.toml  WORKDIR/parties.json (party value -> party-k, classes)
    WORKDIR/*.log  WORKDIR/run.log  WORKDIR/flwr-home/

Every process is stopped at the end, also on failure or Ctrl-C.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from privfl.errors import InputError, ProtocolError
from privfl.federation.flower.local import TASK_POLL_ENV, LocalFederation
from privfl.federation.flower.quickstart import check_workdir
from privfl.training.config import DEFAULT_SIGMOID_DEGREE, default_sizes
from privfl.training.setup import party_names
from privfl.training.twin import Schedule

TRAIN_TASK_POLL_S = "0.25"
APP_PYPROJECT = """\
[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "flower-train"
version = "1.0.0"
description = "SmartCryptNN encrypted federated training (privfl) as a Flower App"
license = "Apache-2.0"
dependencies = ["privfl[flower,threshold]"]

[tool.hatch.build.targets.wheel]
packages = ["."]

[tool.flwr.app]
publisher = "privfl"

[tool.flwr.app.components]
serverapp = "privfl.federation.flower.train_server:app"
clientapp = "privfl.federation.flower.train_client:app"

[tool.flwr.app.config]
parties = 3
layers = "64,30,20,10"
encrypted-layers = 1
epochs = 30
rounds = 0
batch-size = 10
learning-rate = 5.0
seed = 0
sigmoid-low = -10.0
sigmoid-high = 10.0
sigmoid-degree = 13
parameters = "secure"
evaluate-every = 1
max-update-norm = 0.0
reveal-to = ""
timeout = 600.0
output-dir = "train-results"
"""


@dataclass(frozen=True)
class TrainRun:
    """What a local training deployment produced: per party its node folder, model file and
    history; the server's history; the run's facts."""

    workdir: str
    run_id: int | None
    status: str
    seconds: float
    parties: dict[str, dict[str, Any]]
    server: dict[str, Any] = field(default_factory=dict)
    errors: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return {
            "workdir": self.workdir, "run_id": self.run_id, "status": self.status,
            "seconds": self.seconds, "parties": self.parties, "server": self.server,
            "errors": list(self.errors),
        }  # fmt: skip


class TrainRunFailed(ProtocolError):
    """The Flower run ended without every party's model (the message names why)."""

    def __init__(self, message: str, run: TrainRun) -> None:
        super().__init__(message)
        self.run = run


def prepare_nodes(
    file: str | Path,
    party_column: str,
    label_column: str,
    feature_columns: Sequence[str] | None,
    root: Path,
) -> tuple[list[Path], int, tuple[Any, ...], dict[str, str]]:
    """Split the table into one node folder per party (``data.npz``: features and labels
    mapped to ``0..C-1``); returns the folders, the feature count, the classes and party
    value -> name. Checks the data as :func:`privfl.train_federated` does."""
    from privfl.training.data import prepare_parties
    from privfl.training.table import load_table

    table = load_table(file, label_column, party_column, feature_columns)
    data = prepare_parties(table.parties)
    if len(data.parties) < 2:
        raise InputError(f"the party column {party_column!r} names fewer than 2 parties")
    names = party_names(len(data.parties))
    dirs = []
    for name, (x, y) in zip(names, data.parties, strict=True):
        d = root / "nodes" / name
        d.mkdir(parents=True, mode=0o700)
        np.savez(d / "data.npz", x=x, y=y)
        dirs.append(d)
    mapping = dict(zip(data.names, names, strict=True))
    return dirs, data.features, data.classes, mapping


def _wait_for_identities(fed: LocalFederation, dirs: Sequence[Path], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not all((d / "identity.pub").is_file() and (d / "party.sock").exists() for d in dirs):
        for name in list(fed.procs):
            fed._alive(name)
        if time.monotonic() > deadline:
            raise ProtocolError("the party processes did not start in time")
        time.sleep(0.1)


def run_train_local(
    file: str | Path,
    party_column: str,
    label_column: str,
    feature_columns: Sequence[str] | None = None,
    *,
    layers: Sequence[int] | None = None,
    encrypted_layers: int = 1,
    epochs: int = 30,
    batch_size: int = 10,
    learning_rate: float = 5.0,
    seed: int = 0,
    parameters: str = "secure",
    evaluate_every: int = 1,
    reveal_to: str | None = None,
    workdir: Path | None = None,
    timeout: float = 3600.0,
    progress: Callable[[str], None] | None = None,
) -> TrainRun:
    """Train over a local Flower deployment (see the module docstring). ``reveal_to``: the
    party (``party-k``) every node's operator agrees may receive the encrypted layers."""
    from privfl.training.config import check_schedule

    say = progress or (lambda _msg: None)
    root = workdir or Path(tempfile.mkdtemp(prefix="privfl-train-"))
    check_workdir(root)
    root.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    dirs, features, classes, mapping = prepare_nodes(
        file, party_column, label_column, feature_columns, root
    )
    sizes = tuple(layers) if layers else default_sizes(features, len(classes))
    sched = Schedule(sizes, encrypted_layers, epochs, epochs, batch_size, learning_rate, seed,
                     (-10.0, 10.0), DEFAULT_SIGMOID_DEGREE)  # fmt: skip
    check_schedule(sched, parameters, len(dirs))
    if evaluate_every < 0:
        raise InputError("evaluate_every must be >= 0 (0 = never)")
    if sizes[0] != features or sizes[-1] != len(classes):
        raise InputError(f"layers {sizes} do not fit {features} features and {len(classes)} "
                         "classes")  # fmt: skip
    names = [d.name for d in dirs]
    if reveal_to is not None and reveal_to not in names:
        raise InputError(f"reveal_to must be one of {names}")
    info = {"parties": mapping, "classes": [str(c) for c in classes]}
    (root / "parties.json").write_text(json.dumps(info, indent=2) + "\n")
    (root / "app").mkdir()
    (root / "app" / "pyproject.toml").write_text(APP_PYPROJECT)
    with LocalFederation(root) as fed:
        # a round waits for the SuperNode's 3 s poll anyway: a 0.25 s task poll instead of
        # 0.05 s costs little time and a tenth of the SuperExecs' CPU (an operator's own wins)
        fed.env[TASK_POLL_ENV] = os.environ.get(TASK_POLL_ENV, TRAIN_TASK_POLL_S)
        say(f"starting {len(dirs)} party processes")
        privfl = str(fed.bin / "privfl")
        for d in dirs:
            opts = ["--parameters", parameters, *(["--reveal-to", reveal_to] if reveal_to else [])]
            fed._start(f"{d.name}-process", [privfl, "flower", "train-node", str(d), *opts])
        _wait_for_identities(fed, dirs, 120.0)
        roster = {d.name: (d / "identity.pub").read_text().strip() for d in dirs}
        for d in dirs:  # one operator runs every node here: each pins the same roster
            (d / "roster.json").write_text(json.dumps(roster, indent=2) + "\n")
        say("starting the SuperLink and the SuperNodes")
        fed.start_superlink()
        for d in dirs:
            fed.start_supernode(d.name, {"party-socket": str(d / "party.sock"),
                                         "report-timings": True})  # fmt: skip
        fed.wait_for_nodes(len(dirs))
        say(f"training ({parameters} parameters, {epochs} epoch(s); flwr run)")
        config: dict[str, str | int | float | bool] = {
            "parties": len(dirs), "layers": ",".join(map(str, sizes)),
            "encrypted-layers": encrypted_layers, "epochs": epochs, "batch-size": batch_size,
            "learning-rate": learning_rate, "seed": seed, "parameters": parameters,
            "evaluate-every": evaluate_every, "reveal-to": reveal_to or "",
            "output-dir": str(root / "server"), "timeout": max(600.0, timeout),
        }  # fmt: skip
        outcome = fed.run(root / "app", config, timeout=timeout)
    (root / "run.log").write_text(outcome.log)
    return _collect(root, dirs, outcome.run_id, outcome.status, outcome.errors(), started)


def _collect(
    root: Path, dirs: Sequence[Path], run_id: int | None, status: str, errors: list[str],
    started: float,
) -> TrainRun:  # fmt: skip
    parties: dict[str, dict[str, Any]] = {}
    for d in dirs:
        if (d / "model.npz").is_file() and (d / "history.json").is_file():
            history = json.loads((d / "history.json").read_text())
            parties[d.name] = {"model": str(d / "model.npz"), "history": str(d / "history.json"),
                               "revealed": history["revealed"]}  # fmt: skip
    found = sorted((root / "server").glob("history-*.json"))
    server = json.loads(found[-1].read_text()) if found else {}
    run = TrainRun(str(root), run_id, status, time.perf_counter() - started, parties, server,
                   tuple(errors))  # fmt: skip
    if status != "finished:completed" or len(parties) != len(dirs):
        reason = "; ".join(errors) or f"run status {status}"
        raise TrainRunFailed(f"the training run failed: {reason}; logs in {root}", run)
    return run


__all__ = ["TrainRun", "TrainRunFailed", "prepare_nodes", "run_train_local"]
