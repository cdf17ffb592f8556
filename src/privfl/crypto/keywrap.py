"""Wrapping a secret for one recipient: X25519 + HKDF-SHA256 + AES-256-GCM.

Each party has a long-term identity (:mod:`privfl.crypto.identity`) whose public half is
pinned in a roster (the PKI assumption of FHAUC); wrapping uses its X25519 half. The sender
derives the wrapping key from two Diffie-Hellman values: ephemeral-static (fresh per wrap)
and static-static (authenticates the sender: only the holder of the pinned sender key can
compute it). The associated data
binds the sender, the recipient, the purpose and the ephemeral key, so a wrapped secret
cannot be redirected to another recipient or replayed as another kind of secret. A relay
(the aggregator) sees only ciphertext.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from privfl.crypto.identity import IdentityKey, PublicIdentity
from privfl.errors import MalformedMessageError, UnknownPartyError
from privfl.messages import Reader, Writer

__all__ = ["IdentityKey", "WrappedSecret", "unwrap", "wrap"]


@dataclass(frozen=True)
class WrappedSecret:
    """An AES-GCM-sealed secret for one recipient."""

    sender: str
    recipient: str
    purpose: str
    ephemeral_public: bytes
    nonce: bytes
    ciphertext: bytes

    def to_bytes(self) -> bytes:
        w = Writer().str_(self.sender).str_(self.recipient).str_(self.purpose)
        w.bytes_(self.ephemeral_public).bytes_(self.nonce).bytes_(self.ciphertext)
        return w.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> WrappedSecret:
        r = Reader(data, "wrapped secret")
        out = cls(r.str_(), r.str_(), r.str_(), r.bytes_(32), r.bytes_(12), r.bytes_())
        r.end()
        if len(out.ephemeral_public) != 32 or len(out.nonce) != 12:
            raise MalformedMessageError("wrapped secret has bad key or nonce length")
        return out


def _aad(sender: str, recipient: str, purpose: str, eph: bytes) -> bytes:
    return Writer().str_(sender).str_(recipient).str_(purpose).bytes_(eph).getvalue()


def _derive(dh1: bytes, dh2: bytes, aad: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=b"privfl-keywrap-v1", info=aad).derive(
        dh1 + dh2
    )


def wrap(
    secret: bytes,
    *,
    sender: str,
    sender_key: IdentityKey,
    recipient: str,
    recipient_public: bytes,
    purpose: str,
) -> WrappedSecret:
    """Seal ``secret`` so that only ``recipient`` can open it, authenticated as ``sender``."""
    eph = X25519PrivateKey.generate()
    eph_pub = eph.public_key().public_bytes(
        serialization.Encoding.Raw, serialization.PublicFormat.Raw
    )
    peer = PublicIdentity.from_bytes(recipient_public)
    aad = _aad(sender, recipient, purpose, eph_pub)
    key = _derive(eph.exchange(peer.agreement_key()), sender_key.exchange(peer), aad)
    nonce = secrets.token_bytes(12)
    return WrappedSecret(
        sender, recipient, purpose, eph_pub, nonce, AESGCM(key).encrypt(nonce, secret, aad)
    )


def unwrap(
    wrapped: WrappedSecret,
    *,
    recipient: str,
    recipient_key: IdentityKey,
    roster: dict[str, bytes],
    expected_sender: str,
    purpose: str,
) -> bytes:
    """Open a wrapped secret; the sender must be ``expected_sender`` with its pinned key."""
    if wrapped.recipient != recipient:
        raise UnknownPartyError(
            f"secret is wrapped for {wrapped.recipient!r}, not for {recipient!r}"
        )
    if wrapped.sender != expected_sender:
        raise UnknownPartyError(
            f"secret comes from {wrapped.sender!r}; only {expected_sender!r} may provision keys"
        )
    if wrapped.purpose != purpose:
        raise MalformedMessageError(f"expected a {purpose!r} secret, got {wrapped.purpose!r}")
    if expected_sender not in roster:
        raise UnknownPartyError(f"{expected_sender!r} is not in the roster")
    aad = _aad(wrapped.sender, wrapped.recipient, wrapped.purpose, wrapped.ephemeral_public)
    try:
        key = _derive(
            recipient_key.exchange_raw(wrapped.ephemeral_public),
            recipient_key.exchange(PublicIdentity.from_bytes(roster[expected_sender])),
            aad,
        )
    except ValueError as exc:  # a low-order point: no shared secret
        raise UnknownPartyError(
            f"wrapped secret carries an invalid ephemeral key ({exc})"
        ) from None
    try:
        return AESGCM(key).decrypt(wrapped.nonce, wrapped.ciphertext, aad)
    except InvalidTag as exc:
        raise UnknownPartyError(
            "wrapped secret failed authentication: wrong recipient key, a sender key that "
            "does not match the roster, or tampered bytes"
        ) from exc
