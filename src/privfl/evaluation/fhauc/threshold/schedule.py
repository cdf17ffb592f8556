"""The step sequence of FHAUC with threshold keys (in-process and over any transport).

Like :mod:`.schedule`, the aggregator side calls :func:`run_threshold_session` with a
:class:`~.schedule.Transport`; the party side answers with :func:`threshold_party_step`.
Steps (``messages`` go to every party unless stated)::

    "join"      config          -> Join
    "keygen"    Start           -> KeyShareUpload     (round 1 of the joint key)
    "keycheck"  JointPublicKeys -> KeyCheck           (reusing a kept key set: Start -> KeyCheck,
                                                       no keygen; :mod:`.keyset`)
    "upload"    KeyChecks       -> UploadStep         (relinearisation share, ciphertexts)
    "decrypt"   DecryptRequests -> DecryptShares      (every party but the lead)
    "fuse"      LeadRequests    -> Reveal             (the lead only)
    "result"    Reveal          -> Done
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from privfl.errors import ProtocolError
from privfl.evaluation.fhauc.party import PartyResult
from privfl.evaluation.fhauc.schedule import (
    SessionReport,
    SessionRequest,
    StepRunner,
    Transport,
    _answers,
    _direct,
)
from privfl.evaluation.fhauc.steps import THRESHOLD_STEPS, Step
from privfl.evaluation.fhauc.threshold.aggregator import ThresholdMixin
from privfl.evaluation.fhauc.threshold.party import ThresholdFhaucParty

STEPS = THRESHOLD_STEPS


@dataclass(frozen=True)
class ThresholdReport:
    """What the aggregator knows at the end (never an AUC): the session report and which
    party was the lead."""

    report: SessionReport
    lead: str


def run_threshold_session(
    aggregator: ThresholdMixin,
    transport: Transport,
    request: SessionRequest,
    run: StepRunner = _direct,
    spent: Callable[[], None] | None = None,
) -> ThresholdReport:
    """Drive one threshold session; ``run(key, fn, *args)`` executes the aggregator's steps.
    ``spent()`` runs once the decryption requests are made and before they are relayed: the
    moment the key set's count and request ids move on (a deployment stores them then, so its
    count never lags the parties' whatever fails later)."""
    agg = "aggregator"
    parties = request.parties
    config = run(
        agg, aggregator.start_session, list(parties), request.thresholds,
        request.score_range, request.security, request.splits, request.reveal,
    )  # fmt: skip

    def everyone(step: str, message: bytes) -> dict[str, bytes]:
        return _answers(transport, step, {p: message for p in parties}, parties)

    joins = everyone(Step.JOIN, config)
    start = run(agg, aggregator.collect_joins, joins)
    keys = "aggregator_keygen"  # key generation, timed apart (single-key: provisioning)

    def add_share(party: str, data: bytes) -> None:
        run(keys, aggregator.add_keygen_share, party, data)

    if aggregator.session_config.key_set:  # a kept key set: no key generation
        checks = everyone(Step.KEYCHECK, start)
    else:
        stream(transport, Step.KEYGEN, {p: start for p in parties}, parties, add_share)
        checks = everyone(Step.KEYCHECK, run(keys, aggregator.finish_keygen))
    relay = run(keys, aggregator.relay_checks, checks)
    uploads: dict[str, bytes] = {}

    def add_upload(party: str, data: bytes) -> None:
        uploads[party] = run(keys, aggregator.add_mult_share, party, data)

    stream(transport, Step.UPLOAD, {p: relay for p in parties}, parties, add_upload)
    run(agg, aggregator.finish_keys, uploads)  # checking the signed uploads, as single-key
    run(keys, aggregator.install_keys)  # the relinearisation key rode with the uploads
    uploads.clear()
    requests = run(agg, aggregator.request_decryptions)
    if spent is not None:
        spent()
    others = tuple(p for p in parties if p != aggregator.lead)
    decrypted = _answers(transport, Step.DECRYPT, {p: requests for p in others}, others)
    lead_request = run(agg, aggregator.lead_requests, decrypted)
    lead = (aggregator.lead,)
    fused = _answers(transport, Step.FUSE, {aggregator.lead: lead_request}, lead)
    reveal = run(agg, aggregator.relay_reveal, fused[aggregator.lead])
    dones = everyone(Step.RESULT, reveal)
    completed = aggregator.collect_done(dones)
    cfg = aggregator.session_config
    report = SessionReport(
        cfg.session.hex(), cfg.parties, cfg.num_points, cfg.security.value,
        aggregator.executions, tuple(completed),
    )  # fmt: skip
    return ThresholdReport(report, aggregator.lead)


def stream(
    transport: Transport,
    step: str,
    messages: Mapping[str, bytes],
    parties: Sequence[str],
    consume: Callable[[str, bytes], None],
) -> None:
    """Hand each party's answer to ``consume`` as it arrives when the transport can
    (``transport.stream(step, messages, consume)``: the in-process transport, so that ``M``
    key shares are never held at once), else after :meth:`Transport.exchange`. Every party
    must answer exactly once."""
    seen: list[str] = []

    def once(party: str, data: bytes) -> None:
        if party not in messages or party in seen:
            raise ProtocolError(f"an unexpected answer from {party!r} in step {step!r}")
        seen.append(party)
        consume(party, data)

    streaming = getattr(transport, "stream", None)
    if streaming is not None:
        streaming(step, messages, once)
    else:
        for party, data in _answers(transport, step, messages, parties).items():
            once(party, data)
    missing = [p for p in parties if p not in seen]
    if missing:
        raise ProtocolError(f"no answer from {missing} in step {step!r}")


def threshold_party_step(
    party: ThresholdFhaucParty, step: str, message: bytes
) -> tuple[bytes, PartyResult | None]:
    """A party's answer to ``step`` (and its result after the last step)."""
    handlers = {
        Step.JOIN: party.join,
        Step.KEYGEN: party.keygen,
        Step.KEYCHECK: party.keycheck,
        Step.UPLOAD: party.upload,
        Step.DECRYPT: party.decrypt,
        Step.FUSE: party.fuse,
    }
    name = Step.parse(step)
    if name in handlers:
        return handlers[name](message), None
    if name is Step.RESULT:
        result = party.finish(message)
        return party.done(), result
    raise ProtocolError(f"unknown threshold FHAUC step {step!r}")
