"""What each key backend contributes to FHAUC's one step sequence (:mod:`~.schedule`).

The schedule is the same for every (keys, security, reveal) combination::

    join -> [key rounds] -> upload -> [decryption] -> result

The two bracketed points, and how one party's upload answer is taken in, are the key
backend's: a :class:`KeyRounds` strategy, one per key mode, chosen once per session by
:func:`rounds_for` from the aggregator role the role builder (:mod:`~.roles`) made.

* :class:`SingleKeyRounds`: no key rounds (the key holder provisioned the keys); the
  aggregator's :meth:`~.aggregator.Aggregator.handle_uploads` returns the encrypted result,
  which every party decrypts itself in ``result``.
* :class:`ThresholdRounds`: ``keygen`` (streamed: each party's public contribution is added
  as it arrives) and ``keycheck``, or ``keycheck`` alone with a kept key set; the upload
  answer carries a relinearisation share, and both it and the upload are added into the
  aggregator's running sums as they arrive (``M`` uploads never sit in memory at once);
  then ``decrypt`` (every party but the lead) and ``fuse`` (the lead only), whose signed
  reveal is the ``result`` message.

Timing keys for the :class:`~.transport.StepRunner`: ``"aggregator"`` for the session's
computation, ``"aggregator_keygen"`` for key generation (with single keys that work is
provisioning, timed apart).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from privfl.evaluation.fhauc.aggregator import Aggregator
from privfl.evaluation.fhauc.steps import Step
from privfl.evaluation.fhauc.threshold.aggregator import ThresholdAggregator
from privfl.evaluation.fhauc.transport import StepRunner, Transport, answers, stream

__all__ = [
    "AnyAggregator",
    "KeyRounds",
    "SessionIO",
    "SingleKeyRounds",
    "ThresholdRounds",
    "rounds_for",
]

AGG = "aggregator"
KEYGEN = "aggregator_keygen"  # key generation, timed apart (single keys: provisioning)
AnyAggregator = Aggregator | ThresholdAggregator


@dataclass(frozen=True)
class SessionIO:
    """The schedule's reach: the transport to the session's parties and the runner of the
    aggregator's steps."""

    transport: Transport
    run: StepRunner
    parties: tuple[str, ...]

    def everyone(self, step: Step, message: bytes) -> dict[str, bytes]:
        """Every party's answer to ``message`` (one message for all), in party order."""
        return self.to(step, {p: message for p in self.parties}, self.parties)

    def to(
        self, step: Step, messages: Mapping[str, bytes], parties: tuple[str, ...]
    ) -> dict[str, bytes]:
        """The answers of ``parties`` (and only theirs) to their ``messages``."""
        return answers(self.transport, step, messages, parties)

    def collect(self, step: Step, message: bytes, consume: Callable[[str, bytes], None]) -> None:
        """Every party's answer to ``message``, handed to ``consume`` as it arrives (once
        per party; :func:`~.transport.stream`)."""
        stream(self.transport, step, {p: message for p in self.parties}, self.parties, consume)


class KeyRounds(Protocol):
    """A key backend's part of the schedule (see the module docstring)."""

    @property
    def lead(self) -> str:
        """The party that fused the result (``""``: every party decrypts itself)."""
        ...

    def key_rounds(self, io: SessionIO, start: bytes) -> bytes:
        """Run the key rounds after the joins; returns the upload step's message."""
        ...

    def take_upload(self, io: SessionIO, party: str, answer: bytes) -> bytes:
        """``party``'s answer to the upload step, as it arrives; returns what
        :meth:`aggregate` needs of it later (its signed upload, or nothing when the
        aggregator took it in already)."""
        ...

    def aggregate(self, io: SessionIO, uploads: Mapping[str, bytes]) -> bytes:
        """Check every signed upload not yet checked (``uploads``: what :meth:`take_upload`
        returned) and aggregate; returns the encrypted reply message."""
        ...

    def decryption(self, io: SessionIO, reply: bytes) -> bytes:
        """Have the reply decrypted by whoever the key mode entitles; returns the result
        step's message."""
        ...


class SingleKeyRounds:
    """Single keys: no key rounds, every party decrypts the reply itself in ``result``."""

    lead = ""

    def __init__(self, aggregator: Aggregator) -> None:
        self.aggregator = aggregator

    def key_rounds(self, io: SessionIO, start: bytes) -> bytes:
        return start

    def take_upload(self, io: SessionIO, party: str, answer: bytes) -> bytes:
        return answer

    def aggregate(self, io: SessionIO, uploads: Mapping[str, bytes]) -> bytes:
        return io.run(AGG, self.aggregator.handle_uploads, uploads)

    def decryption(self, io: SessionIO, reply: bytes) -> bytes:
        return reply


class ThresholdRounds:
    """Threshold keys (see the module docstring). ``spent()`` runs once the decryption
    requests are made and before they are relayed: the moment the key set's count and
    request ids move on (a deployment stores them then, so its count never lags the
    parties' whatever fails later)."""

    def __init__(
        self, aggregator: ThresholdAggregator, spent: Callable[[], None] | None = None
    ) -> None:
        self.aggregator, self.spent = aggregator, spent

    @property
    def lead(self) -> str:
        return self.aggregator.lead

    def key_rounds(self, io: SessionIO, start: bytes) -> bytes:
        agg = self.aggregator
        if agg.session_config.key_set:  # a kept key set: no key generation
            checks = io.everyone(Step.KEYCHECK, start)
        else:

            def add_share(party: str, data: bytes) -> None:
                io.run(KEYGEN, agg.add_keygen_share, party, data)

            io.collect(Step.KEYGEN, start, add_share)
            checks = io.everyone(Step.KEYCHECK, io.run(KEYGEN, agg.finish_keygen))
        return io.run(KEYGEN, agg.relay_checks, checks)

    def take_upload(self, io: SessionIO, party: str, answer: bytes) -> bytes:
        upload = io.run(KEYGEN, self.aggregator.add_mult_share, party, answer)
        io.run(AGG, self.aggregator.take_upload, party, upload)  # checked, summed as it comes
        return b""  # nothing left to keep: the aggregator holds the running sums

    def aggregate(self, io: SessionIO, uploads: Mapping[str, bytes]) -> bytes:
        agg = self.aggregator
        io.run(KEYGEN, agg.install_keys)  # the relinearisation key rode with the uploads
        return io.run(AGG, agg.request_decryptions)

    def decryption(self, io: SessionIO, reply: bytes) -> bytes:
        agg = self.aggregator
        if self.spent is not None:
            self.spent()
        others = tuple(p for p in io.parties if p != agg.lead)
        shares = io.to(Step.DECRYPT, {p: reply for p in others}, others)
        lead_request = io.run(AGG, agg.lead_requests, shares)
        fused = io.to(Step.FUSE, {agg.lead: lead_request}, (agg.lead,))
        return io.run(AGG, agg.relay_reveal, fused[agg.lead])


def rounds_for(aggregator: AnyAggregator, spent: Callable[[], None] | None = None) -> KeyRounds:
    """The key rounds of ``aggregator``'s key mode (the one place the schedule tells the
    modes apart). ``spent``: see :class:`ThresholdRounds` (single keys keep no key set)."""
    if isinstance(aggregator, ThresholdAggregator):
        return ThresholdRounds(aggregator, spent)
    return SingleKeyRounds(aggregator)
