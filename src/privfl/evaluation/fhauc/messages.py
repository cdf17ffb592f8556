"""FHAUC's wire messages: typed frozen dataclasses with explicit ``to_bytes``/``from_bytes``.

Steps of one session (docs/architecture.md §4, with the session hardening); the
ciphertext-carrying messages (``PartyUpload``, ``Result``) are in :mod:`.uploads`::

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

import functools
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from privfl._typing import FloatArray
from privfl.crypto import keywrap
from privfl.crypto.identity import PUBLIC_BYTES, SIGNATURE_BYTES, IdentityKey, verify_signed
from privfl.errors import InputError, MalformedMessageError, ProtocolError
from privfl.evaluation.fhauc.policy import (
    MAX_PARTIES,
    MAX_SPLITS,
    Policy,
    Security,
)
from privfl.evaluation.fhauc.reveal import Reveal
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
AGGREGATOR = "aggregator"


def _signed_data(
    step: str, session: bytes, sender: str, body: bytes | memoryview
) -> tuple[bytes, bytes | memoryview]:
    """What a party signs: the encoding of (step, session, sender, body), in two parts so
    that a large body is hashed in place."""
    head = Writer().str_(step).bytes_(session).str_(sender).u32(len(body)).getvalue()
    return head, body


def seal(identity: IdentityKey, step: str, session: bytes, sender: str, body: bytes) -> bytes:
    """Frame ``body`` with a signature by ``identity`` over (step, session, sender, body)."""
    sig = identity.sign(SIGNATURE_DOMAIN, _signed_data(step, session, sender, body))
    return CODEC.encode(step, session, sender, Writer().bytes_(body).bytes_(sig).getvalue())


def open_signed(
    data: bytes, step: str, session: bytes | None, roster: Mapping[str, bytes]
) -> tuple[str, bytes, Reader]:
    """Check the header and the sender's signature; returns (sender, session, body reader)."""
    header, r = CODEC.decode(data, step, session)
    body, sig = r.view(len(data)), r.bytes_(SIGNATURE_BYTES)  # the body is a view: no copy
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
    reveal: Reveal = Reveal.AUC  # what the parties learn (fhauc.reveal); bound by the digest
    key_set: bytes = b""  # threshold keys: the kept key set to reuse (b"": generate one)

    STEP = "config"

    def __post_init__(self) -> None:
        # a read-only copy: the digest below is computed once, so the config must not change
        frozen = np.array(self.thresholds, dtype=np.float64)
        frozen.flags.writeable = False
        object.__setattr__(self, "thresholds", frozen)

    @property
    def num_points(self) -> int:
        """N, the number of decision points including the ±inf ends."""
        return int(self.thresholds.size) + 2

    def terms(self) -> int:
        """Slots each party fills per vector: N-1 (semi-honest) or S·N (malicious); with a
        ``curve``/``metrics`` reveal, S·(N-1) (S = 1 semi-honest)."""
        if self.reveal is not Reveal.AUC:
            return self.splits * (self.num_points - 1)
        if self.security is Security.MALICIOUS:
            return self.splits * self.num_points
        return self.num_points - 1

    def body(self) -> bytes:
        w = Writer().u32(len(self.parties))
        for p in self.parties:
            w.str_(p)
        w.bytes_(np.asarray(self.thresholds, dtype="<f8").tobytes())
        w.f64(self.score_range[0]).f64(self.score_range[1])
        w.str_(self.security.value).u32(self.splits)
        return w.str_(self.reveal.value).bytes_(self.key_set).getvalue()

    @functools.cached_property
    def digest(self) -> bytes:
        """SHA-256 of the canonical encoding (session id included); computed once per
        config object (it encodes the whole party list)."""
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
        security, splits, reveal = r.str_(32), r.u32(), r.str_(16)
        key_set = r.bytes_(SESSION_ID_BYTES)
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
                Reveal.parse(reveal),
                key_set,
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
        if self.reveal is Reveal.METRICS and self.thresholds.size != 1:
            raise InputError("reveal='metrics' is computed at exactly one interior threshold")
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
        return seal(identity, self.STEP, self.session, self.sender, self.body())

    @classmethod
    def from_bytes(cls, data: bytes, session: bytes, roster: Mapping[str, bytes]) -> Join:
        sender, sess, r = open_signed(data, cls.STEP, session, roster)
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


@dataclass(frozen=True)
class Done:
    """A party's signed end of session: its status, never its result."""

    session: bytes
    sender: str
    status: str = "ok"

    STEP = "done"

    def seal(self, identity: IdentityKey) -> bytes:
        return seal(
            identity, self.STEP, self.session, self.sender, Writer().str_(self.status).getvalue()
        )

    @classmethod
    def from_bytes(cls, data: bytes, session: bytes, roster: Mapping[str, bytes]) -> Done:
        sender, sess, r = open_signed(data, cls.STEP, session, roster)
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

    @classmethod
    def open(
        cls,
        data: bytes,
        purpose: str,
        me: str,
        identity: IdentityKey,
        roster: Mapping[str, bytes],
        holder: str,
    ) -> Reader:
        """Party ``me`` unwraps a bundle of either key mode (``purpose`` names the mode), which
        must come from the pinned provisioning party ``holder``: a reader of its secret."""
        secret = keywrap.unwrap(
            cls.from_bytes(data).wrapped,
            recipient=me,
            recipient_key=identity,
            roster=dict(roster),
            expected_sender=holder,
            purpose=purpose,
        )
        return Reader(secret, "key bundle")


def upload_body(
    transcript: bytes,
    executions: Sequence[tuple[Sequence[bytes], Sequence[bytes], Sequence[bytes]]],
) -> bytes:
    """The signed body of a party's upload in either key mode: the transcript hash, then per
    execution its T, F and D ciphertexts' bytes (each a length-prefixed list)."""
    w = Writer().bytes_(transcript).u32(len(executions))
    for t, f, d in executions:
        w.list_(list(t)).list_(list(f)).list_(list(d))
    return w.getvalue()
