"""A party's threshold-key backend (:class:`~..party_keys.PartyKeys`): its own key share,
generated in a session and kept for later sessions within its decryption budget
(:mod:`.keyset`). The one :class:`~..party.Party` runs ``join``, ``upload``, ``result`` and
the stage machine; this backend adds its steps (:meth:`ThresholdPartyKeys.handlers`):
``keygen(start)`` · ``keycheck(joint)`` · [party: ``upload(checks)``] · ``decrypt(requests)``
(all but the lead) · ``fuse(lead)`` (the lead); with a kept key set ``keycheck(start)`` (no
keygen). It holds the key share, the lead secret and the key checks' material; the party's
identity key, data and seed stay with the party (it signs and derives the session key).

What each step does and learns: ``keygen`` checks the signed joins, derives the transcript,
session key and threshold session id, samples its share in OpenFHE and sends the ``b`` halves
of its key contributions (RLWE samples); ``keycheck`` sketches its *own* contribution against
the joint key and reveals the lead secret its join nonce committed to; ``upload`` checks the
sketches add up to the joint key's (a substituted key is caught except w.p. ``2^-30`` per RNS
row), opens every commitment (:func:`~.transcript.lead_index`), sends its relinearisation
share and statistics; ``decrypt``: ``s_i c1 + e_i`` (noise flooding) per reply; ``fuse`` (the
lead) sends the values under the session key; ``finish`` opens them with the variant's checks.
Share, key set, abandoned sessions (:func:`~.keyset.note_abandoned`: the limit on
lead steering): the node's own storage only (:meth:`export_state`)."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Callable, Mapping, Sequence
from functools import partial

import numpy as np
import numpy.typing as npt
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from privfl import threshold as tr
from privfl.crypto import keywrap
from privfl.crypto import threshold as th
from privfl.crypto.threshold.keycheck import joint_rows, own_sketch
from privfl.errors import MalformedMessageError, ProtocolError
from privfl.evaluation.fhauc.messages import AGGREGATOR, SessionConfig
from privfl.evaluation.fhauc.party_keys import Finished, PartySide, Restored
from privfl.evaluation.fhauc.party_state import SessionState, Stage
from privfl.evaluation.fhauc.policy import Policy
from privfl.evaluation.fhauc.steps import Step
from privfl.evaluation.fhauc.threshold import messages as tmsg
from privfl.evaluation.fhauc.threshold import plan as tp
from privfl.evaluation.fhauc.threshold import reveal as threshold_reveal
from privfl.evaluation.fhauc.threshold import transcript as tt
from privfl.evaluation.fhauc.threshold.keycheck import lead_secrets, verify_joint_key
from privfl.evaluation.fhauc.threshold.keyset import (
    KeySet,
    check_reuse,
    export_key_set,
    import_key_set,
    note_abandoned,
)
from privfl.evaluation.fhauc.threshold.ops import fhauc_parameters
from privfl.evaluation.fhauc.threshold.setup import open_bundle
from privfl.evaluation.fhauc.threshold.state import ThresholdState
from privfl.evaluation.fhauc.threshold.transcript import reveal_key

log = logging.getLogger(__name__)


class ThresholdPartyKeys:
    """One data owner's threshold keys (module docstring)."""

    mode = "threshold"
    upload_after = Stage.KEYCHECK
    finish_after = Stage.DECRYPTED

    def __init__(self, name: str) -> None:
        """``name``: the party these keys belong to (its index in a session's key rounds)."""
        self._me = name
        self.key_set: KeySet | None = None  # kept across sessions (.keyset)
        self._checked: tuple[SessionConfig, Policy, tp.Plan] | None = None  # the last plan
        self._reset()

    def _reset(self) -> None:
        self._plan: tp.Plan | None = None
        self._keys: tr.ThresholdParty | None = None  # this session's key share lives here
        self._own_rows: npt.NDArray[np.uint64] | None = None
        self._joint: th.JointPublicKeys | None = None
        self._joint_bytes = b""
        self._lead_seed = b""
        self._lead_name = ""
        self._lead_secret = b""  # r_i: committed to in the join, revealed in the key check
        self._commitments: tuple[bytes, ...] = ()

    # ------------------------------------------------------------------ setup
    def receive_bundle(
        self,
        data: bytes,
        name: str,
        identity: keywrap.IdentityKey,
        roster: Mapping[str, bytes],
        provisioner: str,
    ) -> tuple[bytes, Policy]:
        """Unwrap the shared seed and the policy (from the pinned provisioning party)."""
        if name != self._me:
            raise ProtocolError(f"these threshold keys belong to party {self._me!r}, not {name!r}")
        return open_bundle(data, name, identity, dict(roster), provisioner)

    @property
    def holds_key_share(self) -> bool:
        return self._keys is not None and self._keys.has_share

    @property
    def is_lead(self) -> bool:
        """This party fuses the session's result (known once the lead secrets are opened)."""
        return self._lead_name != "" and self._lead_name == self._me

    # ------------------------------------------------------------------ steps
    def handlers(self, party: PartySide) -> dict[Step, Callable[[bytes], bytes]]:
        """The key rounds and the decryption steps (:func:`~..schedule.party_step`)."""
        return {
            Step.KEYGEN: partial(self.keygen, party), Step.KEYCHECK: partial(self.keycheck, party),
            Step.DECRYPT: partial(self.decrypt, party), Step.FUSE: partial(self.fuse, party),
        }  # fmt: skip

    def check_config(self, config: SessionConfig, policy: Policy) -> None:
        """Threshold mode can run ``config`` (the joint key's plan)."""
        self._checked = (config, policy, tp.plan(config, policy))

    def abandon(self, config: SessionConfig, stage: Stage) -> None:
        """Count the abandoned session against a kept key set (the limit on lead steering)."""
        note_abandoned(self.key_set, config, stage)

    def begin(self, config: SessionConfig, policy: Policy) -> bytes:
        """Refuse what verification could refuse later and a kept key set this party does
        not hold or whose budget is spent; commit to a fresh lead secret (the join's nonce)."""
        self._reset()
        plan = self._plan_for(config, policy)
        threshold_reveal.check_at_join(plan, config, policy)  # before any upload
        if config.key_set:  # a kept key set: only if held, for these parties, within budget
            check_reuse(self.key_set, config, plan.requests)
        self._lead_secret = secrets.token_bytes(tt.LEAD_SECRET_BYTES)
        self._plan = plan
        return tt.lead_commitment(self._lead_secret)

    def keygen(self, party: PartySide, data: bytes) -> bytes:
        """Check every join, derive the session, sample this party's key share (round 1)."""
        party.expect(Stage.JOINED, "generate its key share")
        config = party.config()
        if config.key_set:
            raise ProtocolError("a session that reuses a key set has no key generation")
        transcript = self._open_start(party, data)
        ctx = th.ThresholdContext.for_parameters(self._p().params, len(config.parties))
        index = config.parties.index(party.name)
        session = tt.threshold_session(transcript)
        self._keys = tr.ThresholdParty(party.name, index, ctx, session)
        share = self._keys.keygen_share()
        self._own_rows = joint_rows(ctx, share.public_key, share.switch_key)
        party.advance(Stage.KEYGEN)
        return party.seal(tmsg.KeyShareUpload(config.session, party.name, share.to_bytes()))

    def keycheck(self, party: PartySide, data: bytes) -> bytes:
        """Sketch this party's own contribution with coefficients bound to the joint key (a
        session reusing a key set: check the joins instead; no sketch). Reveals r_i."""
        config = party.config()
        if config.key_set:
            party.expect(Stage.JOINED, "reveal its lead secret")
            self._open_start(party, data)
            self._keys = check_reuse(self.key_set, config, 0)
            party.advance(Stage.KEYCHECK)
            return party.seal(tmsg.KeyCheck(config.session, party.name, (), self._lead_secret))
        party.expect(Stage.KEYGEN, "check the joint key")
        keys = self._k()
        self._joint = th.JointPublicKeys.from_bytes(data, keys.context, keys.session)
        if self._joint.sender != AGGREGATOR:
            raise ProtocolError("the joint key must come from the aggregator")
        self._joint_bytes = data
        rows = self._own_rows
        if rows is None:
            raise ProtocolError(f"party {party.name} has no key share for this session")
        own = own_sketch(keys.context, keys.session, rows, data)
        party.advance(Stage.KEYCHECK)
        check = tmsg.KeyCheck(config.session, party.name, own, self._lead_secret)  # r_i
        return party.seal(check)  # every commitment was fixed by the relayed joins

    def upload(self, party: PartySide, data: bytes) -> bytes:
        """Verify the joint key against every party's signed sketch, then use it: the
        relinearisation share and the encrypted statistics of every execution, each signed."""
        config, keys, joint = party.config(), self._k(), self._joint
        relay = tmsg.Relay.from_bytes(data, "th-keychecks", config.session)
        if config.key_set:  # checked when generated; its relinearisation key is installed
            reveals, mult = lead_secrets(config, party.roster, relay.items), b""
        elif joint is None:
            raise ProtocolError(f"party {party.name} has no joint key for this session")
        else:
            reveals = verify_joint_key(
                config, dict(party.roster), keys, joint, self._joint_bytes, relay.items
            )
            mult = keys.keygen_mult_share(joint).to_bytes()
        self._lead_seed = tt.check_reveals(config.parties, self._commitments, reveals)
        transcript = party.progress().transcript
        self._lead_name = self._lead_of(config, transcript)
        executions = threshold_reveal.encrypt(keys, self._p(), party.counts(), party.view())
        self._joint, self._joint_bytes, self._own_rows = None, b"", None  # used: not kept
        upload = tmsg.ThresholdUpload(config.session, party.name, transcript, tuple(executions))
        key = tmsg.MultShareUpload(config.session, party.name, mult)
        return tmsg.UploadStep(party.seal(key), party.seal(upload)).to_bytes()

    def decrypt(self, party: PartySide, data: bytes) -> bytes:
        """A non-lead party's decryption share of every reply (flooding noise included)."""
        party.expect(Stage.UPLOADED, "send decryption shares")
        if self.is_lead:
            raise ProtocolError("the lead party never sends a decryption share")
        config, keys = party.config(), self._k()
        relay = tmsg.Relay.from_bytes(data, "th-decrypt", config.session)
        expected = self._p().requests
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
        party.advance(Stage.DECRYPTED)
        return party.seal(tmsg.DecryptShares(config.session, party.name, tuple(shares)))

    def fuse(self, party: PartySide, data: bytes) -> bytes:
        """The lead: fuse its own share with the aggregator's sum of the others', decode
        every reply and reveal the values to the parties only (AES-GCM, session key)."""
        party.expect(Stage.UPLOADED, "fuse")
        if not self.is_lead:
            raise ProtocolError(f"party {party.name} is not this session's lead")
        config, keys, plan = party.config(), self._k(), self._p()
        relay = tmsg.Relay.from_bytes(data, "th-lead", config.session)
        expected = plan.requests
        if len(relay.items) != expected:
            raise MalformedMessageError(f"{len(relay.items)} replies to fuse, expected {expected}")
        plain = threshold_reveal.lead_plaintext(keys, relay.items, plan, config.reveal)
        nonce = secrets.token_bytes(tmsg.GCM_NONCE_BYTES)
        sealed = AESGCM(reveal_key(party.session_key())).encrypt(nonce, plain, self._aad(party))
        party.advance(Stage.DECRYPTED)
        return party.seal(tmsg.Reveal(config.session, party.name, nonce, sealed))

    def finish(self, party: PartySide, data: bytes) -> Finished:
        """Open the lead's reveal and recover the AUC or the curve (malicious: verify every
        execution)."""
        config, plan = party.config(), self._p()
        lead = self._lead()
        reveal = tmsg.Reveal.from_bytes(data, config.session, dict(party.roster))
        if reveal.sender != lead:
            raise ProtocolError(f"the reveal must come from the lead {lead!r}")
        party.advance(Stage.FINISHED)
        keys, kept = self._k(), self.key_set
        if not config.key_set:  # a fresh key set is kept for later sessions, within budget
            self.key_set = kept = KeySet(keys.session, config.parties, keys)
        self._keys = None
        try:
            plain = AESGCM(reveal_key(party.session_key())).decrypt(
                reveal.nonce, reveal.sealed, self._aad(party)
            )
        except InvalidTag:
            raise ProtocolError("the reveal does not authenticate under the session key") from None
        outcome = threshold_reveal.recover(plain, plan, party.counts(), party.view())
        return Finished(outcome, plan.executions, kept.abandoned if kept else 0)

    # ------------------------------------------------------------------ local state
    def _lead(self) -> str:
        """This session's lead (:func:`~.transcript.lead_index`), after the key round."""
        if not self._lead_name:
            raise ProtocolError("this party has no checked joint key for this session")
        return self._lead_name

    def _lead_of(self, config: SessionConfig, transcript: bytes) -> str:
        return config.parties[tt.lead_index(transcript, len(config.parties), self._lead_seed)]

    def export_kept(self) -> bytes:
        """The kept key set (share and decryption count), for node-local storage only."""
        return export_key_set(self.key_set) if self.key_set is not None else b""

    def import_kept(self, data: bytes) -> None:
        """Reload :meth:`export_kept` (a set for other parameters is dropped: re-key)."""
        self.key_set = import_key_set(data, self._me, fhauc_parameters()) if data else None

    def export_state(self, state: SessionState | None, abandoned: Sequence[str]) -> bytes:
        """Progress, share, abandoned sessions: node-local storage only (a kept key set's share
        is stored once, with the set: :func:`~.keyset.export_key_set`)."""
        keys, kept = self._keys, self.key_set.keys if self.key_set else None
        return ThresholdState(
            state.stage.value if state else "",
            state.config if state else b"", state.nonce if state else b"",
            state.transcript if state else b"",
            keys.export_local_state() if keys and keys.has_share and keys is not kept else b"",
            self._own_rows.tobytes() if self._own_rows is not None else b"", self._joint_bytes,
            self._lead_seed, tuple(abandoned), self._lead_secret, b"".join(self._commitments),
        ).to_bytes()  # fmt: skip

    def restore(
        self, data: bytes | None, check: Callable[[bytes], SessionConfig], policy: Policy | None
    ) -> Restored:
        """Resume from :meth:`export_state` (config checked, share and abandoned sessions
        reloaded; a kept key set must be in :attr:`key_set` already)."""
        self._reset()
        state = ThresholdState.from_bytes(data) if data else None
        abandoned = state.abandoned if state else None  # outlives the session
        if state is None or not state.config:  # none joined yet (or the last join refused)
            return Restored(None, abandoned)
        config = check(state.config)
        if policy is None:
            raise ProtocolError("this party has no key bundle yet")
        try:
            stage = Stage(state.stage)
        except ValueError:
            raise MalformedMessageError("threshold party state has an unknown stage") from None
        reusing = bool(config.key_set) and stage not in (Stage.JOINED, Stage.FINISHED)
        if reusing and (self.key_set is None or self.key_set.key_id != config.key_set):
            # the kept set this unfinished session reuses was dropped since (stored under other
            # parameters: a release that changed them): the session cannot go on; forget it,
            # so that the next join is answered instead of every message refused
            return Restored(None, abandoned)
        self._plan = self._plan_for(config, policy)
        self._lead_seed, self._lead_secret = state.lead_seed, state.lead_secret
        self._commitments = state.commitment_list(len(config.parties))
        if self._lead_seed:
            self._lead_name = self._lead_of(config, state.transcript)
        if reusing:
            self._keys = check_reuse(self.key_set, config, 0)  # restore the key set first
        elif state.keys:
            ctx = th.ThresholdContext.for_parameters(self._p().params, len(config.parties))
            index, session = config.parties.index(self._me), tt.threshold_session(state.transcript)
            self._keys = tr.ThresholdParty(self._me, index, ctx, session)
            self._keys.import_local_state(state.keys)
            if state.own_rows:
                rows = np.frombuffer(state.own_rows, dtype=np.uint64)
                self._own_rows = rows.reshape(-1, ctx.ring)
            if state.joint:
                self._joint = th.JointPublicKeys.from_bytes(state.joint, ctx, self._keys.session)
                self._joint_bytes = state.joint
        progress = SessionState(stage, state.config, state.nonce, state.transcript)
        return Restored(progress, abandoned)

    # ------------------------------------------------------------------ internals
    def _open_start(self, party: PartySide, data: bytes) -> bytes:
        """Check every relayed join; fix the transcript, the commitments and the counts."""
        checked = party.open_start(data)
        transcript = tt.threshold_transcript(checked.transcript)
        party.set_transcript(transcript)
        self._commitments = tuple(j.nonce for j in checked.joins)
        return transcript

    def _aad(self, party: PartySide) -> bytes:
        session, lead = party.config().session, self._lead().encode()
        return b"privfl/fhauc-threshold/reveal|" + session + party.progress().transcript + lead

    def _plan_for(self, config: SessionConfig, policy: Policy) -> tp.Plan:
        """The plan :meth:`check_config` made for these very objects, or a fresh one."""
        checked = self._checked
        if checked is not None and checked[0] is config and checked[1] is policy:
            return checked[2]
        return tp.plan(config, policy)

    def _p(self) -> tp.Plan:
        if self._plan is None:
            raise ProtocolError("this party has no session")
        return self._plan

    def _k(self) -> tr.ThresholdParty:
        if self._keys is None:
            raise ProtocolError("this party has no key share for this session")
        return self._keys
