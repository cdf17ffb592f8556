"""The one step sequence of partially encrypted training, run by the server over a
:class:`Transport`: in process (:func:`~.federated.train_federated`, through
:class:`InProcessTransport`) and over Flower (the training ServerApp) alike.

Per round ``r``::

    "train"     global model (unless delivered by the last evaluation) -> each node starts
                its batches                      \\  then "relay" until every node is done:
    "relay"     requests and sealed shares, routed by the server (one exchange per joint step);
                a node's envelope that says "done" carries its upload (plaintext layers and
                encrypted update and its signed commitment): the server averages the
                plaintext layers and sums the encrypted updates into ``T``
    "sum"       ``T`` and every party's signed commitment -> each party's signed sketch of
                its own update (:mod:`~.sumcheck`); the sketches go to every party with the
                next global model, and each party computes ``W + T/N`` itself once they add
                up (the server never sends an encrypted layer: each party computes the
                public initial one itself, :func:`~.secret.initial_layers`)
    "evaluate"  (rounds the plan evaluates) new global model -> "relay"... -> each node
                evaluates its own rows and keeps the figures (the server gets only "done")

then ``"finish"`` (the final global model) and, if asked, ``"consent"`` (every node's signed
consent, refused by a node whose operator did not agree) and ``"reveal"`` to the recipient
(relayed like training; the layers stay on the recipient's node).

The server learns the routing fields, the plaintext layers, ciphertexts and sealed shares it
cannot open. It learns no evaluation figure and no boundary error: those are computed under a
global model the parties cannot check (a crafted encrypted layer would turn each figure into a
read-out of a slot of the server's choice), so they stay on the nodes; its history holds
each round's time only. A transport that loses a node's answer must
raise; :func:`run_training` refuses an answer for another step or round, an item addressed to
an unknown party or to its sender, and a node that never finishes (bounded exchanges).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import ParamSpec, Protocol, TypeVar

from privfl.crypto.threshold import CiphertextMessage
from privfl.errors import ProtocolError
from privfl.messages import Writer
from privfl.runner import InProcessRunner
from privfl.training.envelope import Envelope, Item, pack_parts, unpack_parts
from privfl.training.messages import PartyPlainLayers
from privfl.training.result import RoundMetrics
from privfl.training.server import Server
from privfl.training.tickets import TrainingPlan

__all__ = ["InProcessTransport", "TrainingReport", "Transport", "run_training"]

P = ParamSpec("P")
R = TypeVar("R")
MAX_RELAYS_PER_STEP = 1 << 20


class Transport(Protocol):
    """Delivers one message per party for ``step`` and returns every party's answer."""

    def exchange(self, step: str, messages: Mapping[str, bytes]) -> dict[str, bytes]: ...


class Node(Protocol):
    """A party's node as the in-process transport sees it: its name and one step."""

    @property
    def name(self) -> str: ...

    def step(self, data: bytes) -> bytes: ...


class StepRunner(Protocol):
    def __call__(self, key: str, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R: ...


def _direct(key: str, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    return fn(*args, **kwargs)


class InProcessTransport:
    """The nodes in this process: each step of a node is timed under its name and every
    envelope passes as bytes on channels ``server>name:step`` / ``name>server:step``."""

    def __init__(self, nodes: Sequence[Node], runner: InProcessRunner) -> None:
        self.nodes = {n.name: n for n in nodes}
        self.runner = runner

    def exchange(self, step: str, messages: Mapping[str, bytes]) -> dict[str, bytes]:
        out = {}
        for name, data in messages.items():
            node = self.nodes[name]
            got = self.runner.send(f"server>{name}:{step}", data)
            answer = self.runner.run(f"{name}:{step}", node.step, got)
            out[name] = self.runner.send(f"{name}>server:{step}", answer)
        return out


@dataclass(frozen=True)
class TrainingReport:
    """What the server knows at the end: the history and the number of exchanges (Flower
    rounds) per step name."""

    history: tuple[RoundMetrics, ...]
    exchanges: dict[str, int]


class _Driver:
    """The server's side of one run (the state of :func:`run_training`)."""

    def __init__(
        self, server: Server, plan: TrainingPlan, transport: Transport, run: StepRunner
    ) -> None:
        self.server, self.plan, self.transport, self.run = server, plan, transport, run
        self.names = plan.names
        self.exchanges: dict[str, int] = {}
        self.delivered = -1
        self.checks: list[bytes] = []  # every party's signed sketch of the last aggregate

    def envelope(self, step: str, rnd: int, items: Sequence[Item] = (), body: bytes = b"") -> bytes:
        s = self.server
        return Envelope(s.session, s.name, step, rnd, tuple(items), False, body).to_bytes()

    def exchange(
        self, step: str, rnd: int, messages: Mapping[str, bytes], label: str = ""
    ) -> dict[str, Envelope]:
        """One transport exchange (named ``label``, default ``step``); checks every answer."""
        label = label or step
        self.exchanges[label] = self.exchanges.get(label, 0) + 1
        got = self.transport.exchange(label, messages)
        missing = [n for n in messages if n not in got]
        if missing:
            raise ProtocolError(f"no answer from {missing} in step {step!r}")
        out = {}
        for n in messages:
            env = Envelope.from_bytes(got[n], self.server.session, n)
            if env.step != step or env.round != rnd:
                raise ProtocolError(f"{n} answered {env.step!r} of round {env.round}")
            out[n] = env
        return out

    def all(self, step: str, rnd: int, body: bytes = b"") -> dict[str, Envelope]:
        messages = {n: self.envelope(step, rnd, body=body) for n in self.names}
        return self.exchange(step, rnd, messages)

    def model(self, rnd: int) -> bytes:
        """The global model of round ``rnd`` as a body, or nothing if already delivered."""
        if self.delivered == rnd:
            return b""
        plain, _ = self.run("server:model", self.server.global_model, rnd)
        self.delivered = rnd
        # no encrypted layer: each party computes the public initial one, then each round's
        # from the checked sum (the parties' signed sketches, after round 0)
        checks, self.checks = self.checks, []
        return pack_parts([plain.to_bytes(), *checks])

    def relay(self, rnd: int, envs: dict[str, Envelope], phase: str) -> dict[str, Envelope]:
        """Route items until every node is done (exchanges named ``"<phase>-relay"``, or
        ``"relay"`` in training); returns the last envelopes."""
        label = "relay" if phase == "train" else f"{phase}-relay"
        for _ in range(MAX_RELAYS_PER_STEP):
            inbox: dict[str, list[Item]] = {n: [] for n in self.names}
            for sender, env in envs.items():
                for item in env.items:
                    if item.peer not in inbox or item.peer == sender:
                        raise ProtocolError(f"{sender} addressed an item to {item.peer!r}")
                    inbox[item.peer].append(Item(sender, item.kind, item.data))
            if all(e.done for e in envs.values()) and not any(inbox.values()):
                return envs
            busy = {n for n in self.names if inbox[n] or not envs[n].done}
            messages = {n: self.envelope("relay", rnd, inbox[n]) for n in busy}
            new = self.exchange("relay", rnd, messages, label)
            # a node not contacted sent nothing new: its items were routed already
            envs = {n: new.get(n) or replace(e, items=()) for n, e in envs.items()}
        raise ProtocolError("the nodes did not finish the step")

    def aggregate(self, rnd: int, envs: Mapping[str, Envelope]) -> None:
        """Average the uploads carried by the envelopes that ended the training step."""
        s = self.server
        plains: list[PartyPlainLayers] = []
        updates: list[list[CiphertextMessage]] = []
        commits: list[bytes] = []
        for n in self.names:
            parts = unpack_parts(envs[n].body)
            if not parts:
                raise ProtocolError(f"{n} uploaded nothing")
            plains.append(PartyPlainLayers.from_bytes(parts[0], s.session, rnd, s.shapes))
            if parts[1:] and s.crypto is None:
                raise ProtocolError(f"{n} uploaded encrypted layers in a run without them")
            if s.crypto is None:
                updates.append([])
            else:
                if len(parts) < 3:
                    raise ProtocolError(f"{n} uploaded no signed encrypted update")
                ctx = s.crypto.context
                updates.append(
                    [CiphertextMessage.from_bytes(b, ctx, s.session) for b in parts[1:-1]]
                )
                commits.append(parts[-1])
        for n, p in zip(self.names, plains, strict=True):
            if p.sender != n:
                raise ProtocolError(f"{n} uploaded {p.sender}'s layers")
        totals = self.run("server:aggregate", s.aggregate, plains, updates)
        if s.crypto is not None:
            self.check_sum(rnd, totals, commits)

    def check_sum(
        self, rnd: int, totals: Sequence[CiphertextMessage], commits: list[bytes]
    ) -> None:
        """Step ``"sum"`` (one exchange per aggregation): ``T`` and every party's signed
        commitment to every party; their signed sketches ride on the next global model."""
        body = pack_parts([pack_parts([t.to_bytes() for t in totals]), pack_parts(commits)])
        envs = self.all("sum", rnd, body)
        self.checks = [envs[n].body for n in self.names]


def _nothing_reported(envs: Mapping[str, Envelope]) -> None:
    """A finished training or evaluation step carries no body: no figure leaves a node."""
    for name, env in envs.items():
        if env.body:
            raise ProtocolError(f"{name} reported data at the end of {env.step!r}")


def run_training(
    server: Server,
    plan: TrainingPlan,
    transport: Transport,
    reveal_to: str | None = None,
    run: StepRunner = _direct,
    on_round: Callable[[RoundMetrics], None] | None = None,
) -> TrainingReport:
    """Drive the whole schedule (see the module doc) and return the history."""
    d = _Driver(server, plan, transport, run)
    sched = plan.schedule
    history = []
    for rnd in range(sched.rounds):
        t0 = time.perf_counter()
        d.aggregate(rnd, d.relay(rnd, d.all("train", rnd, d.model(rnd)), "train"))
        seconds = time.perf_counter() - t0
        if plan.evaluates_after(rnd):
            envs = d.all("evaluate", rnd + 1, d.model(rnd + 1))
            _nothing_reported(d.relay(rnd + 1, envs, "evaluate"))
        epochs = (rnd + 1) * sched.local_epochs
        # the figures stay on the nodes (see the module doc): the server knows the round's time
        row = RoundMetrics(rnd + 1, epochs, None, None, None, None, seconds)
        history.append(row)
        if on_round is not None:
            on_round(row)
    end = sched.rounds
    d.all("finish", end, d.model(end))
    if reveal_to is not None and sched.secret_layers:
        body = Writer().str_(reveal_to).u32(sched.secret_layers).getvalue()
        consents = pack_parts([e.body for e in d.all("consent", end, body).values()])
        envs = d.exchange("reveal", end, {reveal_to: d.envelope("reveal", end, body=consents)})
        idle = {n: Envelope(server.session, n, "reveal", end, (), True) for n in plan.names}
        d.relay(end, {**idle, **envs}, "reveal")
    return TrainingReport(tuple(history), dict(d.exchanges))
