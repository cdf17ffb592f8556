"""The CC's signed alarm for an out-of-range HoLT request (RevFRF): sent to the KGC on the
audit channel, never through the CS (see :mod:`privfl.forest.secure_ops`)."""

from __future__ import annotations

from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from privfl.errors import UnknownPartyError
from privfl.forest.messages import CC, SessionConfig, seal, unseal
from privfl.messages import Writer


@dataclass(frozen=True)
class HoLTAlarm:
    """CC -> KGC (``holt-alarm``, the audit channel, never through the CS): a HoLT request
    of operation ``op`` for ``holder`` whose blinded difference was out of range, answered
    with a random bit. Ed25519-signed by the CC, so an auditor holding the CC's key (pinned
    by the KGC at setup) can attribute it."""

    op: int
    holder: str
    timestamp_ms: int
    signature: bytes = b""

    @staticmethod
    def signed_bytes(config: SessionConfig, op: int, holder: str, timestamp_ms: int) -> bytes:
        w = Writer().str_("privfl revfrf holt-alarm").bytes_(config.session).u64(op)
        return w.str_(holder).u64(timestamp_ms).getvalue()

    @classmethod
    def sign(
        cls, key: Ed25519PrivateKey, config: SessionConfig, op: int, holder: str, ms: int
    ) -> HoLTAlarm:
        return cls(op, holder, ms, key.sign(cls.signed_bytes(config, op, holder, ms)))

    def to_bytes(self, config: SessionConfig) -> bytes:
        w = Writer().u64(self.op).str_(self.holder).u64(self.timestamp_ms)
        return seal("holt-alarm", config, CC, w.bytes_(self.signature))

    @classmethod
    def from_bytes(cls, data: bytes, config: SessionConfig, key: Ed25519PublicKey) -> HoLTAlarm:
        """A CC alarm, its signature checked against the CC's pinned key."""
        r = unseal(data, "holt-alarm", config, CC)
        op, holder, ms, signature = r.u64(), r.str_(256), r.u64(), r.bytes_(64)
        r.end()
        try:
            key.verify(signature, cls.signed_bytes(config, op, holder, ms))
        except InvalidSignature:
            raise UnknownPartyError("a HoLT alarm not signed by the CC") from None
        return cls(op, holder, ms, signature)
