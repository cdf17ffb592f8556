"""The socket between a node's training ClientApp and its party process: length-prefixed
frames (:func:`privfl.federation.flower.payload.frame`), bounded on read. Kept small: the
ClientApp imports it in every fresh process (Flower starts one per message).

Request ``u64 length || frame([kind, data])``, kind ``step`` or ``close``; answer
``u64 length || frame([status, payload, party])``, status ``ok`` or ``error`` (payload: a
fixed failure code)."""

from __future__ import annotations

import socket
import struct
from pathlib import Path

from privfl.errors import InputError, MalformedMessageError
from privfl.federation.flower.payload import frame, unframe

__all__ = ["MAX_MESSAGE", "ask", "read_frame", "write_frame"]

MAX_MESSAGE = 1 << 32


def _read_exact(conn: socket.socket, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = conn.recv(min(n - got, 1 << 20))
        if not chunk:
            raise MalformedMessageError("the peer closed the socket mid-message")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def read_frame(conn: socket.socket) -> list[bytes]:
    """One length-prefixed frame from ``conn`` (bounded)."""
    (size,) = struct.unpack(">Q", _read_exact(conn, 8))
    if size > MAX_MESSAGE:
        raise MalformedMessageError(f"a message of {size} bytes")
    return unframe(_read_exact(conn, size), "the socket peer")


def write_frame(conn: socket.socket, blobs: list[bytes]) -> None:
    data = frame(blobs)
    conn.sendall(struct.pack(">Q", len(data)) + data)


def ask(path: str | Path, kind: str, data: bytes, timeout: float) -> tuple[str, bytes, str]:
    """The ClientApp's side: send one request to the party process at ``path`` and return
    (status, payload, party)."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.settimeout(timeout)
        try:
            conn.connect(str(path))
        except OSError as exc:
            raise InputError(
                f"no party process listens on {path} (start privfl flower train-node): "
                f"{exc.strerror}"
            ) from None
        write_frame(conn, [kind.encode(), data])
        reply = read_frame(conn)
    if len(reply) != 3:
        raise MalformedMessageError("the party process answered with a malformed frame")
    return reply[0].decode(errors="replace"), reply[1], reply[2].decode(errors="replace")
