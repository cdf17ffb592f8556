"""Wire format shared by every protocol message.

Every message is ``MAGIC | header | payload`` where the header carries the protocol name,
its version, the protocol step, the 16-byte session id and the sender's name. Fields are
length-prefixed (``u32`` big-endian). Decoding is strict: a truncated buffer, trailing bytes,
a foreign protocol, a stale session or an unexpected step each raise a typed
:class:`~privfl.errors.ProtocolError` before any payload is interpreted.
"""

from __future__ import annotations

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

    def list_(self, items: Sequence[bytes]) -> Writer:
        self.u32(len(items))
        for item in items:
            self.bytes_(item)
        return self

    def getvalue(self) -> bytes:
        return b"".join(self._parts)


class Reader:
    """Reads the fields a :class:`Writer` wrote; every overrun is a MalformedMessageError."""

    def __init__(self, data: bytes, what: str = "message") -> None:
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

    def bytes_(self) -> bytes:
        return bytes(self._take(self.u32()))

    def str_(self) -> str:
        raw = self.bytes_()
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise MalformedMessageError(f"{self._what} has an invalid text field") from exc

    def list_(self, max_items: int = 1 << 20) -> list[bytes]:
        count = self.u32()
        if count > max_items:
            raise MalformedMessageError(f"{self._what} claims {count} items (max {max_items})")
        return [self.bytes_() for _ in range(count)]

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
    if not isinstance(data, bytes | bytearray | memoryview):
        raise MalformedMessageError(f"expected bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) < len(MAGIC) or data[: len(MAGIC)] != MAGIC:
        raise MalformedMessageError("not a privfl message (bad magic bytes)")
    r = Reader(data[len(MAGIC) :])
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
    payload = r.bytes_()
    r.end()
    return Header(proto, ver, st, sess, sender), payload
