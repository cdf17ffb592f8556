"""Flower ServerApp running RevFRF's center server (CS): labels, growth, prediction,
revocation, through :class:`privfl.federation.revfrf_deploy.CenterDeployment`, the same CS
role and message bytes as the in-process :class:`privfl.forest.RevFRF`.

Run configuration (``[tool.flwr.app.config]``, overridable with ``flwr run -c``):

``cs-keys``        the CS's folder written by ``privfl forest keys init`` (``.../CS``)
``labels-file``    CSV/Parquet with the id column and the label column of the CS
``id-column``, ``label-column``   their names (default ``id`` and ``label``)
``task``           ``classification`` (default) or ``regression``; ``seed`` (bootstrap and
                   feature subsets; default 0); ``min-samples`` (default 2)
``steps``          comma-separated, run in order: ``train`` (PSI, then growth), ``test``
                   (FRF-Test on the participants' aligned test rows: each provider compares
                   its own values in the clear, no decryption; ``secure=true`` repeats the
                   predictions in the ``secure`` field; any number per run), ``query``
                   (FRF-Predict for ``requester``'s rows; once per run), ``revoke``
                   (``revoke`` = participant, ``revoke-level`` 1 or 2). Default ``train,test``.
``output-dir``     where the CS writes ``revfrf-<session>-CS-summary.json`` (its results:
                   aligned ids, predictions, revocation reports, rounds, bytes per channel)
``timeout``        seconds to wait for each round's replies (default 120);
``step-pause``     seconds to sleep after each round (0)

Rounds: ``revfrf_hello`` (which node is which role and name), then one ``revfrf_batch``
round per batch of the CS's jobs (:mod:`privfl.forest.jobs`): each node receives, in one
message, every protocol message addressed to it in that batch, and answers them in order. A
node that does not answer in time, or answers with an error, stops the run with an error
naming it.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from logging import ERROR, INFO
from pathlib import Path
from typing import Any

from flwr.app import Context
from flwr.common.logger import log
from flwr.serverapp import Grid, ServerApp

from privfl.datasets import read_table
from privfl.errors import InputError, PrivflError, ProtocolError
from privfl.federation.flower.payload import MAX_BLOBS, pack
from privfl.federation.flower.rounds import NodeFailure, exchange
from privfl.federation.revfrf_deploy import CenterDeployment, drive
from privfl.federation.revfrf_keys import load_node
from privfl.forest.jobs import Batch
from privfl.forest.messages import CC

app = ServerApp()


def _cfg(context: Context, key: str, default: Any) -> Any:
    return context.run_config.get(key, default)


class FlowerNodes:
    """Delivers each batch of the CS's messages: one Flower message per node per round."""

    def __init__(self, grid: Grid, node_of: dict[str, int], roles: dict[str, str],
                 timeout: float, pause: float) -> None:  # fmt: skip
        self.grid, self.node_of, self.roles = grid, node_of, roles
        self.timeout, self.pause = timeout, pause
        self.rounds = 0
        self.bytes: dict[str, int] = defaultdict(int)
        self.wait_s = 0.0
        self.node_seconds: dict[str, float] = defaultdict(float)

    def __call__(self, batch: Batch) -> tuple[bytes, ...]:
        self.rounds += 1
        by_node: dict[str, list[int]] = defaultdict(list)
        for i, out in enumerate(batch):
            if out.to not in self.node_of:
                raise NodeFailure(f"{out.to!r} is not connected")
            by_node[out.to].append(i)
            self.bytes[f"cs->{self.roles[out.to]}"] += len(out.data)
        too_many = [n for n, idx in by_node.items() if len(idx) > MAX_BLOBS]
        if too_many:  # payload.pack frames at most MAX_BLOBS messages
            raise ProtocolError(f"a batch of more than {MAX_BLOBS} messages for {too_many}")
        got = self.exchange(
            "revfrf_batch", {n: pack([batch[i].data for i in idx]) for n, idx in by_node.items()}
        )
        replies: list[bytes] = [b""] * len(batch)
        for name, idx in by_node.items():
            blobs, meta = got[name]
            seconds = meta.get("seconds", 0.0)
            if isinstance(seconds, float):
                self.node_seconds[self.roles[name]] += seconds
            if len(blobs) != len(idx):
                raise NodeFailure(f"{name} answered {len(blobs)} of {len(idx)} messages")
            for i, blob in zip(idx, blobs, strict=True):
                replies[i] = blob
                self.bytes[f"{self.roles[name]}->cs"] += len(blob)
        time.sleep(self.pause)
        return tuple(replies)

    def exchange(
        self, kind: str, contents: dict[str, Any]
    ) -> dict[str, tuple[list[bytes], dict[str, Any]]]:
        """One round (:func:`privfl.federation.flower.rounds.exchange`): push every node its
        message, pull the replies every 50 ms."""
        start = time.perf_counter()
        names = {self.node_of[n]: n for n in contents}
        got = exchange(
            self.grid, kind, {self.node_of[n]: c for n, c in contents.items()}, names,
            self.timeout, label=f"{self.rounds} ({kind})",
        )  # fmt: skip
        self.wait_s += time.perf_counter() - start
        return {names[node]: reply for node, reply in got.items()}


def _hello(grid: Grid, timeout: float, pause: float) -> FlowerNodes:
    """Which node plays which role: every connected node answers with its role and name."""
    nodes = list(grid.get_node_ids())
    probe = FlowerNodes(grid, {f"node {n}": n for n in nodes}, {}, timeout, pause)
    got = probe.exchange("revfrf_hello", {f"node {n}": pack() for n in nodes})
    node_of, roles = {}, {}
    for key, (_, meta) in got.items():
        name, role = str(meta.get("name", "")), str(meta.get("role", ""))
        if not name or name in node_of:
            raise NodeFailure(f"{key} claims the name {name!r} (missing or taken)")
        node_of[name], roles[name] = probe.node_of[key], role
    return FlowerNodes(grid, node_of, roles, timeout, pause)


def _wait_for(grid: Grid, count: int, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while len(list(grid.get_node_ids())) < count and time.monotonic() < deadline:
        time.sleep(0.5)


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Drive one RevFRF deployment run over the connected SuperNodes."""
    try:
        _run(grid, context)
    except PrivflError as exc:
        log(ERROR, "RevFRF run failed: %s", exc)
        raise


def _run(grid: Grid, context: Context) -> None:
    steps = [s.strip() for s in str(_cfg(context, "steps", "train,test")).split(",") if s.strip()]
    unknown = set(steps) - {"train", "test", "query", "revoke"}
    if unknown or not steps or steps[0] != "train":
        raise InputError(f"steps must start with train and use train/test/query/revoke: {steps}")
    if steps.count("query") > 1:  # tests repeat freely: each is a new FRF-Test round
        raise InputError("one query per run: a requester node signs one query batch per run")
    keys = load_node(str(_cfg(context, "cs-keys", "keys/CS")), "cs")
    table = read_table(str(_cfg(context, "labels-file", "labels.csv")))
    id_col = str(_cfg(context, "id-column", "id"))
    label_col = str(_cfg(context, "label-column", "label"))
    for col in (id_col, label_col):
        if col not in table.columns:
            raise InputError(f"the labels file has no column {col!r}")
    timeout = float(_cfg(context, "timeout", 120.0))
    pause = float(_cfg(context, "step-pause", 0.0))
    requester = str(_cfg(context, "requester", ""))
    expected = len(keys.session.participants) + 1 + int("query" in steps)
    _wait_for(grid, expected, timeout)
    nodes = _hello(grid, timeout, pause)
    needed = [*keys.session.participants, CC] + ([requester] if "query" in steps else [])
    absent = [n for n in needed if n not in nodes.node_of]
    if absent:
        raise NodeFailure(f"{absent} are not connected (connected: {sorted(nodes.node_of)})")
    log(INFO, "revfrf: hello round complete: %s", ", ".join(sorted(nodes.node_of)))
    dep = CenterDeployment(
        keys, table[id_col].tolist(), table[label_col].to_numpy(),
        task=str(_cfg(context, "task", "classification")), seed=int(_cfg(context, "seed", 0)),
        min_samples=int(_cfg(context, "min-samples", 2)),
    )  # fmt: skip
    out: dict[str, Any] = {"steps": [], "rounds": {}, "seconds": {}}
    for step in steps:
        start, rounds = time.perf_counter(), nodes.rounds
        if step == "train":
            drive(dep.align(test="test" in steps), nodes)
            log(INFO, "revfrf: ids aligned: %d samples, %d test rows", len(dep.aligned_ids),
                dep.n_test)  # fmt: skip
            drive(dep.fit(), nodes)
            out["aligned_ids"] = dep.aligned_ids
            result: Any = dep.summary()
        elif step == "test":
            got = drive(dep.test(secure=bool(_cfg(context, "secure", True))), nodes)
            result = {"plain": [str(v) for v in got.plain], "secure": [str(v) for v in got.secure]}
        elif step == "query":
            result = {"requester": requester, "answered": len(drive(dep.query(requester), nodes))}
        else:
            level = int(_cfg(context, "revoke-level", 1))
            report = drive(dep.revoke(str(_cfg(context, "revoke", "")), level), nodes)
            result = {**report.__dict__, "after": dep.summary()}
        out["steps"].append({"step": step, "result": result})
        out["rounds"][step] = nodes.rounds - rounds
        out["seconds"][step] = time.perf_counter() - start
        log(INFO, "revfrf: %s done in %d rounds, %.1f s", step, nodes.rounds - rounds,
            time.perf_counter() - start)  # fmt: skip
        out["bytes"], out["wait_seconds"] = dict(nodes.bytes), nodes.wait_s
        out["node_seconds"] = dict(nodes.node_seconds)
        out["summary"] = dep.summary()
        path = _write(context, keys.session.session, out)  # after every step
    log(INFO, "revfrf: done: %d rounds; results of the CS in %s", nodes.rounds, path)


def _write(context: Context, session: bytes, out: dict[str, Any]) -> Path:
    folder = Path(str(_cfg(context, "output-dir", "revfrf-results")))
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"revfrf-{session.hex()[:12]}-CS-summary.json"
    path.write_text(json.dumps(out, indent=2, default=str))
    return path
