"""A party's side of the aggregate check (:mod:`~.sumcheck`): it commits to its encrypted
update, answers the server's ``T`` with its signed sketch, and accepts ``T`` only when every
party's signed sketch adds up to ``T``'s.

Run by each party's node; holds the party's own updates of the round (ciphertexts it sent to
the server anyway) and what it checked, nothing of any other party's but their signed
commitments and sketches. What it learns: whether the check passed, and of each other
party's update one random linear combination per coefficient vector (see
:mod:`~.sumcheck`). Every refusal (:class:`~privfl.errors.ProtocolError`, or
:class:`~privfl.errors.UnknownPartyError` for a signature) depends on signed or public values
only; a refused aggregate is never used: the node keeps no layer computed from it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from privfl.crypto.identity import verify_signed
from privfl.crypto.threshold import CiphertextMessage, ThresholdContext
from privfl.errors import ProtocolError
from privfl.training.sumcheck import (
    COMMIT_DOMAIN,
    SUMCHECK_DOMAIN,
    SumCheck,
    UpdateCommitment,
    challenge,
    coefficients,
    commitments_digest,
    inner,
    layer_digest,
)
from privfl.training.tickets import TrainingPlan

__all__ = ["SumVerifier"]

Signer = Callable[[str, bytes], bytes]


@dataclass(frozen=True)
class _Pending:
    round: int
    totals: tuple[CiphertextMessage, ...]
    own: SumCheck


class SumVerifier:
    """One party's aggregate check (see the module doc); ``sign`` signs with the party's
    pinned identity for the two domains of :mod:`~.sumcheck` only."""

    def __init__(
        self, name: str, session: bytes, plan: TrainingPlan, ctx: ThresholdContext, sign: Signer
    ) -> None:
        self.name, self.session, self.plan, self.ctx = name, session, plan, ctx
        self._sign = sign
        self._updates: tuple[CiphertextMessage, ...] = ()
        self._commitment: UpdateCommitment | None = None
        self._pending: _Pending | None = None

    @property
    def pending(self) -> int | None:
        """The round whose aggregate this party answered and has not checked yet."""
        return None if self._pending is None else self._pending.round

    def commit(self, rnd: int, updates: Sequence[CiphertextMessage]) -> UpdateCommitment:
        """The signed commitment to this party's updates of round ``rnd`` (sent with them)."""
        if self._pending is not None:
            raise ProtocolError(f"{self.name} has an unchecked aggregate of round {rnd - 1}")
        layers = tuple(layer_digest(u) for u in updates)
        unsigned = UpdateCommitment(self.session, self.name, rnd, layers, bytes(64))
        sig = self._sign(COMMIT_DOMAIN, unsigned.signed_part())
        self._updates = tuple(updates)
        self._commitment = UpdateCommitment(self.session, self.name, rnd, layers, sig)
        return self._commitment

    def answer(
        self, rnd: int, totals: Sequence[CiphertextMessage], commitments: Sequence[UpdateCommitment]
    ) -> SumCheck:
        """Step ``"sum"``: check the server's ``T`` (one per encrypted layer, at its update's
        level and degree) and every party's signed commitment, then sign this party's sketch
        ``<r, D_k>`` under the challenge derived from them. Once per committed round."""
        own = self._commitment
        if own is None or own.round != rnd or self._pending is not None:
            raise ProtocolError(f"{self.name} uploaded no update of round {rnd} to check")
        names = self.plan.names
        if [c.sender for c in commitments] != list(names):
            raise ProtocolError("the aggregate needs one commitment from each party, in order")
        for c in commitments:
            verify_signed(self.plan.pinned, c.sender, c.signature, COMMIT_DOMAIN, c.signed_part())
            shapes = [(d.level, d.deg) for d in c.layers]
            if c.round != rnd or shapes != [(d.level, d.deg) for d in own.layers]:
                raise ProtocolError(f"{c.sender}'s commitment is for another round or level")
        if commitments[names.index(self.name)] != own:
            raise ProtocolError(f"{self.name}'s own commitment was altered")
        if len(totals) != len(self._updates):
            raise ProtocolError("the aggregate has the wrong number of encrypted layers")
        for t, u in zip(totals, self._updates, strict=True):
            if (t.level, t.deg) != (u.level, u.deg):
                raise ProtocolError("the aggregate is not at its updates' level and degree")
        digest = commitments_digest(commitments)
        sketches = []
        for layer, (t, u) in enumerate(zip(totals, self._updates, strict=True)):
            r = challenge(self.ctx, self.session, rnd, layer, t, digest)
            moduli = self.ctx.ciphertext_layout(u.level, u.deg).moduli
            sketches.append(inner(coefficients(self.ctx, u), moduli, r))
        t_digests = tuple(layer_digest(t).digest for t in totals)
        unsigned = SumCheck(
            self.session, self.name, rnd, t_digests, digest, tuple(sketches), bytes(64)
        )
        sig = self._sign(SUMCHECK_DOMAIN, unsigned.signed_part())
        check = SumCheck(self.session, self.name, rnd, t_digests, digest, tuple(sketches), sig)
        self._pending = _Pending(rnd, tuple(totals), check)
        self._commitment = None  # once per round: a second aggregate of it is refused
        return check

    def verify(self, checks: Sequence[SumCheck]) -> tuple[CiphertextMessage, ...]:
        """With the next global model: every party's signed check. Returns the aggregates
        ``T`` (one per encrypted layer) once they pass, else refuses; either way the pending
        aggregate is dropped (a refused one is never used)."""
        pending, self._pending = self._pending, None
        if pending is None:
            raise ProtocolError(f"{self.name} has no aggregate to check")
        own = pending.own
        if [c.sender for c in checks] != list(self.plan.names):
            raise ProtocolError("the aggregate check needs one sketch from each party, in order")
        for c in checks:
            verify_signed(self.plan.pinned, c.sender, c.signature, SUMCHECK_DOMAIN, c.signed_part())
            if (c.round, c.totals, c.commitments) != (own.round, own.totals, own.commitments):
                raise ProtocolError(
                    f"{c.sender} checked another aggregate (the server sent parties different "
                    "sums or commitments)"
                )
            if [len(s) for s in c.sketches] != [len(s) for s in own.sketches]:
                raise ProtocolError(f"{c.sender}'s sketch has the wrong size")
        if checks[self.plan.names.index(self.name)] != own:
            raise ProtocolError(f"{self.name}'s own sketch was altered")
        for layer, t in enumerate(pending.totals):
            moduli = self.ctx.ciphertext_layout(t.level, t.deg).moduli
            r = challenge(self.ctx, self.session, own.round, layer, t, own.commitments)
            expected = inner(coefficients(self.ctx, t), moduli, r)
            got = tuple(
                sum(c.sketches[layer][v] for c in checks) % int(q) for v, q in enumerate(moduli)
            )
            if got != expected:
                raise ProtocolError(
                    "the aggregate is not the sum of the parties' signed updates (the server "
                    "altered, replaced or added to it); it was not used"
                )
        return pending.totals
