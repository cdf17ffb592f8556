"""Messages of the joint steps of training: signed requests, signed consents, sealed shares.

A bootstrapping or decryption request travels as a :class:`SignedRequest`: the threshold
request (``c1`` and its request id, :mod:`privfl.crypto.threshold.messages`) together with
the :class:`~.tickets.Ticket` it is for, signed by the requesting party's pinned Ed25519 key
over the session, the ticket, the kind and the SHA-256 of the request bytes. A relay (the
server) can neither make one, nor change its ``c1``, ticket or consents, nor pass it off as
another party's. Reveals and predictions carry every party's :class:`Consent`.

The answer is a :class:`SealedShare`: the share's bytes sealed for the requester alone
(X25519 + HKDF-SHA256 + AES-256-GCM, :mod:`privfl.crypto.keywrap`, purpose bound to the
ticket) and signed by the answering party. The server relays ciphertext it cannot open, so
it never holds a set of shares it could fuse.

Decoders check the header, bound every length before reading and raise only
:class:`~privfl.errors.ProtocolError` subclasses; signatures are checked by the receiving
role (:class:`~.desk.ShareDesk`), which knows the roster.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import ClassVar, Self

from privfl.errors import MalformedMessageError
from privfl.messages import Reader, Writer
from privfl.training.messages import CODEC
from privfl.training.tickets import KINDS, Purpose, Ticket

__all__ = ["Consent", "SealedShare", "SignedRequest", "request_digest"]

MAX_REQUEST_BYTES = 1 << 26
MAX_SHARE_BYTES = 1 << 26
MAX_CONSENTS = 64
MAX_COUNTER = 1 << 40
SIGNATURE = 64
REQUEST_DOMAIN = "privfl/training/request/v1"
SHARE_DOMAIN = "privfl/training/share/v1"
CONSENT_DOMAIN = "privfl/training/consent/v1"


def _write_ticket(w: Writer, t: Ticket) -> Writer:
    return w.str_(t.purpose.value).u64(t.round).u64(t.epoch).u64(t.index).u32(t.step)


def _read_ticket(r: Reader) -> Ticket:
    purpose = r.str_(16)
    try:
        p = Purpose(purpose)
    except ValueError:
        raise MalformedMessageError(f"unknown purpose {purpose!r}") from None
    values = [r.u64(), r.u64(), r.u64()]
    if any(v >= MAX_COUNTER for v in values):
        raise MalformedMessageError("a ticket counter out of range")
    return Ticket(p, values[0], values[1], values[2], r.u32())


def _signature(r: Reader) -> bytes:
    sig = r.bytes_(SIGNATURE)
    if len(sig) != SIGNATURE:
        raise MalformedMessageError(f"a signature is {SIGNATURE} bytes")
    return sig


def request_digest(request: bytes) -> bytes:
    """SHA-256 of a threshold request's bytes (what the requester signs)."""
    return hashlib.sha256(request).digest()


@dataclass(frozen=True)
class Consent:
    """Party ``sender`` agrees that ``recipient`` may ask for ``purpose`` (reveal or
    predict) up to ``limit`` times (layers or blocks) in this session; signed."""

    STEP: ClassVar[str] = "consent"
    session: bytes
    sender: str
    recipient: str
    purpose: Purpose
    limit: int
    signature: bytes

    def signed_part(self) -> bytes:
        w = Writer().bytes_(self.session).str_(self.sender).str_(self.recipient)
        return w.str_(self.purpose.value).u64(self.limit).getvalue()

    def to_bytes(self) -> bytes:
        w = Writer().str_(self.recipient).str_(self.purpose.value).u64(self.limit)
        w.bytes_(self.signature)
        return CODEC.encode(self.STEP, self.session, self.sender, w.getvalue())

    @classmethod
    def from_bytes(cls, data: bytes, session: bytes) -> Self:
        header, r = CODEC.decode(data, step=cls.STEP, session=session)
        recipient, purpose = r.str_(), r.str_(16)
        if purpose not in (Purpose.REVEAL.value, Purpose.PREDICT.value):
            raise MalformedMessageError(f"a consent is for reveal or predict, not {purpose!r}")
        limit = r.u64()
        if limit >= MAX_COUNTER:
            raise MalformedMessageError("a consent limit out of range")
        sig = _signature(r)
        r.end()
        return cls(session, header.sender, recipient, Purpose(purpose), limit, sig)


@dataclass(frozen=True)
class SignedRequest:
    """Party -> every other party (relayed): a threshold request for ``ticket``."""

    STEP: ClassVar[str] = "signed-request"
    session: bytes
    sender: str
    ticket: Ticket
    kind: str
    request: bytes
    consents: tuple[Consent, ...]
    signature: bytes

    def signed_part(self) -> list[bytes]:
        w = _write_ticket(Writer().bytes_(self.session).str_(self.sender), self.ticket)
        w.str_(self.kind).bytes_(request_digest(self.request))
        w.list_([c.to_bytes() for c in self.consents])
        return [w.getvalue()]

    def to_bytes(self) -> bytes:
        w = _write_ticket(Writer(), self.ticket).str_(self.kind).bytes_(self.request)
        w.list_([c.to_bytes() for c in self.consents]).bytes_(self.signature)
        return CODEC.encode(self.STEP, self.session, self.sender, w.getvalue())

    @classmethod
    def from_bytes(cls, data: bytes, session: bytes) -> Self:
        header, r = CODEC.decode(data, step=cls.STEP, session=session)
        ticket = _read_ticket(r)
        kind = r.str_(16)
        if kind not in KINDS:
            raise MalformedMessageError(f"unknown request kind {kind!r}")
        request = r.bytes_(MAX_REQUEST_BYTES)
        raw = r.list_(MAX_CONSENTS)
        consents = tuple(Consent.from_bytes(c, session) for c in raw)
        sig = _signature(r)
        r.end()
        return cls(session, header.sender, ticket, kind, request, consents, sig)


@dataclass(frozen=True)
class SealedShare:
    """Party -> requester (relayed): a bootstrapping or decryption share sealed for
    ``recipient`` (a :class:`~privfl.crypto.keywrap.WrappedSecret`) and signed."""

    STEP: ClassVar[str] = "sealed-share"
    session: bytes
    sender: str
    recipient: str
    ticket: Ticket
    request_id: int
    sealed: bytes
    signature: bytes

    def signed_part(self) -> list[bytes]:
        w = Writer().bytes_(self.session).str_(self.sender).str_(self.recipient)
        w = _write_ticket(w, self.ticket).u64(self.request_id)
        return [w.getvalue(), hashlib.sha256(self.sealed).digest()]

    def to_bytes(self) -> bytes:
        w = _write_ticket(Writer().str_(self.recipient), self.ticket).u64(self.request_id)
        w.bytes_(self.sealed).bytes_(self.signature)
        return CODEC.encode(self.STEP, self.session, self.sender, w.getvalue())

    @classmethod
    def from_bytes(cls, data: bytes, session: bytes) -> Self:
        header, r = CODEC.decode(data, step=cls.STEP, session=session)
        recipient = r.str_()
        ticket = _read_ticket(r)
        rid = r.u64()
        sealed = r.bytes_(MAX_SHARE_BYTES)
        sig = _signature(r)
        r.end()
        return cls(session, header.sender, recipient, ticket, rid, sealed, sig)
