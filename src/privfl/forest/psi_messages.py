"""The PSI's wire messages (:mod:`.psi`): every message is signed by its sender with the
Ed25519 key the provisioning pinned for it, over the session, the step, the sender and the
payload; a list carries its origin's signed size, announced at the start, and nobody may
lengthen it; decoding is strict and bounded by the config before anything is allocated."""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from cryptography.exceptions import InvalidSignature, InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from privfl.errors import InputError, MalformedMessageError, ProtocolError, UnknownPartyError
from privfl.forest.messages import StaleMessageError
from privfl.messages import Codec, Header, Reader, Writer, decode_message

CODEC = Codec("psi", 1)
TAG = 32
MAX_PARTIES = 64
SIGNATURE = 64
ATTEMPT = 16


@dataclass(frozen=True)
class PsiConfig:
    """What every party agreed: the session, the ring of parties (its order is the order of
    the passes), the comparer, the Ed25519 key of every party and of the comparer (pinned at
    provisioning: every message is signed by its sender) and the largest id list any party
    may send."""

    session: bytes
    parties: tuple[str, ...]
    comparer: str
    keys: Mapping[str, Ed25519PublicKey]
    max_ids: int = 1 << 22

    def __post_init__(self) -> None:
        if not 2 <= len(self.parties) <= MAX_PARTIES or len(set(self.parties)) != len(self.parties):
            raise InputError("PSI needs 2 to 64 distinct parties")
        if self.comparer in self.parties:
            raise InputError("the PSI comparer must hold no ids (it is not a party)")
        missing = [p for p in (*self.parties, self.comparer) if p not in self.keys]
        if missing:
            raise InputError(f"PSI needs the signing key of {missing}")

    def index(self, name: str) -> int:
        if name not in self.parties:
            raise UnknownPartyError(f"{name!r} is not a PSI party")
        return self.parties.index(name)

    def holder(self, origin: str, stage: int) -> str:
        """The party that applies the ``stage + 1``-th scalar to ``origin``'s list."""
        return self.parties[(self.index(origin) + stage) % len(self.parties)]


class RepeatedStageError(ProtocolError):
    """A party was asked to key a list it already keyed (one keying per list, ever)."""


def _tbs(session: bytes, step: str, sender: str, body: bytes) -> bytes:
    return Writer().str_("privfl-psi-signed-v1").bytes_(session).str_(step).str_(sender).bytes_(
        body
    ).getvalue()  # fmt: skip


def _encode(config: PsiConfig, step: str, sender: str, key: Ed25519PrivateKey, w: Writer) -> bytes:
    """A PSI message whose payload ends with the sender's signature over the session, the
    step, the sender and the rest of the payload."""
    body = w.getvalue()
    signature = key.sign(_tbs(config.session, step, sender, body))
    return CODEC.encode(step, config.session, sender, w.bytes_(signature).getvalue())


def _decode(data: bytes, config: PsiConfig, step: str | None) -> tuple[Header, Reader]:
    """Check the header and the sender's signature (with its pinned key); a reader over the
    signed part of the payload."""
    header, payload = decode_message(
        data, protocol=CODEC.protocol, version=CODEC.version, step=step, session=config.session
    )
    key = config.keys.get(header.sender)
    if key is None or len(payload) < 4 + SIGNATURE:
        raise UnknownPartyError(f"a PSI message from {header.sender!r}, who has no pinned key")
    body, tail = payload[: -4 - SIGNATURE], payload[-4 - SIGNATURE :]
    if tail[:4] != SIGNATURE.to_bytes(4, "big"):
        raise MalformedMessageError("a PSI message without its signature")
    try:
        key.verify(tail[4:], _tbs(config.session, header.step, header.sender, body))
    except InvalidSignature:
        raise UnknownPartyError(f"a PSI message not signed by {header.sender!r}") from None
    return header, Reader(body, f"psi {header.step}")


@dataclass(frozen=True)
class SizeAnnouncement:
    """The origin's signed size of its list (at the start: nobody may lengthen it later) and
    its fresh ``attempt`` nonce (16 bytes, drawn with its scalar): the comparer's
    :class:`Positions` for that origin repeat it, so a result of an earlier attempt (another
    scalar, another order) is refused."""

    origin: str
    count: int
    attempt: bytes
    signature: bytes

    @staticmethod
    def tbs(config: PsiConfig, origin: str, count: int, attempt: bytes) -> bytes:
        w = Writer().str_("privfl-psi-size-v2").bytes_(config.session).str_(origin)
        return w.u32(count).bytes_(attempt).getvalue()

    @classmethod
    def sign(
        cls, key: Ed25519PrivateKey, config: PsiConfig, origin: str, count: int, attempt: bytes
    ) -> SizeAnnouncement:
        return cls(origin, count, attempt, key.sign(cls.tbs(config, origin, count, attempt)))

    def write(self, w: Writer) -> Writer:
        return w.u32(self.count).bytes_(self.attempt).bytes_(self.signature)

    @classmethod
    def read(cls, r: Reader, config: PsiConfig, origin: str) -> SizeAnnouncement:
        count, attempt = r.count(config.max_ids, "announced ids"), r.bytes_(ATTEMPT)
        signature = r.bytes_(SIGNATURE)
        if len(attempt) != ATTEMPT:
            raise MalformedMessageError(f"a PSI attempt nonce is {ATTEMPT} bytes")
        try:
            config.keys[origin].verify(signature, cls.tbs(config, origin, count, attempt))
        except InvalidSignature:
            raise UnknownPartyError(f"a list size {origin!r} did not announce") from None
        return cls(origin, count, attempt, signature)


@dataclass(frozen=True)
class PsiList:
    """``psi-start`` / ``psi-pass``: ``origin``'s list after ``stage`` scalars, in the
    origin's secret order, with the origin's signed size; signed by its sender."""

    origin: str
    stage: int
    values: tuple[bytes, ...]
    size: SizeAnnouncement

    def to_bytes(self, config: PsiConfig, sender: str, key: Ed25519PrivateKey) -> bytes:
        step = "psi-start" if self.stage == 1 else "psi-pass"
        w = self.size.write(Writer().str_(self.origin).u32(self.stage))
        w.u32(len(self.values)).bytes_(b"".join(self.values))
        return _encode(config, step, sender, key, w)

    @classmethod
    def from_bytes(cls, data: bytes, config: PsiConfig) -> PsiList:
        """A list from the party that keyed it last (the origin itself after one key), as
        long as its origin announced, never longer."""
        header, r = _decode(data, config, None)
        origin, stage = r.str_(256), r.u32()
        config.index(origin)
        if not 1 <= stage < len(config.parties):
            raise MalformedMessageError(f"a PSI list after {stage} of {len(config.parties)} keys")
        if header.step != ("psi-start" if stage == 1 else "psi-pass"):
            raise MalformedMessageError(f"a '{header.step}' message carrying a list")
        if header.sender != config.holder(origin, stage - 1):
            raise UnknownPartyError(f"{header.sender!r} cannot send {origin}'s list at {stage}")
        size = SizeAnnouncement.read(r, config, origin)
        count = r.count(config.max_ids, "ids")
        if count != size.count:
            raise MalformedMessageError(f"{origin}'s list has {count} ids, {size.count} announced")
        raw = r.bytes_(count * TAG)
        r.end()
        if len(raw) != count * TAG:
            raise MalformedMessageError(f"{count} PSI values need {count * TAG} bytes")
        values = tuple(raw[i : i + TAG] for i in range(0, len(raw), TAG))
        return cls(origin, stage, values, size)


def _seal_key(shared: bytes, aad: bytes) -> bytes:
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"privfl-psi-seal-v1", info=aad)
    return hkdf.derive(shared)


def _aad(config: PsiConfig, origin: str, eph: bytes) -> bytes:
    w = Writer().str_("psi-final").bytes_(config.session).str_(config.comparer).str_(origin)
    return w.bytes_(eph).getvalue()


@dataclass(frozen=True)
class SealedFinal:
    """``psi-final``: ``origin``'s fully keyed list, sealed for the comparer alone, with the
    origin's signed size; signed by the party that keyed it last."""

    origin: str
    size: SizeAnnouncement
    ephemeral: bytes
    nonce: bytes
    ciphertext: bytes

    @classmethod
    def seal(
        cls, config: PsiConfig, size: SizeAnnouncement, values: Sequence[bytes], to: bytes
    ) -> SealedFinal:
        eph = X25519PrivateKey.generate()
        eph_pub = eph.public_key().public_bytes_raw()
        aad = _aad(config, size.origin, eph_pub)
        key = _seal_key(eph.exchange(X25519PublicKey.from_public_bytes(to)), aad)
        nonce = secrets.token_bytes(12)
        body = AESGCM(key).encrypt(nonce, b"".join(values), aad)
        return cls(size.origin, size, eph_pub, nonce, body)

    def open(self, config: PsiConfig, key: X25519PrivateKey) -> tuple[bytes, ...]:
        aad = _aad(config, self.origin, self.ephemeral)
        shared = key.exchange(X25519PublicKey.from_public_bytes(self.ephemeral))
        try:
            raw = AESGCM(_seal_key(shared, aad)).decrypt(self.nonce, self.ciphertext, aad)
        except InvalidTag:
            raise MalformedMessageError(f"{self.origin}'s sealed PSI list does not open") from None
        if len(raw) != self.size.count * TAG:
            raise MalformedMessageError(f"{self.origin}'s final list is not the size announced")
        return tuple(raw[i : i + TAG] for i in range(0, len(raw), TAG))

    def to_bytes(self, config: PsiConfig, sender: str, key: Ed25519PrivateKey) -> bytes:
        w = self.size.write(Writer().str_(self.origin))
        w.bytes_(self.ephemeral).bytes_(self.nonce).bytes_(self.ciphertext)
        return _encode(config, "psi-final", sender, key, w)

    @classmethod
    def from_bytes(cls, data: bytes, config: PsiConfig, sender: str) -> SealedFinal:
        header, r = _decode(data, config, "psi-final")
        origin = r.str_(256)
        config.index(origin)
        if header.sender != sender or config.holder(origin, len(config.parties) - 1) != sender:
            raise UnknownPartyError(f"{header.sender!r} cannot seal {origin!r}'s final list")
        size = SizeAnnouncement.read(r, config, origin)
        eph, nonce = r.bytes_(32), r.bytes_(12)
        body = r.bytes_(size.count * TAG + 16)
        r.end()
        if len(eph) != 32 or len(nonce) != 12:
            raise MalformedMessageError("a sealed PSI list with a bad key or nonce")
        return cls(origin, size, eph, nonce, body)


@dataclass(frozen=True)
class Positions:
    """``psi-result`` (comparer -> one party, signed by the comparer): positions in that
    party's list of the common tags, in the agreed (tag-sorted) order."""

    party: str
    attempt: bytes
    positions: tuple[int, ...]

    def to_bytes(self, config: PsiConfig, key: Ed25519PrivateKey) -> bytes:
        w = Writer().str_(self.party).bytes_(self.attempt).u32(len(self.positions))
        w.bytes_(np.asarray(self.positions, dtype=">u4").tobytes())
        return _encode(config, "psi-result", config.comparer, key, w)

    @classmethod
    def from_bytes(
        cls, data: bytes, config: PsiConfig, party: str, n_own: int, attempt: bytes
    ) -> Positions:
        """The comparer's result for ``party``'s list of attempt ``attempt`` (its own)."""
        header, r = _decode(data, config, "psi-result")
        if header.sender != config.comparer:
            raise UnknownPartyError(f"a psi-result from {header.sender!r}")
        if r.str_(256) != party:
            raise UnknownPartyError(f"a psi-result for another party than {party!r}")
        if r.bytes_(ATTEMPT) != attempt:
            raise StaleMessageError(f"a psi-result of another attempt than {party!r}'s current")
        count = r.count(n_own, "common ids")
        raw = r.bytes_(4 * count)
        r.end()
        if len(raw) != 4 * count:
            raise MalformedMessageError(f"{count} positions need {4 * count} bytes")
        pos = np.frombuffer(raw, dtype=">u4").astype(np.int64)
        if pos.size and (pos.max() >= n_own or np.unique(pos).size != pos.size):
            raise MalformedMessageError("psi-result positions repeat or exceed the list")
        return cls(party, attempt, tuple(int(p) for p in pos))
