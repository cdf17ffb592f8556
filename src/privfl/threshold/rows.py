"""Coefficient-row helpers shared by the threshold roles (:mod:`~privfl.threshold.party`,
:mod:`~privfl.threshold.server`): OpenFHE objects as rows of ``uint64`` coefficients modulo each
RNS prime, their sums, and the checks every fusing role runs on a set of decryption shares."""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from privfl.crypto.threshold import messages as tm
from privfl.crypto.threshold import wire
from privfl.crypto.threshold.context import KeyShape, ThresholdContext
from privfl.errors import ProtocolError, UnknownPartyError
from privfl.threshold import keystore


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


def install_evaluation_keys(
    ctx: ThresholdContext, session: bytes, keys: tm.EvaluationKeys, owner: object
) -> keystore.Lease:
    """Insert the joint relinearisation and automorphism keys into OpenFHE's key stores (once
    per process: several roles of one session simulated in one process share them) and return
    ``owner``'s lease on them (:mod:`~privfl.threshold.keystore`): the keys leave the stores
    when the last lease on the session's tag is released."""
    tag = session.hex()
    shape = ctx.automorphism_shape

    def mult() -> Any:
        return ctx.load("eval_key", ctx.switch_key_shape.layout, keys.mult_key, tag)

    automorphism = None
    if shape is not None:
        automorphism = functools.partial(_automorphism_keys, ctx, shape, session, keys)
    return keystore.install(ctx, tag, mult, automorphism, owner)


def _automorphism_keys(
    ctx: ThresholdContext, shape: KeyShape, session: bytes, keys: tm.EvaluationKeys
) -> Any:
    b = payload_rows(keys.automorphism_keys, len(shape.b_index), ctx.ring)
    payload = shape.merge(ctx.crp(shape, session, "automorphism"), b)
    return ctx.load("eval_key_map", shape.layout, payload, session.hex())


def sum_rows(
    payloads: Sequence[bytes], moduli: npt.NDArray[np.uint64], ring: int
) -> npt.NDArray[np.uint64]:
    """Coefficient-wise sum modulo each vector's prime (RNS addition of polynomials)."""
    total = np.zeros((len(moduli), ring), dtype=wire.U64)
    for p in payloads:
        wire.add_mod_into(total, payload_rows(p, len(moduli), ring), moduli)
    return total
