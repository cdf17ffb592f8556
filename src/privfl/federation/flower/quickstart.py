"""``privfl flower local``: FHAUC over a real local Flower deployment, from one data file.

:func:`run_local` splits the file by its party column into one CSV per party, provisions a
key folder per party (and the aggregator's public folder), writes the FHAUC Flower app,
starts a SuperLink and one SuperNode per party on free loopback ports
(:class:`~privfl.federation.flower.local.LocalFederation`), waits until every node is online,
runs the app and collects each party's result file. Everything lives in one working folder
(by default a fresh folder under the system's temporary directory, never the repository)::

    WORKDIR/data/<party>.csv        # that party's rows: score, label
    WORKDIR/keys/<party>/ keys/aggregator/
    WORKDIR/results/<party>/fhauc-<session>-<party>.json
    WORKDIR/app/pyproject.toml      # the Flower app (components from the installed privfl)
    WORKDIR/run.log                 # what `flwr run --stream` printed (the ServerApp's log)
    WORKDIR/*.log  WORKDIR/flwr-home/   # each process's log, Flower's config

Every process is stopped at the end, also on failure or Ctrl-C.
"""

from __future__ import annotations

import json
import re
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from privfl.crypto.threshold.params import require_openfhe
from privfl.datasets import check_party_names, read_table, typed_pos_label
from privfl.errors import InputError, ProtocolError
from privfl.evaluation.curves import binarize_labels
from privfl.evaluation.fhauc.policy import DEFAULT_SPLITS, Policy, Security
from privfl.evaluation.fhauc.reveal import Reveal
from privfl.evaluation.fhauc.sizing import data_bounds, sized_policy
from privfl.evaluation.reference import validate_parties
from privfl.evaluation.statistics import interior_thresholds
from privfl.federation.flower.launch import app_pyproject
from privfl.federation.flower.local import LocalFederation, RunOutcome
from privfl.federation.provisioning import provision

APP_PYPROJECT = app_pyproject(
    "flower-fhauc",
    "Private federated ROC-AUC (FHAUC, privfl) as a Flower App",
    "server_app:client_app",
    {"aggregator-keys": "keys/aggregator", "thresholds": 100, "security": "", "keys": "",
     "splits": DEFAULT_SPLITS, "score-low": 0.0, "score-high": 1.0, "parties": "", "reveal": "auc",
     "timeout": 120.0, "step-pause": 0.0},
)  # fmt: skip
SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")


@dataclass(frozen=True)
class LocalRun:
    """Every party's result (name -> its result file's content) and the run's facts."""

    parties: dict[str, dict[str, Any]]
    workdir: str
    run_id: int | None
    status: str
    seconds: float
    security: str
    thresholds: int
    errors: tuple[str, ...] = field(default=())

    def to_dict(self) -> dict[str, Any]:
        return {
            "parties": self.parties, "workdir": self.workdir, "run_id": self.run_id,
            "status": self.status, "seconds": self.seconds, "security": self.security,
            "thresholds": self.thresholds,
        }  # fmt: skip


def default_workdir() -> Path:
    """A fresh folder under the system's temporary directory (outside any repository)."""
    return Path(tempfile.mkdtemp(prefix="privfl-flower-local-"))


def check_workdir(path: Path) -> None:
    """Refuse a working folder that is a file or already holds files (before any work)."""
    if path.exists() and not path.is_dir():
        raise InputError(f"--workdir {path} is a file; give a folder")
    if path.is_dir() and any(path.iterdir()):
        raise InputError(f"--workdir {path} is not empty; give a new or empty folder")
    parent = path if path.exists() else path.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise InputError(f"--workdir {path}: {parent} is not a folder")


def split_by_party(
    file: str | Path,
    party_column: str,
    score_column: str,
    label_column: str,
    out: Path,
    pos_label: str | None = None,
) -> dict[str, Path]:
    """One CSV (``score,label``) per distinct value of ``party_column``; party name -> file.
    Labels are written as 0/1 by the library's one ``pos_label`` rule (0/1 and -1/1 need
    none; :func:`privfl.datasets.typed_pos_label` reads a numeric one)."""
    df = read_table(file)
    for col in (party_column, score_column, label_column):
        if col not in df.columns:
            raise InputError(f"unknown column {col!r}; columns are {list(df.columns)}")
    blank = df[party_column].isna() | (df[party_column].astype(str).str.strip() == "")
    if blank.any():
        raise InputError(
            f"{int(blank.sum())} of {len(df)} rows have no value in the party column "
            f"{party_column!r}; fill them in or remove them (no row is dropped silently)"
        )
    by_name = list(df.groupby(df[party_column].astype(str)))
    if len(by_name) < 2:
        raise InputError(f"the party column {party_column!r} names fewer than 2 parties")
    check_party_names([str(k) for k, _ in by_name])
    groups = {str(k): g for k, g in by_name}
    bad = [n for n in groups if not SAFE_NAME.match(n) or n == "aggregator"]
    if bad:
        raise InputError(
            f"party names {bad} cannot name a key folder: use letters, digits, '.', '_' or '-' "
            "(and not 'aggregator')"
        )
    pos = typed_pos_label(df[label_column], pos_label)
    labels = binarize_labels([g[label_column].to_numpy() for g in groups.values()], pos)
    validate_parties(
        {
            n: (g[score_column].to_numpy(), y)
            for (n, g), y in zip(groups.items(), labels, strict=True)
        },
        (0.0, 1.0),
    )
    groups = {
        n: g.assign(**{label_column: y}) for (n, g), y in zip(groups.items(), labels, strict=True)
    }
    out.mkdir(parents=True, exist_ok=True)
    files = {}
    for name, g in sorted(groups.items()):
        files[name] = out / f"{name}.csv"
        part = g[[score_column, label_column]].set_axis(["score", "label"], axis=1)
        part.to_csv(files[name], index=False)
    return files


def run_local(
    file: str | Path,
    party_column: str,
    score_column: str,
    label_column: str,
    *,
    security: str = "semi-honest",
    thresholds: int = 100,
    workdir: Path | None = None,
    timeout: float = 600.0,
    progress: Callable[[str], None] | None = None,
    keys: str = "single",
    pos_label: str | None = None,
    reveal: str = "auc",
) -> LocalRun:
    """Run FHAUC over a local Flower deployment (see the module docstring). ``keys=
    "threshold"``: no key holder; every SuperNode generates its own key share in the run.
    ``pos_label``: the positive class, as for :func:`split_by_party`. ``reveal``: what the
    parties learn (``auc``, ``curve``, ``metrics``); every node consents to it (node setting
    ``reveals``) and each result file holds it."""
    say = progress or (lambda _msg: None)
    mode = Security.parse(security)
    shown = Reveal.parse(reveal)
    if keys not in ("single", "threshold"):
        raise InputError(f"keys must be 'single' or 'threshold', not {keys!r}")
    if keys == "threshold":
        require_openfhe()
    root = workdir or default_workdir()
    check_workdir(root)
    root.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    files = split_by_party(file, party_column, score_column, label_column, root / "data", pos_label)
    names = sorted(files)
    labels = [read_table(f)["label"].to_numpy() for f in files.values()]
    policy = local_policy(labels, mode, keys, thresholds, shown)
    say(f"provisioning {keys} keys for {len(names)} parties in {root / 'keys'}")
    provision(names, root / "keys", policy, keys=keys)
    (root / "app").mkdir()
    (root / "app" / "pyproject.toml").write_text(APP_PYPROJECT)
    with LocalFederation(root) as fed:
        say("starting the SuperLink")
        fed.start_superlink()
        for name in names:
            fed.start_supernode(
                name,
                {"keys-dir": str(root / "keys" / name), "data-file": str(files[name]),
                 "output-dir": str(root / "results" / name), "reveals": shown.value},
            )  # fmt: skip
        say(f"waiting for {len(names)} SuperNodes")
        fed.wait_for_nodes(len(names))
        say("running FHAUC (flwr run)")
        outcome = fed.run(
            root / "app",
            {"aggregator-keys": str(root / "keys" / "aggregator"), "thresholds": thresholds,
             "security": mode.value, "keys": keys, "reveal": shown.value, "timeout": 120.0},
            timeout=timeout,
        )  # fmt: skip
    (root / "run.log").write_text(outcome.log)
    return _collect(root, names, outcome, time.perf_counter() - started, mode, thresholds)


def local_policy(
    labels: Sequence[npt.NDArray[Any]],
    mode: Security,
    keys: str,
    thresholds: int,
    reveal: Reveal = Reveal.AUC,
    splits: int = DEFAULT_SPLITS,
) -> Policy:
    """The policy a launcher holding every party's labels provisions, as
    :func:`privfl.federated_auc` sizes an in-process run: a size bound near the real sizes
    (the malicious masks and the threshold flooding noise scale with it) and ``min_pairs``,
    the global positives x negatives rounded down (the malicious parties' join check uses
    it, never their own counts), then the executions that check needs for ``reveal``."""
    if mode is not Security.MALICIOUS and keys != "threshold":
        return Policy(security=mode)
    positives = float(sum(int(np.sum(y)) for y in labels))
    negatives = float(sum(len(y) for y in labels)) - positives
    size, pairs = data_bounds([len(y) for y in labels], positives, negatives, mode, keys)
    policy = Policy(security=mode, max_samples_per_party=size, min_pairs=pairs)
    points = interior_thresholds(thresholds, (0.0, 1.0))
    return sized_policy(policy, len(labels), points, splits, keys, reveal)


def _collect(
    root: Path, names: list[str], outcome: RunOutcome, seconds: float, mode: Security, n: int
) -> LocalRun:
    results: dict[str, dict[str, Any]] = {}
    for name in names:
        found = sorted((root / "results" / name).glob("fhauc-*.json"))
        if found:
            results[name] = json.loads(found[-1].read_text())
    run = LocalRun(
        results, str(root), outcome.run_id, outcome.status, seconds, mode.value, n,
        tuple(outcome.errors()),
    )  # fmt: skip
    if not outcome.ok or set(results) != set(names):
        reason = "; ".join(outcome.errors()) or f"run status {outcome.status}"
        missing = sorted(set(names) - set(results))
        raise LocalRunFailed(
            f"the FHAUC run failed: {reason}"
            + (f" (no result from {', '.join(missing)})" if missing else "")
            + f"; logs in {root}",
            run,
        )
    return run


class LocalRunFailed(ProtocolError):
    """The Flower run ended without a result for every party (the message names why)."""

    def __init__(self, message: str, run: LocalRun) -> None:
        super().__init__(message)
        self.run = run
