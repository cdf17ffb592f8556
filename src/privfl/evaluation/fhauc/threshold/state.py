"""A threshold FHAUC party's progress through one session, for its own node-local storage.

A Flower ClientApp may run each step in a fresh process, so the party's progress (stage,
config, nonce, transcript), its key share and what it needs for the next step (its own key
contributions, the joint key it checked) are exported after every step into the node-local
``context.state`` and restored before the next. These bytes never leave the node; they hold
the party's key share and are parsed with bounded reads. They also carry the party's record
of the sessions it joined and never finished (the last :data:`MAX_ABANDONED` session ids),
so an aggregator that abandons sessions to change the threshold lead leaves a trace on every
node that survives the ClientApp's processes.
"""

from __future__ import annotations

from dataclasses import dataclass

from privfl.errors import MalformedMessageError
from privfl.evaluation.fhauc.party_state import Stage
from privfl.messages import Reader, Writer

MAX_STATE_FIELD = 1 << 27
MAX_ABANDONED = 64

__all__ = ["MAX_ABANDONED", "Stage", "ThresholdState"]


@dataclass(frozen=True)
class ThresholdState:
    stage: str
    config: bytes
    nonce: bytes
    transcript: bytes
    keys: bytes
    own_rows: bytes
    joint: bytes
    lead_seed: bytes = b""  # hash of every party's opened lead secret (the lead's choice)
    abandoned: tuple[str, ...] = ()  # sessions joined and never finished (hex ids, newest last)
    lead_secret: bytes = b""  # this party's r_i, committed to by its join nonce
    commitments: bytes = b""  # every party's join nonce (its commitment), in party order

    def to_bytes(self) -> bytes:
        w = Writer().str_(self.stage)
        for field in (self.config, self.nonce, self.transcript, self.keys, self.own_rows):
            w.bytes_(field)
        w.bytes_(self.joint).bytes_(self.lead_seed)
        w.list_([a.encode("ascii") for a in self.abandoned[-MAX_ABANDONED:]])
        return w.bytes_(self.lead_secret).bytes_(self.commitments).getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> ThresholdState:
        r = Reader(data, "threshold party state")
        stage = r.str_(32)
        fields = [r.bytes_(MAX_STATE_FIELD) for _ in range(6)]
        fields.append(r.bytes_(32))
        raw = r.list_(MAX_ABANDONED)
        secret, commitments = r.bytes_(32), r.bytes_(MAX_STATE_FIELD)
        r.end()
        if any(len(a) > 64 or not a.isascii() for a in raw):
            raise MalformedMessageError("threshold party state: a malformed session id")
        config, nonce, transcript, keys, own_rows, joint, lead_seed = fields
        abandoned = tuple(a.decode("ascii") for a in raw)
        return cls(
            stage, config, nonce, transcript, keys, own_rows, joint, lead_seed, abandoned,
            secret, commitments,
        )  # fmt: skip

    def commitment_list(self, parties: int) -> tuple[bytes, ...]:
        """:attr:`commitments` split per party (empty before the joins were checked)."""
        raw, size = self.commitments, 32
        if raw and len(raw) != size * parties:
            raise MalformedMessageError("threshold party state: malformed commitments")
        return tuple(raw[i : i + size] for i in range(0, len(raw), size))
