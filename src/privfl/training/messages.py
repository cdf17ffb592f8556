"""Messages of partially encrypted training (SmartCryptNN) that are not threshold-CKKS objects.

Ciphertexts (the encrypted layers and their updates), decryption and bootstrapping requests
and shares travel as :mod:`privfl.crypto.threshold.messages`. What this module adds is the
plaintext part of the model: :class:`PlainLayers`, the weights and biases of the plaintext
layers (server -> party: the global model; party -> server: the party's model after its local
epochs). Decoding checks the header, the round, the number of layers and every shape against
what the receiver expects *before* reading any array, then that every value is finite; only
:class:`~privfl.errors.ProtocolError` subclasses come out.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Self

import numpy as np

from privfl._typing import FloatArray
from privfl.errors import MalformedMessageError, ProtocolError
from privfl.messages import Codec, Writer

__all__ = ["CODEC", "GlobalPlainLayers", "PartyPlainLayers", "PlainLayers"]

CODEC = Codec("smartcryptnn", 1)
MAX_LAYERS = 64
MAX_WIDTH = 1 << 16


@dataclass(frozen=True)
class PlainLayers:
    """The plaintext layers' weights (``out x in``) and biases, for round ``round``."""

    STEP: ClassVar[str] = "plain-layers"
    session: bytes
    sender: str
    round: int
    weights: tuple[FloatArray, ...]
    biases: tuple[FloatArray, ...]

    def to_bytes(self) -> bytes:
        w = Writer().u64(self.round).u32(len(self.weights))
        for wt, b in zip(self.weights, self.biases, strict=True):
            rows, cols = wt.shape
            w.u32(rows).u32(cols)
            w.bytes_(np.ascontiguousarray(wt, dtype=">f8").tobytes())
            w.bytes_(np.ascontiguousarray(b, dtype=">f8").tobytes())
        return CODEC.encode(self.STEP, self.session, self.sender, w.getvalue())

    @classmethod
    def from_bytes(
        cls,
        data: bytes,
        session: bytes,
        expected_round: int,
        shapes: Sequence[tuple[int, int]],
    ) -> Self:
        """Decode and check against the round and the layer ``shapes`` the receiver expects."""
        header, r = CODEC.decode(data, step=cls.STEP, session=session)
        rnd = r.u64()
        if rnd != expected_round:
            raise ProtocolError(f"{cls.STEP} of round {rnd}, expected round {expected_round}")
        count = r.count(MAX_LAYERS, "layers")
        if count != len(shapes):
            raise MalformedMessageError(f"{cls.STEP}: {count} layers, expected {len(shapes)}")
        weights, biases = [], []
        for rows_cols in shapes:
            rows, cols = r.u32(), r.u32()
            if (rows, cols) != tuple(rows_cols) or max(rows, cols) > MAX_WIDTH:
                raise MalformedMessageError(
                    f"{cls.STEP}: a {rows}x{cols} layer where {rows_cols} was expected"
                )
            weights.append(_floats(r.bytes_(8 * rows * cols), rows * cols).reshape(rows, cols))
            biases.append(_floats(r.bytes_(8 * rows), rows))
        r.end()
        return cls(session, header.sender, rnd, tuple(weights), tuple(biases))


def _floats(raw: bytes, count: int) -> FloatArray:
    if len(raw) != 8 * count:
        raise MalformedMessageError(f"expected {count} float64 values, got {len(raw)} bytes")
    try:
        values = np.frombuffer(raw, dtype=">f8").astype(np.float64)
    except (ValueError, struct.error) as exc:  # pragma: no cover - length checked above
        raise MalformedMessageError("bad float64 array") from exc
    if not np.all(np.isfinite(values)):
        raise MalformedMessageError("a weight or bias is not a finite number")
    return values


@dataclass(frozen=True)
class GlobalPlainLayers(PlainLayers):
    """Server -> party: the averaged plaintext layers at the start of a round."""

    STEP: ClassVar[str] = "global-plain-layers"


@dataclass(frozen=True)
class PartyPlainLayers(PlainLayers):
    """Party -> server: the party's plaintext layers after its local epochs of a round."""

    STEP: ClassVar[str] = "party-plain-layers"
