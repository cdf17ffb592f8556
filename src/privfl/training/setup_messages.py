"""Messages of the setup of a training session (before the first round): a node's
:class:`NodeHello` and the server's :class:`SessionPlan`.

The session id is not the server's choice alone: it is ``SHA-256(server nonce || every node's
hello nonce)`` (first 16 bytes, :func:`session_id`), so a node that contributed a fresh nonce
knows the session is new (nothing signed in an earlier session can be replayed into it).

After the joint key is generated, every node sends a signed :class:`KeyCheck` (a sketch of its
own key contribution) and the server relays them all (:class:`KeyChecks`): every node checks
the joint key before it uses it (:mod:`privfl.crypto.threshold.keycheck`).

Decoders bound every count and length before reading, check every value's range and raise only
:class:`~privfl.errors.ProtocolError` subclasses.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Self

from privfl.crypto.identity import SIGNATURE_BYTES, IdentityKey, verify_signed
from privfl.errors import MalformedMessageError
from privfl.messages import SESSION_ID_BYTES, Reader, Writer
from privfl.training.config import MAX_PARTIES, PARAMETER_KINDS, Schedule
from privfl.training.messages import CODEC

__all__ = ["NONCE_BYTES", "KeyCheck", "KeyChecks", "NodeHello", "SessionPlan", "session_id"]

NONCE_BYTES = 32
IDENTITY_BYTES = 64
MAX_LAYERS = 16
MAX_WIDTH = 1 << 16
MAX_COUNT = 1 << 40
SETUP_DOMAIN = b"privfl/training/session/v1"


def session_id(server_nonce: bytes, nonces: tuple[bytes, ...]) -> bytes:
    """The session id both sides derive from the server's and every node's nonce."""
    h = hashlib.sha256(SETUP_DOMAIN + server_nonce)
    for n in nonces:
        h.update(n)
    return h.digest()[:SESSION_ID_BYTES]


def _fixed(r: Reader, size: int, what: str) -> bytes:
    data = r.bytes_(size)
    if len(data) != size:
        raise MalformedMessageError(f"{what} is {size} bytes")
    return data


@dataclass(frozen=True)
class NodeHello:
    """Node -> server: which party the node plays, its pinned identity (X25519 || Ed25519
    public keys), its number of rows and features, and a fresh nonce for the session id.
    Travels under the first 16 bytes of the server's nonce as the (provisional) session."""

    STEP: ClassVar[str] = "node-hello"
    server_nonce: bytes
    sender: str
    identity: bytes
    samples: int
    features: int
    nonce: bytes

    def to_bytes(self) -> bytes:
        w = Writer().bytes_(self.identity).u64(self.samples).u32(self.features)
        w.bytes_(self.nonce)
        return CODEC.encode(
            self.STEP, self.server_nonce[:SESSION_ID_BYTES], self.sender, w.getvalue()
        )

    @classmethod
    def from_bytes(cls, data: bytes, server_nonce: bytes, sender: str) -> Self:
        header, r = CODEC.decode(data, step=cls.STEP, session=server_nonce[:SESSION_ID_BYTES])
        if header.sender != sender:
            raise MalformedMessageError(f"a hello from {header.sender!r}, not {sender!r}")
        identity = _fixed(r, IDENTITY_BYTES, "an identity")
        samples, features = r.u64(), r.u32()
        if not 1 <= samples < MAX_COUNT or not 1 <= features <= MAX_WIDTH:
            raise MalformedMessageError("a row or feature count out of range")
        nonce = _fixed(r, NONCE_BYTES, "a nonce")
        r.end()
        return cls(server_nonce, sender, identity, samples, features, nonce)


def _write_schedule(w: Writer, s: Schedule) -> Writer:
    w.u32(len(s.sizes))
    for size in s.sizes:
        w.u32(size)
    w.u32(s.secret_layers).u64(s.epochs).u64(s.rounds).u64(s.batch_size).f64(s.learning_rate)
    return w.u64(s.seed).f64(s.sigmoid_range[0]).f64(s.sigmoid_range[1]).u32(s.sigmoid_degree)


def _read_schedule(r: Reader) -> Schedule:
    count = r.count(MAX_LAYERS, "layer widths")
    sizes = tuple(r.u32() for _ in range(count))
    if any(not 1 <= s <= MAX_WIDTH for s in sizes):
        raise MalformedMessageError("a layer width out of range")
    secret, epochs, rounds, batch = r.u32(), r.u64(), r.u64(), r.u64()
    if secret > MAX_LAYERS or not (1 <= epochs < MAX_COUNT and 1 <= rounds <= epochs):
        raise MalformedMessageError("a layer, epoch or round count out of range")
    if not 1 <= batch < MAX_COUNT:
        raise MalformedMessageError("a batch size out of range")
    lr = r.f64_finite("learning rate")
    seed = r.u64()
    low, high = r.f64_finite("sigmoid low"), r.f64_finite("sigmoid high")
    degree = r.u32()
    return Schedule(sizes, secret, epochs, rounds, batch, lr, seed, (low, high), degree)


@dataclass(frozen=True)
class SessionPlan:
    """Server -> every node: the public plan of the session (names, pinned identities, sample
    counts, every node's nonce, the schedule, how often to evaluate, the parameter set).
    Travels under the derived session id."""

    STEP: ClassVar[str] = "session-plan"
    server_nonce: bytes
    names: tuple[str, ...]
    roster: tuple[bytes, ...]
    samples: tuple[int, ...]
    nonces: tuple[bytes, ...]
    schedule: Schedule
    evaluate_every: int
    parameters: str

    @property
    def session(self) -> bytes:
        return session_id(self.server_nonce, self.nonces)

    def to_bytes(self) -> bytes:
        w = Writer().bytes_(self.server_nonce).u32(len(self.names))
        for name, ident, n, nonce in zip(
            self.names, self.roster, self.samples, self.nonces, strict=True
        ):
            w.str_(name).bytes_(ident).u64(n).bytes_(nonce)
        w = _write_schedule(w, self.schedule).u64(self.evaluate_every).str_(self.parameters)
        return CODEC.encode(self.STEP, self.session, "server", w.getvalue())

    @classmethod
    def from_bytes(cls, data: bytes) -> Self:
        """Decode (the session id in the header must be the one the nonces give)."""
        header, r = CODEC.decode(data, step=cls.STEP)
        if header.sender != "server":
            raise MalformedMessageError("a session plan comes from the server")
        server_nonce = _fixed(r, NONCE_BYTES, "the server's nonce")
        names, roster, samples, nonces = [], [], [], []
        for _ in range(r.count(MAX_PARTIES, "parties")):
            names.append(r.str_(64))
            roster.append(_fixed(r, IDENTITY_BYTES, "an identity"))
            samples.append(r.u64())
            nonces.append(_fixed(r, NONCE_BYTES, "a nonce"))
        if not names or any(not 1 <= n < MAX_COUNT for n in samples):
            raise MalformedMessageError("a plan without parties, or a row count out of range")
        schedule = _read_schedule(r)
        every = r.u64()
        parameters = r.str_(16)
        r.end()
        if every >= MAX_COUNT or parameters not in PARAMETER_KINDS:
            raise MalformedMessageError("an evaluation period or parameter set out of range")
        plan = cls(
            server_nonce, tuple(names), tuple(roster), tuple(samples), tuple(nonces),
            schedule, int(every), parameters,
        )  # fmt: skip
        if plan.session != header.session:
            raise MalformedMessageError("the plan's session id is not the one its nonces give")
        return plan

    def batches_per_epoch(self) -> int:
        """The largest party's mini-batches per epoch."""
        return max(math.ceil(n / self.schedule.batch_size) for n in self.samples)


MAX_SKETCH_ROWS = 1 << 12  # the secure training ring has 96 rows; 32 KB at most
KEY_CHECK_DOMAIN = "privfl/training/key-check/v1"


@dataclass(frozen=True)
class KeyCheck:
    """Node -> server, relayed by the server to every node: the node's sketch of its own
    contribution to the joint public and switching keys
    (:func:`privfl.crypto.threshold.keycheck.own_sketch`), signed with its pinned identity
    over the session, its name and the sketch, so the server can relay it but not forge or
    alter it."""

    STEP: ClassVar[str] = "key-check"
    session: bytes
    sender: str
    sketch: tuple[int, ...]
    signature: bytes = b""

    def _signed(self) -> bytes:
        w = Writer().bytes_(self.session).str_(self.sender).u32(len(self.sketch))
        for v in self.sketch:
            w.u64(v)
        return w.getvalue()

    def seal(self, identity: IdentityKey) -> bytes:
        """This check signed by ``identity`` (the sender's), as wire bytes."""
        signature = identity.sign(KEY_CHECK_DOMAIN, self._signed())
        w = Writer().u32(len(self.sketch))
        for v in self.sketch:
            w.u64(v)
        w.bytes_(signature)
        return CODEC.encode(self.STEP, self.session, self.sender, w.getvalue())

    @classmethod
    def from_bytes(cls, data: bytes, session: bytes, roster: Mapping[str, bytes]) -> Self:
        """Decode and check the signature against the sender's pinned identity in
        ``roster`` (``UnknownPartyError`` for a sender not in it or a bad signature)."""
        header, r = CODEC.decode(data, step=cls.STEP, session=session)
        sketch = tuple(r.u64() for _ in range(r.count(MAX_SKETCH_ROWS, "sketch rows")))
        signature = _fixed(r, SIGNATURE_BYTES, "a signature")
        r.end()
        check = cls(header.session, header.sender, sketch, signature)
        verify_signed(roster, header.sender, signature, KEY_CHECK_DOMAIN, check._signed())
        return check


@dataclass(frozen=True)
class KeyChecks:
    """Server -> every node: every node's signed :class:`KeyCheck` (wire bytes), relayed
    unchanged; each node checks the signatures and the sums itself."""

    STEP: ClassVar[str] = "key-checks"
    session: bytes
    items: tuple[bytes, ...]

    def to_bytes(self) -> bytes:
        body = Writer().list_(list(self.items)).getvalue()
        return CODEC.encode(self.STEP, self.session, "server", body)

    @classmethod
    def from_bytes(cls, data: bytes, session: bytes) -> Self:
        header, r = CODEC.decode(data, step=cls.STEP, session=session)
        if header.sender != "server":
            raise MalformedMessageError("relayed key checks come from the server")
        items = r.list_(MAX_PARTIES)
        r.end()
        return cls(header.session, tuple(items))
