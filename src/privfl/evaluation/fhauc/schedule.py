"""The one FHAUC step sequence, for every (keys, security, reveal) combination, driven
in-process (``privfl.federated_auc``, :mod:`privfl.metrics`) and over Flower
(``privfl.federation.flower.server_app``) alike.

The aggregator side calls :func:`run_session` with a :class:`~.transport.Transport` that
delivers one message per party for a step and returns each party's answer; the party side
answers with :func:`party_step`, whose handlers come from the party
(:meth:`~.party.Party.handlers`). Steps, in order (:mod:`~.steps`)::

    "join"      config -> Join                (aggregator.start_session, collect_joins)
    [key rounds of the key backend]           (threshold keys: "keygen", "keycheck")
    "upload"    Start / key checks -> upload  (every answer taken in as it arrives)
    [decryption of the key backend]           (threshold keys: "decrypt", "fuse")
    "result"    Result / Reveal -> Done       (aggregator.collect_done)

What each key backend contributes at the two bracketed points is a
:class:`~.rounds.KeyRounds` strategy (:mod:`~.rounds`): with single keys there are no key
rounds and every party decrypts the reply itself; with threshold keys the parties run the
joint key rounds (none when the aggregator announces a kept key set) and one lead fuses the
others' decryption shares. A transport that loses a party's answer must raise
(:class:`~privfl.errors.ProtocolError` naming the party): the schedule never produces a
result with a party missing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy.typing as npt

from privfl.errors import ProtocolError
from privfl.evaluation.fhauc.party import PartyResult
from privfl.evaluation.fhauc.policy import DEFAULT_SPLITS, Security
from privfl.evaluation.fhauc.reveal import Reveal
from privfl.evaluation.fhauc.rounds import AGG, AnyAggregator, SessionIO, rounds_for
from privfl.evaluation.fhauc.steps import SINGLE_KEY_STEPS, Step
from privfl.evaluation.fhauc.transport import StepRunner, Transport, direct
from privfl.evaluation.statistics import ScoreRange

__all__ = [
    "STEPS",
    "SessionReport",
    "SessionRequest",
    "StepParty",
    "StepRunner",
    "Transport",
    "party_step",
    "run_session",
]

STEPS = SINGLE_KEY_STEPS


@dataclass(frozen=True)
class SessionRequest:
    """What the operator of the aggregator asks for."""

    parties: tuple[str, ...]
    thresholds: int | npt.ArrayLike = 100
    score_range: ScoreRange = (0.0, 1.0)
    security: Security | None = None
    splits: int = DEFAULT_SPLITS
    reveal: Reveal = Reveal.AUC


@dataclass(frozen=True)
class SessionReport:
    """What the aggregator knows at the end of a session (never an AUC); ``lead``: the party
    that fused the result with threshold keys (``""`` with single keys)."""

    session: str
    parties: tuple[str, ...]
    num_points: int
    security: str
    executions: int
    completed: tuple[str, ...]
    lead: str = ""


def run_session(
    aggregator: AnyAggregator,
    transport: Transport,
    request: SessionRequest,
    run: StepRunner = direct,
    spent: Callable[[], None] | None = None,
) -> SessionReport:
    """Drive one session: config, joins, the key backend's rounds, uploads, its decryption,
    result, statuses.

    ``run(key, fn, *args)`` executes each aggregator step (the in-process runner passes its
    timer; keys ``"aggregator"`` and ``"aggregator_keygen"``, :mod:`~.rounds`). ``spent()``
    (threshold keys) runs once the decryption requests are made, before they are relayed
    (:class:`~.rounds.ThresholdRounds`)."""
    rounds = rounds_for(aggregator, spent)
    io = SessionIO(transport, run, tuple(request.parties))
    config = run(
        AGG, aggregator.start_session, list(request.parties), request.thresholds,
        request.score_range, request.security, request.splits, request.reveal,
    )  # fmt: skip
    start = run(AGG, aggregator.collect_joins, io.everyone(Step.JOIN, config))
    upload_request = rounds.key_rounds(io, start)
    uploads: dict[str, bytes] = {}

    def take(party: str, data: bytes) -> None:
        uploads[party] = rounds.take_upload(io, party, data)

    io.collect(Step.UPLOAD, upload_request, take)
    reply = rounds.aggregate(io, {p: uploads[p] for p in io.parties})
    uploads.clear()
    result = rounds.decryption(io, reply)
    completed = aggregator.collect_done(io.everyone(Step.RESULT, result))
    cfg = aggregator.session_config
    return SessionReport(
        cfg.session.hex(), cfg.parties, cfg.num_points, cfg.security.value,
        aggregator.executions, tuple(completed), rounds.lead,
    )  # fmt: skip


class StepParty(Protocol):
    """A party as :func:`party_step` drives it (:class:`~.party.Party`, whatever its key
    backend)."""

    def handlers(self) -> Mapping[Step, Callable[[bytes], bytes]]:
        """This party's answer to each step before ``result`` (bytes in, bytes out)."""
        ...

    def finish(self, data: bytes) -> PartyResult:
        """The ``result`` step: the party's checked result."""
        ...

    def done(self, status: str = "ok") -> bytes:
        """The signed status the aggregator collects after ``result``."""
        ...


def party_step(party: StepParty, step: str, message: bytes) -> tuple[bytes, PartyResult | None]:
    """A party's answer to ``step`` (and its result after the last step). ``step`` and
    ``message`` come from the aggregator: an unknown step, or one this party's key mode has
    not, is a :class:`~privfl.errors.ProtocolError`."""
    name = Step.parse(step)
    if name is Step.RESULT:
        result = party.finish(message)
        return party.done(), result
    handler = party.handlers().get(name)
    if handler is None:
        raise ProtocolError(f"step {step!r} is not a step of this party's FHAUC key mode")
    return handler(message), None
