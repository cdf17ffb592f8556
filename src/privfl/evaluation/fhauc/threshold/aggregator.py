"""The FHAUC aggregator with threshold keys: the one :class:`~..aggregator.Aggregator`'s
computation, run on ciphertexts under a joint key it helps assemble but can never decrypt.

Composition, not inheritance: a :class:`ThresholdAggregator` holds, as attributes set in
``__init__``, its ``computation`` (the one :class:`Aggregator`, or any subclass such as the
tamper suite's: it runs ``start_session``, ``collect_joins``, ``aggregate`` and
``collect_done`` with its own public state, nothing is copied into it) and its key state: the
:class:`~.keys.ThresholdKeys` backend the computation encrypts and operates under, the
session's :class:`~.plan.Plan`, a :class:`~privfl.threshold.ThresholdServer` (sums of the
parties' public key-generation contributions, the joint public and evaluation keys; no share),
the lead and the kept :class:`~.keyset.ServerKeySet`. Steps: ``start_session`` /
``collect_joins`` (the computation's, then the plan and key rounds) · ``add_keygen_share``
per party and ``finish_keygen`` · ``relay_checks`` · ``add_mult_share`` per party,
``take_upload`` per party (checked, loaded and added into running sums as it arrives) ·
``install_keys`` · ``request_decryptions`` (aggregates with the
computation's :meth:`Aggregator.aggregate`, unchanged) · ``lead_requests`` · ``relay_reveal``
· ``collect_done``. Key material and uploads are added as each party's message arrives, so
the aggregator never holds ``M`` key shares or ``M`` uploads at once. The one schedule
drives these steps through :class:`~privfl.evaluation.fhauc.rounds.ThresholdRounds`.

Why it never learns the AUC (it knows its multiplier ``c``, so any fused reply would give
it away): a reply is decrypted as ``c0 + sum_i s_i c1 + e``. Every party but the lead sends
``s_i c1 + e_i`` to the aggregator, which adds these ``M - 1`` shares into **one**
ciphertext-sized sum, adds ``c0`` and forwards it with ``c1`` to the lead. The lead adds its own
share ``s_L c1 + e_L`` (which it never sends anywhere) and decodes. Without ``s_L c1`` the
aggregator's ``c0 + sum_{i != L}(s_i c1 + e_i)`` is an RLWE sample under the lead's secret
share: it reveals nothing of the plaintext. The lead sends the values encrypted under the
parties' session key (AES-GCM; the aggregator has neither the seed nor the key), and the
aggregator relays that reveal. Per party: one ``c1`` and one share (non-lead), or one
``c1`` and one sum (lead), plus 16 bytes per execution: O(1) in ``M``.

Why a coalition of the aggregator with fewer than all parties cannot decrypt a party's
upload: the joint secret is ``s = sum_i s_i`` and each share exists only inside its party's
process; the missing party contributes ``s_j c1 + e_j`` only for the ciphertexts the
aggregator asks it to decrypt (with flooding noise, which hides ``s_j``), and parties check
the joint key before encrypting under it (so the aggregator cannot substitute a key it
knows). Against a *semi-honest* coalition (one that follows the protocol) that suffices.
A *malicious* aggregator may ask the parties to decrypt a ciphertext of its choosing instead
of its reply (parties cannot recompute the reply without every upload): the parties would
then see two slots of that plaintext in the reveal, though the aggregator still would not;
collusion of the aggregator with any party is outside the model, as in single-key mode.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Any, TypeVar

from privfl import threshold as tr
from privfl.crypto import threshold as th
from privfl.errors import MalformedMessageError, ProtocolError, UnknownPartyError
from privfl.evaluation.fhauc.aggregator import Aggregator
from privfl.evaluation.fhauc.messages import AGGREGATOR, SessionConfig
from privfl.evaluation.fhauc.policy import DEFAULT_SPLITS, Policy, Security
from privfl.evaluation.fhauc.reveal import Reveal
from privfl.evaluation.fhauc.session import check_joins
from privfl.evaluation.fhauc.threshold import messages as tmsg
from privfl.evaluation.fhauc.threshold import plan as tp
from privfl.evaluation.fhauc.threshold import transcript as tt
from privfl.evaluation.fhauc.threshold.intake import UploadIntake
from privfl.evaluation.fhauc.threshold.keys import ThresholdKeys
from privfl.evaluation.fhauc.threshold.keyset import ServerKeySet
from privfl.evaluation.fhauc.threshold.ops import ThresholdCiphertext
from privfl.evaluation.fhauc.threshold.parallel import map_parties
from privfl.evaluation.fhauc.threshold.setup import ThresholdPublicSetup
from privfl.evaluation.statistics import ScoreRange

__all__ = ["ThresholdAggregator", "threshold_aggregator"]

KeyShareT = TypeVar("KeyShareT", th.KeyGenShare, th.MultKeyShare)


class ThresholdAggregator:
    """The threshold aggregator (see the module docstring). ``computation``: the
    :class:`Aggregator` whose steps and :meth:`~Aggregator.aggregate` run on the joint-key
    ciphertexts (default: the honest one); pass any subclass, e.g. from the tamper suite, to
    test robustness."""

    name = AGGREGATOR

    def __init__(self, computation: Aggregator | None = None) -> None:
        self.computation: Aggregator = Aggregator() if computation is None else computation
        self.keys = ThresholdKeys()  # the computation's key backend (receive_setup)
        self.server: tr.ThresholdServer | None = None
        self.plan: tp.Plan | None = None
        self.lead = ""
        self.key_set: ServerKeySet | None = None  # kept across sessions (.keyset)
        self.reuse_keys = True  # announce the kept key set when it fits (False: re-key)
        self._commitments: tuple[bytes, ...] = ()
        self._fresh_session = b""  # a fresh key set's session id, until its server is built
        self._requests: list[th.DecryptionRequest] = []
        self._intake: UploadIntake | None = None  # this session's uploads (take_upload)
        self._keys_installed = False

    # ------------------------------------------------------------------ public state
    @property
    def roster(self) -> dict[str, bytes]:
        return self.computation.roster

    @property
    def policy(self) -> Policy | None:
        return self.computation.policy

    @property
    def config(self) -> SessionConfig | None:
        return self.computation.config

    @property
    def transcript(self) -> bytes | None:
        return self.computation.transcript

    @property
    def session_config(self) -> SessionConfig:
        """The current session's config (ProtocolError before :meth:`start_session`)."""
        return self.computation.session_config

    @property
    def executions(self) -> int:
        """Independent executions of the current session."""
        return self.computation.executions

    # ------------------------------------------------------------------ steps
    def receive_setup(self, data: bytes) -> None:
        """Roster and public policy; there is no key material to receive."""
        setup = ThresholdPublicSetup.from_bytes(data)
        self.computation.install(self.keys, dict(setup.roster), setup.policy)

    def start_session(
        self,
        parties: Sequence[str],
        thresholds: Any = 100,
        score_range: ScoreRange = (0.0, 1.0),
        security: str | Security | None = None,
        splits: int = DEFAULT_SPLITS,
        reveal: str | Reveal = Reveal.AUC,
    ) -> bytes:
        """Announce a session (the computation's :meth:`Aggregator.start_session`, every
        ``reveal`` mode); refuses before any work one the joint key cannot run (too many
        parties for the parameter set, more joint decryptions than the key set's budget)."""
        comp = self.computation
        self.plan, self.server, self._requests, self._fresh_session = None, None, [], b""
        self._intake, self._keys_installed, self.lead, self._commitments = None, False, "", ()
        self.keys.install(None)  # none of this session state survives a refused start
        data = comp.start_session(parties, thresholds, score_range, security, splits, reveal)
        cfg = comp.session_config
        plan = self.plan = tp.plan(cfg, self._policy())
        kept, need = self.key_set, plan.requests
        if self.reuse_keys and kept and kept.fits(cfg.parties, need, plan.params):
            comp.config = replace(cfg, key_set=kept.key_id)  # announced: no key rounds
            self.server, self._keys_installed = kept.server, True
            return comp.config.to_bytes()
        return data

    def collect_joins(self, joins: Mapping[str, bytes]) -> bytes:
        """Check and relay the joins (the computation's) and open this session's key rounds."""
        start = self.computation.collect_joins(joins)
        if self.transcript is None:
            raise ProtocolError("the joins fixed no transcript")
        transcript = tt.threshold_transcript(self.transcript)
        cfg = self._config()
        if not cfg.key_set:  # a fresh key set for this session: built by key generation
            self._fresh_session = tt.threshold_session(transcript)
        self.lead = ""  # known once the key checks reveal the lead secrets (tt.lead_index)
        checked = check_joins(cfg, [joins[p] for p in cfg.parties], self.roster)
        self._commitments = tuple(j.nonce for j in checked)
        return start

    def add_keygen_share(self, party: str, data: bytes) -> None:
        """Key generation round 1, one party's signed contribution (public RLWE samples),
        added into the running sums as it arrives (``M`` shares are never held at once)."""
        share = self._key_share(party, tmsg.KeyShareUpload, th.KeyGenShare, data)
        self._server().add_keygen_share(share)

    def finish_keygen(self) -> bytes:
        """Key generation round 1, end: the joint public and switching keys (every party's
        contribution must have been added)."""
        return self._server().joint_public_keys().to_bytes()

    def relay_checks(self, checks: Mapping[str, bytes]) -> bytes:
        """Relay every party's signed key sketch (each party checks them itself); the lead
        secrets they reveal must open the joins' commitments, and fix the lead."""
        cfg = self._config()
        reveals = []
        for p in cfg.parties:
            check = tmsg.KeyCheck.from_bytes(checks[p], cfg.session, self.roster)
            if check.sender != p:
                raise UnknownPartyError(f"the key check of {p!r} is signed by another party")
            reveals.append(check.lead_secret)
        seed = tt.check_reveals(cfg.parties, self._commitments, reveals)
        transcript = tt.threshold_transcript(self.transcript or b"")
        self.lead = cfg.parties[tt.lead_index(transcript, len(cfg.parties), seed)]
        items = tuple(checks[p] for p in cfg.parties)
        return tmsg.Relay(cfg.session, items, "th-keychecks").to_bytes()

    def add_mult_share(self, party: str, data: bytes) -> bytes:
        """Key generation round 2, one party's answer to the upload step: check its signed
        relinearisation share and add it into the joint key's sum; returns the signed
        ciphertext upload (for :meth:`take_upload`)."""
        step = tmsg.UploadStep.from_bytes(data)
        if not self._config().key_set:  # a reused key set has its relinearisation key
            share = self._key_share(party, tmsg.MultShareUpload, th.MultKeyShare, step.mult)
            self._server().add_mult_share(share)
        return step.upload

    def take_upload(self, party: str, data: bytes) -> None:
        """One party's signed ciphertext upload, as it arrives: checked, loaded and added into
        the running sums of every execution (:class:`~.intake.UploadIntake`), so the
        aggregator holds the sums and one batch of uploads (8 per upload worker), never ``M``.
        A computation that overrides :meth:`Aggregator.aggregate` (the tamper suite) is given every
        party's upload instead, in the config's order."""
        if self._intake is None:
            cfg, comp = self._config(), self.computation
            self._intake = UploadIntake(
                cfg.parties, cfg.session, self.roster,
                tt.threshold_transcript(self.transcript or b""), self._plan(), self._server(),
                comp.workers, keep_all=type(comp).aggregate is not Aggregator.aggregate,
            )  # fmt: skip
        self._intake.take(party, data)

    def install_keys(self) -> None:
        """Key generation round 2, end: install the joint evaluation keys (every party's
        relinearisation share must have been added by :meth:`add_mult_share`)."""
        cfg, server = self._config(), self._server()
        if cfg.key_set:
            return  # installed when the key set was generated
        server.evaluation_keys()
        self._keys_installed = True
        self.key_set = ServerKeySet(server.session, cfg.parties, server)

    def request_decryptions(self) -> bytes:
        """Once every party's upload is taken in (:meth:`take_upload`) and the joint keys are
        installed: run :meth:`aggregate` per execution (on the running sums, or on every
        upload for a computation that overrides it) and ask the non-lead parties for their
        decryption shares of each reply (AUC: ``num + den`` in one ciphertext; curve/metrics:
        each of the reply's ``2·chunks`` ciphertexts, :mod:`.curve`)."""
        cfg, server, plan = self._config(), self._server(), self._plan()
        if self._intake is None or not self._keys_installed:
            raise ProtocolError("the uploads and joint keys of every party are needed first")
        intake, self._intake = self._intake, None
        per_execution = intake.per_execution()
        self.keys.install(server)
        comp = self.computation
        self._requests = []
        for e in range(plan.groups):  # the executions, or lanes of them per ciphertext
            comp.execution = e
            try:
                reply = comp.aggregate(per_execution[e])
                if cfg.reveal is Reveal.AUC:
                    wanted = [reply.numerator + reply.denominator]
                else:  # curve/metrics: every ciphertext of the reply, in reply order
                    wanted = [reply.numerator, reply.denominator, *reply.extra]
                if len(wanted) != plan.requests_per_execution:
                    raise ValueError(f"{len(wanted)} reply ciphertexts")
                for ct in wanted:
                    self._requests.append(server.request_decryption(_native(ct)))
            except (ValueError, RuntimeError, TypeError, AttributeError) as exc:
                raise MalformedMessageError(f"the uploads cannot be combined ({exc})") from None
        items = tuple(r.to_bytes() for r in self._requests)
        if self.key_set is not None and self.key_set.server is server:
            self.key_set.used += len(items)  # every party spends one share per request
        return tmsg.Relay(cfg.session, items, "th-decrypt").to_bytes()

    def lead_requests(self, shares: Mapping[str, bytes]) -> bytes:
        """Add the non-lead parties' shares of every reply into one sum each, plus ``c0``, and
        give the lead those sums with ``c1`` (never a complete set of shares)."""
        cfg, server = self._config(), self._server()
        ctx = server.context
        per_request: list[list[th.DecryptionShare]] = [[] for _ in self._requests]

        def decode(p: str) -> list[th.DecryptionShare]:
            msg = tmsg.DecryptShares.from_bytes(shares[p], cfg.session, self.roster)
            if msg.sender != p or len(msg.shares) != len(self._requests):
                raise MalformedMessageError(f"the decryption shares of {p!r} do not fit")
            out = [th.DecryptionShare.from_bytes(raw, ctx, server.session) for raw in msg.shares]
            for share in out:
                if share.sender != p:
                    raise UnknownPartyError(f"{p!r} sent a share in {share.sender!r}'s name")
            return out

        others = [p for p in cfg.parties if p != self.lead]
        for got in map_parties(decode, others, self.computation.workers):
            for k, share in enumerate(got):
                per_request[k].append(share)
        items = tuple(
            server.lead_decryption(req, got, self.lead).to_bytes()
            for req, got in zip(self._requests, per_request, strict=True)
        )
        self._requests = []
        return tmsg.Relay(cfg.session, items, "th-lead").to_bytes()

    def relay_reveal(self, reveal: bytes) -> bytes:
        """Check the lead's signature and relay its (encrypted) reveal to every party."""
        cfg = self._config()
        if tmsg.Reveal.from_bytes(reveal, cfg.session, self.roster).sender != self.lead:
            raise UnknownPartyError("the reveal is not signed by this session's lead")
        return reveal

    # ------------------------------------------------------------------ internals
    def _key_share(
        self,
        party: str,
        signed: type[tmsg.KeyShareUpload],
        kind: type[KeyShareT],
        data: bytes,
    ) -> KeyShareT:
        """The threshold-CKKS key share inside ``party``'s signed message ``data``: the
        signer, the share's own sender and ``party`` must be one party of this session."""
        cfg, server = self._config(), self._server()
        if party not in cfg.parties:
            raise UnknownPartyError(f"{party!r} is not in this session")
        msg = signed.from_bytes(data, cfg.session, self.roster)
        if msg.sender != party:
            raise UnknownPartyError(f"a key share signed by {msg.sender!r} arrived as {party!r}'s")
        share = kind.from_bytes(msg.share, server.context, server.session)
        if share.sender != party:
            raise UnknownPartyError(f"{party!r} sent a key share in {share.sender!r}'s name")
        return share

    def _server(self) -> tr.ThresholdServer:
        """This session's :class:`~privfl.threshold.ThresholdServer`: the kept key set's, or,
        for a fresh key set, built when key generation first needs it (the joint key's
        context, whose key layouts take a throwaway key generation, is key-generation work:
        timed as ``aggregator_keygen`` with the rest of it, never in a session on a kept
        key set)."""
        if self.server is None and self._fresh_session:
            cfg, plan = self._config(), self._plan()
            ctx = th.ThresholdContext.for_parameters(plan.params, len(cfg.parties))
            self.server = tr.ThresholdServer(AGGREGATOR, ctx, self._fresh_session)
            self._fresh_session = b""
        if self.server is None:
            raise ProtocolError("no threshold session: collect the joins first")
        return self.server

    def _plan(self) -> tp.Plan:
        if self.plan is None:
            raise ProtocolError("no session started")
        return self.plan

    def _config(self) -> SessionConfig:
        return self.computation.session_config

    def _policy(self) -> Policy:
        if self.policy is None:
            raise ProtocolError("the aggregator has not received the public setup")
        return self.policy

    def collect_done(self, dones: Mapping[str, bytes]) -> list[str]:
        """Check each party's signed status (the computation's
        :meth:`Aggregator.collect_done`)."""
        return self.computation.collect_done(dones)


def _native(ct: object) -> th.Ciphertext:
    """The OpenFHE ciphertext of a reply (a deviating aggregator may return anything)."""
    if not isinstance(ct, ThresholdCiphertext):
        raise TypeError("a threshold reply must hold ciphertexts under the joint key")
    return ct.ct


def threshold_aggregator(
    aggregator: Aggregator | ThresholdAggregator | None = None,
) -> ThresholdAggregator:
    """A threshold aggregator whose computation is ``aggregator`` (any :class:`Aggregator`,
    e.g. from the tamper suite), or the honest one; a :class:`ThresholdAggregator` as is."""
    if isinstance(aggregator, ThresholdAggregator):
        return aggregator
    return ThresholdAggregator(aggregator)
