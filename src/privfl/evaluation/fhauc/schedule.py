"""The one FHAUC step sequence, driven in-process (``privfl.federated_auc``) and over Flower
(``privfl.federation.flower.server_app``) alike.

The aggregator side calls :func:`run_session` with a :class:`Transport` that delivers one
message per party for a step and returns each party's answer; the party side answers with
:func:`party_step`. Steps, in order::

    "join"    config -> Join           (aggregator.start_session, then collect_joins)
    "upload"  Start  -> PartyUpload    (aggregator.handle_uploads)
    "result"  Result -> Done           (aggregator.collect_done)

A transport that loses a party's answer must raise (:class:`~privfl.errors.ProtocolError`
naming the party): the schedule never produces a result with a party missing.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import ParamSpec, Protocol, TypeVar

import numpy.typing as npt

from privfl.errors import ProtocolError
from privfl.evaluation.fhauc.aggregator import Aggregator
from privfl.evaluation.fhauc.party import Party, PartyResult
from privfl.evaluation.fhauc.policy import Security
from privfl.evaluation.fhauc.reveal import Reveal
from privfl.evaluation.fhauc.steps import SINGLE_KEY_STEPS, Step
from privfl.evaluation.statistics import ScoreRange

STEPS = SINGLE_KEY_STEPS
P = ParamSpec("P")
R = TypeVar("R")


class Transport(Protocol):
    """Delivers one message per party for ``step`` and returns every party's answer."""

    def exchange(self, step: str, messages: Mapping[str, bytes]) -> dict[str, bytes]: ...


class StepRunner(Protocol):
    """Runs one role's step (``InProcessRunner.run`` times it under ``key``)."""

    def __call__(self, key: str, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R: ...


def _direct(key: str, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    return fn(*args, **kwargs)


@dataclass(frozen=True)
class SessionRequest:
    """What the operator of the aggregator asks for."""

    parties: tuple[str, ...]
    thresholds: int | npt.ArrayLike = 100
    score_range: ScoreRange = (0.0, 1.0)
    security: Security | None = None
    splits: int = 4
    reveal: Reveal = Reveal.AUC


@dataclass(frozen=True)
class SessionReport:
    """What the aggregator knows at the end of a session (never an AUC)."""

    session: str
    parties: tuple[str, ...]
    num_points: int
    security: str
    executions: int
    completed: tuple[str, ...]


def run_session(
    aggregator: Aggregator,
    transport: Transport,
    request: SessionRequest,
    run: StepRunner = _direct,
) -> SessionReport:
    """Drive one session: config, joins, start, uploads, result, statuses.

    ``run(key, fn, *args)`` executes each aggregator step (the in-process runner passes its
    timer, with key ``"aggregator"``)."""
    config = run(
        "aggregator",
        aggregator.start_session,
        list(request.parties),
        request.thresholds,
        request.score_range,
        request.security,
        request.splits,
        request.reveal,
    )
    parties = request.parties
    joins = _answers(transport, Step.JOIN, {p: config for p in parties}, parties)
    start = run("aggregator", aggregator.collect_joins, joins)
    uploads = _answers(transport, Step.UPLOAD, {p: start for p in parties}, parties)
    result = run("aggregator", aggregator.handle_uploads, uploads)
    dones = _answers(transport, Step.RESULT, {p: result for p in parties}, parties)
    completed = aggregator.collect_done(dones)
    cfg = aggregator.session_config
    return SessionReport(
        cfg.session.hex(),
        cfg.parties,
        cfg.num_points,
        cfg.security.value,
        aggregator.executions,
        tuple(completed),
    )


def _answers(
    transport: Transport, step: str, messages: Mapping[str, bytes], parties: Sequence[str]
) -> dict[str, bytes]:
    got = transport.exchange(step, messages)
    missing = [p for p in parties if p not in got]
    if missing:
        raise ProtocolError(f"no answer from {missing} in step {step!r}")
    return {p: got[p] for p in parties}


def party_step(party: Party, step: str, message: bytes) -> tuple[bytes, PartyResult | None]:
    """A party's answer to ``step`` (and its result after the last step)."""
    match Step.parse(step):
        case Step.JOIN:
            return party.join(message), None
        case Step.UPLOAD:
            return party.upload(message), None
        case Step.RESULT:
            result = party.finish(message)
            return party.done(), result
    raise ProtocolError(f"step {step!r} is not a single-key FHAUC step")
