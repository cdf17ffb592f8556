"""Re-randomising a joint step's ``c1`` with an encryption of zero derived from a public seed.

Why: a decryption share is ``s_i c1 + e_i`` and a bootstrapping share ``s_i c1 - M_i``. When
``c1`` is an honest ciphertext's (pseudo-random) second element, that is an RLWE sample and
reveals nothing about the key share ``s_i``. When the *requester* chooses ``c1`` (a large
constant ``C``, say), ``s_i`` falls out by rounding ``(s_i C + e_i) / C``: the flooding noise
(about 2^39) is far below ``C`` (up to 2^117). A party cannot tell an honest ``c1`` from a
crafted one (the ciphertext comes from the requester's private rows), so it must make sure the
``c1`` it multiplies by is not the requester's choice.

How: requester and answering parties both derive, from a seed the requester cannot steer (the
SHA-256 of the signed request, which contains ``c1``), the same encryption of zero under the
joint public key ``(b, a)``::

    Z = (b p, a p),   p = Encode(2^RERANDOMISE_BITS / scale * u),  u uniform in [-1, 1)^slots

(``p`` is the CKKS encoding of tiny uniform values: a polynomial with small integer
coefficients, thousands of random bits; OpenFHE computes the products in NTT form). The
answering party computes its share on ``c1' = c1 + a p``; the requester adds ``Z`` to the
ciphertext it keeps (:meth:`~.threshold_ciphertext.CiphertextHolder.rerandomise_pending`), so
its fused result is the plaintext plus ``e p`` (``e`` the joint public key's small error: about
2^20 in coefficient units, far below the flooding noise of 2^39). ``c1'`` is ``c1`` plus a
pseudo-random polynomial fixed by the hash: to make ``c1'`` structured the requester would
need ``c1 = C - a p(H(c1, ...))``, a hash fixed point. Honest results are unchanged within the
flooding noise (tests compare the encrypted training with its numpy twin).

**What this does not do (a fresh-eyes review broke it).** ``Z`` encrypts zero under the
joint key and the requester holds its own share ``s_0``: adding its own lead on ``Z`` to the
other parties' answers on ``c1 + a p`` gives ``(s - s_0) C`` plus small noise, so a requester
that signs ``c1 = C`` still recovers the sum of the other parties' key shares, that is the
joint key, from one ticket (boundary or boot; the boot masks cancel for the requester). Any
decryption of a ciphertext the requester chooses reveals ``s C``: re-randomising with a public
encryption of zero cannot prevent that. Only a check that ``c1`` is well formed (recomputing it
from public ciphertexts, or a proof of correct encryption and evaluation) would; that is open
(``docs/security/training.md``). What remains of this step: the answering party never
multiplies its share by a polynomial of the requester's exact choice, which stops recovering
one party's share alone when three or more parties hold shares, not the joint key.
Cost per joint step and party: one CKKS encoding and one
ciphertext-plaintext product on the towers of the request.
"""

from __future__ import annotations

import hashlib
from typing import Any

import numpy as np
import numpy.typing as npt

from privfl.crypto import threshold_wire as wire
from privfl.crypto.prng import SharedRandomness
from privfl.crypto.threshold_context import ThresholdContext
from privfl.errors import MalformedMessageError

__all__ = ["RERANDOMISE_BITS", "ZeroSource", "add_zero", "rerandomise_seed"]

RERANDOMISE_BITS = 20


def rerandomise_seed(domain: bytes, signed: bytes) -> bytes:
    """The 32-byte seed of the zero encryption for one signed request (``signed`` = the bytes
    the requester's signature covers; ``domain`` separates protocols)."""
    return hashlib.sha256(b"privfl-rerandomise-v1|" + domain + b"|" + signed).digest()


class ZeroSource:
    """Encryptions of zero under one joint public key, one per seed (deterministic: every
    party derives the same ``Z`` from the same seed). Public data only."""

    def __init__(self, context: ThresholdContext, public_key: Any, tag: str) -> None:
        self.context = context
        self.tag = tag
        layout = context.public_key_shape.layout
        rows = np.frombuffer(context.dump(layout, public_key), dtype=wire.U64)
        self._pk = rows.reshape(2, context.levels, context.ring)  # (b, a), like (c0, c1)
        self._keys: dict[int, Any] = {}

    def _key(self, towers: int) -> Any:
        """The joint public key as a ciphertext on its first ``towers`` towers."""
        if towers not in self._keys:
            ctx = self.context
            layout = ctx.ciphertext_layout(ctx.levels - towers, 1)
            payload = np.ascontiguousarray(self._pk[:, :towers]).tobytes()
            self._keys[towers] = ctx.load("ciphertext", layout, payload, self.tag)
        return self._keys[towers]

    def zero(self, seed: bytes, towers: int) -> npt.NDArray[np.uint64]:
        """``Z = (b p, a p)`` for ``seed`` on the first ``towers`` towers: shape
        ``(2, towers, ring)``."""
        ctx = self.context
        if not 2 <= towers <= ctx.levels:
            raise MalformedMessageError(f"cannot re-randomise on {towers} towers")
        level = ctx.levels - towers
        eps = float(1 << RERANDOMISE_BITS) / ctx.scaling_factor(level, 1)
        u = (SharedRandomness(seed, "rerandomise-c1").uniform(ctx.slots) * 2.0 - 1.0) * eps
        plain = ctx.cc.MakeCKKSPackedPlaintext(u.tolist(), 1, level)
        product = ctx.cc.EvalMult(self._key(towers), plain)
        rows = np.frombuffer(ctx.dump(ctx.ciphertext_layout(level, 2), product), dtype=wire.U64)
        return rows.reshape(2, towers, ctx.ring)


def add_zero(
    layout: wire.Layout, payload: bytes, zero: npt.NDArray[np.uint64], elements: int
) -> bytes:
    """``payload`` (``elements`` polynomials on ``layout``'s towers, a prefix of the chain)
    plus the last ``elements`` of ``Z``'s two polynomials (1: ``c1`` only; 2: ``c0, c1``)."""
    towers = layout.vectors // elements
    rows = np.frombuffer(payload, dtype=wire.U64).reshape(elements, towers, layout.ring)
    add = zero[2 - elements :, :towers]
    moduli = layout.moduli.reshape(elements, towers)
    if add.shape != rows.shape or not np.array_equal(moduli[0], layout.moduli[:towers]):
        raise MalformedMessageError("the request's towers do not match the zero encryption")
    out = np.stack([wire.add_mod(rows[e], add[e], moduli[e]) for e in range(elements)])
    return out.tobytes()
