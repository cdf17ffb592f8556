"""High-level entry points: run FHAUC in one process and return a result."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from privfl.crypto import keywrap
from privfl.crypto.ckks import DEFAULT_PARAMETERS, CKKSParameters
from privfl.errors import InputError
from privfl.evaluation import fhauc, malicious
from privfl.evaluation.reference import PartyData, validate_parties
from privfl.evaluation.statistics import DEFAULT_THRESHOLDS, ScoreRange, interior_thresholds
from privfl.runner import InProcessRunner

log = logging.getLogger(__name__)


@dataclass
class AUCResult:
    """Outcome of a federated AUC run.

    ``timings``: ``party_encrypt`` (slowest party), ``aggregator`` (including parsing the
    uploads), ``party_decrypt`` (slowest party), ``setup`` (key generation and wrapping).
    ``bytes``: ``party_upload`` (largest single party upload), ``aggregator_reply`` (per
    party), ``setup_public_context`` (what the aggregator receives at setup),
    ``setup_key_bundle`` (per party).
    """

    auc: float
    num_parties: int
    thresholds: int
    security: str
    timings: dict[str, float]
    bytes: dict[str, int]
    party_aucs: list[float] = field(default_factory=list, repr=False)
    verified: bool | None = None
    cheat_probability: float | None = None
    cheat_probability_log2: float | None = None
    splits: int | None = None
    precision: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "auc": self.auc,
            "parties": self.num_parties,
            "thresholds": self.thresholds,
            "security": self.security,
            "timings": self.timings,
            "bytes": self.bytes,
        }
        if self.verified is not None:
            out["verified"] = self.verified
            out["cheat_probability"] = self.cheat_probability
            out["cheat_probability_log2"] = self.cheat_probability_log2
            out["splits"] = self.splits
            out["precision"] = self.precision
        return out


def party_names(count: int) -> list[str]:
    return [f"party-{i}" for i in range(count)]


def federated_auc(
    parties: Sequence[PartyData],
    thresholds: int | npt.ArrayLike = DEFAULT_THRESHOLDS,
    *,
    score_range: ScoreRange = (0.0, 1.0),
    security: str = "semi-honest",
    splits: int = 4,
    aggregator: fhauc.Aggregator | None = None,
    max_samples_per_party: int | None = None,
    hiding_bits: int = malicious.DEFAULT_HIDING_BITS,
    multiplier_bits: float = malicious.DEFAULT_MULTIPLIER_BITS,
    params: CKKSParameters = DEFAULT_PARAMETERS,
) -> AUCResult:
    """Global ROC-AUC of ``parties`` (a list of ``(scores, labels)``) under FHAUC.

    ``security="semi-honest"`` (default) or ``"malicious"`` (masks, multipliers, ``splits``
    additive splits, a secret permutation, two executions and verification by the parties;
    raises :class:`privfl.errors.VerificationError` if the aggregator deviates).

    ``max_samples_per_party`` is the public bound on any party's size: it sizes the CKKS
    headroom (semi-honest, default 10^7) or the masks (malicious; default: the smallest power
    of two that holds the largest party, which tells the aggregator that size within a
    factor 2; pass your own bound to hide it).

    Every party is a separate :class:`fhauc.Party` object; the aggregator (default
    :class:`fhauc.Aggregator`, or the instance you pass) only ever sees message bytes.
    Raises :class:`privfl.errors.InputError` for bad input and
    :class:`privfl.errors.ProtocolError` if the run fails; never returns a partial result.
    """
    if security not in ("semi-honest", "malicious"):
        raise InputError(f"security must be 'semi-honest' or 'malicious' (got {security!r})")
    data = validate_parties(parties, score_range)
    if security == "malicious" and len(data) < 2:
        raise InputError("the malicious variant needs at least 2 parties (zero-sum masks)")
    interior = interior_thresholds(thresholds, score_range)
    n_points = interior.size + 2
    if max_samples_per_party is None:
        if security == "malicious":
            largest = max(s.size for s, _ in data)
            max_samples_per_party = 1 << max(0, (largest - 1).bit_length())
        else:
            max_samples_per_party = fhauc.DEFAULT_MAX_SAMPLES_PER_PARTY
    n_splits = splits if security == "malicious" else 1
    names = party_names(len(data))
    runner = InProcessRunner()

    identities = {n: keywrap.IdentityKey() for n in names}
    roster = {n: k.public_bytes for n, k in identities.items()}
    holder = fhauc.KeyHolder(names[0], identities[names[0]], roster)
    roles = [
        fhauc.Party(n, identities[n], roster, names[0], s, y)
        for n, (s, y) in zip(names, data, strict=True)
    ]
    agg = aggregator if aggregator is not None else fhauc.Aggregator()

    # --- setup: key holder provisions; the aggregator relays bundles it cannot open
    public, bundles = runner.run("setup", holder.provision, n_points, params, n_splits)
    runner.run("aggregator_setup", agg.receive_setup, runner.send("setup_public_context", public))
    for role in roles:
        runner.run(
            "party_setup", role.receive_bundle, runner.send("setup_key_bundle", bundles[role.name])
        )

    # --- session
    config = runner.run(
        "aggregator_config",
        agg.start_session,
        names,
        interior,
        score_range,
        max_samples_per_party,
        security,
        n_splits,
        hiding_bits,
        multiplier_bits,
    )
    for role in roles:
        role.receive_config(runner.send("config", config))
    executions = 2 if security == "malicious" else 1
    per_party = []
    for role in roles:
        ups = runner.run("party_encrypt", role.uploads)
        runner.send("party_upload", b"".join(ups))  # one party's whole upload
        per_party.append(ups)
    replies = [
        runner.run("aggregator", agg.handle_uploads, [u[e] for u in per_party], e)
        for e in range(executions)
    ]
    aucs = []
    for role in roles:
        received = [runner.send("aggregator_reply_part", r) for r in replies]
        runner.sizes["aggregator_reply"].append(sum(len(r) for r in received))
        aucs.append(runner.run("party_decrypt", role.finish_all, received))
    if max(aucs) - min(aucs) > 1e-9:  # all parties decrypt the same ciphertexts
        raise RuntimeError("parties disagree on the decrypted AUC")
    result = AUCResult(
        auc=float(np.mean(aucs)),
        num_parties=len(roles),
        thresholds=n_points,
        security=security,
        timings={
            "party_encrypt": runner.max_seconds("party_encrypt"),
            "aggregator": runner.total_seconds("aggregator"),
            "party_decrypt": runner.max_seconds("party_decrypt"),
            "setup": runner.total_seconds("setup"),
        },
        bytes={
            "party_upload": runner.max_bytes("party_upload"),
            "aggregator_reply": runner.max_bytes("aggregator_reply"),
            "setup_public_context": runner.max_bytes("setup_public_context"),
            "setup_key_bundle": runner.max_bytes("setup_key_bundle"),
        },
        party_aucs=aucs,
    )
    if security == "malicious":
        log2p = agg.config.sizes().cheat_probability_log2() if agg.config else float("nan")
        result.verified = True
        result.cheat_probability_log2 = log2p
        result.cheat_probability = 2.0**log2p
        result.splits = n_splits
        result.precision = max(r.last_precision or 0.0 for r in roles)
    return result
