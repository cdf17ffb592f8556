"""``federated_auc(..., keys="threshold")``: FHAUC where every party holds its own key share.

Builds the roles (a provisioning party that creates only the shared seed, one
:class:`~.fhauc.party.Party` with threshold keys per data holder, the threshold
aggregator) and runs the one schedule, :func:`~.fhauc.schedule.run_session`, through an
in-process transport that moves real message bytes and times every role. The security
argument is in :mod:`privfl.evaluation.fhauc.threshold.aggregator`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from privfl.crypto.threshold import require_openfhe
from privfl.errors import ProtocolError
from privfl.evaluation.federated import AUCResult, party_names
from privfl.evaluation.fhauc import Aggregator, malicious, roles
from privfl.evaluation.fhauc.measures import Timings, Traffic
from privfl.evaluation.fhauc.messages import SessionConfig
from privfl.evaluation.fhauc.party import Party, PartyResult
from privfl.evaluation.fhauc.policy import Policy, Security
from privfl.evaluation.fhauc.schedule import SessionReport, SessionRequest, party_step, run_session
from privfl.evaluation.fhauc.steps import KEY_STEPS, Step
from privfl.evaluation.fhauc.threshold.aggregator import ThresholdAggregator
from privfl.evaluation.fhauc.threshold.messages import UploadStep
from privfl.evaluation.fhauc.threshold.plan import plan
from privfl.evaluation.fhauc.transport import Transport
from privfl.evaluation.statistics import ScoreRange, interior_thresholds
from privfl.messages import SESSION_ID_BYTES
from privfl.progress import Progress
from privfl.runner import InProcessRunner

FloatArray = np.ndarray


class ThresholdTransport(Transport):
    """Delivers each step's messages to in-process threshold parties through the runner
    (channel ``to_party_<step>`` down, ``from_party_<step>`` up; each party's step timed as
    ``party_<step>``)."""

    SETUP: ClassVar[frozenset[str]] = KEY_STEPS

    def __init__(self, parties: Sequence[Party], runner: InProcessRunner) -> None:
        self.parties = {p.name: p for p in parties}
        self.runner = runner
        self.results: dict[str, PartyResult] = {}
        self.traffic: dict[str, dict[str, int]] = {p.name: {} for p in parties}

    def exchange(self, step: str, messages: Mapping[str, bytes]) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        self.stream(step, messages, out.__setitem__)
        return out

    def stream(
        self, step: str, messages: Mapping[str, bytes], consume: Callable[[str, bytes], None]
    ) -> None:
        """Run each party's step and hand its answer to ``consume`` before the next party
        runs (nothing is kept here: ``M`` key shares never sit in memory at once)."""
        for name, data in messages.items():
            received = self.runner.send(f"to_party_{step}", data)
            answer, result = self.runner.run(
                f"party_{step}", party_step, self.parties[name], step, received
            )
            if result is not None:
                self.results[name] = result
            up = self.runner.send(f"from_party_{step}", answer)
            self._count(name, step, data, up)
            consume(name, up)

    def _count(self, name: str, step: str, down: bytes, up: bytes) -> None:
        """Per-party traffic: key generation (rounds 1-2, the key checks and the
        relinearisation share that rides with the upload) is ``setup``; the rest ``session``."""
        mine = self.traffic[name]
        setup, session = 0, len(down) + len(up)
        if step in self.SETUP:
            setup, session = session, 0
        elif step == Step.UPLOAD:
            upload = len(UploadStep.from_bytes(up).upload)
            setup, session = len(down) + len(up) - upload, upload
            mine["upload"] = upload
        mine["setup"] = mine.get("setup", 0) + setup
        mine["session"] = mine.get("session", 0) + session


@dataclass(frozen=True)
class InProcessSession:
    """One in-process threshold session: its runner (times and sizes), transport (per-party
    traffic), the aggregator's report and every party's result, in ``request.parties``
    order."""

    runner: InProcessRunner
    transport: ThresholdTransport
    report: SessionReport
    results: tuple[PartyResult, ...]
    aggregator: ThresholdAggregator  # keeps the key set: run_session again reuses it


def run_in_process(
    data: Sequence[tuple[FloatArray, FloatArray]],
    request: SessionRequest,
    policy: Policy,
    aggregator: Aggregator | None = None,
    progress: Progress | None = None,
) -> InProcessSession:
    """Provision and run one threshold session with ``request`` (any security and reveal;
    every party consents to ``request.reveal``) through the one role builder
    (:mod:`~privfl.evaluation.fhauc.roles`); used by :func:`run_threshold` and the
    :mod:`privfl.metrics` functions."""
    require_openfhe()
    names = list(request.parties)
    mode = request.security or policy.security
    lo, hi = request.score_range
    config = SessionConfig(
        bytes(SESSION_ID_BYTES), request.parties,
        interior_thresholds(request.thresholds, request.score_range), (float(lo), float(hi)),
        mode, request.splits if mode is Security.MALICIOUS else 1, reveal=request.reveal,
    )  # fmt: skip
    plan(config, policy)  # a session the joint key cannot run is refused before any work
    runner = InProcessRunner(progress=progress)
    fed = roles.in_process(names, "threshold", aggregator)
    parties = [
        roles.make_party("threshold", n, *fed.member(n), s, y, reveal=request.reveal)
        for n, (s, y) in zip(names, data, strict=True)
    ]
    roles.provision(fed, parties, policy, runner)
    agg = fed.aggregator
    if not isinstance(agg, ThresholdAggregator):
        raise ProtocolError("threshold keys need the threshold aggregator")
    transport = ThresholdTransport(parties, runner)
    report = run_session(agg, transport, request, runner.run)
    results = tuple(transport.results[n] for n in names)
    return InProcessSession(runner, transport, report, results, agg)


def run_threshold(
    data: Sequence[tuple[FloatArray, FloatArray]],
    interior: FloatArray,
    score_range: ScoreRange,
    mode: Security,
    splits: int,
    policy: Policy,
    aggregator: Aggregator | None,
    progress: Progress | None = None,
    party_labels: Sequence[str] | None = None,
) -> AUCResult:
    """Run one threshold session in-process (called by :func:`privfl.federated_auc`);
    ``party_labels``: the parties' names (default ``party-0``, ``party-1``, ...)."""
    names = list(party_labels) if party_labels is not None else party_names(len(data))
    request = SessionRequest(tuple(names), interior, score_range, mode, splits)
    session = run_in_process(data, request, policy, aggregator, progress)
    runner, transport, report = session.runner, session.transport, session.report
    results = list(session.results)
    aucs = tuple(r.auc for r in results)
    if max(aucs) - min(aucs) > 1e-9:
        raise ProtocolError("parties disagree on the decrypted AUC")
    non_lead = [t for n, t in transport.traffic.items() if n != report.lead]
    lead = transport.traffic[report.lead]
    party_keys = ("keygen", "keycheck", "upload", "decrypt", "fuse", "result")
    base = AUCResult(
        auc=float(np.mean(aucs)),
        num_parties=len(names),
        thresholds=int(interior.size) + 2,
        security=mode.value,
        timings=Timings(
            party_keygen=runner.max_seconds("party_keygen") + runner.max_seconds("party_keycheck"),
            party_encrypt=runner.max_seconds("party_upload"),
            aggregator=runner.total_seconds("aggregator"),
            aggregator_keygen=runner.total_seconds("aggregator_keygen"),
            party_decrypt=max(runner.max_seconds("party_decrypt"), runner.max_seconds("party_fuse"))
            + runner.max_seconds("party_result"),
            party_total=max(
                sum(runner.seconds[f"party_{k}"][i] for k in party_keys[:3])
                for i in range(len(names))
            ),
            setup=runner.total_seconds("setup"),
        ),
        bytes=Traffic(
            party_upload=max(t.get("upload", 0) for t in transport.traffic.values()),
            party_session_traffic=max(t.get("session", 0) for t in non_lead or [lead]),
            lead_session_traffic=lead.get("session", 0),
            party_setup_traffic=max(t.get("setup", 0) for t in transport.traffic.values()),
            aggregator_reply=runner.max_bytes("to_party_decrypt"),
            lead_request=runner.max_bytes("to_party_fuse"),
            reveal=runner.max_bytes("to_party_result"),
        ),
        party_aucs=aucs,
        party_names=tuple(names),
        precision=max(r.outcome.precision or 0.0 for r in results),
    )
    if mode is Security.SEMI_HONEST:
        return base
    sizes = malicious.Sizes.for_session(
        len(names), int(interior.size) + 2, splits, policy.max_samples_per_party,
        policy.hiding_bits,
    )  # fmt: skip
    log2p = sizes.cheat_probability_log2()
    return replace(
        base,
        verified=all(r.verified for r in results),
        cheat_probability=2.0**log2p,
        cheat_probability_log2=log2p,
        splits=splits,
        precision=max(r.outcome.precision or 0.0 for r in results),
        tolerance=max(r.outcome.tolerance or 0.0 for r in results),
        spread=max(r.outcome.spread or 0.0 for r in results),
        guarantee_log2=max(r.outcome.guarantee_log2 or 0.0 for r in results),
        executions=policy.executions,
    )
