"""A threshold FHAUC party's progress through one session, for its own node-local storage.

A Flower ClientApp may run each step in a fresh process, so the party's progress (stage,
config, nonce, transcript), its key share and what it needs for the next step (its own key
contributions, the joint key it checked) are exported after every step into the node-local
``context.state`` and restored before the next. These bytes never leave the node; they hold
the party's key share and are parsed with bounded reads.
"""

from __future__ import annotations

from dataclasses import dataclass

from privfl.messages import Reader, Writer

MAX_STATE_FIELD = 1 << 27


@dataclass(frozen=True)
class ThresholdState:
    stage: str
    config: bytes
    nonce: bytes
    transcript: bytes
    keys: bytes
    own_rows: bytes
    joint: bytes
    lead_seed: bytes = b""  # digest of the checked joint key (the lead's choice)

    def to_bytes(self) -> bytes:
        w = Writer().str_(self.stage)
        for field in (self.config, self.nonce, self.transcript, self.keys, self.own_rows):
            w.bytes_(field)
        return w.bytes_(self.joint).bytes_(self.lead_seed).getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> ThresholdState:
        r = Reader(data, "threshold party state")
        stage = r.str_(32)
        fields = [r.bytes_(MAX_STATE_FIELD) for _ in range(6)]
        fields.append(r.bytes_(32))
        r.end()
        return cls(stage, *fields)
