"""Protocol bytes inside Flower records.

Every protocol message travels as one ``uint8`` array in an ``ArrayRecord`` named
``"privfl"`` (ciphertexts are far larger than a ``ConfigRecord`` value should be); small
metadata (party name, status, error reason) travels in a ``ConfigRecord`` named ``"meta"``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from flwr.app import Array, ArrayRecord, ConfigRecord, RecordDict

from privfl.errors import MalformedMessageError

BLOBS = "privfl"
META = "meta"


def pack(blobs: Sequence[bytes] = (), **meta: Any) -> RecordDict:
    """A RecordDict with the blobs (in order) and string/int metadata."""
    arrays = {
        f"blob-{i:04d}": Array(np.frombuffer(b, dtype=np.uint8).copy()) for i, b in enumerate(blobs)
    }
    content = RecordDict()
    content[BLOBS] = ArrayRecord(arrays)
    content[META] = ConfigRecord({k: v for k, v in meta.items() if v is not None})
    return content


def unpack(content: RecordDict, who: str = "peer") -> tuple[list[bytes], dict[str, Any]]:
    """Inverse of :func:`pack`; a message without the expected records is malformed."""
    try:
        record = content[BLOBS]
        meta = dict(content[META])
    except KeyError as exc:
        raise MalformedMessageError(f"message from {who} lacks the privfl records") from exc
    if not isinstance(record, ArrayRecord):
        raise MalformedMessageError(f"message from {who} has a malformed payload record")
    blobs = []
    for key in sorted(record.keys()):
        arr = record[key].numpy()
        if arr.dtype != np.uint8 or arr.ndim != 1:
            raise MalformedMessageError(f"message from {who} carries a non-byte array {key!r}")
        blobs.append(arr.tobytes())
    return blobs, meta
