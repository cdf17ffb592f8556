"""The parties' check of a joint threshold-CKKS key (pure arithmetic, used by threshold FHAUC
and by encrypted training alike).

Before a party encrypts anything under the joint key the server returned (or computes its
relinearisation share from the joint switching key), it checks that key against every party's
signed *sketch*: a random linear combination, per RNS row, of the ``b`` halves that party
contributed to the joint public and switching keys, with coefficients derived from the session
and the joint key's bytes (fixed before anyone computes a sketch). The ``b`` halves are summed
coefficient-wise, so the sketches of honest contributions add up to the sketch of the joint
key; a server that substitutes a key it knows, drops or alters a contribution, or gives
parties different joint keys, is caught except with probability about ``2^-30`` per row. A
sketch reveals ``rows`` random linear combinations of an RLWE sample's ``b`` half (public
material: the joint ``b`` is sent in the clear). The signed messages carrying the sketches are
the protocols' own (signature and session binding); this module holds only the arithmetic.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from privfl.crypto.prng import SharedRandomness
from privfl.crypto.threshold.context import ThresholdContext
from privfl.crypto.threshold.messages import JointPublicKeys
from privfl.crypto.threshold.wire import U64
from privfl.errors import MalformedMessageError, ProtocolError

__all__ = [
    "SKETCH_BITS",
    "joint_rows",
    "own_sketch",
    "row_moduli",
    "sketch",
    "sketch_coefficients",
    "verify_sketches",
]

LABEL = b"privfl/threshold-keycheck/v1|"
SKETCH_BITS = 30
_LOW30 = np.uint64((1 << 30) - 1)
_LOW32 = np.uint64((1 << 32) - 1)


def sketch_coefficients(
    session: bytes, joint: bytes, rows: int, ring: int
) -> npt.NDArray[np.uint64]:
    """Random ``SKETCH_BITS``-bit coefficients, derived from the joint key's bytes (fixed
    before anyone computes a sketch) and the threshold session."""
    seed = hashlib.sha256(LABEL + b"sketch|" + session + hashlib.sha256(joint).digest()).digest()
    raw = SharedRandomness(seed, "key-sketch").uniform_bits(SKETCH_BITS, rows * ring)
    return raw.astype(np.uint64).reshape(rows, ring)


def _wide_sum(x: npt.NDArray[np.uint64]) -> int:
    """Exact sum of values below ``2^62`` (no uint64 overflow)."""
    return (int(np.sum(x >> np.uint64(32))) << 32) + int(np.sum(x & _LOW32))


def sketch(
    rows: npt.NDArray[np.uint64], moduli: npt.NDArray[np.uint64], coeffs: npt.NDArray[np.uint64]
) -> tuple[int, ...]:
    """``sum_j coeffs[i, j] * rows[i, j] mod q_i`` for every row ``i`` (exact: the products
    are split in 30-bit halves, each below ``2^61``)."""
    out = []
    for row, q, r in zip(rows, moduli, coeffs, strict=True):
        qq = np.uint64(q)
        low = (r * (row & _LOW30)) % qq
        high = (r * (row >> np.uint64(30))) % qq
        out.append((_wide_sum(low) + (_wide_sum(high) << 30)) % int(q))
    return tuple(out)


def joint_rows(
    ctx: ThresholdContext, public_key: bytes, switch_key: bytes
) -> npt.NDArray[np.uint64]:
    """The ``b`` rows of a public-key and a switching-key payload, stacked."""
    pk, sw = ctx.public_key_shape, ctx.switch_key_shape
    a = np.frombuffer(public_key, dtype=U64).reshape(len(pk.b_index), ctx.ring)
    b = np.frombuffer(switch_key, dtype=U64).reshape(len(sw.b_index), ctx.ring)
    return np.concatenate([a, b])


def row_moduli(ctx: ThresholdContext) -> npt.NDArray[np.uint64]:
    """The modulus of every row of :func:`joint_rows`."""
    return np.concatenate([ctx.public_key_shape.b_moduli, ctx.switch_key_shape.b_moduli])


def own_sketch(
    ctx: ThresholdContext, session: bytes, own: npt.NDArray[np.uint64], joint_bytes: bytes
) -> tuple[int, ...]:
    """Run by a party on receiving the joint key's bytes: the sketch of its own contribution
    ``own`` (its :func:`joint_rows`), with coefficients bound to ``joint_bytes``."""
    coeffs = sketch_coefficients(session, joint_bytes, own.shape[0], ctx.ring)
    return sketch(own, row_moduli(ctx), coeffs)


def verify_sketches(
    ctx: ThresholdContext,
    session: bytes,
    parties: Sequence[str],
    sketches: Sequence[tuple[str, tuple[int, ...]]],
    joint: JointPublicKeys,
    joint_bytes: bytes,
) -> None:
    """Run by every party before it uses ``joint`` (whose wire bytes are ``joint_bytes``):
    refuse (``ProtocolError``) unless ``sketches`` (sender, sketch; signatures already
    checked by the caller) hold exactly one sketch of each of ``parties`` and they add up to
    the sketch of the joint key. Learns only whether the check passed."""
    seen: dict[str, tuple[int, ...]] = {}
    for sender, values in sketches:
        if sender not in parties or sender in seen:
            raise ProtocolError(f"unexpected or repeated key check from {sender!r}")
        seen[sender] = values
    missing = [p for p in parties if p not in seen]
    if missing:
        raise ProtocolError(f"no key check from {missing}")
    moduli = row_moduli(ctx)
    rows = joint_rows(ctx, joint.public_key, joint.switch_key)
    coeffs = sketch_coefficients(session, joint_bytes, rows.shape[0], ctx.ring)
    expected = sketch(rows, moduli, coeffs)
    if any(len(s) != len(expected) for s in seen.values()):
        raise MalformedMessageError("a key check has the wrong number of rows")
    total = [sum(s[i] for s in seen.values()) % int(q) for i, q in enumerate(moduli)]
    if tuple(total) != expected:
        raise ProtocolError(
            "the joint key is not the sum of the parties' contributions (the server altered "
            "or substituted it, dropped a contribution, or gave parties different keys); "
            "nothing was encrypted under it"
        )
