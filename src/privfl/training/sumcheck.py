"""The parties' check of each round's encrypted aggregate (messages and pure arithmetic).

The server no longer sends the parties a new encrypted layer: it sends ``T = sum_k D_k``, the
coefficient-wise sum of the parties' encrypted updates, and every party computes the new
layer ``W + T * (1/N)`` itself from the layer it already holds
(:class:`~.verifier.SumVerifier`). Before it does, it checks that ``T`` is the sum of the
updates the parties signed, without seeing any other party's update:

1. with its upload, each party ``k`` signs an :class:`UpdateCommitment`: for every encrypted
   layer the level, the scaling degree and the SHA-256 of ``D_k``'s coefficients;
2. the server sends ``T`` and every party's signed commitment (step ``"sum"``);
3. each party checks every commitment against its pinned roster (one per party, its own
   unchanged, every level and degree equal to its own update's and to ``T``'s), derives the
   challenge ``r`` (uniform coefficients modulo each tower's prime,
   :func:`challenge`) from the session, the round, the layer, ``H(T)`` and the commitments
   (Fiat-Shamir: fixed only once ``T`` and every ``D_k`` are committed), and signs a
   :class:`SumCheck` carrying ``p_k = <r, coeffs(D_k)> mod q`` for every coefficient vector
   (element and tower) of every layer;
4. the server relays every signed check to every party (with the next global model); each
   party checks the signatures, that every check names the same ``H(T)`` and commitments,
   that its own check is in the list unchanged, and that ``sum_k p_k = <r, coeffs(T)> mod q``
   for every vector; only then does it use ``T``.

**Soundness.** If ``T != sum_k D_k`` in some vector, the difference ``d`` is a nonzero
vector modulo ``q`` and ``<r, d> = 0`` for at most a ``1/q`` fraction of uniform ``r``: a
wrong ``T`` passes with probability at most ``1/q_min`` (``q_min`` the smallest tower prime
of the update's level) per attempt. ``r`` depends on ``H(T)``, so a server that wants to
grind must recompute a challenge and a sketch per candidate ``T`` (about ``q_min`` tries).

**What each role learns from the check.** The server learns ``p_k``, linear combinations of a
ciphertext it already holds in full: nothing new. A party learns, of each other party's
update, one uniformly random linear combination per coefficient vector (of 2 x towers x ring
coefficients): a handful of scalars of an RLWE ciphertext, from which it cannot rebuild the
ciphertext nor decrypt it, even holding the joint key. A refusal depends only on signed,
public values. **What it does not stop**: a party colluding with the server can sign any
``p_k`` after seeing ``r`` (its ``D_k`` is then whatever the server wants): the same power as a
deviating party sending a crafted update (poisoning, see ``docs/security/training.md``).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import ClassVar, Self

import numpy as np
import numpy.typing as npt

from privfl.crypto.threshold import CiphertextMessage, ThresholdContext
from privfl.crypto.threshold.keycheck import sketch
from privfl.crypto.threshold.wire import U64, add_mod, check_coefficients, uniform_coefficients
from privfl.errors import MalformedMessageError, ProtocolError
from privfl.messages import Reader, Writer
from privfl.training.messages import CODEC

__all__ = [
    "COMMIT_DOMAIN",
    "SUMCHECK_DOMAIN",
    "LayerDigest",
    "SumCheck",
    "UpdateCommitment",
    "challenge",
    "coefficients",
    "commitments_digest",
    "inner",
    "layer_digest",
    "sum_updates",
]

COMMIT_DOMAIN = "privfl/training/update-commitment/v1"
SUMCHECK_DOMAIN = "privfl/training/sum-check/v1"
LABEL = b"privfl/training/sum-check/v1|"
MAX_LAYERS = 8
MAX_VECTORS = 1 << 10
MAX_ROUND = 1 << 32
DIGEST = 32
SIGNATURE = 64
_LOW30 = np.uint64((1 << 30) - 1)


def _fixed(r: Reader, size: int, what: str) -> bytes:
    raw = r.bytes_(size)
    if len(raw) != size:
        raise MalformedMessageError(f"{what} is {size} bytes")
    return raw


def _round(r: Reader) -> int:
    rnd = r.u64()
    if rnd >= MAX_ROUND:
        raise MalformedMessageError("a round number out of range")
    return rnd


@dataclass(frozen=True)
class LayerDigest:
    """One encrypted layer's update as committed: level, scaling degree, SHA-256 of the
    coefficient payload."""

    level: int
    deg: int
    digest: bytes


def layer_digest(message: CiphertextMessage) -> LayerDigest:
    """The commitment to one encrypted update (or to ``T``)."""
    return LayerDigest(message.level, message.deg, hashlib.sha256(message.payload).digest())


class _Signed:
    """What both signed messages share: the signed bytes (session, sender, body) and the
    framed message (body and signature)."""

    STEP: ClassVar[str]
    session: bytes
    sender: str
    signature: bytes

    def _body(self) -> Writer:
        raise NotImplementedError

    def signed_part(self) -> bytes:
        return Writer().bytes_(self.session).str_(self.sender).getvalue() + self._body().getvalue()

    def to_bytes(self) -> bytes:
        payload = self._body().bytes_(self.signature).getvalue()
        return CODEC.encode(self.STEP, self.session, self.sender, payload)


@dataclass(frozen=True)
class UpdateCommitment(_Signed):
    """Party -> server (with its upload), relayed to every party: the party's signed
    commitment to its encrypted updates of ``round``."""

    STEP: ClassVar[str] = "update-commitment"
    session: bytes
    sender: str
    round: int
    layers: tuple[LayerDigest, ...]
    signature: bytes

    def _body(self) -> Writer:
        w = Writer().u64(self.round).u32(len(self.layers))
        for d in self.layers:
            w.u32(d.level).u32(d.deg).bytes_(d.digest)
        return w

    @classmethod
    def from_bytes(cls, data: bytes, session: bytes) -> Self:
        header, r = CODEC.decode(data, step=cls.STEP, session=session)
        rnd = _round(r)
        layers = []
        for _ in range(r.count(MAX_LAYERS, "committed layers")):
            level, deg = r.u32(), r.u32()
            layers.append(LayerDigest(level, deg, _fixed(r, DIGEST, "a digest")))
        sig = _fixed(r, SIGNATURE, "a signature")
        r.end()
        return cls(session, header.sender, rnd, tuple(layers), sig)


@dataclass(frozen=True)
class SumCheck(_Signed):
    """Party -> server, relayed to every party: ``sketches[l][v] = <r, D_k> mod q_v`` for
    every coefficient vector ``v`` of layer ``l``, bound to ``H(T)`` of every layer and to the
    digest of the commitments the challenge was derived from; signed."""

    STEP: ClassVar[str] = "sum-check"
    session: bytes
    sender: str
    round: int
    totals: tuple[bytes, ...]
    commitments: bytes
    sketches: tuple[tuple[int, ...], ...]
    signature: bytes

    def _body(self) -> Writer:
        w = Writer().u64(self.round).bytes_(self.commitments).u32(len(self.totals))
        for digest, values in zip(self.totals, self.sketches, strict=True):
            w.bytes_(digest).u32(len(values))
            for v in values:
                w.u64(v)
        return w

    @classmethod
    def from_bytes(cls, data: bytes, session: bytes) -> Self:
        header, r = CODEC.decode(data, step=cls.STEP, session=session)
        rnd = _round(r)
        commitments = _fixed(r, DIGEST, "a commitments digest")
        totals, sketches = [], []
        for _ in range(r.count(MAX_LAYERS, "checked layers")):
            totals.append(_fixed(r, DIGEST, "a digest"))
            count = r.count(MAX_VECTORS, "sketch values")
            sketches.append(tuple(r.u64() for _ in range(count)))
        sig = _fixed(r, SIGNATURE, "a signature")
        r.end()
        return cls(
            session, header.sender, rnd, tuple(totals), commitments, tuple(sketches), sig
        )  # fmt: skip


def commitments_digest(commitments: Sequence[UpdateCommitment]) -> bytes:
    """SHA-256 over the commitments' bytes, in the given (roster) order."""
    h = hashlib.sha256(LABEL + b"commitments")
    for c in commitments:
        h.update(hashlib.sha256(c.to_bytes()).digest())
    return h.digest()


def _moduli(ctx: ThresholdContext, message: CiphertextMessage) -> npt.NDArray[np.uint64]:
    return ctx.ciphertext_layout(message.level, message.deg).moduli


def coefficients(ctx: ThresholdContext, message: CiphertextMessage) -> npt.NDArray[np.uint64]:
    """The ``(vectors, ring)`` coefficients of a decoded ciphertext message (checked)."""
    return check_coefficients(_moduli(ctx, message), ctx.ring, message.payload, "a ciphertext")


def sum_updates(
    ctx: ThresholdContext, session: bytes, sender: str, updates: Sequence[CiphertextMessage]
) -> CiphertextMessage:
    """Run by the server: ``T = sum_k D_k``, coefficient-wise modulo each tower (what
    OpenFHE's ``EvalAdd`` computes at one level and degree). Refuses updates at different
    levels or degrees (the schedule fixes one: a mismatch is a deviating party)."""
    if not updates:
        raise ProtocolError("no update to sum")
    shapes = {(u.level, u.deg) for u in updates}
    if len(shapes) != 1:
        raise ProtocolError(f"encrypted updates at different levels or degrees: {sorted(shapes)}")
    moduli = _moduli(ctx, updates[0])
    total = coefficients(ctx, updates[0]).copy()
    for u in updates[1:]:
        total = add_mod(total, coefficients(ctx, u), moduli)
    first = updates[0]
    return CiphertextMessage(session, sender, first.level, first.deg, total.tobytes())


def challenge(
    ctx: ThresholdContext,
    session: bytes,
    rnd: int,
    layer: int,
    total: CiphertextMessage,
    commitments: bytes,
) -> npt.NDArray[np.uint64]:
    """The Fiat-Shamir challenge ``r``: uniform coefficients modulo each vector's prime,
    derived from the session, the round, the layer, ``H(T)`` and the commitments' digest."""
    digest = layer_digest(total).digest
    seed = hashlib.sha256(
        LABEL + session + Writer().u64(rnd).u32(layer).getvalue() + digest + commitments
    ).digest()
    moduli = _moduli(ctx, total)
    raw = uniform_coefficients(seed, "sum-check", moduli, ctx.ring)
    return np.frombuffer(raw, dtype=U64).reshape(len(moduli), ctx.ring)


def inner(
    values: npt.NDArray[np.uint64], moduli: npt.NDArray[np.uint64], r: npt.NDArray[np.uint64]
) -> tuple[int, ...]:
    """``<r_v, values_v> mod q_v`` for every vector ``v`` (exact: ``r`` split in 30-bit
    halves, each half-product below ``2^60``)."""
    low = sketch(values, moduli, r & _LOW30)
    high = sketch(values, moduli, r >> np.uint64(30))
    return tuple((lo + (hi << 30)) % int(q) for lo, hi, q in zip(low, high, moduli, strict=True))
