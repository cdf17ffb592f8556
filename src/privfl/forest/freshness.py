"""Freshness, single use and session binding of signed revocation requests: one check that
the CS and the CC both run (without it, a CC would accept a request dated 1970 and any
number of replays).

A request binds the session (its signature covers the session id, and its header must carry
it), is dated within :data:`~.messages.REVOCATION_WINDOW_S` of now (and at most
:data:`~.messages.CLOCK_SKEW_S` in the future), and its 16-byte nonce is accepted once. A
nonce is remembered for as long as its request could still pass the window, so the memory is
bounded by the requests of the last few minutes. The refusal depends only on the request
(public) and the clock.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from privfl.forest.messages import (
    CLOCK_SKEW_S,
    REVOCATION_WINDOW_S,
    RevocationRequest,
    StaleMessageError,
)
from privfl.messages import Reader, Writer

MAX_REMEMBERED = 1 << 16


class ReplayGuard:
    """The nonces of the revocation requests a role accepted, with their dates."""

    def __init__(self) -> None:
        self._seen: dict[bytes, int] = {}

    def check(self, request: RevocationRequest, now_ms: int | None = None) -> None:
        """Refuse (StaleMessageError) a request older than the window, from the future, or
        seen before; otherwise remember its nonce. Call after its signature is verified."""
        now = int(time.time() * 1000) if now_ms is None else now_ms
        window, skew = int(REVOCATION_WINDOW_S * 1000), int(CLOCK_SKEW_S * 1000)
        if request.timestamp_ms > now + skew:
            raise StaleMessageError("revocation request is dated in the future")
        if now - request.timestamp_ms > window:
            raise StaleMessageError(f"revocation request is older than {REVOCATION_WINDOW_S} s")
        if request.nonce in self._seen:
            raise StaleMessageError("revocation request replayed (nonce already seen)")
        self._seen = {k: v for k, v in self._seen.items() if now - v <= window + skew}
        if len(self._seen) >= MAX_REMEMBERED:
            raise StaleMessageError("too many revocation requests in the window")
        self._seen[request.nonce] = request.timestamp_ms

    def to_bytes(self) -> bytes:
        """The remembered nonces (for a node that rebuilds its role per message)."""
        w = Writer().u32(len(self._seen))
        for nonce, ms in self._seen.items():
            w.bytes_(nonce).u64(ms)
        return w.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> ReplayGuard:
        r = Reader(data, "revocation nonces")
        guard = cls()
        for _ in range(r.count(MAX_REMEMBERED, "nonces")):
            nonce = r.bytes_(64)
            guard._seen[nonce] = r.u64()
        r.end()
        return guard


@dataclass(frozen=True)
class RevocationReport:
    """What a revocation did: nodes destroyed and regrown, splits refreshed (level 2)."""

    participant: str
    level: int
    destroyed_nodes: int
    rebuilt_nodes: int
    seconds: float = 0.0
    refreshed_ciphertexts: int = 0
