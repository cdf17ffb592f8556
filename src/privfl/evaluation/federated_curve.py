"""Run a FHAUC session with a ``curve``/``metrics`` reveal in one process.

The same roles and step sequence as :func:`privfl.federated_auc` (key holder, one
:class:`~privfl.evaluation.fhauc.Party` per data holder, the aggregator, real bytes through
the in-process runner); the parties consent to the requested reveal and may hold sample
weights. Returns every party's :class:`~privfl.evaluation.fhauc.PartyResult` and the run's
timings and sizes; :mod:`privfl.evaluation.metrics` turns them into scikit-learn-shaped
results.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from privfl.crypto.ckks import DEFAULT_PARAMETERS, CKKSParameters
from privfl.errors import InputError, ProtocolError
from privfl.evaluation import fhauc
from privfl.evaluation.federated import InProcessTransport, _check_int, _optional_int, party_names
from privfl.evaluation.fhauc import roles
from privfl.evaluation.fhauc.layout import DEFAULT_MEMORY_LIMIT, Cost
from privfl.evaluation.fhauc.layout import fresh_ciphertext_bytes as ct_bytes
from privfl.evaluation.fhauc.layout import loaded_ciphertext_bytes as loaded_bytes
from privfl.evaluation.fhauc.policy import (
    DEFAULT_GUARANTEE_BITS,
    DEFAULT_SPLITS,
    REQUIRED_ACCURACY,
    Policy,
    Security,
)
from privfl.evaluation.fhauc.reveal import Reveal
from privfl.evaluation.fhauc.schedule import SessionRequest, run_session
from privfl.evaluation.fhauc.sizing import in_process_policy
from privfl.evaluation.statistics import ScoreRange
from privfl.evaluation.threshold_federated import run_in_process
from privfl.progress import Progress
from privfl.runner import InProcessRunner

KEYS = roles.KEYS


@dataclass(frozen=True)
class RunOptions:
    """The protocol options every :mod:`privfl.metrics` function takes (as
    :func:`privfl.federated_auc`)."""

    security: str = "semi-honest"
    keys: str | None = None
    splits: int = DEFAULT_SPLITS
    executions: int | None = None
    max_samples_per_party: int | None = None
    min_pairs: int | None = None
    min_guarantee_bits: float = DEFAULT_GUARANTEE_BITS
    required_accuracy: float = REQUIRED_ACCURACY
    params: CKKSParameters = DEFAULT_PARAMETERS
    memory_limit: int = DEFAULT_MEMORY_LIMIT
    force: bool = False
    aggregator: fhauc.Aggregator | None = None
    progress: Progress | None = None  # told after every protocol step (privfl.progress)


@dataclass(frozen=True)
class Run:
    """One session's party results and measurements."""

    results: tuple[fhauc.PartyResult, ...]
    own_totals: tuple[tuple[float, float], ...]  # each party's own (P_m, Q_m)
    timings: dict[str, float]
    bytes: dict[str, int]
    security: str
    num_points: int


def check_keys(keys: str | None, reveal: Reveal = Reveal.CURVE) -> str:
    """``keys=`` as :func:`privfl.federated_auc` takes it (``None`` = ``"single"``), checked
    with ``reveal`` by :func:`~privfl.evaluation.fhauc.roles.check_combination` (InputError
    before any work)."""
    return roles.check_combination(keys, reveal)


def run_reveal(
    data: Sequence[tuple[npt.NDArray[np.float64], npt.NDArray[np.int8]]],
    weights: Sequence[npt.NDArray[np.float64]] | None,
    interior: npt.NDArray[np.float64],
    score_range: ScoreRange,
    reveal: Reveal,
    options: RunOptions,
) -> Run:
    """Provision, run one session and collect every party's result (validated data)."""
    check_keys(options.keys, reveal)
    mode = Security.parse(options.security)
    n_points = interior.size + 2
    splits = _check_int(options.splits, "splits") if mode is Security.MALICIOUS else 1
    totals = [_totals(y, None if weights is None else weights[i]) for i, (_, y) in enumerate(data)]
    policy = in_process_policy(
        mode, check_keys(options.keys, reveal), reveal, interior, splits,
        [max(s.size, p + q) for (s, _), (p, q) in zip(data, totals, strict=True)],
        sum(p for p, _ in totals), sum(q for _, q in totals),
        max_samples=_optional_int(options.max_samples_per_party, "max_samples_per_party"),
        min_pairs=_optional_int(options.min_pairs, "min_pairs"),
        executions=_optional_int(options.executions, "executions"),
        required_accuracy=options.required_accuracy,
        min_guarantee_bits=options.min_guarantee_bits,
    )  # fmt: skip
    names = party_names(len(data))
    request = SessionRequest(tuple(names), interior, score_range, mode, splits, reveal)
    if check_keys(options.keys, reveal) == "threshold":
        if weights is not None:
            raise InputError("keys='threshold' takes no sample weights yet")
        results, timings, sizes = _run_threshold(data, request, policy, options)
        return Run(_agreed(results), tuple(totals), timings, sizes, mode.value, n_points)
    executions = policy.executions if mode is Security.MALICIOUS else 1
    _cost(options.params, n_points, len(data), splits, executions).check(
        options.memory_limit, options.force
    )
    runner = InProcessRunner(progress=options.progress)
    fed = roles.in_process(names, "single", options.aggregator)
    parties = [
        roles.make_party(
            "single", n, *fed.member(n), s, y, None if weights is None else weights[i], reveal
        )
        for i, (n, (s, y)) in enumerate(zip(names, data, strict=True))
    ]
    roles.provision(fed, parties, policy, runner, options.params)
    transport = InProcessTransport(parties, runner)
    run_session(fed.aggregator, transport, request, runner.run)
    results = _agreed(tuple(transport.results[n] for n in names))
    return Run(
        results,
        tuple(totals),
        {
            "party_encrypt": runner.max_seconds("party_encrypt"),
            "aggregator": runner.total_seconds("aggregator"),
            "aggregator_cpu": sum(runner.cpu.get("aggregator", [])),
            "party_decrypt": runner.max_seconds("party_decrypt"),
            "setup": runner.total_seconds("setup"),
        },
        {
            "party_upload": runner.max_bytes("party_upload"),
            "aggregator_reply": runner.max_bytes("aggregator_reply"),
            "setup_public_context": runner.max_bytes("setup_public_context"),
            "setup_key_bundle": runner.max_bytes("setup_key_bundle"),
            "party_setup_traffic": runner.max_bytes("setup_key_bundle"),
        },
        mode.value,
        n_points,
    )


def _agreed(results: tuple[fhauc.PartyResult, ...]) -> tuple[fhauc.PartyResult, ...]:
    """``results`` once every party revealed a curve, the same one (every party decrypts, or
    receives from the lead, the same values)."""
    curves = [r.outcome.curve for r in results]
    if any(c is None for c in curves):
        raise ProtocolError("a party finished without a revealed curve")
    first = curves[0]
    for c in curves[1:]:
        if c is None or first is None or np.max(np.abs(c.tp - first.tp)) > 1e-9:
            raise ProtocolError("parties disagree on the decrypted curve")
    return results


def _run_threshold(
    data: Sequence[tuple[npt.NDArray[np.float64], npt.NDArray[np.int8]]],
    request: SessionRequest,
    policy: Policy,
    options: RunOptions,
) -> tuple[tuple[fhauc.PartyResult, ...], dict[str, float], dict[str, int]]:
    """The session with threshold keys (:func:`~.threshold_federated.run_in_process`): the
    results, and the same timing and size fields as with single keys (the key rounds count
    as setup: ``setup`` adds the aggregator's key generation, ``setup_key_bundle`` is the
    seed bundle, ``party_setup_traffic`` a party's key-round traffic)."""
    session = run_in_process(data, request, policy, options.aggregator, options.progress)
    runner, traffic = session.runner, session.transport.traffic.values()
    timings = {
        "party_encrypt": runner.max_seconds("party_upload"),
        "aggregator": runner.total_seconds("aggregator"),
        "aggregator_cpu": sum(runner.cpu.get("aggregator", [])),
        "party_decrypt": max(runner.max_seconds("party_decrypt"), runner.max_seconds("party_fuse"))
        + runner.max_seconds("party_result"),
        "setup": runner.total_seconds("setup") + runner.total_seconds("aggregator_keygen"),
    }
    sizes = {
        "party_upload": max(t.get("upload", 0) for t in traffic),
        "aggregator_reply": runner.max_bytes("to_party_decrypt"),
        "setup_public_context": runner.max_bytes("setup_public"),
        "setup_key_bundle": runner.max_bytes("setup_bundle"),
        "party_setup_traffic": max(t.get("setup", 0) for t in traffic),
    }
    return session.results, timings, sizes


def _totals(y: npt.NDArray[np.int8], w: npt.NDArray[np.float64] | None) -> tuple[float, float]:
    pos = y.astype(bool)
    if w is None:
        return float(pos.sum()), float((~pos).sum())
    return float(w[pos].sum()), float(w[~pos].sum())


def _cost(params: CKKSParameters, points: int, parties: int, splits: int, executions: int) -> Cost:
    """Upload per party and aggregator ciphertext memory of a curve session (two vectors of
    ``S·(N-1)`` slots, chunked)."""
    per_execution = 2 * math.ceil(splits * (points - 1) / params.slots)
    upload = executions * per_execution * ct_bytes(params)
    memory = parties * upload + (parties + 2) * per_execution * loaded_bytes(params)
    return Cost(upload, memory)


def describe(run: Run) -> dict[str, Any]:
    """The run's public facts for a result's ``to_dict``."""
    first = run.results[0].outcome
    bounds = [r.outcome.precision for r in run.results if r.outcome.precision is not None]
    return {
        "security": run.security,
        "parties": len(run.results),
        "party_names": [r.party for r in run.results],
        "thresholds": run.num_points,
        "verified": first.verified,
        "precision": max(bounds) if bounds else None,
        "guarantee_log2": first.guarantee_log2,
        "timings": run.timings,
        "bytes": run.bytes,
    }
