"""Long-term party identities: an X25519 key (key agreement, for wrapping secrets) and an
Ed25519 key (signatures, for authenticating protocol messages end to end).

The public half of an identity is 64 bytes, ``X25519 public || Ed25519 public``, pinned in
the roster (the PKI assumption of FHAUC). A relay that is not in the roster (the aggregator,
a rogue node) can neither open a wrapped secret nor produce a message that verifies under a
roster key. Signatures are over ``SHA-256(domain || data)`` so that a signature made for one
purpose can never be replayed for another.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from privfl.errors import MalformedMessageError, UnknownPartyError

__all__ = ["PUBLIC_BYTES", "SIGNATURE_BYTES", "IdentityKey", "PublicIdentity", "verify_signed"]

KEY_BYTES = 32
PUBLIC_BYTES = 2 * KEY_BYTES
SIGNATURE_BYTES = 64
_RAW = serialization.Encoding.Raw


Signed = bytes | Sequence[bytes | memoryview]


def _digest(domain: str, data: Signed) -> bytes:
    """SHA-256 of ``domain || 0 || data`` (``data`` may come in parts: hashed in order,
    without joining them, so a large message is never copied to be signed)."""
    h = hashlib.sha256(domain.encode() + b"\x00")
    for part in (data,) if isinstance(data, bytes | bytearray | memoryview) else data:
        h.update(part)
    return h.digest()


@dataclass(frozen=True)
class PublicIdentity:
    """The public half of an identity: what a roster pins for one party."""

    agreement: bytes  # X25519 public key
    verifying: bytes  # Ed25519 public key

    def to_bytes(self) -> bytes:
        return self.agreement + self.verifying

    @classmethod
    def from_bytes(cls, data: bytes) -> PublicIdentity:
        if len(data) != PUBLIC_BYTES:
            raise MalformedMessageError(
                f"a public identity is {PUBLIC_BYTES} bytes (X25519 || Ed25519), got {len(data)}"
            )
        return cls(bytes(data[:KEY_BYTES]), bytes(data[KEY_BYTES:]))

    def agreement_key(self) -> X25519PublicKey:
        return X25519PublicKey.from_public_bytes(self.agreement)

    def verify(self, signature: bytes, domain: str, data: Signed) -> None:
        """Raise :class:`UnknownPartyError` unless ``signature`` is this identity's
        signature of ``data`` for ``domain``."""
        try:
            key = Ed25519PublicKey.from_public_bytes(self.verifying)
            key.verify(signature, _digest(domain, data))
        except (InvalidSignature, ValueError) as exc:
            raise UnknownPartyError(
                "signature check failed: the message was not produced by the pinned key"
            ) from exc


class IdentityKey:
    """A party's long-term key pair (X25519 for key agreement, Ed25519 for signatures)."""

    def __init__(
        self,
        agreement: X25519PrivateKey | None = None,
        signing: Ed25519PrivateKey | None = None,
    ) -> None:
        self._agreement = agreement or X25519PrivateKey.generate()
        self._signing = signing or Ed25519PrivateKey.generate()

    @property
    def public(self) -> PublicIdentity:
        return PublicIdentity(
            self._agreement.public_key().public_bytes(_RAW, serialization.PublicFormat.Raw),
            self._signing.public_key().public_bytes(_RAW, serialization.PublicFormat.Raw),
        )

    @property
    def public_bytes(self) -> bytes:
        """The 64 bytes a roster pins for this party."""
        return self.public.to_bytes()

    def private_bytes(self) -> bytes:
        fmt, none = serialization.PrivateFormat.Raw, serialization.NoEncryption()
        return self._agreement.private_bytes(_RAW, fmt, none) + self._signing.private_bytes(
            _RAW, fmt, none
        )

    @classmethod
    def from_private_bytes(cls, data: bytes) -> IdentityKey:
        if len(data) != 2 * KEY_BYTES:
            raise MalformedMessageError(
                f"an identity key file holds {2 * KEY_BYTES} bytes (X25519 || Ed25519 private "
                f"keys), got {len(data)}; re-provision with this version of privfl"
            )
        return cls(
            X25519PrivateKey.from_private_bytes(data[:KEY_BYTES]),
            Ed25519PrivateKey.from_private_bytes(data[KEY_BYTES:]),
        )

    def exchange(self, peer: PublicIdentity) -> bytes:
        """X25519 shared secret with ``peer``'s agreement key."""
        return self._agreement.exchange(peer.agreement_key())

    def exchange_raw(self, peer_agreement: bytes) -> bytes:
        """X25519 shared secret with a bare 32-byte public key (an ephemeral key)."""
        if len(peer_agreement) != KEY_BYTES:
            raise MalformedMessageError("an X25519 public key is 32 bytes")
        return self._agreement.exchange(X25519PublicKey.from_public_bytes(peer_agreement))

    def sign(self, domain: str, data: Signed) -> bytes:
        """Ed25519 signature of ``SHA-256(domain || 0 || data)``."""
        return self._signing.sign(_digest(domain, data))


def verify_signed(
    roster: Mapping[str, bytes], signer: str, signature: bytes, domain: str, data: Signed
) -> None:
    """Check that ``signer`` is in ``roster`` and signed ``data`` for ``domain``."""
    if signer not in roster:
        raise UnknownPartyError(f"{signer!r} is not in the pinned roster")
    if len(signature) != SIGNATURE_BYTES:
        raise MalformedMessageError(f"a signature is {SIGNATURE_BYTES} bytes")
    try:
        PublicIdentity.from_bytes(roster[signer]).verify(signature, domain, data)
    except UnknownPartyError:
        raise UnknownPartyError(
            f"message claiming to come from {signer!r} does not verify under its pinned key"
        ) from None
