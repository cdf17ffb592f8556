"""Protocol bytes inside Flower records.

All protocol messages of one Flower message travel as *one* ``uint8`` array (key
``"frames"``) in an ``ArrayRecord`` named ``"privfl"`` (ciphertexts are far larger than a
``ConfigRecord`` value should be): ``u32 count``, ``count`` times ``u32 length``, then the
messages back to back. One array, not one per message: Flower stores and transfers every
array as its own content-addressed object (one request each between SuperLink, SuperNode and
ClientApp), and two identical messages in one batch would be one object referenced twice,
which Flower 1.41 could leave a ClientApp waiting for forever. Small metadata (party name,
status, error reason) travels in a ``ConfigRecord`` named ``"meta"``.

:func:`unpack` reads every byte from another role as hostile: the counts and lengths are
bounded and must add up to exactly the array's size.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

from privfl.errors import MalformedMessageError

BLOBS = "privfl"
FRAMES = "frames"
META = "meta"
MAX_BLOBS = 1 << 16


def frame(blobs: Sequence[bytes]) -> bytes:
    """``u32 count || count x u32 length || blobs``."""
    if len(blobs) > MAX_BLOBS:
        raise ValueError(f"{len(blobs)} messages in one Flower message (at most {MAX_BLOBS})")
    head = struct.pack(f">{len(blobs) + 1}I", len(blobs), *(len(b) for b in blobs))
    return head + b"".join(blobs)


def unframe(data: bytes, who: str = "peer") -> list[bytes]:
    """Inverse of :func:`frame`; anything else is a :class:`MalformedMessageError`."""
    if len(data) < 4:
        raise MalformedMessageError(f"message from {who} has a truncated payload")
    (count,) = struct.unpack_from(">I", data, 0)
    if count > MAX_BLOBS or 4 + 4 * count > len(data):
        raise MalformedMessageError(f"message from {who} announces {count} messages")
    lengths = struct.unpack_from(f">{count}I", data, 4)
    offset = 4 + 4 * count
    if offset + sum(lengths) != len(data):
        raise MalformedMessageError(f"message from {who} has a payload of the wrong size")
    out = []
    for n in lengths:
        out.append(data[offset : offset + n])
        offset += n
    return out


def pack(blobs: Sequence[bytes] = (), **meta: Any) -> RecordDict:
    """A RecordDict with the blobs (in order, one array) and string/int metadata."""
    content = RecordDict()
    framed = np.frombuffer(frame(blobs), dtype=np.uint8).copy()
    content[BLOBS] = ArrayRecord({FRAMES: Array(framed)})
    content[META] = ConfigRecord({k: v for k, v in meta.items() if v is not None})
    return content


def unpack(content: RecordDict, who: str = "peer") -> tuple[list[bytes], dict[str, Any]]:
    """Inverse of :func:`pack`; a message without the expected records is malformed."""
    try:
        record = content[BLOBS]
        meta = dict(content[META])
    except KeyError as exc:
        raise MalformedMessageError(f"message from {who} lacks the privfl records") from exc
    if not isinstance(record, ArrayRecord) or list(record.keys()) != [FRAMES]:
        raise MalformedMessageError(f"message from {who} has a malformed payload record")
    arr = record[FRAMES].numpy()
    if arr.dtype != np.uint8 or arr.ndim != 1:
        raise MalformedMessageError(f"message from {who} carries a non-byte array")
    return unframe(arr.tobytes(), who), meta
