"""Coefficient-row helpers shared by the threshold roles (:mod:`~privfl.threshold.party`,
:mod:`~privfl.threshold.server`): OpenFHE objects as rows of ``uint64`` coefficients modulo each
RNS prime, their sums, and the checks every fusing role runs on a set of decryption shares."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from privfl.crypto.threshold import messages as tm
from privfl.crypto.threshold import wire
from privfl.crypto.threshold.context import ThresholdContext
from privfl.errors import ProtocolError, UnknownPartyError


def coefficient_rows(shape_layout: wire.Layout, payload: bytes) -> npt.NDArray[np.uint64]:
    return np.frombuffer(payload, dtype=wire.U64).reshape(shape_layout.vectors, shape_layout.ring)


def payload_rows(payload: bytes, vectors: int, ring: int) -> npt.NDArray[np.uint64]:
    return np.frombuffer(payload, dtype=wire.U64).reshape(vectors, ring)


def check_senders(
    ctx: ThresholdContext,
    shares: Sequence[tm.DecryptionShare],
    request_id: int,
    expected: int,
    exclude: str | None = None,
) -> None:
    names = [s.sender for s in shares]
    if len(set(names)) != len(names) or exclude in names:
        raise UnknownPartyError("duplicate decryption shares (or the fuser's own) were given")
    if any(s.request_id != request_id for s in shares):
        raise ProtocolError("a decryption share answers another request")
    if len(shares) != expected:
        raise ProtocolError(
            f"{len(shares)} decryption shares for request {request_id}, expected {expected}: "
            f"all {ctx.parties} parties must take part"
        )


def key_installed(getter: Any, tag: str) -> bool:
    """Whether OpenFHE's process-global store already holds keys under ``tag`` (several
    roles of one session simulated in one process install the same public keys once)."""
    try:
        getter(tag)
    except RuntimeError:
        return False
    return True


def install_evaluation_keys(ctx: ThresholdContext, session: bytes, keys: tm.EvaluationKeys) -> None:
    """Insert the joint relinearisation and automorphism keys into OpenFHE's key stores."""
    tag, cc = session.hex(), ctx.cc
    if not key_installed(cc.GetEvalMultKeyVector, tag):
        cc.InsertEvalMultKey(
            [ctx.load("eval_key", ctx.switch_key_shape.layout, keys.mult_key, tag)]
        )
    shape = ctx.automorphism_shape
    if shape is not None and not key_installed(cc.GetEvalAutomorphismKeyMap, tag):
        b = payload_rows(keys.automorphism_keys, len(shape.b_index), ctx.ring)
        payload = shape.merge(ctx.crp(shape, session, "automorphism"), b)
        cc.InsertEvalAutomorphismKey(ctx.load("eval_key_map", shape.layout, payload, tag), tag)


def sum_rows(
    payloads: Sequence[bytes], moduli: npt.NDArray[np.uint64], ring: int
) -> npt.NDArray[np.uint64]:
    """Coefficient-wise sum modulo each vector's prime (RNS addition of polynomials)."""
    total = np.zeros((len(moduli), ring), dtype=wire.U64)
    for p in payloads:
        wire.add_mod_into(total, payload_rows(p, len(moduli), ring), moduli)
    return total
