"""How FHAUC's one schedule (:mod:`~.schedule`) reaches the parties: a :class:`Transport`
delivers one message per party for a step and returns every party's answer; a
:class:`StepRunner` runs (and, in process, times) the aggregator's side of each step.

Every answer comes from another role and is hostile: :func:`stream` and :func:`answers`
both refuse a missing party and an answer from a party the step was not sent to; :func:`stream`
also refuses a second answer from one party (a transport's ``exchange`` returns one answer per
key, so none counts twice there). Either way the schedule never produces a result with a party
missing, counted twice or added (:class:`~privfl.errors.ProtocolError` naming the party). A
transport that learns who sent an answer from the answer itself (a Flower reply names its
party) checks that claim against the party it asked, too.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import ParamSpec, Protocol, TypeVar

from privfl.errors import ProtocolError

__all__ = ["StepRunner", "Transport", "answers", "direct", "stream"]

P = ParamSpec("P")
R = TypeVar("R")


class Transport(Protocol):
    """Delivers one message per party for ``step`` and returns every party's answer.

    Subclass it to inherit :meth:`stream`; a transport that can hand each answer on as it
    arrives (the in-process one, so that ``M`` key shares never sit in memory at once)
    overrides it."""

    def exchange(self, step: str, messages: Mapping[str, bytes]) -> dict[str, bytes]:
        """Every party's answer to its message of ``messages`` for ``step``."""
        ...

    def stream(
        self, step: str, messages: Mapping[str, bytes], consume: Callable[[str, bytes], None]
    ) -> None:
        """Hand each party's answer to ``consume(party, answer)``; by default after
        :meth:`exchange` has collected them all."""
        for party, data in self.exchange(step, messages).items():
            consume(party, data)


class StepRunner(Protocol):
    """Runs one role's step (``InProcessRunner.run`` times it under ``key``)."""

    def __call__(self, key: str, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R: ...


def direct(key: str, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
    """The :class:`StepRunner` that just calls ``fn`` (no timing)."""
    return fn(*args, **kwargs)


def answers(
    transport: Transport, step: str, messages: Mapping[str, bytes], parties: Sequence[str]
) -> dict[str, bytes]:
    """Every answer of ``parties`` to ``messages`` for ``step``, in ``parties`` order
    (:class:`ProtocolError` naming the parties that did not answer, or a sender the step was
    not sent to)."""
    got = transport.exchange(step, messages)
    unexpected = sorted(p for p in got if p not in messages)
    if unexpected:
        raise ProtocolError(f"an unexpected answer from {unexpected} in step {str(step)!r}")
    missing = [p for p in parties if p not in got]
    if missing:
        raise ProtocolError(f"no answer from {missing} in step {str(step)!r}")
    return {p: got[p] for p in parties}


def stream(
    transport: Transport,
    step: str,
    messages: Mapping[str, bytes],
    parties: Sequence[str],
    consume: Callable[[str, bytes], None],
) -> None:
    """Hand each answer of ``parties`` to ``consume`` as the transport delivers it
    (:meth:`Transport.stream`). Every party must answer exactly once: an answer from a party
    the step was not sent to, a second answer, or a missing one is a :class:`ProtocolError`."""
    seen: set[str] = set()

    def once(party: str, data: bytes) -> None:
        if party not in messages or party in seen:
            raise ProtocolError(f"an unexpected answer from {party!r} in step {str(step)!r}")
        seen.add(party)
        consume(party, data)

    transport.stream(step, messages, once)
    missing = [p for p in parties if p not in seen]
    if missing:
        raise ProtocolError(f"no answer from {missing} in step {str(step)!r}")
