"""An FHAUC party with threshold keys: its own key share, generated in a session and kept
for later sessions within its decryption budget (:mod:`.keyset`).

Steps (bytes in, bytes out; :meth:`~ThresholdFhaucParty.handlers` for the one schedule):
``join(config)`` · ``keygen(start)`` · ``keycheck(joint)`` · ``upload(checks)`` ·
``decrypt(requests)`` (all but the lead) · ``fuse(lead)`` (the lead) · ``finish(reveal)`` ->
:class:`~.party.PartyResult` · ``done()``. With a kept key set ``keycheck(start)`` (no keygen).

What each step does and learns: ``keygen`` checks the signed joins, derives the transcript,
session key and threshold session id, samples its share in OpenFHE and sends the ``b`` halves
of its key contributions (RLWE samples); ``keycheck`` sketches its *own* contribution against
the joint key and reveals the lead secret its join nonce committed to; ``upload`` checks the
sketches add up to the joint key's (a substituted key is caught except w.p. ``2^-30`` per RNS
row), opens every commitment (:func:`~.plan.lead_index`), sends its relinearisation
share and statistics; ``decrypt``: ``s_i c1 + e_i`` (noise flooding) per reply; ``fuse`` (the
lead) sends the values under the session key; ``finish`` opens them with the variant's checks.
Share, key set, abandoned sessions (:func:`~.keyset.note_abandoned`: the limit on
lead steering): the node's own storage only (:meth:`export_state`)."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Iterable

import numpy as np
import numpy.typing as npt
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from privfl import threshold as tr
from privfl.crypto import keywrap
from privfl.crypto import threshold as th
from privfl.crypto.threshold.keycheck import joint_rows, own_sketch
from privfl.errors import MalformedMessageError, ProtocolError, UnknownPartyError
from privfl.evaluation.fhauc.messages import AGGREGATOR, Done, Join, SessionConfig, Start
from privfl.evaluation.fhauc.party import PartyResult
from privfl.evaluation.fhauc.policy import Policy
from privfl.evaluation.fhauc.reveal import Reveal
from privfl.evaluation.fhauc.session import check_start, session_key
from privfl.evaluation.fhauc.steps import Step
from privfl.evaluation.fhauc.threshold import messages as tmsg
from privfl.evaluation.fhauc.threshold import plan as tp
from privfl.evaluation.fhauc.threshold import reveal as threshold_reveal
from privfl.evaluation.fhauc.threshold.keycheck import lead_secrets, verify_joint_key
from privfl.evaluation.fhauc.threshold.keyset import KeySet, check_reuse, note_abandoned
from privfl.evaluation.fhauc.threshold.plan import reveal_key
from privfl.evaluation.fhauc.threshold.setup import open_bundle
from privfl.evaluation.fhauc.threshold.state import Stage, ThresholdState
from privfl.evaluation.fhauc.variant import PartyView
from privfl.evaluation.statistics import PartyCounts, party_counts, validate_bounded_party

log = logging.getLogger(__name__)


class ThresholdFhaucParty:
    """One data owner in threshold mode (module docstring)."""

    def __init__(
        self,
        name: str,
        identity: keywrap.IdentityKey,
        roster: dict[str, bytes],
        provisioner: str,
        scores: npt.ArrayLike | None = None,
        labels: npt.ArrayLike | None = None,
        reveals: Iterable[Reveal | str] = (Reveal.AUC,),
    ) -> None:
        """``reveals``: the disclosures this party consents to (as :class:`~.party.Party`)."""
        if roster.get(name) != identity.public_bytes:
            raise UnknownPartyError(f"party {name!r} is not in the roster with this identity key")
        self.name, self.roster, self.provisioner = name, dict(roster), provisioner
        self._identity, self._scores, self._labels = identity, scores, labels
        self.reveals = frozenset(Reveal.parse(r) for r in reveals)
        self._seed: bytes | None = None
        self._policy: Policy | None = None
        self.stage: Stage | None = None
        self.abandoned: list[str] = []  # sessions this party joined and never finished
        self.key_set: KeySet | None = None  # kept across sessions (.keyset)
        self._reset()

    def _reset(self) -> None:
        self._config: SessionConfig | None = None
        self._nonce = b""
        self._transcript = b""
        self._plan: tp.Plan | None = None
        self._keys: tr.ThresholdParty | None = None  # this session's key share lives here
        self._own_rows: npt.NDArray[np.uint64] | None = None
        self._joint: th.JointPublicKeys | None = None
        self._joint_bytes = b""
        self._counts: PartyCounts | None = None
        self._lead_seed = b""
        self._lead_secret = b""  # r_i: committed to in the join, revealed in the key check
        self._commitments: tuple[bytes, ...] = ()

    # ------------------------------------------------------------------ setup
    def receive_bundle(self, data: bytes) -> None:
        """Unwrap the shared seed and the policy (from the pinned provisioning party)."""
        bundle = open_bundle(data, self.name, self._identity, self.roster, self.provisioner)
        self._seed, self._policy = bundle

    @property
    def policy(self) -> Policy:
        if self._policy is None:
            raise ProtocolError(f"party {self.name} has no key bundle yet")
        return self._policy

    @property
    def holds_key_share(self) -> bool:
        return self._keys is not None and self._keys.has_share

    @property
    def is_lead(self) -> bool:
        return self._lead() == self.name

    # ------------------------------------------------------------------ steps
    def handlers(self) -> dict[Step, Callable[[bytes], bytes]]:
        """This party's steps before ``result`` (:func:`~..schedule.party_step`)."""
        return {
            Step.JOIN: self.join, Step.KEYGEN: self.keygen, Step.KEYCHECK: self.keycheck,
            Step.UPLOAD: self.upload, Step.DECRYPT: self.decrypt, Step.FUSE: self.fuse,
        }  # fmt: skip

    def join(self, data: bytes) -> bytes:
        """Check the config against roster and policy (and that threshold mode can run it),
        draw a fresh nonce, answer with a signed Join. Abandons any earlier session."""
        config = SessionConfig.from_bytes(data)
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
        plan = tp.plan(config, self.policy)
        if self._config is not None and self.stage is not Stage.FINISHED:
            self.abandoned.append(self._config.session.hex())
            log.info("party %s abandons session %s", self.name, self.abandoned[-1][:8])
            note_abandoned(self.key_set, self._config, self.stage or "")  # lead steering
        self._reset()
        self._count(config)
        threshold_reveal.check_at_join(plan, config, self.policy)  # before any upload
        if config.key_set:  # a kept key set: only if held, for these parties, within budget
            check_reuse(self.key_set, config, plan.executions * plan.requests_per_execution)
        self._lead_secret = secrets.token_bytes(tp.LEAD_SECRET_BYTES)
        self._config, self._plan, self._nonce = config, plan, tp.lead_commitment(self._lead_secret)
        self.stage = Stage.JOINED
        return Join(config.session, self.name, config.digest, self._nonce).seal(self._identity)

    def keygen(self, data: bytes) -> bytes:
        """Check every join, derive the session, sample this party's key share (round 1)."""
        self._expect(Stage.JOINED, "generate its key share")
        config = self._cfg()
        if config.key_set:
            raise ProtocolError("a session that reuses a key set has no key generation")
        self._open_start(data)
        ctx = th.ThresholdContext.for_parameters(self._p().params, len(config.parties))
        index = config.parties.index(self.name)
        session = tp.threshold_session(self._transcript)
        self._keys = tr.ThresholdParty(self.name, index, ctx, session)
        share = self._keys.keygen_share()
        self._own_rows = joint_rows(ctx, share.public_key, share.switch_key)
        self.stage = Stage.KEYGEN
        return tmsg.KeyShareUpload(config.session, self.name, share.to_bytes()).seal(self._identity)

    def keycheck(self, data: bytes) -> bytes:
        """Sketch this party's own contribution with coefficients bound to the joint key (a
        session reusing a key set: check the joins instead; no sketch). Reveals r_i."""
        if self._cfg().key_set:
            self._expect(Stage.JOINED, "reveal its lead secret")
            self._open_start(data)
            self._keys = check_reuse(self.key_set, self._cfg(), 0)
            self.stage = Stage.KEYCHECK
            check = tmsg.KeyCheck(self._cfg().session, self.name, (), self._lead_secret)
            return check.seal(self._identity)
        self._expect(Stage.KEYGEN, "check the joint key")
        keys = self._k()
        self._joint = th.JointPublicKeys.from_bytes(data, keys.context, keys.session)
        if self._joint.sender != AGGREGATOR:
            raise ProtocolError("the joint key must come from the aggregator")
        self._joint_bytes = data
        rows = self._own_rows
        if rows is None:
            raise ProtocolError(f"party {self.name} has no key share for this session")
        own = own_sketch(keys.context, keys.session, rows, data)
        self.stage = Stage.KEYCHECK
        check = tmsg.KeyCheck(self._cfg().session, self.name, own, self._lead_secret)  # r_i
        return check.seal(self._identity)  # every commitment was fixed by the relayed joins

    def upload(self, data: bytes) -> bytes:
        """Verify the joint key against every party's signed sketch, then use it: the
        relinearisation share and the encrypted statistics of every execution, each signed."""
        self._expect(Stage.KEYCHECK, "upload")
        config, keys, joint = self._cfg(), self._k(), self._joint
        relay = tmsg.Relay.from_bytes(data, "th-keychecks", config.session)
        if config.key_set:  # checked when generated; its relinearisation key is installed
            reveals, mult = lead_secrets(config, self.roster, relay.items), b""
        elif joint is None:
            raise ProtocolError(f"party {self.name} has no joint key for this session")
        else:
            reveals = verify_joint_key(
                config, self.roster, keys, joint, self._joint_bytes, relay.items
            )
            mult = keys.keygen_mult_share(joint).to_bytes()
        self._lead_seed = tp.check_reveals(config.parties, self._commitments, reveals)
        plan, counts = self._p(), self._c()
        view = PartyView(config, self.policy, self._key(), config.parties.index(self.name))
        executions = threshold_reveal.encrypt(keys, plan, counts, view)
        self.stage = Stage.UPLOADED
        self._joint, self._joint_bytes, self._own_rows = None, b"", None  # used: not kept
        upload = tmsg.ThresholdUpload(
            config.session, self.name, self._transcript, tuple(executions)
        ).seal(self._identity)
        key = tmsg.MultShareUpload(config.session, self.name, mult)
        return tmsg.UploadStep(key.seal(self._identity), upload).to_bytes()

    def decrypt(self, data: bytes) -> bytes:
        """A non-lead party's decryption share of every reply (flooding noise included)."""
        self._expect(Stage.UPLOADED, "send decryption shares")
        if self.is_lead:
            raise ProtocolError("the lead party never sends a decryption share")
        config, keys = self._cfg(), self._k()
        relay = tmsg.Relay.from_bytes(data, "th-decrypt", config.session)
        expected = self._p().executions * self._p().requests_per_execution
        if len(relay.items) != expected:
            raise MalformedMessageError(
                f"{len(relay.items)} decryption requests, expected {expected}"
            )
        shares = []
        for item in relay.items:
            request = th.DecryptionRequest.from_bytes(item, keys.context, keys.session)
            if request.sender != AGGREGATOR:
                raise ProtocolError("decryption requests must come from the aggregator")
            shares.append(keys.decryption_share(request).to_bytes())
        self.stage = Stage.DECRYPTED
        return tmsg.DecryptShares(config.session, self.name, tuple(shares)).seal(self._identity)

    def fuse(self, data: bytes) -> bytes:
        """The lead: fuse its own share with the aggregator's sum of the others', decode
        every reply and reveal the values to the parties only (AES-GCM, session key)."""
        self._expect(Stage.UPLOADED, "fuse")
        if not self.is_lead:
            raise ProtocolError(f"party {self.name} is not this session's lead")
        config, keys, plan = self._cfg(), self._k(), self._p()
        relay = tmsg.Relay.from_bytes(data, "th-lead", config.session)
        expected = plan.executions * plan.requests_per_execution
        if len(relay.items) != expected:
            raise MalformedMessageError(f"{len(relay.items)} replies to fuse, expected {expected}")
        plain = threshold_reveal.lead_plaintext(keys, relay.items, plan, config.reveal)
        nonce = secrets.token_bytes(tmsg.GCM_NONCE_BYTES)
        sealed = AESGCM(reveal_key(self._key())).encrypt(nonce, plain, self._aad())
        self.stage = Stage.DECRYPTED
        return tmsg.Reveal(config.session, self.name, nonce, sealed).seal(self._identity)

    def finish(self, data: bytes) -> PartyResult:
        """Open the lead's reveal and recover the AUC or the curve (malicious: verify every
        execution)."""
        self._expect(Stage.DECRYPTED, "finish")
        config, plan = self._cfg(), self._p()
        lead = self._lead()
        reveal = tmsg.Reveal.from_bytes(data, config.session, self.roster)
        if reveal.sender != lead:
            raise ProtocolError(f"the reveal must come from the lead {lead!r}")
        self.stage = Stage.FINISHED
        keys, kept = self._k(), self.key_set
        if not config.key_set:  # a fresh key set is kept for later sessions, within budget
            self.key_set = kept = KeySet(keys.session, config.parties, keys)
        self._keys = None
        try:
            plain = AESGCM(reveal_key(self._key())).decrypt(
                reveal.nonce, reveal.sealed, self._aad()
            )
        except InvalidTag:
            raise ProtocolError("the reveal does not authenticate under the session key") from None
        view = PartyView(config, self.policy, self._key(), config.parties.index(self.name))
        outcome = threshold_reveal.recover(plain, plan, self._c(), view)
        return PartyResult(
            self.name, config.session.hex(), config.security.value, config.num_points,
            config.parties, plan.executions, outcome, kept.abandoned if kept else 0,
        )  # fmt: skip

    def done(self, status: str = "ok") -> bytes:
        """The signed end-of-session status (never the AUC)."""
        self._expect(Stage.FINISHED, "report its status")
        return Done(self._cfg().session, self.name, status).seal(self._identity)

    # ------------------------------------------------------------------ local state
    def _lead(self) -> str:
        """This session's lead (:func:`~.plan.lead_index`), after the key round."""
        cfg = self._cfg()
        if not self._lead_seed:
            raise ProtocolError(f"party {self.name} has no checked joint key for this session")
        return cfg.parties[tp.lead_index(self._transcript, len(cfg.parties), self._lead_seed)]

    def export_state(self) -> bytes:
        """Progress, share, abandoned sessions: node-local storage only (a kept key set's share
        is stored once, with the set: :func:`~.keyset.export_key_set`)."""
        keys, kept = self._keys, self.key_set.keys if self.key_set else None
        return ThresholdState(
            self.stage.value if self.stage else "",
            self._config.to_bytes() if self._config else b"", self._nonce, self._transcript,
            keys.export_local_state() if keys and keys.has_share and keys is not kept else b"",
            self._own_rows.tobytes() if self._own_rows is not None else b"", self._joint_bytes,
            self._lead_seed, tuple(self.abandoned), self._lead_secret, b"".join(self._commitments),
        ).to_bytes()  # fmt: skip

    def restore(self, data: bytes | None) -> None:
        """Resume from :meth:`export_state` (config checked, counts recomputed, share and
        abandoned sessions reloaded; a kept key set must be in :attr:`key_set` already)."""
        self._reset()
        self.stage = None
        state = ThresholdState.from_bytes(data) if data else None
        self.abandoned = list(state.abandoned) if state else self.abandoned  # outlives it
        if state is None or not state.config:  # none joined yet (or the last join refused)
            return
        config = SessionConfig.from_bytes(state.config)
        config.check_policy(self.policy)
        self._config, self._plan = config, tp.plan(config, self.policy)
        self._nonce, self._transcript = state.nonce, state.transcript
        self._lead_seed, self._lead_secret = state.lead_seed, state.lead_secret
        self._commitments = state.commitment_list(len(config.parties))
        try:
            self.stage = Stage(state.stage)
        except ValueError:
            raise MalformedMessageError("threshold party state has an unknown stage") from None
        if state.transcript:
            self._counts = self._count(config)
        if config.key_set and self.stage not in (Stage.JOINED, Stage.FINISHED):
            self._keys = check_reuse(self.key_set, config, 0)  # restore the key set first
        elif state.keys:
            ctx = th.ThresholdContext.for_parameters(self._p().params, len(config.parties))
            index, session = config.parties.index(self.name), tp.threshold_session(state.transcript)
            self._keys = tr.ThresholdParty(self.name, index, ctx, session)
            self._keys.import_local_state(state.keys)
            if state.own_rows:
                rows = np.frombuffer(state.own_rows, dtype=np.uint64)
                self._own_rows = rows.reshape(-1, ctx.ring)
            if state.joint:
                self._joint = th.JointPublicKeys.from_bytes(state.joint, ctx, self._keys.session)
                self._joint_bytes = state.joint

    # ------------------------------------------------------------------ internals
    def _open_start(self, data: bytes) -> None:
        """Check every relayed join; fix the transcript, the commitments and the counts."""
        config = self._cfg()
        start = Start.from_bytes(data, config.session)
        if start.config != config.to_bytes():
            raise ProtocolError("the start message carries another configuration than joined")
        checked = check_start(config, self.policy, start.joins, self.roster, self.name, self._nonce)
        self._transcript = tp.threshold_transcript(checked.transcript)
        self._commitments = tuple(j.nonce for j in checked.joins)
        self._counts = self._count(config)

    def _aad(self) -> bytes:
        session, lead = self._cfg().session, self._lead().encode()
        return b"privfl/fhauc-threshold/reveal|" + session + self._transcript + lead

    def _count(self, config: SessionConfig) -> PartyCounts:
        s, y = validate_bounded_party(
            self._scores, self._labels, config.score_range, self.policy.max_samples_per_party,
            self.name,
        )  # fmt: skip
        return party_counts(s, y, config.thresholds)

    def _key(self) -> bytes:
        if self._seed is None:
            raise ProtocolError(f"party {self.name} has no key bundle yet")
        return session_key(self._seed, self._transcript)

    def _expect(self, stage: Stage, step: str) -> None:
        if self.stage is not stage:
            have = "no session" if self.stage is None else f"stage '{self.stage.value}'"
            raise ProtocolError(
                f"party {self.name} cannot {step} now ({have}, expected '{stage.value}'): "
                "steps out of order are refused"
            )

    def _cfg(self) -> SessionConfig:
        if self._config is None:
            raise ProtocolError(f"party {self.name} has no session")
        return self._config

    def _p(self) -> tp.Plan:
        if self._plan is None:
            raise ProtocolError(f"party {self.name} has no session")
        return self._plan

    def _k(self) -> tr.ThresholdParty:
        if self._keys is None:
            raise ProtocolError(f"party {self.name} has no key share for this session")
        return self._keys

    def _c(self) -> PartyCounts:
        if self._counts is None:
            raise ProtocolError(f"party {self.name} has no session")
        return self._counts
