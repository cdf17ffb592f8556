"""Wire format shared by every protocol message.

Every message is ``MAGIC | header | payload`` where the header carries the protocol name,
its version, the protocol step, the 16-byte session id and the sender's name. Fields are
length-prefixed (``u32`` big-endian). Decoding is strict: a truncated buffer, trailing bytes,
a foreign protocol, a stale session or an unexpected step each raise a typed
:class:`~privfl.errors.ProtocolError` before any payload is interpreted.

Each protocol frames its messages through one :class:`Codec` (its name and version), and
every session id comes from :func:`new_session_id`. Sizes read from the wire are bounded
before anything is allocated: :meth:`Reader.count` for item counts, :meth:`Reader.uint` for
big integers (parsed here, never by a general deserialiser).
"""

from __future__ import annotations

import secrets
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from privfl.errors import (
    MalformedMessageError,
    UnexpectedStepError,
    WrongProtocolError,
    WrongSessionError,
)

MAGIC = b"PFL\x01"
SESSION_ID_BYTES = 16
MAX_TEXT_BYTES = 1024


def new_session_id() -> bytes:
    """A fresh random 16-byte session id (the only place session ids are made)."""
    return secrets.token_bytes(SESSION_ID_BYTES)


@dataclass(frozen=True)
class Header:
    """Who sent a message, for which protocol/version/step and which session."""

    protocol: str
    version: int
    step: str
    session: bytes
    sender: str

    def __post_init__(self) -> None:
        if len(self.session) != SESSION_ID_BYTES:
            raise MalformedMessageError(f"session id must be {SESSION_ID_BYTES} bytes")


class Writer:
    """Accumulates length-prefixed fields."""

    def __init__(self) -> None:
        self._parts: list[bytes] = []

    def bytes_(self, data: bytes) -> Writer:
        self._parts.append(struct.pack(">I", len(data)))
        self._parts.append(data)
        return self

    def str_(self, text: str) -> Writer:
        return self.bytes_(text.encode("utf-8"))

    def u32(self, value: int) -> Writer:
        self._parts.append(struct.pack(">I", value))
        return self

    def u64(self, value: int) -> Writer:
        self._parts.append(struct.pack(">Q", value))
        return self

    def f64(self, value: float) -> Writer:
        self._parts.append(struct.pack(">d", value))
        return self

    def uint(self, value: int) -> Writer:
        """A non-negative integer of any size: length-prefixed big-endian bytes."""
        value = int(value)
        if value < 0:
            raise ValueError("uint fields hold non-negative integers")
        return self.bytes_(value.to_bytes((value.bit_length() + 7) // 8, "big"))

    def list_(self, items: Sequence[bytes]) -> Writer:
        self.u32(len(items))
        for item in items:
            self.bytes_(item)
        return self

    def getvalue(self) -> bytes:
        return b"".join(self._parts)


class Reader:
    """Reads the fields a :class:`Writer` wrote; every overrun is a MalformedMessageError."""

    def __init__(self, data: bytes | memoryview, what: str = "message") -> None:
        self._data = memoryview(data)
        self._pos = 0
        self._what = what

    def _take(self, n: int) -> memoryview:
        if n < 0 or self._pos + n > len(self._data):
            raise MalformedMessageError(
                f"{self._what} is truncated: needed {n} more bytes at offset {self._pos}, "
                f"only {len(self._data) - self._pos} left"
            )
        chunk = self._data[self._pos : self._pos + n]
        self._pos += n
        return chunk

    def u32(self) -> int:
        return int(struct.unpack(">I", self._take(4))[0])

    def u64(self) -> int:
        return int(struct.unpack(">Q", self._take(8))[0])

    def f64(self) -> float:
        return float(struct.unpack(">d", self._take(8))[0])

    def f64_finite(self, what: str) -> float:
        """A float that must be finite (NaN and infinities are malformed)."""
        value = self.f64()
        if value != value or value in (float("inf"), float("-inf")):
            raise MalformedMessageError(f"{self._what}: {what} is not a finite number")
        return value

    def view(self, max_bytes: int) -> memoryview:
        """A length-prefixed field as a view into the message, not a copy (for large fields
        that are decoded at once, e.g. packed coefficients)."""
        n = self.u32()
        if n > max_bytes:
            raise MalformedMessageError(
                f"{self._what} has a {n}-byte field where at most {max_bytes} are allowed"
            )
        return self._take(n)

    def bytes_(self, max_bytes: int | None = None) -> bytes:
        n = self.u32()
        if max_bytes is not None and n > max_bytes:
            raise MalformedMessageError(
                f"{self._what} has a {n}-byte field where at most {max_bytes} are allowed"
            )
        return bytes(self._take(n))

    def str_(self, max_bytes: int = MAX_TEXT_BYTES) -> str:
        raw = self.bytes_(max_bytes)
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedMessageError(f"{self._what} has an invalid text field") from exc

    def count(self, limit: int, what: str) -> int:
        """A ``u32`` item count, refused above ``limit`` before anything is allocated."""
        n = self.u32()
        if n > limit:
            raise MalformedMessageError(f"{self._what} claims {n} {what} (at most {limit})")
        return n

    def uint(self, max_bits: int, what: str = "integer") -> int:
        """A non-negative integer written by :meth:`Writer.uint`, of at most ``max_bits``
        bits (checked on the length before the bytes are converted); no leading zero byte."""
        raw = self.bytes_((max_bits + 7) // 8)
        if raw[:1] == b"\x00":
            raise MalformedMessageError(f"{self._what}: {what} has a non-canonical encoding")
        value = int.from_bytes(raw, "big")
        if value.bit_length() > max_bits:
            raise MalformedMessageError(f"{self._what}: {what} exceeds {max_bits} bits")
        return value

    def list_(self, max_items: int = 1 << 20) -> list[bytes]:
        return [self.bytes_() for _ in range(self.count(max_items, "items"))]

    def end(self) -> None:
        if self._pos != len(self._data):
            raise MalformedMessageError(
                f"{self._what} has {len(self._data) - self._pos} unexpected trailing bytes"
            )


def encode_message(header: Header, payload: bytes) -> bytes:
    """Frame ``payload`` with ``header``."""
    w = Writer()
    w.str_(header.protocol).u32(header.version).str_(header.step)
    w.bytes_(header.session).str_(header.sender).bytes_(payload)
    return MAGIC + w.getvalue()


def decode_message(
    data: bytes,
    *,
    protocol: str,
    version: int,
    step: str | None = None,
    session: bytes | None = None,
) -> tuple[Header, bytes]:
    """Parse and check a framed message; returns its header and payload bytes.

    Raises WrongProtocolError, UnexpectedStepError, WrongSessionError or
    MalformedMessageError, in that order of checking, before the payload is touched.
    """
    header, payload = _decode(data, protocol, version, step, session)
    return header, bytes(payload)


def _decode(
    data: bytes | memoryview,
    protocol: str,
    version: int,
    step: str | None,
    session: bytes | None,
) -> tuple[Header, memoryview]:
    """:func:`decode_message` with the payload as a view into ``data`` (copied first unless
    it is ``bytes`` or a read-only view of ``bytes``: what is read cannot change), not a copy."""
    if not isinstance(data, bytes | bytearray | memoryview):
        raise MalformedMessageError(f"expected bytes, got {type(data).__name__}")
    view = memoryview(data)
    if not (view.readonly and isinstance(view.obj, bytes) and view.format == "B"):
        view = memoryview(bytes(data))  # a view of immutable bytes cannot change: no copy
    if len(view) < len(MAGIC) or view[: len(MAGIC)] != MAGIC:
        raise MalformedMessageError("not a privfl message (bad magic bytes)")
    r = Reader(view[len(MAGIC) :])
    proto = r.str_()
    ver = r.u32()
    if proto != protocol or ver != version:
        raise WrongProtocolError(f"expected a {protocol} v{version} message, got {proto!r} v{ver}")
    st = r.str_()
    if step is not None and st != step:
        raise UnexpectedStepError(f"expected a {protocol} '{step}' message, got '{st}'")
    sess = r.bytes_()
    if len(sess) != SESSION_ID_BYTES:
        raise MalformedMessageError("bad session id length")
    if session is not None and sess != session:
        raise WrongSessionError(
            f"message is from session {sess.hex()[:8]}..., this run is {session.hex()[:8]}..."
        )
    sender = r.str_()
    payload = r.view(len(view))
    r.end()
    return Header(proto, ver, st, sess, sender), payload


@dataclass(frozen=True)
class Codec:
    """Frames the messages of one protocol (its name and version fixed once)."""

    protocol: str
    version: int

    def encode(self, step: str, session: bytes, sender: str, payload: bytes) -> bytes:
        return encode_message(Header(self.protocol, self.version, step, session, sender), payload)

    def decode(
        self, data: bytes | memoryview, step: str | None = None, session: bytes | None = None
    ) -> tuple[Header, Reader]:
        """Check the header (protocol, version, step, session) and return a strict reader
        over the payload (a view of ``data``, not a copy), named after the step for error
        messages."""
        header, payload = _decode(data, self.protocol, self.version, step, session)
        return header, Reader(payload, f"{self.protocol} {header.step}")
