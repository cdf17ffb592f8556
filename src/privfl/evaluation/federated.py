"""High-level entry point: run FHAUC in one process and return a typed result.

``federated_auc`` builds the roles (a key holder, one :class:`~.fhauc.Party` per data
holder, the aggregator), provisions them, and runs :func:`~.fhauc.schedule.run_session`,
the same step sequence the Flower ServerApp runs, through an in-process transport that
moves real message bytes and times every role.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from privfl.crypto.ckks import DEFAULT_PARAMETERS, CKKSParameters
from privfl.errors import InputError, ProtocolError
from privfl.evaluation import fhauc
from privfl.evaluation.fhauc import malicious, roles
from privfl.evaluation.fhauc.layout import DEFAULT_MEMORY_LIMIT, estimate_cost
from privfl.evaluation.fhauc.measures import Timings, Traffic
from privfl.evaluation.fhauc.messages import MAX_NAME_BYTES
from privfl.evaluation.fhauc.policy import (
    DEFAULT_GUARANTEE_BITS,
    DEFAULT_HIDING_BITS,
    DEFAULT_MULTIPLIER_BITS,
    DEFAULT_SPLITS,
    REQUIRED_ACCURACY,
    Security,
)
from privfl.evaluation.fhauc.reveal import Reveal
from privfl.evaluation.fhauc.schedule import SessionRequest, party_step, run_session
from privfl.evaluation.fhauc.sizing import in_process_policy
from privfl.evaluation.fhauc.steps import Step
from privfl.evaluation.fhauc.transport import Transport
from privfl.evaluation.reference import Parties, party_items, validate_parties
from privfl.evaluation.results import FloatLike
from privfl.evaluation.statistics import DEFAULT_THRESHOLDS, ScoreRange, interior_thresholds
from privfl.progress import Progress
from privfl.runner import InProcessRunner

log = logging.getLogger(__name__)


@dataclass(frozen=True, eq=False)
class AUCResult(FloatLike):
    """Outcome of a federated AUC run; behaves like ``auc`` where a number is expected
    (:class:`~privfl.evaluation.results.FloatLike`: ``float(res)``, ``res > 0.5``,
    ``f"{res:.3f}"``).

    ``timings`` (seconds): ``party_encrypt`` (slowest party's upload step), ``aggregator``
    (all its steps, including parsing the uploads), ``party_decrypt`` (slowest party's
    result step), ``setup`` (key generation and wrapping). ``bytes``: ``party_upload``
    (largest single party upload), ``aggregator_reply`` (per party), ``setup_public_context``
    (what the aggregator receives at setup), ``setup_key_bundle`` (per party).
    Malicious variant: ``verified``, ``precision`` (bound on |AUC - binned AUC| of an honest
    run), ``tolerance`` (largest accepted spread of the executions), ``guarantee_log2``
    (log2 of the probability that a deviating aggregator gets an AUC off by more than
    ``required_accuracy`` accepted), ``executions`` and the paper's permutation bound
    ``cheat_probability_log2``. ``party_names``: the parties, in input order (a dict's keys,
    else ``party-0``, ``party-1``, ...), as errors name them.
    """

    auc: float
    num_parties: int
    thresholds: int
    security: str
    timings: Timings
    bytes: Traffic
    party_aucs: tuple[float, ...] = field(default=(), repr=False)
    verified: bool | None = None
    cheat_probability: float | None = None
    cheat_probability_log2: float | None = None
    splits: int | None = None
    precision: float | None = None
    tolerance: float | None = None
    spread: float | None = None
    guarantee_log2: float | None = None
    executions: int = 1
    party_names: tuple[str, ...] = ()

    def __float__(self) -> float:
        return self.auc

    def to_dict(self) -> dict[str, Any]:
        """One schema in every mode: the same keys, each always of one type or null
        (``verified`` is true when the parties verified the result, null when nothing was
        verified, never false: a failed verification raises; ``precision`` is a number when
        the run bounds its error, else null)."""
        return {
            "auc": self.auc,
            "parties": self.num_parties,
            "party_names": list(self.party_names),
            "thresholds": self.thresholds,
            "security": self.security,
            "timings": dict(self.timings),
            "bytes": dict(self.bytes),
            "verified": self.verified,
            "precision": self.precision,
            "cheat_probability": self.cheat_probability,
            "cheat_probability_log2": self.cheat_probability_log2,
            "splits": self.splits,
            "executions": self.executions,
            "tolerance": self.tolerance,
            "spread": self.spread,
            "guarantee_log2": self.guarantee_log2,
        }


def party_names(count: int) -> list[str]:
    return [f"party-{i}" for i in range(count)]


class InProcessTransport(Transport):
    """Delivers each step's messages to in-process :class:`fhauc.Party` objects through the
    runner (real bytes, sizes recorded per channel, each party's step timed)."""

    CHANNELS: ClassVar[dict[str, str]] = {
        Step.JOIN: "party_join",
        Step.UPLOAD: "party_encrypt",
        Step.RESULT: "party_decrypt",
    }
    UPSTREAM: ClassVar[dict[str, str]] = {
        Step.JOIN: "party_join_message",
        Step.UPLOAD: "party_upload",
        Step.RESULT: "party_done",
    }
    DOWNSTREAM: ClassVar[dict[str, str]] = {
        Step.JOIN: "config",
        Step.UPLOAD: "start",
        Step.RESULT: "aggregator_reply",
    }

    def __init__(self, parties: Sequence[fhauc.Party], runner: InProcessRunner) -> None:
        self.parties = {p.name: p for p in parties}
        self.runner = runner
        self.results: dict[str, fhauc.PartyResult] = {}

    def exchange(self, step: str, messages: Mapping[str, bytes]) -> dict[str, bytes]:
        out = {}
        for name, data in messages.items():
            received = self.runner.send(self.DOWNSTREAM[step], data)
            answer, result = self.runner.run(
                self.CHANNELS[step], party_step, self.parties[name], step, received
            )
            if result is not None:
                self.results[name] = result
            out[name] = self.runner.send(self.UPSTREAM[step], answer)
        return out


def federated_auc(
    parties: Parties,
    thresholds: int | npt.ArrayLike = DEFAULT_THRESHOLDS,
    *,
    score_range: ScoreRange = (0.0, 1.0),
    security: str = "semi-honest",
    splits: int = DEFAULT_SPLITS,
    aggregator: fhauc.Aggregator | None = None,
    max_samples_per_party: int | None = None,
    hiding_bits: int = DEFAULT_HIDING_BITS,
    multiplier_bits: float = DEFAULT_MULTIPLIER_BITS,
    executions: int | None = None,
    required_accuracy: float = REQUIRED_ACCURACY,
    min_pairs: int | None = None,
    min_guarantee_bits: float = DEFAULT_GUARANTEE_BITS,
    params: CKKSParameters = DEFAULT_PARAMETERS,
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
    force: bool = False,
    keys: str = "single",
    pos_label: Any = None,
    progress: Progress | None = None,
) -> AUCResult:
    """Global ROC-AUC of ``parties`` (a list of ``(scores, labels)``, or a dict naming each
    party) under FHAUC. Labels: ``{0, 1}`` or ``{-1, 1}``, or two other values and
    ``pos_label`` (the rule of :func:`privfl.evaluation.reference.validate_parties`).
    ``progress``: an optional callback told after every protocol step
    (:class:`privfl.progress.ProgressEvent`; step names and counts only).

    ``security="semi-honest"`` (default) or ``"malicious"`` (masks, multipliers, ``splits``
    additive splits, a secret permutation, ``executions`` independent executions (3 by
    default; the paper's 2 rarely guarantees more than 2^-8, see ``malicious.py``) and
    verification by the parties; raises :class:`privfl.errors.VerificationError` if the
    aggregator deviates). ``executions=None`` (default): the fewest, from 3 up, for which every
    party's verification meets ``required_accuracy`` and ``min_guarantee_bits`` whatever the
    session's secret multipliers (:mod:`privfl.evaluation.fhauc.sizing`; each party checks
    this at join, before uploading, and refuses naming the setting when no count up to 64
    (with threshold keys: within the key set's budget and the upload bound) suffices), so an
    honest session is not refused after the fact.

    ``max_samples_per_party`` is the public bound on any party's size, fixed in every party's
    provisioning: it sizes the CKKS headroom (semi-honest, default 10^7) or the masks
    (malicious; default: the smallest power of two that holds the largest party, which tells
    the aggregator that size within a factor 2; pass your own bound to hide it).
    ``min_pairs`` (malicious) is the parties' provisioned lower bound on the global
    positives × negatives, which sets how tight their verification can be (the aggregator never
    sees it); default: the true product rounded down to a quarter power of two
    (:func:`~privfl.evaluation.fhauc.sizing.quarter_floor`), as an operator who
    knows its federation's size would provision it. ``min_guarantee_bits``: a verified AUC is
    output only if a deviation of more than ``required_accuracy`` would have been caught except
    with probability ``2^-min_guarantee_bits`` (else :class:`privfl.errors.WeakGuaranteeError`).
    A session whose ciphertexts would need more than ``memory_limit`` bytes at the
    aggregator is refused up front unless ``force``.

    ``keys="threshold"`` (needs the ``[threshold]`` extra): no key holder; every party
    generates its own share of a joint threshold-CKKS key (OpenFHE) in the session, the
    aggregator computes exactly as with ``keys="single"`` (pass any :class:`fhauc.Aggregator`
    subclass) and the AUC is decrypted for the parties only (lead/sum decryption, see
    :mod:`privfl.evaluation.fhauc.threshold.aggregator`). ``max_samples_per_party`` then
    defaults to the smallest power of two that holds the largest party in both modes (joint
    decryption holds values below ``2^56``). ``params`` and ``memory_limit`` are single-key
    settings.

    Every party is a separate :class:`fhauc.Party` object; the aggregator (default
    :class:`fhauc.Aggregator`, or the instance you pass) only ever sees message bytes.
    Raises :class:`privfl.errors.InputError` for bad input and
    :class:`privfl.errors.ProtocolError` if the run fails; never returns a partial result.
    """
    mode = Security.parse(security)
    keys = roles.check_combination(keys, Reveal.AUC)
    data = validate_parties(parties, score_range, pos_label)
    names = [name for name, _ in party_items(parties)]
    too_long = [n for n in names if len(n.encode()) > MAX_NAME_BYTES]
    if too_long:
        raise InputError(f"party names may have at most {MAX_NAME_BYTES} bytes: {too_long[0]!r}")
    interior = interior_thresholds(thresholds, score_range)
    n_points = interior.size + 2
    n_splits = _check_int(splits, "splits") if mode is Security.MALICIOUS else 1
    positives = sum(int(y.sum()) for _, y in data)
    policy = in_process_policy(
        mode, keys, Reveal.AUC, interior, n_splits, [s.size for s, _ in data], positives,
        sum(int(y.size) for _, y in data) - positives,
        max_samples=_optional_int(max_samples_per_party, "max_samples_per_party"),
        min_pairs=_optional_int(min_pairs, "min_pairs"),
        executions=_optional_int(executions, "executions"),
        required_accuracy=required_accuracy, min_guarantee_bits=min_guarantee_bits,
        hiding_bits=_check_int(hiding_bits, "hiding_bits"), multiplier_bits=multiplier_bits,
    )  # fmt: skip
    if keys == "threshold":
        from privfl.evaluation.threshold_federated import run_threshold

        return run_threshold(
            data, interior, score_range, mode, n_splits, policy, aggregator, progress, names
        )
    cfg_executions = policy.executions if mode is Security.MALICIOUS else 1
    estimate_cost(params, n_points, len(data), n_splits, cfg_executions).check(memory_limit, force)
    runner = InProcessRunner(progress=progress)
    fed = roles.in_process(names, "single", aggregator)
    members = [
        roles.make_party("single", n, *fed.member(n), s, y)
        for n, (s, y) in zip(names, data, strict=True)
    ]
    # setup: the key holder provisions; the aggregator relays bundles it cannot open
    roles.provision(fed, members, policy, runner, params)
    transport = InProcessTransport(members, runner)
    request = SessionRequest(tuple(names), interior, score_range, mode, n_splits)
    run_session(fed.aggregator, transport, request, runner.run)
    results = [transport.results[n] for n in names]
    aucs = tuple(r.auc for r in results)
    if max(aucs) - min(aucs) > 1e-9:  # all parties decrypt the same ciphertexts
        raise ProtocolError("parties disagree on the decrypted AUC")
    base = AUCResult(
        auc=float(np.mean(aucs)),
        num_parties=len(members),
        thresholds=n_points,
        security=mode.value,
        timings=Timings(
            party_encrypt=runner.max_seconds("party_encrypt"),
            aggregator=runner.total_seconds("aggregator"),
            party_decrypt=runner.max_seconds("party_decrypt"),
            setup=runner.total_seconds("setup"),
            party_total=runner.max_seconds("party_encrypt"),
        ),
        bytes=Traffic(
            party_upload=runner.max_bytes("party_upload"),
            aggregator_reply=runner.max_bytes("aggregator_reply"),
            setup_public_context=runner.max_bytes("setup_public_context"),
            setup_key_bundle=runner.max_bytes("setup_key_bundle"),
            party_setup_traffic=runner.max_bytes("setup_key_bundle"),
            party_session_traffic=runner.max_bytes("config")
            + runner.max_bytes("party_join_message")
            + runner.max_bytes("start")
            + runner.max_bytes("party_upload")
            + runner.max_bytes("aggregator_reply")
            + runner.max_bytes("party_done"),
        ),
        party_aucs=aucs,
        party_names=tuple(names),
    )
    if mode is Security.SEMI_HONEST:
        return base
    sizes = malicious.Sizes.for_session(
        len(members), n_points, n_splits, policy.max_samples_per_party, policy.hiding_bits
    )
    log2p = sizes.cheat_probability_log2()
    return replace(
        base,
        verified=all(r.verified is True for r in results),
        cheat_probability=2.0**log2p,
        cheat_probability_log2=log2p,
        splits=n_splits,
        precision=max(r.outcome.precision or 0.0 for r in results),
        tolerance=max(r.outcome.tolerance or 0.0 for r in results),
        spread=max(r.outcome.spread or 0.0 for r in results),
        guarantee_log2=max(r.outcome.guarantee_log2 or 0.0 for r in results),
        executions=policy.executions,
    )


def _optional_int(value: Any, name: str) -> int | None:
    """None, or :func:`_check_int` of ``value``."""
    return None if value is None else _check_int(value, name)


def _check_int(value: Any, name: str) -> int:
    """An int (or an integral float); a bool, a string or a fraction is an InputError."""
    if isinstance(value, bool | np.bool_) or not isinstance(value, int | float | np.number):
        raise InputError(f"{name} must be an integer, got {value!r}")
    if isinstance(value, float | np.floating) and not float(value).is_integer():
        raise InputError(f"{name} must be an integer, got {value!r}")
    return int(value)
