"""The FHAUC aggregator: holds only the public CKKS context, the roster and the policy.

Steps (each takes what it receives and returns what it sends):
``start_session(...) -> SessionConfig`` · ``collect_joins(joins) -> Start`` ·
``handle_uploads(uploads) -> Result`` · ``collect_done(dones)``.

It learns the ciphertext sizes and which parties took part, nothing in plaintext: it can
encrypt with the public key, add, multiply and rotate, but not decrypt. It rejects anything a
non-member produced (every party message is signed with a roster key) and uploads that are
not bound to this session's transcript. Subclass it and override :meth:`aggregate` to test
robustness (see :mod:`privfl.evaluation.fhauc.tamper`).
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence

import numpy.typing as npt

from privfl.crypto.ckks import CKKSContext
from privfl.errors import InputError, MalformedMessageError, ProtocolError, UnknownPartyError
from privfl.evaluation.fhauc import curve
from privfl.evaluation.fhauc.ciphertext import HECiphertext, add_all
from privfl.evaluation.fhauc.keys import KeyBackend, SingleKey
from privfl.evaluation.fhauc.layout import Layout
from privfl.evaluation.fhauc.messages import AGGREGATOR, Done, PublicSetup, SessionConfig, Start
from privfl.evaluation.fhauc.policy import DEFAULT_SPLITS, Policy, Security
from privfl.evaluation.fhauc.reveal import Reveal
from privfl.evaluation.fhauc.session import check_joins, transcript_hash
from privfl.evaluation.fhauc.upload_checks import UploadCheck, UploadSum
from privfl.evaluation.fhauc.upload_pool import (
    MIN_PARALLEL_CIPHERTEXTS,
    WARM_ROSTER,
    resolve_workers,
    shared_pool,
)
from privfl.evaluation.fhauc.uploads import Reply, Result, Upload, summed_vectors
from privfl.evaluation.fhauc.variant import variant_for
from privfl.evaluation.statistics import DEFAULT_THRESHOLDS, ScoreRange, interior_thresholds
from privfl.messages import new_session_id


def random_multiplier(low_bits: float, high_bits: float) -> int:
    """Integer c, log-uniform in ``[2^low_bits, 2^high_bits)``, from the OS CSPRNG. It is
    applied at scale 1, so it costs no modulus level."""
    u = secrets.randbits(53) / float(1 << 53)
    return max(1, int(2 ** (low_bits + u * (high_bits - low_bits))))


class Aggregator:
    """The untrusted aggregator (see the module docstring).

    Attributes a subclass may read in :meth:`aggregate`: ``keys`` (the
    :class:`~privfl.evaluation.fhauc.keys.KeyBackend`: slots, public encryption),
    ``config`` (:class:`SessionConfig`), ``layout`` (:class:`Layout`), ``execution`` (the
    ciphertext group being aggregated: the execution itself, or ``layout.lanes`` executions
    side by side, :mod:`~privfl.evaluation.fhauc.layout`) and ``multiplier_range``.

    ``workers``: processes that verify, load and sum the uploads
    (:mod:`~privfl.evaluation.fhauc.upload_pool`; started once per process, at key setup
    for a roster of 16 parties or more, else on the first session large enough to gain).
    Default: the cores this process may use, at most 8; ``1``: everything in this process.
    The result is the same bit for bit."""

    name = AGGREGATOR

    def __init__(self, workers: int | None = None) -> None:
        self.workers = resolve_workers(workers)
        self.worker_cpu = 0.0  # the upload workers' CPU seconds in the last handle_uploads
        self._public_context = b""
        self.context: CKKSContext | None = None  # single keys: the public context
        self.keys: KeyBackend | None = None
        self.roster: dict[str, bytes] = {}
        self.policy: Policy | None = None
        self.config: SessionConfig | None = None
        self.layout: Layout | None = None
        self.multiplier_range = (0.0, 0.0)
        self.execution = 0
        self.transcript: bytes | None = None
        self.multiplier_scale_bits = 0

    # ------------------------------------------------------------------ setup
    def receive_setup(self, data: bytes) -> None:
        """Load the public context, roster and policy the key holder provisioned."""
        setup = PublicSetup.from_bytes(data)
        context = CKKSContext.deserialize(setup.public_context)
        self.install(SingleKey(context), dict(setup.roster), setup.policy)  # no private key
        self._public_context = setup.public_context
        if self.workers > 1 and len(self.roster) >= WARM_ROSTER:
            shared_pool(self.workers).warm(setup.public_context)

    def install(self, keys: KeyBackend, roster: dict[str, bytes], policy: Policy) -> None:
        """The key backend, roster and public policy this aggregator runs sessions under
        (:meth:`receive_setup` with single keys; the threshold aggregator, which composes this
        one, with its joint-key backend)."""
        self.keys, self.roster, self.policy = keys, roster, policy
        self.context = keys.context if isinstance(keys, SingleKey) else None

    # ------------------------------------------------------------------ steps
    def start_session(
        self,
        parties: Sequence[str],
        thresholds: int | npt.ArrayLike = DEFAULT_THRESHOLDS,
        score_range: ScoreRange = (0.0, 1.0),
        security: str | Security | None = None,
        splits: int = DEFAULT_SPLITS,
        reveal: str | Reveal = Reveal.AUC,
    ) -> bytes:
        """Announce a new session (fresh random id) to the parties; returns the config.

        ``security`` defaults to the provisioned policy's mode; ``splits`` is used by the
        malicious variant only; ``reveal`` says what the parties will learn
        (:mod:`~privfl.evaluation.fhauc.reveal`; each party refuses a reveal it did not
        consent to)."""
        keys, policy = self._keys(), self._policy()
        unknown = [p for p in parties if p not in self.roster]
        if unknown:
            raise UnknownPartyError(f"parties not in the provisioned roster: {unknown}")
        mode = Security.parse(security) if security is not None else policy.security
        cfg = SessionConfig(
            new_session_id(),
            tuple(parties),
            interior_thresholds(thresholds, score_range),
            (float(score_range[0]), float(score_range[1])),
            mode,
            int(splits) if mode is Security.MALICIOUS else 1,
            self.name,
            Reveal.parse(reveal),
        )
        cfg.validate()
        try:
            cfg.check_policy(policy)
        except ProtocolError as exc:
            raise InputError(f"the parties would refuse this session: {exc}") from None
        layout = keys.layout(cfg, policy)
        missing = keys.missing_rotations(layout.rotation_steps)
        if missing:
            raise InputError(
                f"the provisioned keys do not support N={cfg.num_points} decision points "
                f"with {cfg.splits} split(s) (missing rotations {missing}); "
                "re-provision with a larger --max-thresholds / --max-splits, or without them"
            )
        self.multiplier_range, self.multiplier_scale_bits = keys.session_multiplier(cfg, policy)
        self.config, self.layout, self.execution, self.transcript = cfg, layout, 0, None
        return cfg.to_bytes()

    def collect_joins(self, joins: Mapping[str, bytes]) -> bytes:
        """Check every party's signed join (a non-member or a join to another config is
        refused) and relay them all to every party."""
        cfg = self._config()
        checked = check_joins(cfg, list(joins.values()), self.roster)
        self.transcript = transcript_hash(cfg, self._policy(), checked)
        return Start(cfg.session, cfg.to_bytes(), tuple(joins[p] for p in cfg.parties)).to_bytes()

    def handle_uploads(self, uploads: Mapping[str, bytes]) -> bytes:
        """Verify each party's signed upload (sender, session, transcript, shape, scale),
        aggregate every execution and return the result for the parties."""
        cfg, ctx, layout, policy = self._config(), self._ctx(), self._layout(), self._policy()
        if self.transcript is None:
            raise ProtocolError("uploads arrived before the joins were collected")
        variant = variant_for(cfg.security)
        groups = layout.groups(variant.executions(policy))  # ciphertext groups (lanes)
        if cfg.reveal is Reveal.AUC:
            scale = variant.upload_scale_bits(ctx.params, cfg, policy)
        else:
            scale = curve.upload_scale_bits(ctx.params, cfg, policy)
        check = UploadCheck(
            cfg.session,
            self.roster,
            self.transcript,
            frozenset(cfg.parties),
            groups,
            (layout.chunks, layout.f_ciphertexts, layout.denominator_ciphertexts),
            scale,
        )
        per_execution = self._open_uploads(ctx, check, uploads)
        replies = []
        for e in range(groups):
            self.execution = e
            try:
                replies.append(self.aggregate(per_execution[e]))
            except (ValueError, RuntimeError) as exc:  # SEAL refused to combine them
                raise MalformedMessageError(f"the uploads cannot be combined ({exc})") from None
        return Result(cfg.session, tuple(replies), self.name).to_bytes()

    def _open_uploads(
        self, ctx: CKKSContext, check: UploadCheck, uploads: Mapping[str, bytes]
    ) -> list[list[Upload]]:
        """Per execution, the uploads :meth:`aggregate` combines. With the honest
        :meth:`aggregate`: one partial sum per upload worker when :attr:`workers` > 1 and
        there are enough ciphertexts (the same checks, run in the workers,
        :mod:`~privfl.evaluation.fhauc.upload_pool`), else one sum, each party's upload
        opened and added in turn; the same sum, bit for bit, either way. A subclass that
        overrides :meth:`aggregate` gets every party's upload, in the config's order."""
        cfg = self._config()
        missing = [p for p in cfg.parties if p not in uploads]
        per_upload = check.executions * sum(check.shape)
        if (
            self.workers > 1
            and type(self).aggregate is Aggregator.aggregate
            and len(uploads) * per_upload >= MIN_PARALLEL_CIPHERTEXTS
        ):
            partials, self.worker_cpu = shared_pool(self.workers).sum_uploads(
                ctx, self._public_context, check, list(uploads.items())
            )
            if missing:  # every upload was verified to come from the party it arrived as
                raise ProtocolError(f"no upload from {missing}")
            return [[p[e] for p in partials] for e in range(check.executions)]
        self.worker_cpu = 0.0
        if type(self).aggregate is Aggregator.aggregate and uploads:
            # opened and added one party at a time: one upload in memory, not M
            total = UploadSum()
            for claimed, data in uploads.items():
                opened = check.open(ctx, claimed, data)  # refused naming its sender
                try:
                    total.add(opened)
                except (ValueError, RuntimeError, TypeError) as exc:  # SEAL refused to add them
                    raise MalformedMessageError(f"the uploads cannot be combined ({exc})") from None
            if missing:
                raise ProtocolError(f"no upload from {missing}")
            sums = total.result("sum")
            return [[sums[e]] for e in range(check.executions)]
        by_party = {claimed: check.open(ctx, claimed, data) for claimed, data in uploads.items()}
        if missing:
            raise ProtocolError(f"no upload from {missing}")
        return [[by_party[p][e] for p in cfg.parties] for e in range(check.executions)]

    def collect_done(self, dones: Mapping[str, bytes]) -> list[str]:
        """Check each party's signed status; returns the parties that reported success."""
        cfg = self._config()
        ok = []
        for claimed, data in dones.items():
            done = Done.from_bytes(data, cfg.session, self.roster)
            if done.sender != claimed:
                raise UnknownPartyError(
                    f"a status signed by {done.sender!r} arrived as {claimed!r}'s"
                )
            if done.status == "ok":
                ok.append(done.sender)
        return ok

    def aggregate(self, uploads: list[Upload]) -> Reply:
        """Sum the parties' vectors, compute E(c·num) and E(c·TP·FP). Learns nothing.

        ``uploads`` holds one :class:`Upload` per party, in the config's party order, for
        execution :attr:`execution`. With a ``curve``/``metrics`` reveal: the slot-wise sums,
        every ciphertext times one ``c`` (:func:`~privfl.evaluation.fhauc.curve.aggregate`)."""
        cfg, layout = self._config(), self._layout()
        if cfg.reveal is not Reveal.AUC:
            c = random_multiplier(*self.multiplier_range)
            t0, f0, extra = curve.aggregate(uploads, layout, c)
            return Reply(cfg.session, t0, f0, self.execution, self.name, extra)
        num, den = self.numerator_and_denominator(uploads)
        c = random_multiplier(*self.multiplier_range)
        return Reply(
            cfg.session, self.times_multiplier(num, c), self.times_multiplier(den, c),
            self.execution, self.name,
        )  # fmt: skip

    def numerator_and_denominator(self, uploads: list[Upload]) -> tuple[HECiphertext, HECiphertext]:
        """E(num) in every slot of each lane and E(TP·FP) at each lane's denominator slot,
        from the parties' uploads of one ciphertext group, before the multiplier ``c`` (the
        AUC reveal; the tamper suite builds its deviations on it)."""
        layout = self._layout()
        t, f = summed_vectors(uploads, layout)
        products = [t[k] * f[k] for k in range(layout.chunks)]
        summed = add_all(products) if len(products) > 1 else products[0]
        num = summed.window_sum(layout.window, layout.lanes)
        if layout.folded:
            return num, t[0] * f[0].rotate(layout.denominator_rotation)
        d = add_all([u.d[0] for u in uploads])
        return num, d * d.rotate(layout.denominator_rotation)

    def times_multiplier(self, ct: HECiphertext, c: int) -> HECiphertext:
        """``ct`` times the secret multiplier ``c``: an integer product at scale 1 (no
        level), or, when the key backend's plan says so (:attr:`multiplier_scale_bits`
        ``j > 0``: threshold keys, malicious variant), the real ``c / 2^j`` at one level,
        which the parties undo by multiplying what they decode by ``2^j``."""
        j = self.multiplier_scale_bits
        return ct.scale_by(c / 2.0**j) if j else ct * c

    # ------------------------------------------------------------------ state
    @property
    def session_config(self) -> SessionConfig:
        """The current session's config (ProtocolError before :meth:`start_session`)."""
        return self._config()

    @property
    def executions(self) -> int:
        """Independent executions of the current session."""
        return variant_for(self._config().security).executions(self._policy())

    def _ctx(self) -> CKKSContext:
        if self.context is None:
            raise ProtocolError("the aggregator has not received a single-key public setup")
        return self.context

    def _keys(self) -> KeyBackend:
        if self.keys is None:
            raise ProtocolError("the aggregator has not received the public setup")
        return self.keys

    def _policy(self) -> Policy:
        if self.policy is None:
            raise ProtocolError("the aggregator has not received the public setup")
        return self.policy

    def _config(self) -> SessionConfig:
        if self.config is None:
            raise ProtocolError("no session started")
        return self.config

    def _layout(self) -> Layout:
        if self.layout is None:
            raise ProtocolError("no session started")
        return self.layout
