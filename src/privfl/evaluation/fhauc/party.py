"""An FHAUC party: a data owner holding its scores, labels, the CKKS secret key and the seed.

One method per protocol step, each taking the bytes it receives and returning the bytes it
sends (or its result at the end); the steps must come in order, for one session at a time:

``join(config) -> Join`` · ``upload(start) -> PartyUpload`` · ``finish(result) -> PartyResult``
(then :meth:`Party.done` for the signed status the aggregator collects).

What a party learns: the session's public parameters, the global AUC (the whole protocol's
output) and, against a malicious aggregator, the size of ``TP·FP`` within a factor
``2^w`` (the verification needs a lower bound on it). Never another party's counts. With a
``curve``/``metrics`` reveal, which it must have consented to (``reveals=``), the global
counts up to a common secret scale instead (:mod:`~privfl.evaluation.fhauc.reveal`).
The party's progress through a session (:class:`~.party_state.SessionState`) can be exported
and restored,
so that a deployment that runs each step in a fresh process (a Flower ClientApp) keeps the
order checks; the state holds nothing secret beyond the party's own two totals.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from privfl.crypto import keywrap, prng
from privfl.crypto.ckks import CKKSContext
from privfl.errors import InputError, MalformedMessageError, ProtocolError, UnknownPartyError
from privfl.evaluation.fhauc import curve
from privfl.evaluation.fhauc.key_holder import BUNDLE_PURPOSE
from privfl.evaluation.fhauc.layout import Layout
from privfl.evaluation.fhauc.messages import (
    Done,
    Join,
    KeyBundle,
    SessionConfig,
    Start,
)
from privfl.evaluation.fhauc.party_state import SessionState, Stage
from privfl.evaluation.fhauc.policy import Policy, Security
from privfl.evaluation.fhauc.reveal import Reveal
from privfl.evaluation.fhauc.session import check_start, new_nonce, parse_config, session_key
from privfl.evaluation.fhauc.steps import Step
from privfl.evaluation.fhauc.uploads import PartyUpload, Result, Upload
from privfl.evaluation.fhauc.variant import Malicious, Outcome, PartyView, variant_for
from privfl.evaluation.statistics import (
    PartyCounts,
    party_counts,
    validate_bounded_party,
    validate_party,
    validate_weights,
    weighted_counts,
)
from privfl.messages import Reader

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
    CKKS secret context, the shared seed and its identity key."""

    def __init__(
        self,
        name: str,
        identity: keywrap.IdentityKey,
        roster: dict[str, bytes],
        key_holder: str,
        scores: npt.ArrayLike | None = None,
        labels: npt.ArrayLike | None = None,
        *,
        weights: npt.ArrayLike | None = None,
        reveals: Iterable[Reveal | str] = (Reveal.AUC,),
    ) -> None:
        """``weights``: per-sample weights (``curve``/``metrics`` reveals only).
        ``reveals``: the disclosures this party consents to; a session announcing another
        ``reveal`` is refused (default: the AUC only)."""
        if roster.get(name) != identity.public_bytes:
            raise UnknownPartyError(f"party {name!r} is not in the roster with this identity key")
        self.name, self.roster, self.key_holder = name, dict(roster), key_holder
        self._identity = identity
        self._scores, self._labels, self._weights = scores, labels, weights
        self.reveals = frozenset(Reveal.parse(r) for r in reveals)
        self._context: CKKSContext | None = None
        self._seed: bytes | None = None
        self._policy: Policy | None = None
        self.state: SessionState | None = None

    # ------------------------------------------------------------------ setup
    def receive_bundle(self, data: bytes) -> None:
        """Unwrap the secret context, seed and policy (must come from the pinned key holder)."""
        bundle = KeyBundle.from_bytes(data)
        secret = keywrap.unwrap(
            bundle.wrapped,
            recipient=self.name,
            recipient_key=self._identity,
            roster=self.roster,
            expected_sender=self.key_holder,
            purpose=BUNDLE_PURPOSE,
        )
        r = Reader(secret, "key bundle")
        context = CKKSContext.deserialize(r.bytes_())
        seed = r.bytes_(prng.SEED_BYTES)
        policy = Policy.from_bytes(r.bytes_(256))
        r.end()
        if not context.is_private or len(seed) != prng.SEED_BYTES:
            raise MalformedMessageError("key bundle lacks the secret key or the seed")
        self._context, self._seed, self._policy = context, seed, policy

    @property
    def policy(self) -> Policy:
        if self._policy is None:
            raise ProtocolError(f"party {self.name} has no key bundle yet")
        return self._policy

    def restore(self, state: bytes | None) -> None:
        """Resume a session from :meth:`SessionState.to_bytes` (a fresh process per step).
        The restored config is checked again against this party's roster and policy."""
        if state is None:
            self.state = None
            return
        restored = SessionState.from_bytes(state)
        self._check_config(restored.config)
        self.state = restored

    # ------------------------------------------------------------------ steps
    def handlers(self) -> dict[Step, Callable[[bytes], bytes]]:
        """This party's steps before ``result`` (:func:`~.schedule.party_step`)."""
        return {Step.JOIN: self.join, Step.UPLOAD: self.upload}

    def join(self, data: bytes) -> bytes:
        """Check the announced config against this party's roster and policy, draw a fresh
        nonce and answer with a signed Join. An unfinished earlier session is abandoned for
        good: its nonce is forgotten, so none of its messages can be used again."""
        config = self._check_config(data)
        if self.state is not None and self.state.stage is not Stage.FINISHED:
            log.info("party %s abandons session %s", self.name, self._session_hex())
        self._count(config)  # refuse bad or oversized data before joining
        self._check_verification(config)  # and what verification could refuse later
        nonce = new_nonce()
        self.state = SessionState(Stage.JOINED, data, nonce)
        return Join(config.session, self.name, config.digest, nonce).seal(self._identity)

    def upload(self, data: bytes) -> bytes:
        """Check every party's join, derive the session key and upload the encrypted
        statistics of every execution, signed. Reveals only ciphertext sizes."""
        state = self._expect(Stage.JOINED, "upload")
        config = parse_config(state.config)
        start = Start.from_bytes(data, config.session)
        if start.config != state.config:
            raise ProtocolError(
                "the aggregator's start message carries another configuration than the one "
                "this party joined"
            )
        checked = check_start(config, self.policy, start.joins, self.roster, self.name, state.nonce)
        counts = self._count(config)
        key = self._key(checked.transcript)
        ctx, layout = self._ctx(), self._layout(config)
        variant = variant_for(config.security)
        view = PartyView(config, self.policy, key, config.parties.index(self.name))
        if config.reveal is Reveal.AUC:
            packed = variant.pack(counts, layout, view)
        else:
            if not isinstance(layout, curve.CurveLayout):
                raise ProtocolError("a curve session needs a curve layout")
            packed = curve.pack(*self._curve_counts(config), layout, view)
        uploads = [
            Upload(
                self.name,
                config.session,
                [ctx.encrypt(v, p.scale_bits) for v in p.t],
                [ctx.encrypt(v, p.scale_bits) for v in p.f],
                [ctx.encrypt(v, p.scale_bits) for v in p.d],
                e,
            )
            for e, p in enumerate(packed)
        ]
        self.state = SessionState(
            Stage.UPLOADED,
            state.config,
            state.nonce,
            checked.transcript,
            counts.positives,
            counts.negatives,
        )
        message = PartyUpload.build(config.session, self.name, checked.transcript, uploads)
        return message.seal(self._identity)

    def finish(self, data: bytes) -> PartyResult:
        """Decrypt every execution's reply, verify (malicious) and output the global AUC.
        A session finishes once: a second result for it is refused."""
        state = self._expect(Stage.UPLOADED, "finish")
        config = parse_config(state.config)
        ctx, layout = self._ctx(), self._layout(config)
        variant = variant_for(config.security)
        executions = variant.executions(self.policy)
        extra = 2 * (layout.chunks - 1) if config.reveal is not Reveal.AUC else 0
        result = Result.from_bytes(data, ctx, config.session, extra, executions)
        self.state = SessionState(Stage.FINISHED, state.config, state.nonce, state.transcript)
        if [r.execution for r in result.replies] != list(range(executions)):
            raise ProtocolError(
                f"the result must hold executions 0..{executions - 1} in order, got "
                f"{[r.execution for r in result.replies]}"
            )
        key = self._key(state.transcript)
        view = PartyView(config, self.policy, key, config.parties.index(self.name))
        if config.reveal is not Reveal.AUC:
            if not isinstance(layout, curve.CurveLayout):
                raise ProtocolError("a curve session needs a curve layout")
            vectors = [curve.reply_vectors(r.decrypt(ctx), layout) for r in result.replies]
            tp, fp = self._curve_counts(config)
            outcome = curve.recover(vectors, float(tp[-1] + fp[-1]), view)
        else:
            plain = [r.decrypt(ctx) for r in result.replies]
            decoded = [(float(v[0][0]), float(v[1][layout.denominator_slot])) for v in plain]
            counts = PartyCounts(
                np.array([0, state.positives], dtype=np.int64),
                np.array([0, state.negatives], dtype=np.int64),
            )
            outcome = variant.recover(decoded, counts, view)
        return PartyResult(
            self.name,
            config.session.hex(),
            config.security.value,
            config.num_points,
            config.parties,
            executions,
            outcome,
        )

    def done(self, status: str = "ok") -> bytes:
        """The signed end-of-session status for the aggregator (never the AUC)."""
        state = self._expect(Stage.FINISHED, "report its status")
        session = parse_config(state.config).session
        return Done(session, self.name, status).seal(self._identity)

    # ------------------------------------------------------------------ internals
    def _check_config(self, data: bytes) -> SessionConfig:
        config = parse_config(data)
        if self.name not in config.parties:
            raise UnknownPartyError(f"party {self.name!r} is not part of this session")
        unknown = [p for p in config.parties if p not in self.roster]
        if unknown:
            raise UnknownPartyError(f"session names parties outside the roster: {unknown}")
        config.check_policy(self.policy)
        if config.key_set:  # public: a single-key party holds no threshold key set
            raise ProtocolError(
                "the session names a threshold key set to reuse; this party holds single keys "
                "(provision threshold keys, or announce a single-key session)"
            )
        if config.reveal not in self.reveals:
            raise ProtocolError(
                f"the session would reveal {config.reveal.value!r} to the parties; party "
                f"{self.name} consented to {sorted(r.value for r in self.reveals)} only"
            )
        if config.reveal is Reveal.AUC:
            variant = variant_for(config.security)
            variant.multiplier_range(self._ctx().params, config, self.policy)  # raises if too big
            variant.upload_scale_bits(self._ctx().params, config, self.policy)
        else:
            curve.multiplier_range(self._ctx().params, config, self.policy)  # raises if too big
            curve.upload_scale_bits(self._ctx().params, config, self.policy)
        self._layout(config)
        return config

    def _check_verification(self, config: SessionConfig) -> None:
        """Malicious: refuse at join what the verification could refuse after decryption."""
        variant = variant_for(config.security)
        if config.reveal is Reveal.AUC and isinstance(variant, Malicious):
            variant.check_before_upload(config, self.policy)  # public sizes and min_pairs
        elif config.reveal is not Reveal.AUC and config.security is Security.MALICIOUS:
            curve.check_before_upload(config, self.policy)

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

    def _layout(self, config: SessionConfig) -> Layout:
        ctx = self._ctx()
        return curve.layout_for(config, ctx.params.slots, True, ctx.rotation_steps)

    def _key(self, transcript: bytes) -> bytes:
        if self._seed is None:
            raise ProtocolError(f"party {self.name} has no key bundle yet")
        return session_key(self._seed, transcript)

    def _ctx(self) -> CKKSContext:
        if self._context is None:
            raise ProtocolError(f"party {self.name} has no key bundle yet")
        return self._context

    def _expect(self, stage: Stage, step: str) -> SessionState:
        if self.state is None or self.state.stage is not stage:
            have = "no session" if self.state is None else f"stage '{self.state.stage.value}'"
            raise ProtocolError(
                f"party {self.name} cannot {step} now ({have}, expected '{stage.value}'): "
                "steps out of order are refused"
            )
        return self.state

    def _session_hex(self) -> str:
        if self.state is None:
            return "-"
        return parse_config(self.state.config).session.hex()[:8]
