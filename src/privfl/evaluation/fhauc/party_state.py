"""An FHAUC party's progress through one session (:class:`SessionState`), for its
own node-local storage between steps (a Flower ClientApp may be a fresh process per message):
stage, the config it joined, its nonce, the transcript and its own two totals. Nothing secret
beyond those totals; parsed with bounded reads. With single keys these are the whole node-local
state; with threshold keys :class:`~.threshold.state.ThresholdState` stores them with the key
share."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from privfl.errors import MalformedMessageError
from privfl.evaluation.fhauc.messages import NONCE_BYTES
from privfl.messages import Reader, Writer

__all__ = ["SessionState", "Stage"]


class Stage(StrEnum):
    """A party's progress through one session (single keys: joined, uploaded, finished)."""

    JOINED = "joined"
    KEYGEN = "keygen"
    KEYCHECK = "keycheck"
    UPLOADED = "uploaded"
    DECRYPTED = "decrypted"
    FINISHED = "finished"


@dataclass(frozen=True)
class SessionState:
    """Where a party is in its current session (what it needs for the next step)."""

    stage: Stage
    config: bytes
    nonce: bytes
    transcript: bytes = b""
    positives: int = 0
    negatives: int = 0

    def to_bytes(self) -> bytes:
        w = Writer().str_(self.stage.value).bytes_(self.config).bytes_(self.nonce)
        return w.bytes_(self.transcript).u64(self.positives).u64(self.negatives).getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> SessionState:
        r = Reader(data, "party session state")
        try:
            stage = Stage(r.str_(16))
        except ValueError:
            raise MalformedMessageError("party session state has an unknown stage") from None
        out = cls(stage, r.bytes_(), r.bytes_(NONCE_BYTES), r.bytes_(32), r.u64(), r.u64())
        r.end()
        return out
