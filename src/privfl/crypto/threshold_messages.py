"""Messages of threshold CKKS: key generation, ciphertexts, joint decryption, bootstrapping.

Every message is a frozen dataclass framed by :data:`CODEC` (protocol ``threshold-ckks``,
version 1: magic, protocol, version, step, session id, sender). Its payload holds small
integers and **coefficient payloads** only (OpenFHE objects stripped to their coefficient
vectors, :mod:`privfl.crypto.threshold_wire`). ``from_bytes(data, context, session)`` checks,
in this order and before anything is allocated from the payload: the header (protocol,
version, step, session), each declared level/degree against the context's depth, each field's
length against the exact size the context's layouts give, every coefficient against its
modulus, and trailing bytes. Only :class:`~privfl.errors.ProtocolError` subclasses come out.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Self

import numpy as np
import numpy.typing as npt

from privfl.crypto import threshold_wire as wire
from privfl.crypto.threshold_params import DECRYPTION_TOWERS
from privfl.errors import MalformedMessageError
from privfl.messages import Codec, Reader, Writer

if TYPE_CHECKING:
    from privfl.crypto.threshold_context import ThresholdContext

__all__ = [
    "CODEC",
    "BootstrapRequest",
    "BootstrapShare",
    "CiphertextMessage",
    "DecryptionRequest",
    "DecryptionShare",
    "EvaluationKeys",
    "JointPublicKeys",
    "KeyGenShare",
    "MaskedDecryption",
    "MultKeyShare",
]

CODEC = Codec("threshold-ckks", 1)
_MAX_LEVEL = 64


def _payload(r: Reader, moduli: npt.NDArray[np.uint64], ring: int, what: str) -> bytes:
    """A length-prefixed coefficient field: its size is bounded by the layout *before* the
    bytes are read, then every coefficient is checked against its modulus."""
    expected = len(moduli) * ring * wire.U64.itemsize
    raw = r.bytes_(expected)
    wire.check_coefficients(moduli, ring, raw, what)
    return raw


def _shape(r: Reader, ctx: ThresholdContext, max_used: int | None = None) -> tuple[int, int]:
    """A declared (level, scaling degree), refused unless a ciphertext of the context can
    have it and has used at most ``max_used`` levels (default: the depth)."""
    level, deg = r.count(_MAX_LEVEL, "levels"), r.count(2, "scaling degrees")
    ctx.check_level(level, deg)
    limit = ctx.params.multiplicative_depth if max_used is None else max_used
    if level + deg - 1 > limit:
        raise MalformedMessageError(
            f"a ciphertext declared at level {level}, degree {deg} has used more than "
            f"the {limit} levels this step allows"
        )
    return level, deg


class _Message:
    STEP: ClassVar[str]
    session: bytes
    sender: str

    def _frame(self, w: Writer) -> bytes:
        return CODEC.encode(self.STEP, self.session, self.sender, w.getvalue())

    @classmethod
    def _open(cls, data: bytes, session: bytes) -> tuple[str, Reader]:
        header, r = CODEC.decode(data, step=cls.STEP, session=session)
        return header.sender, r


@dataclass(frozen=True)
class KeyGenShare(_Message):
    """Key generation round 1, party -> server: the ``b`` halves of the party's public-key,
    key-switching (relinearisation, first pass) and automorphism-key contributions. Their
    ``a`` halves are the session's common reference polynomials. Reveals RLWE samples only."""

    STEP: ClassVar[str] = "keygen-share"
    session: bytes
    sender: str
    public_key: bytes
    switch_key: bytes
    automorphism_keys: bytes

    def to_bytes(self) -> bytes:
        w = Writer().bytes_(self.public_key).bytes_(self.switch_key)
        return self._frame(w.bytes_(self.automorphism_keys))

    @classmethod
    def from_bytes(cls, data: bytes, ctx: ThresholdContext, session: bytes) -> Self:
        sender, r = cls._open(data, session)
        pk = _payload(r, ctx.public_key_shape.b_moduli, ctx.ring, "public key share")
        sk = _payload(r, ctx.switch_key_shape.b_moduli, ctx.ring, "switch key share")
        shape = ctx.automorphism_shape
        empty = np.zeros(0, dtype=np.uint64)
        auto = _payload(r, shape.b_moduli if shape else empty, ctx.ring, "rotation keys")
        r.end()
        return cls(session, sender, pk, sk, auto)


@dataclass(frozen=True)
class JointPublicKeys(_Message):
    """Key generation round 1 -> 2, server -> parties: the ``b`` halves of the joint public
    key (for encryption) and of the summed key-switching key (input of round 2)."""

    STEP: ClassVar[str] = "keygen-joint"
    session: bytes
    sender: str
    public_key: bytes
    switch_key: bytes

    def to_bytes(self) -> bytes:
        return self._frame(Writer().bytes_(self.public_key).bytes_(self.switch_key))

    @classmethod
    def from_bytes(cls, data: bytes, ctx: ThresholdContext, session: bytes) -> Self:
        sender, r = cls._open(data, session)
        pk = _payload(r, ctx.public_key_shape.b_moduli, ctx.ring, "joint public key")
        sk = _payload(r, ctx.switch_key_shape.b_moduli, ctx.ring, "joint switch key")
        r.end()
        return cls(session, sender, pk, sk)


@dataclass(frozen=True)
class MultKeyShare(_Message):
    """Key generation round 2, party -> server: the party's share ``s_i * (a, b)`` of the
    relinearisation key (both halves: neither is a CRP)."""

    STEP: ClassVar[str] = "keygen-mult-share"
    session: bytes
    sender: str
    mult_key: bytes

    def to_bytes(self) -> bytes:
        return self._frame(Writer().bytes_(self.mult_key))

    @classmethod
    def from_bytes(cls, data: bytes, ctx: ThresholdContext, session: bytes) -> Self:
        sender, r = cls._open(data, session)
        layout = ctx.switch_key_shape.layout
        mk = _payload(r, layout.moduli, ctx.ring, "relinearisation key share")
        r.end()
        return cls(session, sender, mk)


@dataclass(frozen=True)
class EvaluationKeys(_Message):
    """Server -> a role that evaluates: the joint relinearisation key and the ``b`` halves of
    the joint automorphism (rotation / sum) keys. Public material."""

    STEP: ClassVar[str] = "eval-keys"
    session: bytes
    sender: str
    mult_key: bytes
    automorphism_keys: bytes

    def to_bytes(self) -> bytes:
        return self._frame(Writer().bytes_(self.mult_key).bytes_(self.automorphism_keys))

    @classmethod
    def from_bytes(cls, data: bytes, ctx: ThresholdContext, session: bytes) -> Self:
        sender, r = cls._open(data, session)
        mk = _payload(r, ctx.switch_key_shape.layout.moduli, ctx.ring, "relinearisation key")
        shape = ctx.automorphism_shape
        empty = np.zeros(0, dtype=np.uint64)
        auto = _payload(r, shape.b_moduli if shape else empty, ctx.ring, "rotation keys")
        r.end()
        return cls(session, sender, mk, auto)


@dataclass(frozen=True)
class CiphertextMessage(_Message):
    """A ciphertext under the joint key: its level, scaling degree and both elements."""

    STEP: ClassVar[str] = "ciphertext"
    session: bytes
    sender: str
    level: int
    deg: int
    payload: bytes

    def to_bytes(self) -> bytes:
        w = Writer().u32(self.level).u32(self.deg).bytes_(self.payload)
        return self._frame(w)

    @classmethod
    def from_bytes(cls, data: bytes, ctx: ThresholdContext, session: bytes) -> Self:
        sender, r = cls._open(data, session)
        level, deg = _shape(r, ctx)
        moduli = ctx.ciphertext_layout(level, deg).moduli
        payload = _payload(r, moduli, ctx.ring, "ciphertext")
        r.end()
        return cls(session, sender, level, deg, payload)


@dataclass(frozen=True)
class DecryptionRequest(_Message):
    """Ciphertext holder -> parties: ``c1`` of the ciphertext compressed to two towers (a
    decryption share needs nothing else), its level and degree, and a request id that binds the
    shares. Reveals nothing beyond the ciphertext."""

    STEP: ClassVar[str] = "decrypt-request"
    session: bytes
    sender: str
    request_id: int
    level: int
    deg: int
    c1: bytes

    def to_bytes(self) -> bytes:
        w = Writer().u64(self.request_id).u32(self.level).u32(self.deg).bytes_(self.c1)
        return self._frame(w)

    @classmethod
    def from_bytes(cls, data: bytes, ctx: ThresholdContext, session: bytes) -> Self:
        sender, r = cls._open(data, session)
        request_id = r.u64()
        level, deg = _shape(r, ctx, ctx.params.decrypt_max_level)
        c1 = _payload(r, ctx.q_moduli[:DECRYPTION_TOWERS], ctx.ring, "decryption request")
        r.end()
        return cls(session, sender, request_id, level, deg, c1)


@dataclass(frozen=True)
class DecryptionShare(_Message):
    """Party -> fuser: ``s_i * c1 + e_i`` with the flooding noise ``e_i``, possibly plus the
    parties' common mask (masked decryption); on its own it reveals nothing about ``s_i``."""

    STEP: ClassVar[str] = "decrypt-share"
    session: bytes
    sender: str
    request_id: int
    share: bytes

    def to_bytes(self) -> bytes:
        return self._frame(Writer().u64(self.request_id).bytes_(self.share))

    @classmethod
    def from_bytes(cls, data: bytes, ctx: ThresholdContext, session: bytes) -> Self:
        sender, r = cls._open(data, session)
        request_id = r.u64()
        share = _payload(r, ctx.q_moduli[:DECRYPTION_TOWERS], ctx.ring, "decryption share")
        r.end()
        return cls(session, sender, request_id, share)


@dataclass(frozen=True)
class MaskedDecryption(_Message):
    """Server -> parties: ``c0 + sum_i share_i`` where one party's share carries the parties'
    mask ``R`` (uniform modulo ``q0 q1``, from a seed the server does not know): to the server
    this is a uniformly random polynomial; a party subtracts ``R`` and decodes."""

    STEP: ClassVar[str] = "masked-result"
    session: bytes
    sender: str
    request_id: int
    level: int
    deg: int
    masked: bytes

    def to_bytes(self) -> bytes:
        w = Writer().u64(self.request_id).u32(self.level).u32(self.deg).bytes_(self.masked)
        return self._frame(w)

    @classmethod
    def from_bytes(cls, data: bytes, ctx: ThresholdContext, session: bytes) -> Self:
        sender, r = cls._open(data, session)
        request_id = r.u64()
        level, deg = _shape(r, ctx, ctx.params.decrypt_max_level)
        masked = _payload(r, ctx.q_moduli[:DECRYPTION_TOWERS], ctx.ring, "masked result")
        r.end()
        return cls(session, sender, request_id, level, deg, masked)


@dataclass(frozen=True)
class BootstrapRequest(_Message):
    """Owner -> parties (interactive bootstrapping): ``c1`` of the scale-adjusted ciphertext.
    The common random element ``a`` is the session's CRP for ``request_id``."""

    STEP: ClassVar[str] = "boot-request"
    session: bytes
    sender: str
    request_id: int
    level: int
    deg: int
    c1: bytes

    def to_bytes(self) -> bytes:
        w = Writer().u64(self.request_id).u32(self.level).u32(self.deg).bytes_(self.c1)
        return self._frame(w)

    @classmethod
    def from_bytes(cls, data: bytes, ctx: ThresholdContext, session: bytes) -> Self:
        sender, r = cls._open(data, session)
        request_id = r.u64()
        level, deg = _shape(r, ctx, ctx.params.bootstrap_max_level)
        c1 = _payload(r, ctx.boot_c1_layout(level, deg).moduli, ctx.ring, "bootstrap request")
        r.end()
        return cls(session, sender, request_id, level, deg, c1)


@dataclass(frozen=True)
class BootstrapShare(_Message):
    """Party -> owner: ``h0 = s_i c1 - M_i`` and ``h1 = -s_i a + M_i + e_i`` with a fresh
    uniform mask ``M_i``: the owner learns only the re-encryption."""

    STEP: ClassVar[str] = "boot-share"
    session: bytes
    sender: str
    request_id: int
    h0: bytes
    h1: bytes

    def to_bytes(self) -> bytes:
        return self._frame(Writer().u64(self.request_id).bytes_(self.h0).bytes_(self.h1))

    @classmethod
    def from_bytes(cls, data: bytes, ctx: ThresholdContext, session: bytes) -> Self:
        sender, r = cls._open(data, session)
        request_id = r.u64()
        boot = ctx.boot_c1_layout(0, 1)
        h0 = _payload(r, boot.moduli, ctx.ring, "bootstrap share h0")
        h1 = _payload(r, ctx.crp_layout.moduli, ctx.ring, "bootstrap share h1")
        r.end()
        return cls(session, sender, request_id, h0, h1)
