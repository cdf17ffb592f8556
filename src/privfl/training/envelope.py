"""The one message type between the server and a party node during training: an
:class:`Envelope` (step, round, relayed items, done flag, step body).

The server relays party-to-party messages (signed requests, sealed shares) as :class:`Item`
s: a party addresses each item to a peer, the server delivers it with ``peer`` set to the
sender. The server reads only the routing fields; the item bytes are signed and sealed by the
parties (:mod:`~.joint`). The body carries what the step needs (the global model, a party's
upload, its evaluation counts, consents), encoded by :func:`pack_parts`.

Decoding checks the header, the step name, every count and length before reading, and raises
only :class:`~privfl.errors.ProtocolError` subclasses.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Self

from privfl.errors import MalformedMessageError
from privfl.messages import Reader, Writer
from privfl.training.messages import CODEC

__all__ = ["ITEM_KINDS", "STEPS", "Envelope", "Item", "pack_parts", "unpack_parts"]

STEPS = ("train", "relay", "sum", "evaluate", "consent", "reveal", "finish")
ITEM_KINDS = ("request", "share")
MAX_ITEMS = 4096
MAX_PARTS = 64
MAX_BODY = 1 << 28
MAX_ROUND = 1 << 32


@dataclass(frozen=True)
class Item:
    """A relayed message: to ``peer`` (from a party) or from ``peer`` (from the server)."""

    peer: str
    kind: str
    data: bytes


@dataclass(frozen=True)
class Envelope:
    """Server <-> party node: one step of the training schedule (see the module doc)."""

    STEP: ClassVar[str] = "envelope"
    session: bytes
    sender: str
    step: str
    round: int
    items: tuple[Item, ...] = ()
    done: bool = False
    body: bytes = b""

    def to_bytes(self) -> bytes:
        w = Writer().str_(self.step).u64(self.round).u32(len(self.items))
        for item in self.items:
            w.str_(item.peer).str_(item.kind).bytes_(item.data)
        w.u32(int(self.done)).bytes_(self.body)
        return CODEC.encode(self.STEP, self.session, self.sender, w.getvalue())

    @classmethod
    def from_bytes(cls, data: bytes, session: bytes, sender: str | None = None) -> Self:
        """Decode; ``sender`` (if given) must be the header's sender."""
        header, r = CODEC.decode(data, step=cls.STEP, session=session)
        if sender is not None and header.sender != sender:
            raise MalformedMessageError(f"an envelope from {header.sender!r}, not {sender!r}")
        step = r.str_(16)
        if step not in STEPS:
            raise MalformedMessageError(f"unknown training step {step!r}")
        rnd = r.u64()
        if rnd >= MAX_ROUND:
            raise MalformedMessageError("a round number out of range")
        items = []
        for _ in range(r.count(MAX_ITEMS, "relayed items")):
            peer, kind = r.str_(), r.str_(16)
            if kind not in ITEM_KINDS:
                raise MalformedMessageError(f"unknown relayed item kind {kind!r}")
            items.append(Item(peer, kind, r.bytes_(MAX_BODY)))
        done = r.u32()
        if done not in (0, 1):
            raise MalformedMessageError("the done flag is 0 or 1")
        body = r.bytes_(MAX_BODY)
        r.end()
        return cls(session, header.sender, step, rnd, tuple(items), bool(done), body)


def pack_parts(parts: Sequence[bytes]) -> bytes:
    """Several byte strings as one body."""
    return Writer().list_(list(parts)).getvalue()


def unpack_parts(body: bytes, expected: int | None = None) -> list[bytes]:
    """The parts of a body (exactly ``expected`` of them, if given)."""
    r = Reader(body, "envelope body")
    parts = r.list_(MAX_PARTS)
    r.end()
    if expected is not None and len(parts) != expected:
        raise MalformedMessageError(f"a body of {len(parts)} parts, expected {expected}")
    return parts
