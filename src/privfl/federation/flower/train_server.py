"""Flower ServerApp of a training deployment: the server role of SmartCryptNN training,
driving the same step sequences as :func:`privfl.train_federated` in process (the setup of
:func:`privfl.training.setup.run_setup`, then :func:`privfl.training.schedule.run_training`)
over a :class:`TrainTransport`: one Flower round per exchange, one message per node
(:func:`privfl.federation.flower.rounds.exchange`). The nodes answer through the training
ClientApp (:mod:`~privfl.federation.flower.train_client`), a relay to each party's
long-lived party process.

Run configuration (``[tool.flwr.app.config]``, overridable with ``flwr run -c``):

``parties``          number of party nodes (required)
``layers``           model widths, e.g. ``"64,30,20,10"`` (required)
``encrypted-layers`` (1), ``epochs`` (1), ``rounds`` (0 = one per epoch), ``batch-size``
(10), ``learning-rate`` (5.0), ``seed`` (0), ``sigmoid-low``/``sigmoid-high`` (-10, 10),
``sigmoid-degree`` (13), ``parameters`` (``"secure"``; ``"test"``: an insecure small ring),
``evaluate-every`` (1; 0 = never), ``max-update-norm`` (0 = no bound)
``reveal-to``        ``""`` (default: the encrypted layers stay encrypted) or a party name;
                     the parties' own nodes decide whether they consent
``timeout``          seconds to wait for each round's replies (600)
``output-dir``       where the server writes ``history-<run id>.json`` (``train-results``)

What the server learns and holds is the training server's (:mod:`privfl.training.server`):
the plaintext layers, ciphertexts, the routing of sealed items, each party's row count and the
parties' evaluation counts; never a key share.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from logging import ERROR, INFO, WARNING
from pathlib import Path
from typing import Any

from flwr.app import ConfigRecord, Context
from flwr.common.logger import log
from flwr.serverapp import Grid, ServerApp

from privfl.errors import InputError, MalformedMessageError, PrivflError
from privfl.federation.flower.payload import pack
from privfl.federation.flower.rounds import check_reply, exchange, node_label
from privfl.federation.flower.server_app import PartyFailure, _claims, _wait_for_nodes
from privfl.training.config import DEFAULT_SIGMOID_DEGREE, Schedule
from privfl.training.result import RoundMetrics
from privfl.training.schedule import run_training
from privfl.training.setup import run_setup

app = ServerApp()
KIND = "train"


class TrainTransport:
    """Each exchange of the training schedule as one Flower round. The first exchange (the
    setup hello, the same bytes for every party) goes to every connected node and maps each
    node to the party it claims; the nodes' pinned rosters check that claim at the plan."""

    def __init__(self, grid: Grid, nodes: Sequence[int], timeout: float) -> None:
        self.grid, self.nodes, self.timeout = grid, list(nodes), timeout
        self.node_of: dict[str, int] | None = None
        self.rounds = 0
        self.seconds: dict[str, float] = {}

    def exchange(self, step: str, messages: Mapping[str, bytes]) -> dict[str, bytes]:
        t0 = time.perf_counter()
        if self.node_of is None:
            got = self._first(step, messages)
        else:
            targets = {self.node_of[p]: p for p in messages}
            contents = {self.node_of[p]: pack([m]) for p, m in messages.items()}
            raw = exchange(
                self.grid, KIND, contents, targets, self.timeout, failure=PartyFailure, label=step
            )
            got = {targets[n]: reply for n, reply in raw.items()}
        self.rounds += 1
        self.seconds[step] = self.seconds.get(step, 0.0) + time.perf_counter() - t0
        out = {}
        for party, (blobs, _) in got.items():
            if len(blobs) != 1:
                raise PartyFailure(f"{party} answered step {step} with {len(blobs)} blobs")
            out[party] = blobs[0]
        return out

    def _first(
        self, step: str, messages: Mapping[str, bytes]
    ) -> dict[str, tuple[list[bytes], dict[str, Any]]]:
        if len(set(messages.values())) != 1:
            raise InputError("the first exchange must send every party the same bytes")
        (data,) = set(messages.values())
        names = {n: f"node {n}" for n in self.nodes}
        got = exchange(
            self.grid, KIND, {n: pack([data]) for n in self.nodes}, names, self.timeout,
            failure=PartyFailure, label=step, keep_errors=True,
        )  # fmt: skip
        for node, (_, meta) in got.items():
            if meta.get("party") in messages or meta.get("party") is None:
                check_reply(meta, node_label(node, names), step, PartyFailure)
        claims = _claims({n: r for n, r in got.items() if r[1].get("status") == "ok"})
        absent = [p for p in messages if p not in claims]
        if absent:
            raise PartyFailure(f"parties {absent} are not connected (connected: {sorted(claims)})")
        self.node_of = {p: claims[p] for p in messages}
        log(INFO, "privfl training: parties mapped: %s", ", ".join(messages))
        return {p: got[self.node_of[p]] for p in messages}

    def close(self, history: str) -> None:
        """The ``train_close`` round: every party writes its model and history and exits."""
        if self.node_of is None:
            return
        targets = {n: p for p, n in self.node_of.items()}
        contents = {n: pack(history=history) for n in targets}
        exchange(self.grid, "train_close", contents, targets, self.timeout, failure=PartyFailure)


def _cfg(context: Context, key: str, default: Any) -> Any:
    return context.run_config.get(key, default)


def schedule_from(context: Context) -> Schedule:
    """The training schedule from the run config (see the module doc)."""
    layers = str(_cfg(context, "layers", "")).strip()
    if not layers:
        raise InputError("run config needs layers, e.g. layers='64,30,20,10'")
    try:
        sizes = tuple(int(s) for s in layers.split(","))
    except ValueError:
        raise InputError(f"layers must be comma-separated integers, got {layers!r}") from None
    epochs = int(_cfg(context, "epochs", 1))
    rounds = int(_cfg(context, "rounds", 0)) or epochs
    low = float(_cfg(context, "sigmoid-low", -10.0))
    high = float(_cfg(context, "sigmoid-high", 10.0))
    return Schedule(
        sizes, int(_cfg(context, "encrypted-layers", 1)), epochs, rounds,
        int(_cfg(context, "batch-size", 10)), float(_cfg(context, "learning-rate", 5.0)),
        int(_cfg(context, "seed", 0)), (low, high),
        int(_cfg(context, "sigmoid-degree", DEFAULT_SIGMOID_DEGREE)),
    )  # fmt: skip


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Set up the session and train over the connected SuperNodes."""
    try:
        _run(grid, context)
    except PrivflError as exc:
        log(ERROR, "privfl training failed: %s", exc)
        raise


def _run(grid: Grid, context: Context) -> None:
    parties = int(_cfg(context, "parties", 0))
    if parties < 1:
        raise InputError("run config needs parties (the number of party nodes)")
    sched = schedule_from(context)
    parameters = str(_cfg(context, "parameters", "secure"))
    every = int(_cfg(context, "evaluate-every", 1))
    bound = float(_cfg(context, "max-update-norm", 0.0)) or None
    reveal_to = str(_cfg(context, "reveal-to", "")).strip() or None
    timeout = float(_cfg(context, "timeout", 600.0))
    out_dir = Path(str(_cfg(context, "output-dir", "train-results")))
    nodes = _wait_for_nodes(grid, parties, timeout)
    log(INFO, "privfl training: %d SuperNodes connected, %d parties expected", len(nodes), parties)
    started = time.perf_counter()
    transport = TrainTransport(grid, nodes, timeout)
    history: list[dict[str, Any]] = []

    def on_round(row: RoundMetrics) -> None:
        history.append(row.to_dict())
        low, high = sched.sigmoid_range
        if row.max_abs_u is not None and sched.secret_layers and row.max_abs_u > min(-low, high):
            log(WARNING, "round %d: |u| reached %.2f, outside the sigmoid range", row.round,
                row.max_abs_u)  # fmt: skip
        log(INFO, "privfl training: round %d done (%.1f s, accuracy %s)", row.round,
            row.seconds, row.accuracy)  # fmt: skip

    try:
        server, plan = run_setup(transport, parties, sched, parameters, every, bound)
        setup_rounds, setup_seconds = transport.rounds, time.perf_counter() - started
        report = run_training(server, plan, transport, reveal_to=reveal_to, on_round=on_round)
    except MalformedMessageError as exc:
        raise PartyFailure(f"invalid message from a party: {exc}") from exc
    summary = {
        "parties": list(plan.names), "layers": list(sched.sizes), "parameters": parameters,
        "epochs": sched.epochs, "history": history, "exchanges": report.exchanges,
        "setup_rounds": setup_rounds, "setup_seconds": round(setup_seconds, 3),
        "flower_rounds": transport.rounds, "seconds_per_step": transport.seconds,
        "wall_seconds": round(time.perf_counter() - started, 3), "revealed_to": reveal_to,
        "session": server.session.hex(),
    }  # fmt: skip
    transport.close(json.dumps(summary))
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / f"history-{context.run_id}.json").write_text(json.dumps(summary, indent=2) + "\n")
    log(INFO, "privfl training: done in %.1f s, %d Flower rounds", summary["wall_seconds"],
        transport.rounds)  # fmt: skip
    context.state["privfl"] = ConfigRecord({"status": "ok", "rounds": transport.rounds})
