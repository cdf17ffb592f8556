"""``privfl forest local``: RevFRF over a real local Flower deployment, from one data file.

:func:`run_forest_local` holds the last ``predict`` rows of the file out as the requester's
queries, splits the other rows' feature columns over ``participants`` participants (each file
with the rows in its own order, as separate data owners hold them), gives the labels to the
center server (CS), provisions every node's keys, writes the RevFRF Flower app, checks every
node's files, starts a SuperLink and one SuperNode per participant, the CC and the requester
on free loopback ports, runs ``train`` (PSI of the ids, growth) then ``query`` (a secure
prediction of each held-out row for the requester), and returns the requester's predictions
with their proper type (the label column's values for classification, floats for regression).
Everything lives in one working folder (a fresh folder under the system's temporary directory
by default)::

    WORKDIR/data/<participant>.csv  labels.csv  requester.csv
    WORKDIR/keys/<node>/            WORKDIR/results/<node>/   WORKDIR/app/pyproject.toml
    WORKDIR/run.log  WORKDIR/<node>.log  WORKDIR/flwr-home/

Every process is stopped at the end, also on failure or Ctrl-C; Flower's own log lines stay
in the working folder's log files.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from privfl.datasets import read_table
from privfl.errors import InputError, ProtocolError
from privfl.federation.flower.launch import app_pyproject
from privfl.federation.flower.local import LocalFederation
from privfl.federation.flower.quickstart import check_workdir, default_workdir
from privfl.federation.revfrf_keys import provision_revfrf

REQUESTER = "requester"
TASKS = ("classification", "regression")
APP_PYPROJECT = app_pyproject(
    "flower-revfrf",
    "Revocable vertical federated random forest (RevFRF, privfl) as a Flower App",
    "revfrf_server:revfrf_client",
    {"cs-keys": "keys/CS", "labels-file": "data/labels.csv", "id-column": "id",
     "label-column": "label", "task": "classification", "seed": 0, "min-samples": 2,
     "steps": "train,query", "secure": True, "requester": "requester", "revoke": "",
     "revoke-level": 1, "output-dir": "results/CS", "timeout": 600.0, "step-pause": 0.0},
)  # fmt: skip


@dataclass(frozen=True)
class ForestSettings:
    """What ``privfl forest local`` provisions and runs."""

    label_column: str
    participants: int = 3
    id_column: str | None = None
    predict: int = 1
    task: str = "classification"
    trees: int = 10
    depth: int = 10
    key_bits: int = 2048
    allow_insecure_key_bits: bool = False
    seed: int = 0

    def check(self) -> None:
        if self.participants < 2:
            raise InputError("--participants must be at least 2")
        if self.predict < 1:
            raise InputError("--predict must be at least 1 (rows held out and predicted)")
        if self.task not in TASKS:
            raise InputError(f"--task must be one of {', '.join(TASKS)}, not {self.task!r}")
        for value, option in ((self.trees, "--trees"), (self.depth, "--depth")):
            if value < 1:
                raise InputError(f"{option} must be at least 1, got {value}")


@dataclass(frozen=True)
class ForestRun:
    """The requester's predictions (typed), the CS's summary and the run's facts."""

    predictions: list[Any]
    summary: dict[str, Any]
    workdir: str
    run_id: int | None
    status: str
    seconds: float
    rounds: dict[str, int]

    def to_dict(self) -> dict[str, Any]:
        return {
            "predictions": self.predictions, "summary": self.summary, "workdir": self.workdir,
            "run_id": self.run_id, "status": self.status, "seconds": self.seconds,
            "rounds": self.rounds,
        }  # fmt: skip


class ForestRunFailed(ProtocolError):
    """The Flower run ended without the requester's predictions (the message names why)."""


# the fewest rows a forest is trained on after the held-out --predict rows
MIN_TRAIN_ROWS = 10


def split_columns(features: list[str], participants: int) -> list[list[str]]:
    """Consecutive feature columns, as evenly as possible over the participants."""
    if len(features) < participants:
        raise InputError(
            f"{len(features)} feature columns cannot be split over {participants} participants"
        )
    return [list(c) for c in np.array_split(np.array(features, dtype=object), participants)]


def check_table(df: Any, s: ForestSettings) -> list[str]:
    """The feature columns of the table ``df`` for the settings ``s``, or
    :class:`InputError` naming the option to change: the label and id columns, numeric
    features, at least one feature column per participant (``--participants``) and enough
    rows to hold out ``--predict`` of them and train on at least :data:`MIN_TRAIN_ROWS`. The
    launcher runs it before any key or node is made."""
    if s.label_column not in df.columns:
        raise InputError(f"unknown label column {s.label_column!r}; columns are {list(df.columns)}")
    if s.id_column is not None and s.id_column not in df.columns:
        raise InputError(f"unknown id column {s.id_column!r}; columns are {list(df.columns)}")
    if df[s.label_column].isna().any():
        raise InputError(f"the label column {s.label_column!r} has empty values")
    features = [c for c in df.columns if c not in (s.label_column, s.id_column)]
    bad = [c for c in features if not pd.api.types.is_numeric_dtype(df[c])]
    if bad:
        raise InputError(f"feature columns must be numeric; not numeric: {bad}")
    n = len(features)
    if n < s.participants:
        fix = f"give --participants {n} or fewer" if n >= 2 else "a forest needs at least 2"
        raise InputError(
            f"--participants {s.participants}: the table has {n} feature columns (all but "
            f"--label-column and --id-column), at least one per participant; {fix}"
        )
    if len(df) < s.predict + MIN_TRAIN_ROWS:
        most = len(df) - MIN_TRAIN_ROWS
        fix = f"give --predict {most} or fewer" if most >= 1 else "add rows"
        raise InputError(
            f"--predict {s.predict}: the table has {len(df)} rows; the held-out rows must "
            f"leave at least {MIN_TRAIN_ROWS} for training; {fix}"
        )
    return features


def write_node_files(file: str | Path, s: ForestSettings, data: Path) -> dict[str, Any]:
    """Every node's data files from ``file`` (see the module docstring); returns the
    participants' names, their columns, the label values and the files."""
    df = read_table(file)
    features = check_table(df, s)
    ids = df[s.id_column].astype(str) if s.id_column else pd.Series(
        [f"r{i}" for i in range(len(df))]
    )  # fmt: skip
    if ids.duplicated().any():
        raise InputError(f"the id column {s.id_column!r} has duplicate values")
    train, query = df.iloc[: -s.predict], df.iloc[-s.predict :]
    train_ids = ids.iloc[: -s.predict].to_numpy()
    names = [f"participant-{i + 1}" for i in range(s.participants)]
    columns = split_columns(features, s.participants)
    data.mkdir(parents=True, exist_ok=True)
    shuffle = secrets.SystemRandom().shuffle
    files: dict[str, Path] = {}
    for name, cols in zip(names, columns, strict=True):
        order = list(range(len(train)))
        shuffle(order)  # each owner holds the rows in its own order (not a secret)
        part = train[cols].iloc[order].reset_index(drop=True)
        part.insert(0, "id", train_ids[order])
        files[name] = data / f"{name}.csv"
        part.to_csv(files[name], index=False)
    pd.DataFrame({"id": train_ids, "label": train[s.label_column].to_numpy()}).to_csv(
        data / "labels.csv", index=False
    )
    query[[c for cols in columns for c in cols]].to_csv(data / f"{REQUESTER}.csv", index=False)
    return {
        "names": names, "columns": columns, "files": files,
        "labels": sorted(set(train[s.label_column].tolist()), key=str),
    }  # fmt: skip


def check_node_files(layout: dict[str, Any], data: Path) -> None:
    """Before any process starts: every node's file exists and holds what its node reads."""
    for name, cols in zip(layout["names"], layout["columns"], strict=True):
        path = layout["files"][name]
        if not path.is_file():
            raise InputError(f"{name}'s data file {path} is missing")
        header = list(pd.read_csv(path, nrows=0).columns)
        if header != ["id", *cols]:
            raise InputError(f"{path} has columns {header}, expected {['id', *cols]}")
    for extra in ("labels.csv", f"{REQUESTER}.csv"):
        if not (data / extra).is_file():
            raise InputError(f"{data / extra} is missing")


def typed(values: list[str], task: str, labels: list[Any]) -> list[Any]:
    """The requester's predictions (strings on the wire) as the label column's own values
    (classification) or floats (regression)."""
    if task == "regression":
        return [float(v) for v in values]
    by_text = {str(v): v.item() if isinstance(v, np.generic) else v for v in labels}
    unknown = [v for v in values if v not in by_text]
    if unknown:
        raise ForestRunFailed(f"the forest predicted labels {unknown} that are not in the data")
    return [by_text[v] for v in values]


def run_forest_local(
    file: str | Path,
    settings: ForestSettings,
    *,
    workdir: Path | None = None,
    timeout: float = 3600.0,
    progress: Callable[[str], None] | None = None,
) -> ForestRun:
    """Run RevFRF over a local Flower deployment (see the module docstring)."""
    say = progress or (lambda _msg: None)
    settings.check()
    root = workdir or default_workdir()
    check_workdir(root)
    root.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    data = root / "data"
    layout = write_node_files(file, settings, data)
    names = layout["names"]
    say(f"provisioning {settings.key_bits}-bit DT-PKC keys for {len(names)} participants")
    provision_revfrf(
        names, [len(c) for c in layout["columns"]], root / "keys", requesters=[REQUESTER],
        key_bits=settings.key_bits, allow_insecure_key_bits=settings.allow_insecure_key_bits,
        n_trees=settings.trees, max_depth=settings.depth,
    )  # fmt: skip
    (root / "app").mkdir()
    (root / "app" / "pyproject.toml").write_text(APP_PYPROJECT)
    check_node_files(layout, data)
    keys, results = root / "keys", root / "results"
    nodes: dict[str, dict[str, str | int | float | bool]] = {
        name: {"role": "participant", "keys-dir": str(keys / name),
               "data-file": str(layout["files"][name]), "output-dir": str(results / name)}
        for name in names
    }  # fmt: skip
    nodes["CC"] = {"role": "cc", "keys-dir": str(keys / "CC"), "output-dir": str(results / "CC")}
    nodes[REQUESTER] = {"role": "requester", "keys-dir": str(keys / REQUESTER),
                        "data-file": str(data / f"{REQUESTER}.csv"),
                        "output-dir": str(results / REQUESTER)}  # fmt: skip
    with LocalFederation(root) as fed:
        say("starting the SuperLink")
        fed.start_superlink()
        for name, config in nodes.items():
            fed.start_supernode(name, config)
        say(f"waiting for {len(nodes)} SuperNodes")
        fed.wait_for_nodes(len(nodes))
        say(f"growing {settings.trees} trees of depth {settings.depth}, then the queries")
        outcome = fed.run(
            root / "app",
            {"cs-keys": str(keys / "CS"), "labels-file": str(data / "labels.csv"),
             "output-dir": str(results / "CS"), "task": settings.task, "seed": settings.seed,
             "steps": "train,query", "requester": REQUESTER, "timeout": 600.0},
            timeout=timeout,
        )  # fmt: skip
    (root / "run.log").write_text(outcome.log)
    summaries = sorted((results / "CS").glob("revfrf-*-CS-summary.json"))
    predicted = sorted((results / REQUESTER).glob(f"revfrf-*-{REQUESTER}-predictions.json"))
    if not outcome.ok or not summaries or not predicted:
        reason = "; ".join(outcome.errors()) or f"run status {outcome.status}"
        raise ForestRunFailed(f"the RevFRF run failed: {reason}; logs in {root}")
    summary = json.loads(summaries[-1].read_text())
    values = json.loads(predicted[-1].read_text())["predictions"]
    return ForestRun(
        typed(values, settings.task, layout["labels"]), summary.get("summary", {}), str(root),
        outcome.run_id, outcome.status, time.perf_counter() - started,
        dict(summary.get("rounds", {})),
    )  # fmt: skip
