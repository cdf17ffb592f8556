"""FHAUC's wire messages: typed frozen dataclasses with explicit ``to_bytes``/``from_bytes``.

Steps of one session (ARCHITECTURE §4, with the session hardening of issue 14)::

    aggregator -> party   config   SessionConfig   the announced session
    party -> aggregator   join     Join            signed: session, config digest, fresh nonce
    aggregator -> party   start    Start           the config and every party's Join
    party -> aggregator   upload   PartyUpload     signed: transcript hash, ciphertexts
    aggregator -> party   result   Result          one Reply (c·num, c·TP·FP) per execution
    party -> aggregator   done     Done            signed status (never the AUC)

Setup messages: ``PublicSetup`` (key holder -> aggregator: roster, public CKKS context,
policy) and ``KeyBundle`` (key holder -> one party, relayed: the wrapped secret context,
shared seed and policy). Every party message is signed with the party's pinned Ed25519 key
over (step, session, sender, body), so a node that is not in the roster cannot join, upload
or finish as a party, and the aggregator cannot forge a party's message. Every count and
size read from the wire is bounded before anything is allocated.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from privfl._typing import FloatArray
from privfl.crypto import keywrap
from privfl.crypto.ckks import Ciphertext, CKKSContext
from privfl.crypto.identity import PUBLIC_BYTES, SIGNATURE_BYTES, IdentityKey, verify_signed
from privfl.errors import InputError, MalformedMessageError, ProtocolError
from privfl.evaluation.fhauc.policy import (
    MAX_EXECUTIONS,
    MAX_PARTIES,
    MAX_SPLITS,
    Policy,
    Security,
)
from privfl.evaluation.statistics import MAX_POINTS, ScoreRange, interior_thresholds
from privfl.messages import SESSION_ID_BYTES, Codec, Reader, Writer

PROTOCOL = "fhauc"
VERSION = 2
CODEC = Codec(PROTOCOL, VERSION)
PROVISIONING_SESSION = b"\x00" * SESSION_ID_BYTES
SIGNATURE_DOMAIN = "privfl/fhauc/v2"
NONCE_BYTES = 32
DIGEST_BYTES = 32
MAX_NAME_BYTES = 128
MAX_CIPHERTEXTS = 4096  # per vector and execution: 4096 chunks = 16.7 M slots
MAX_CIPHERTEXT_BYTES = 4 << 20
AGGREGATOR = "aggregator"


def _signed_data(step: str, session: bytes, sender: str, body: bytes) -> bytes:
    return Writer().str_(step).bytes_(session).str_(sender).bytes_(body).getvalue()


def _seal(identity: IdentityKey, step: str, session: bytes, sender: str, body: bytes) -> bytes:
    """Frame ``body`` with a signature by ``identity`` over (step, session, sender, body)."""
    sig = identity.sign(SIGNATURE_DOMAIN, _signed_data(step, session, sender, body))
    return CODEC.encode(step, session, sender, Writer().bytes_(body).bytes_(sig).getvalue())


def _open(
    data: bytes, step: str, session: bytes | None, roster: Mapping[str, bytes]
) -> tuple[str, bytes, Reader]:
    """Check the header and the sender's signature; returns (sender, session, body reader)."""
    header, r = CODEC.decode(data, step, session)
    body, sig = r.bytes_(), r.bytes_(SIGNATURE_BYTES)
    r.end()
    verify_signed(
        roster,
        header.sender,
        sig,
        SIGNATURE_DOMAIN,
        _signed_data(step, header.session, header.sender, body),
    )
    return header.sender, header.session, Reader(body, f"{PROTOCOL} {step} from {header.sender}")


def _protocol_input(exc: InputError, what: str) -> MalformedMessageError:
    return MalformedMessageError(f"{what}: {exc}")


# ============================================================================ session
@dataclass(frozen=True)
class SessionConfig:
    """Public parameters of one evaluation, announced by the aggregator (checked by every
    party against its own policy; never trusted)."""

    session: bytes
    parties: tuple[str, ...]
    thresholds: FloatArray  # interior thresholds, strictly decreasing
    score_range: ScoreRange = (0.0, 1.0)
    security: Security = Security.SEMI_HONEST
    splits: int = 1
    sender: str = AGGREGATOR

    STEP = "config"

    @property
    def num_points(self) -> int:
        """N, the number of decision points including the ±inf ends."""
        return int(self.thresholds.size) + 2

    def terms(self) -> int:
        """Slots each party fills per vector: N-1 (semi-honest) or S·N (malicious)."""
        if self.security is Security.MALICIOUS:
            return self.splits * self.num_points
        return self.num_points - 1

    def body(self) -> bytes:
        w = Writer().u32(len(self.parties))
        for p in self.parties:
            w.str_(p)
        w.bytes_(np.asarray(self.thresholds, dtype="<f8").tobytes())
        w.f64(self.score_range[0]).f64(self.score_range[1])
        return w.str_(self.security.value).u32(self.splits).getvalue()

    @property
    def digest(self) -> bytes:
        """SHA-256 of the canonical encoding (session id included)."""
        return hashlib.sha256(self.session + self.body()).digest()

    def to_bytes(self) -> bytes:
        return CODEC.encode(self.STEP, self.session, self.sender, self.body())

    @classmethod
    def from_bytes(cls, data: bytes, session: bytes | None = None) -> SessionConfig:
        header, r = CODEC.decode(data, cls.STEP, session)
        parties = tuple(r.str_(MAX_NAME_BYTES) for _ in range(r.count(MAX_PARTIES, "parties")))
        raw = r.bytes_(8 * MAX_POINTS)
        if len(raw) % 8:
            raise MalformedMessageError("session config: bad threshold array")
        thresholds = np.frombuffer(raw, dtype="<f8").astype(np.float64)
        lo, hi = r.f64_finite("score range low"), r.f64_finite("score range high")
        security, splits = r.str_(32), r.u32()
        r.end()
        try:
            cfg = cls(
                header.session,
                parties,
                thresholds,
                (lo, hi),
                Security.parse(security),
                splits,
                header.sender,
            )
            cfg.validate()
        except InputError as exc:
            raise _protocol_input(exc, "invalid session config") from None
        return cfg

    def validate(self) -> None:
        """Checks every party runs on the announced configuration (InputError)."""
        if not 1 <= len(self.parties) <= MAX_PARTIES:
            raise InputError(f"a session names 1..{MAX_PARTIES} parties")
        if len(set(self.parties)) != len(self.parties) or not all(self.parties):
            raise InputError("the session must name distinct, non-empty parties")
        if self.thresholds.size < 1:
            raise InputError("the session needs at least one interior threshold")
        interior_thresholds(self.thresholds, self.score_range)  # raises on bad thresholds
        if self.security is Security.MALICIOUS:
            if not 2 <= self.splits <= MAX_SPLITS:
                raise InputError(f"splits must be between 2 and {MAX_SPLITS}, got {self.splits}")
            if len(self.parties) < 2:
                raise InputError("the malicious variant needs at least 2 parties")
        elif self.splits != 1:
            raise InputError("the semi-honest variant uses splits = 1")

    def check_policy(self, policy: Policy) -> None:
        """What a party refuses whatever the aggregator says (ProtocolError)."""
        if self.security.rank < policy.security.rank:
            raise ProtocolError(
                f"the aggregator announced a {self.security.value} session; this party's "
                f"provisioning requires {policy.security.value} (no downgrade)"
            )
        if self.num_points > policy.max_points:
            raise ProtocolError(
                f"the session has N={self.num_points} decision points; this party's "
                f"provisioning allows at most {policy.max_points}"
            )
        if self.splits > policy.max_splits:
            raise ProtocolError(
                f"S={self.splits} splits exceed the provisioned {policy.max_splits}"
            )
        if len(self.parties) < policy.min_parties:
            raise ProtocolError(
                f"the session has {len(self.parties)} parties; this party joins sessions of "
                f"at least {policy.min_parties}"
            )


@dataclass(frozen=True)
class Join:
    """A party's answer to a config: it joins *this* config (by digest) with a fresh nonce."""

    session: bytes
    sender: str
    config_digest: bytes
    nonce: bytes

    STEP = "join"

    def body(self) -> bytes:
        return Writer().bytes_(self.config_digest).bytes_(self.nonce).getvalue()

    def seal(self, identity: IdentityKey) -> bytes:
        return _seal(identity, self.STEP, self.session, self.sender, self.body())

    @classmethod
    def from_bytes(cls, data: bytes, session: bytes, roster: Mapping[str, bytes]) -> Join:
        sender, sess, r = _open(data, cls.STEP, session, roster)
        digest, nonce = r.bytes_(DIGEST_BYTES), r.bytes_(NONCE_BYTES)
        r.end()
        if len(digest) != DIGEST_BYTES or len(nonce) != NONCE_BYTES:
            raise MalformedMessageError(f"join from {sender}: bad digest or nonce length")
        return cls(sess, sender, digest, nonce)


@dataclass(frozen=True)
class Start:
    """Aggregator -> every party: the config and every party's signed Join (relayed)."""

    session: bytes
    config: bytes
    joins: tuple[bytes, ...]
    sender: str = AGGREGATOR

    STEP = "start"

    def to_bytes(self) -> bytes:
        body = Writer().bytes_(self.config).list_(list(self.joins)).getvalue()
        return CODEC.encode(self.STEP, self.session, self.sender, body)

    @classmethod
    def from_bytes(cls, data: bytes, session: bytes) -> Start:
        header, r = CODEC.decode(data, cls.STEP, session)
        config = r.bytes_()
        joins = tuple(r.list_(MAX_PARTIES))
        r.end()
        return cls(header.session, config, joins, header.sender)


# ============================================================================ uploads
@dataclass(frozen=True)
class Upload:
    """One party's ciphertexts for one execution (what :meth:`Aggregator.aggregate` gets).

    ``t``/``f``: the T and F vector chunks; ``d``: denominator ciphertexts (empty in the folded
    layout, where TP and FP ride in ``t`` and ``f``)."""

    sender: str
    session: bytes
    t: list[Ciphertext]
    f: list[Ciphertext]
    d: list[Ciphertext] = field(default_factory=list)
    execution: int = 0


@dataclass(frozen=True)
class PartyUpload:
    """A party's signed upload: the session transcript hash and, per execution, the raw
    ciphertext bytes (loaded and checked by :meth:`open`)."""

    session: bytes
    sender: str
    transcript: bytes
    executions: tuple[tuple[tuple[bytes, ...], tuple[bytes, ...], tuple[bytes, ...]], ...]

    STEP = "upload"

    @classmethod
    def build(
        cls, session: bytes, sender: str, transcript: bytes, uploads: Sequence[Upload]
    ) -> PartyUpload:
        return cls(
            session,
            sender,
            transcript,
            tuple(
                (
                    tuple(c.to_bytes() for c in u.t),
                    tuple(c.to_bytes() for c in u.f),
                    tuple(c.to_bytes() for c in u.d),
                )
                for u in uploads
            ),
        )

    def body(self) -> bytes:
        w = Writer().bytes_(self.transcript).u32(len(self.executions))
        for t, f, d in self.executions:
            w.list_(list(t)).list_(list(f)).list_(list(d))
        return w.getvalue()

    def seal(self, identity: IdentityKey) -> bytes:
        return _seal(identity, self.STEP, self.session, self.sender, self.body())

    @classmethod
    def from_bytes(cls, data: bytes, session: bytes, roster: Mapping[str, bytes]) -> PartyUpload:
        """Check the signature before anything else; then the structure (bounded)."""
        sender, sess, r = _open(data, cls.STEP, session, roster)
        transcript = r.bytes_(DIGEST_BYTES)
        execs = []
        for _ in range(r.count(MAX_EXECUTIONS, "executions")):
            vectors = tuple(tuple(r.list_(MAX_CIPHERTEXTS)) for _ in range(3))
            execs.append((vectors[0], vectors[1], vectors[2]))
        r.end()
        return cls(sess, sender, transcript, tuple(execs))

    def open(
        self, context: CKKSContext, chunks: int, d_count: int, scale_bits: float
    ) -> list[Upload]:
        """Load every ciphertext, checking the shape and that each is a fresh ciphertext at
        the session's scale: a mismatch is a MalformedMessageError naming the sender."""
        out = []
        for e, (t, f, d) in enumerate(self.executions):
            if (len(t), len(f), len(d)) != (chunks, chunks, d_count):
                raise MalformedMessageError(
                    f"upload from {self.sender} has {len(t)}/{len(f)}/{len(d)} ciphertexts in "
                    f"execution {e}, expected {chunks}/{chunks}/{d_count}"
                )
            try:
                loaded = [
                    [context.fresh_ciphertext_from_bytes(b, scale_bits) for b in vec]
                    for vec in (t, f, d)
                ]
            except MalformedMessageError as exc:
                raise MalformedMessageError(f"upload from {self.sender}: {exc}") from None
            out.append(Upload(self.sender, self.session, loaded[0], loaded[1], loaded[2], e))
        return out


# ============================================================================ replies
@dataclass(frozen=True)
class Reply:
    """The aggregator's answer for one execution: ``numerator`` encrypts c·num in every slot,
    ``denominator`` encrypts c·TP·FP at :attr:`Layout.denominator_slot`."""

    session: bytes
    numerator: Ciphertext
    denominator: Ciphertext
    execution: int = 0
    sender: str = AGGREGATOR


@dataclass(frozen=True)
class Result:
    """Aggregator -> every party: the replies of all executions."""

    session: bytes
    replies: tuple[Reply, ...]
    sender: str = AGGREGATOR

    STEP = "result"

    def to_bytes(self) -> bytes:
        w = Writer().u32(len(self.replies))
        for rep in self.replies:
            w.u32(rep.execution).bytes_(rep.numerator.to_bytes())
            w.bytes_(rep.denominator.to_bytes())
        return CODEC.encode(self.STEP, self.session, self.sender, w.getvalue())

    @classmethod
    def from_bytes(cls, data: bytes, context: CKKSContext, session: bytes) -> Result:
        header, r = CODEC.decode(data, cls.STEP, session)
        replies = []
        for _ in range(r.count(MAX_EXECUTIONS, "executions")):
            execution = r.u32()
            num = context.ciphertext_from_bytes(r.bytes_(MAX_CIPHERTEXT_BYTES))
            den = context.ciphertext_from_bytes(r.bytes_(MAX_CIPHERTEXT_BYTES))
            replies.append(Reply(header.session, num, den, execution, header.sender))
        r.end()
        return cls(header.session, tuple(replies), header.sender)


@dataclass(frozen=True)
class Done:
    """A party's signed end of session: its status, never its result."""

    session: bytes
    sender: str
    status: str = "ok"

    STEP = "done"

    def seal(self, identity: IdentityKey) -> bytes:
        return _seal(
            identity, self.STEP, self.session, self.sender, Writer().str_(self.status).getvalue()
        )

    @classmethod
    def from_bytes(cls, data: bytes, session: bytes, roster: Mapping[str, bytes]) -> Done:
        sender, sess, r = _open(data, cls.STEP, session, roster)
        status = r.str_(64)
        r.end()
        return cls(sess, sender, status)


# ============================================================================ setup
@dataclass(frozen=True)
class PublicSetup:
    """Key holder -> aggregator: the roster, the public CKKS context and the policy."""

    sender: str
    roster: dict[str, bytes]
    public_context: bytes
    policy: Policy

    STEP = "setup-public"

    def to_bytes(self) -> bytes:
        w = Writer().u32(len(self.roster))
        for name, key in sorted(self.roster.items()):
            w.str_(name).bytes_(key)
        w.bytes_(self.public_context).bytes_(self.policy.to_bytes())
        return CODEC.encode(self.STEP, PROVISIONING_SESSION, self.sender, w.getvalue())

    @classmethod
    def from_bytes(cls, data: bytes) -> PublicSetup:
        header, r = CODEC.decode(data, cls.STEP)
        roster = read_roster(r)
        ctx = r.bytes_()
        policy = Policy.from_bytes(r.bytes_(256))
        r.end()
        return cls(header.sender, roster, ctx, policy)


def read_roster(r: Reader) -> dict[str, bytes]:
    """A roster (name -> 64-byte public identity), bounded and checked."""
    roster = {}
    for _ in range(r.count(MAX_PARTIES, "roster entries")):
        name, key = r.str_(MAX_NAME_BYTES), r.bytes_(PUBLIC_BYTES)
        if len(key) != PUBLIC_BYTES or not name or name in roster:
            raise MalformedMessageError("roster entry with a bad key or a repeated name")
        roster[name] = key
    return roster


@dataclass(frozen=True)
class KeyBundle:
    """Key holder -> one party (relayed): the wrapped secret context, seed and policy."""

    sender: str
    wrapped: keywrap.WrappedSecret

    STEP = "setup-bundle"

    def to_bytes(self) -> bytes:
        body = Writer().bytes_(self.wrapped.to_bytes()).getvalue()
        return CODEC.encode(self.STEP, PROVISIONING_SESSION, self.sender, body)

    @classmethod
    def from_bytes(cls, data: bytes) -> KeyBundle:
        header, r = CODEC.decode(data, cls.STEP)
        wrapped = keywrap.WrappedSecret.from_bytes(r.bytes_())
        r.end()
        return cls(header.sender, wrapped)
