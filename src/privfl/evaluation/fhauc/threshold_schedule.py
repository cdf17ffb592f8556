"""The step sequence of FHAUC with threshold keys (in-process and over any transport).

Like :mod:`.schedule`, the aggregator side calls :func:`run_threshold_session` with a
:class:`~.schedule.Transport`; the party side answers with :func:`threshold_party_step`.
Steps (``messages`` go to every party unless stated)::

    "join"      config          -> Join
    "keygen"    Start           -> KeyShareUpload     (round 1 of the joint key)
    "keycheck"  JointPublicKeys -> KeyCheck
    "upload"    KeyChecks       -> ThresholdUpload    (relinearisation share, ciphertexts)
    "decrypt"   DecryptRequests -> DecryptShares      (every party but the lead)
    "fuse"      LeadRequests    -> Reveal             (the lead only)
    "result"    Reveal          -> Done
"""

from __future__ import annotations

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
from privfl.evaluation.fhauc.threshold_aggregator import ThresholdMixin
from privfl.evaluation.fhauc.threshold_party import ThresholdFhaucParty

STEPS = ("join", "keygen", "keycheck", "upload", "decrypt", "fuse", "result")


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
) -> ThresholdReport:
    """Drive one threshold session; ``run(key, fn, *args)`` executes the aggregator's steps."""
    agg = "aggregator"
    parties = request.parties
    config = run(
        agg, aggregator.start_session, list(parties), request.thresholds,
        request.score_range, request.security, request.splits,
    )  # fmt: skip

    def everyone(step: str, message: bytes) -> dict[str, bytes]:
        return _answers(transport, step, {p: message for p in parties}, parties)

    joins = everyone("join", config)
    start = run(agg, aggregator.collect_joins, joins)
    shares = everyone("keygen", start)
    keys = "aggregator_keygen"  # key generation, timed apart (single-key: provisioning)
    joint = run(keys, aggregator.combine_keygen, shares)
    checks = everyone("keycheck", joint)
    relay = run(keys, aggregator.relay_checks, checks)
    uploads = everyone("upload", relay)
    run(agg, aggregator.finish_keys, uploads)  # checking the signed uploads, as single-key
    run(keys, aggregator.install_keys)  # the relinearisation key rode with the uploads
    requests = run(agg, aggregator.handle_uploads, uploads)
    others = tuple(p for p in parties if p != aggregator.lead)
    decrypted = _answers(transport, "decrypt", {p: requests for p in others}, others)
    lead_request = run(agg, aggregator.lead_requests, decrypted)
    lead = (aggregator.lead,)
    fused = _answers(transport, "fuse", {aggregator.lead: lead_request}, lead)
    reveal = run(agg, aggregator.relay_reveal, fused[aggregator.lead])
    dones = everyone("result", reveal)
    completed = aggregator.collect_done(dones)
    cfg = aggregator.session_config
    report = SessionReport(
        cfg.session.hex(), cfg.parties, cfg.num_points, cfg.security.value,
        aggregator.executions, tuple(completed),
    )  # fmt: skip
    return ThresholdReport(report, aggregator.lead)


def threshold_party_step(
    party: ThresholdFhaucParty, step: str, message: bytes
) -> tuple[bytes, PartyResult | None]:
    """A party's answer to ``step`` (and its result after the last step)."""
    handlers = {
        "join": party.join,
        "keygen": party.keygen,
        "keycheck": party.keycheck,
        "upload": party.upload,
        "decrypt": party.decrypt,
        "fuse": party.fuse,
    }
    if step in handlers:
        return handlers[step](message), None
    if step == "result":
        result = party.finish(message)
        return party.done(), result
    raise ProtocolError(f"unknown threshold FHAUC step {step!r}")
