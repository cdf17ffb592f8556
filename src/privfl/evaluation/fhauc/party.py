"""An FHAUC party: a data owner holding its scores and labels, composed with its keys.

One :class:`Party` class whatever the keys: it holds what every party does (its data and
counts, the check of an announced session against its roster, policy and consent, the stage
machine, the packing of its statistics with the session's multipliers and masks, the result)
and delegates what depends on the keys to one :class:`~.party_keys.PartyKeys` backend chosen
by the role builder (:func:`~.roles.make_party`): :class:`~.single_keys.SingleKeys` (the CKKS
secret context from the key holder) or :class:`~.threshold.party.ThresholdPartyKeys` (its own
key share). The backend adds its steps to :meth:`Party.handlers` (threshold keys: ``keygen``,
``keycheck``, ``decrypt``, ``fuse``) the way :class:`~.rounds.KeyRounds` adds the aggregator's.

Each step takes the bytes it receives and returns the bytes it sends (or its result at the
end); the steps must come in order, for one session at a time:
``join(config) -> Join`` · [key rounds] · ``upload(start or key checks)`` · [decryption] ·
``finish(result) -> PartyResult`` (then :meth:`Party.done` for the signed status).

What a party learns: the session's public parameters, the global AUC (the whole protocol's
output) and, against a malicious aggregator, the size of ``TP·FP`` within a factor
``2^w`` (the verification needs a lower bound on it). Never another party's counts. With a
``curve``/``metrics`` reveal, which it must have consented to (``reveals=``), the global
counts up to a common secret scale instead (:mod:`~privfl.evaluation.fhauc.reveal`).
The party's progress through a session (:class:`~.party_state.SessionState`) can be exported
and restored (:meth:`Party.export_state`, in the backend's node-local format), so that a
deployment that runs each step in a fresh process (a Flower ClientApp) keeps the order checks.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from privfl.crypto import keywrap
from privfl.errors import InputError, ProtocolError, UnknownPartyError
from privfl.evaluation.fhauc import curve
from privfl.evaluation.fhauc.layout import Layout
from privfl.evaluation.fhauc.messages import Done, Join, SessionConfig, Start
from privfl.evaluation.fhauc.party_keys import PartyKeys, Sealable
from privfl.evaluation.fhauc.party_state import SessionState, Stage
from privfl.evaluation.fhauc.policy import Policy
from privfl.evaluation.fhauc.reveal import Reveal
from privfl.evaluation.fhauc.session import CheckedStart, check_start, parse_config, session_key
from privfl.evaluation.fhauc.single_keys import SingleKeys
from privfl.evaluation.fhauc.steps import Step
from privfl.evaluation.fhauc.variant import Outcome, Packed, PartyView, variant_for
from privfl.evaluation.statistics import (
    PartyCounts,
    party_counts,
    validate_bounded_party,
    validate_party,
    validate_weights,
    weighted_counts,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PartyResult:
    """A party's output of one session: the session's public facts and the outcome."""

    party: str
    session: str  # hex
    security: str
    num_points: int
    parties: tuple[str, ...]
    executions: int
    outcome: Outcome
    abandoned: int = 0  # threshold reuse: sessions on the key set abandoned after the lead draw

    @property
    def auc(self) -> float:
        return self.outcome.auc

    @property
    def verified(self) -> bool | None:
        """True when verified (malicious variant); None when semi-honest (nothing to verify)."""
        return self.outcome.verified

    def to_dict(self) -> dict[str, Any]:
        """The result as JSON values; with a ``curve``/``metrics`` reveal also ``curve``:
        the revealed counts normalised by the total (``tp``, ``fp``, decision points
        ``0..N-1``) and the ROC points ``tpr``, ``fpr`` computed from them."""
        o = self.outcome
        out = {
            "party": self.party, "session": self.session, "auc": o.auc,
            "security": self.security, "thresholds": self.num_points,
            "party_names": list(self.parties), "verified": o.verified,
            "executions": self.executions, "precision": o.precision,
            "abandoned_sessions": self.abandoned,
            "tolerance": o.tolerance, "spread": o.spread, "guarantee_log2": o.guarantee_log2,
        }  # fmt: skip
        if o.curve is not None:
            tp, fp = o.curve.tp, o.curve.fp
            out["curve"] = {
                "tp": tp.tolist(), "fp": fp.tolist(),
                "tpr": (tp / tp[-1]).tolist(), "fpr": (fp / fp[-1]).tolist(),
            }  # fmt: skip
        return out


class Party:
    """A data owner (see the module docstring). Holds only its own secrets: its data, the
    shared seed and its identity key; its key material is its key backend's (``keys``)."""

    def __init__(
        self,
        name: str,
        identity: keywrap.IdentityKey,
        roster: dict[str, bytes],
        provisioner: str,
        scores: npt.ArrayLike | None = None,
        labels: npt.ArrayLike | None = None,
        *,
        weights: npt.ArrayLike | None = None,
        reveals: Iterable[Reveal | str] = (Reveal.AUC,),
        keys: PartyKeys | None = None,
    ) -> None:
        """``provisioner``: the party whose bundle this one accepts (single keys: the key
        holder). ``weights``: per-sample weights (``curve``/``metrics`` reveals only).
        ``reveals``: the disclosures this party consents to; a session announcing another
        ``reveal`` is refused (default: the AUC only). ``keys``: the key backend (default
        single keys; :func:`~.roles.make_party` chooses it from the provisioned key mode)."""
        if roster.get(name) != identity.public_bytes:
            raise UnknownPartyError(f"party {name!r} is not in the roster with this identity key")
        self.name, self.roster, self.provisioner = name, dict(roster), provisioner
        self._identity = identity
        self._scores, self._labels, self._weights = scores, labels, weights
        self.reveals = frozenset(Reveal.parse(r) for r in reveals)
        self.keys: PartyKeys = keys if keys is not None else SingleKeys()
        self._seed: bytes | None = None
        self._policy: Policy | None = None
        self.state: SessionState | None = None
        self.abandoned: list[str] = []  # sessions this party joined and never finished
        self._counts: PartyCounts | None = None

    # ------------------------------------------------------------------ setup
    def receive_bundle(self, data: bytes) -> None:
        """Open this party's bundle (it must come from the pinned provisioning party): the
        key backend keeps its key material, the party the shared seed and the policy."""
        self._seed, self._policy = self.keys.receive_bundle(
            data, self.name, self._identity, self.roster, self.provisioner
        )

    @property
    def policy(self) -> Policy:
        if self._policy is None:
            raise ProtocolError(f"party {self.name} has no key bundle yet")
        return self._policy

    @property
    def stage(self) -> Stage | None:
        return self.state.stage if self.state is not None else None

    def export_state(self) -> bytes:
        """This party's progress (and its key backend's session material) for node-local
        storage only."""
        return self.keys.export_state(self.state, self.abandoned)

    def restore(self, state: bytes | None) -> None:
        """Resume a session from :meth:`export_state` (a fresh process per step). The
        restored config is checked again against this party's roster, policy and keys."""
        restored = self.keys.restore(state, self._check_config, self._policy)
        if restored.abandoned is not None:
            self.abandoned = list(restored.abandoned)
        self.state, self._counts = restored.state, None
        if self.state is not None and self.state.transcript:
            self._counts = self._count(parse_config(self.state.config))

    # ------------------------------------------------------------------ steps
    def handlers(self) -> dict[Step, Callable[[bytes], bytes]]:
        """This party's steps before ``result`` (:func:`~.schedule.party_step`): ``join``,
        ``upload`` and the steps of its key backend."""
        steps: dict[Step, Callable[[bytes], bytes]] = {Step.JOIN: self.join}
        steps.update(self.keys.handlers(self))
        steps[Step.UPLOAD] = self.upload
        return steps

    def join(self, data: bytes) -> bytes:
        """Check the announced config against this party's roster, policy, consent and keys,
        draw a fresh nonce and answer with a signed Join. An unfinished earlier session is
        abandoned for good: its nonce is forgotten, so none of its messages can be used again."""
        config = self._check_config(data)
        self._count(config)  # refuse bad or oversized data before joining
        if self.state is not None and self.state.stage is not Stage.FINISHED:
            old = parse_config(self.state.config)
            self.abandoned.append(old.session.hex())
            log.info("party %s abandons session %s", self.name, self.abandoned[-1][:8])
            self.keys.abandon(old, self.state.stage)
            self.state = None
        self._counts = None
        nonce = self.keys.begin(config, self.policy)  # what verification could refuse later
        self.state = SessionState(Stage.JOINED, data, nonce)
        return Join(config.session, self.name, config.digest, nonce).seal(self._identity)

    def upload(self, data: bytes) -> bytes:
        """Upload the encrypted statistics of every execution, signed (the key backend checks
        ``data``: the start message or the key checks). Reveals only ciphertext sizes."""
        self.expect(self.keys.upload_after, "upload")
        message = self.keys.upload(self, data)
        counts = self.counts()
        self.state = replace(
            self.progress(),
            stage=Stage.UPLOADED,
            positives=counts.positives,
            negatives=counts.negatives,
        )
        return message

    def finish(self, data: bytes) -> PartyResult:
        """Open the session's result with the key backend, verify (malicious) and output the
        global AUC. A session finishes once: a second result for it is refused."""
        self.expect(self.keys.finish_after, "finish")
        config = self.config()
        done = self.keys.finish(self, data)
        return PartyResult(
            self.name, config.session.hex(), config.security.value, config.num_points,
            config.parties, done.executions, done.outcome, done.abandoned,
        )  # fmt: skip

    def done(self, status: str = "ok") -> bytes:
        """The signed end-of-session status for the aggregator (never the AUC)."""
        state = self.expect(Stage.FINISHED, "report its status")
        session = parse_config(state.config).session
        return Done(session, self.name, status).seal(self._identity)

    # ---------------------------------------------- for the key backend (its PartySide view)
    # The backend works on the party's session through these (never through the identity
    # key or the data): progress and stage, the checked start, the session key, the counts,
    # the packed statistics and signing.
    def config(self) -> SessionConfig:
        return parse_config(self.progress().config)

    def progress(self) -> SessionState:
        if self.state is None:
            raise ProtocolError(f"party {self.name} has no session")
        return self.state

    def expect(self, stage: Stage, step: str) -> SessionState:
        if self.state is None or self.state.stage is not stage:
            have = "no session" if self.state is None else f"stage '{self.state.stage.value}'"
            raise ProtocolError(
                f"party {self.name} cannot {step} now ({have}, expected '{stage.value}'): "
                "steps out of order are refused"
            )
        return self.state

    def advance(self, stage: Stage) -> None:
        self.state = replace(self.progress(), stage=stage)

    def open_start(self, data: bytes) -> CheckedStart:
        """Check the aggregator's start message (the config joined) and every relayed join;
        count this party's data."""
        state = self.progress()
        config = parse_config(state.config)
        start = Start.from_bytes(data, config.session)
        if start.config != state.config:
            raise ProtocolError(
                "the aggregator's start message carries another configuration than the one "
                "this party joined"
            )
        checked = check_start(config, self.policy, start.joins, self.roster, self.name, state.nonce)
        self._counts = self._count(config)
        return checked

    def set_transcript(self, transcript: bytes) -> None:
        self.state = replace(self.progress(), transcript=transcript)

    def session_key(self) -> bytes:
        if self._seed is None:
            raise ProtocolError(f"party {self.name} has no key bundle yet")
        return session_key(self._seed, self.progress().transcript)

    def view(self) -> PartyView:
        config = self.config()
        return PartyView(config, self.policy, self.session_key(), config.parties.index(self.name))

    def counts(self) -> PartyCounts:
        if self._counts is None:
            raise ProtocolError(f"party {self.name} has no session")
        return self._counts

    def pack(self, layout: Layout) -> list[Packed]:
        """The slot vectors of every execution: the variant's (AUC) or the curve's, with the
        session's multipliers and masks."""
        config, view = self.config(), self.view()
        if config.reveal is Reveal.AUC:
            return variant_for(config.security).pack(self.counts(), layout, view)
        if not isinstance(layout, curve.CurveLayout):
            raise ProtocolError("a curve session needs a curve layout")
        return curve.pack(*self._curve_counts(config), layout, view)

    def curve_total(self) -> float:
        tp, fp = self._curve_counts(self.config())
        return float(tp[-1] + fp[-1])

    def seal(self, message: Sealable) -> bytes:
        return message.seal(self._identity)

    # ------------------------------------------------------------------ internals
    def _check_config(self, data: bytes) -> SessionConfig:
        config = parse_config(data)
        if self.name not in config.parties:
            raise UnknownPartyError(f"party {self.name!r} is not part of this session")
        unknown = [p for p in config.parties if p not in self.roster]
        if unknown:
            raise UnknownPartyError(f"session names parties outside the roster: {unknown}")
        config.check_policy(self.policy)
        if config.reveal not in self.reveals:
            raise ProtocolError(
                f"the session would reveal {config.reveal.value!r} to the parties; party "
                f"{self.name} consented to {sorted(r.value for r in self.reveals)} only"
            )
        self.keys.check_config(config, self.policy)
        return config

    def _count(self, config: SessionConfig) -> PartyCounts:
        """Validate the local data and count TP/FP at the session's decision points."""
        s, y = validate_bounded_party(
            self._scores, self._labels, config.score_range, self.policy.max_samples_per_party,
            self.name,
        )  # fmt: skip
        if self._weights is not None and config.reveal is Reveal.AUC:
            raise InputError(
                f"party {self.name}: sample weights need reveal='curve' or 'metrics' (the "
                "AUC-only protocol sums integer counts)"
            )
        return party_counts(s, y, config.thresholds)

    def _curve_counts(
        self, config: SessionConfig
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """(TP, FP) at the decision points, sample-weighted if this party has weights; a
        party's weight total must stay within its provisioned size bound."""
        counts = self._count(config)
        if self._weights is None:
            return counts.tp.astype(np.float64), counts.fp.astype(np.float64)
        s, y = validate_party(self._scores, self._labels, config.score_range, self.name)
        w = validate_weights(self._weights, s.size, self.name)
        if float(w.sum()) > self.policy.max_samples_per_party:
            raise InputError(
                f"party {self.name}: its sample weights sum to {float(w.sum()):.6g}, more than "
                f"its provisioned max_samples_per_party={self.policy.max_samples_per_party} "
                "(the bound that sizes the CKKS headroom and the masks)"
            )
        return weighted_counts(s, y, w, config.thresholds)
