"""Messages of threshold CKKS: key generation, ciphertexts, joint decryption, bootstrapping.

Every message is a frozen dataclass framed by :data:`CODEC` (protocol ``threshold-ckks``,
version 2: magic, protocol, version, step, session id, sender). Its payload holds small
integers and **coefficient payloads** only, at 60 bits per coefficient
(:func:`~privfl.crypto.threshold.wire.pack60`) (OpenFHE objects stripped to their coefficient
vectors, :mod:`privfl.crypto.threshold.wire`). ``from_bytes(data, context, session)`` checks,
in this order and before anything is allocated from the payload: the header (protocol,
version, step, session), each declared level/degree against the context's depth, each field's
length against the exact size the context's layouts give, every coefficient against its
modulus, and trailing bytes. Only :class:`~privfl.errors.ProtocolError` subclasses come out.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, ClassVar, Self

import numpy as np
import numpy.typing as npt

import privfl.crypto.threshold.wire as wire
from privfl.crypto.threshold.params import DECRYPTION_TOWERS
from privfl.errors import MalformedMessageError
from privfl.messages import Codec, Writer

if TYPE_CHECKING:
    from privfl.crypto.threshold.context import ThresholdContext

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
    "LeadDecryption",
    "MaskedDecryption",
    "MultKeyShare",
]

CODEC = Codec("threshold-ckks", 2)
_NO_MODULI = np.zeros(0, dtype=np.uint64)

Moduli = npt.NDArray[np.uint64]


@dataclass(frozen=True)
class _Message:
    """Header fields plus ``int`` fields (``u64`` on the wire) and coefficient payloads
    (``bytes``), in declaration order. A subclass names its step, says which moduli each
    payload holds (:meth:`_moduli`) and, if it has ``level``/``deg``, how many levels the
    declared ciphertext may have used (``MAX_USED``, a :class:`ThresholdParameters` property)."""

    STEP: ClassVar[str]
    MAX_USED: ClassVar[str] = ""
    LAYOUT: ClassVar[str] = ""
    MODULI: ClassVar[dict[str, Callable[[ThresholdContext], Moduli]]] = {}
    session: bytes
    sender: str

    def to_bytes(self) -> bytes:
        w = Writer()
        for f in fields(self)[2:]:
            value = getattr(self, f.name)
            w.bytes_(wire.pack60(value)) if isinstance(value, bytes) else w.u64(value)
        return CODEC.encode(self.STEP, self.session, self.sender, w.getvalue())

    @classmethod
    def from_bytes(cls, data: bytes, ctx: ThresholdContext, session: bytes) -> Self:
        """Decode and check ``data`` against ``ctx`` and ``session`` (see the module doc)."""
        sender, values = cls._decode(data, ctx, session)
        payloads = (v if isinstance(v, int) else v.tobytes() for v in values)
        return cls(session, sender, *payloads)

    @classmethod
    def _decode(
        cls, data: bytes | memoryview, ctx: ThresholdContext, session: bytes
    ) -> tuple[str, list[int | npt.NDArray[np.uint64]]]:
        """The sender and the checked fields in declaration order (coefficient payloads as
        ``(vectors, ring)`` arrays): every check of :meth:`from_bytes`."""
        header, r = CODEC.decode(data, step=cls.STEP, session=session)
        ints: dict[str, int] = {}
        values: list[int | npt.NDArray[np.uint64]] = []
        for f in fields(cls)[2:]:
            if f.type == "int":
                ints[f.name] = r.u64()
                values.append(ints[f.name])
                if f.name == "deg":  # level precedes deg: check the pair before any payload
                    cls._check_shape(ctx, ints["level"], ints["deg"])
                continue
            moduli = cls._moduli(ctx, f.name, ints)
            count, what = len(moduli) * ctx.ring, f"{cls.STEP} {f.name}"
            packed = r.view(wire.packed_bytes(count))  # bounded before it is read
            raw = wire.unpack60_array(packed, count, what)
            values.append(wire.check_rows(moduli, ctx.ring, raw, what))
        r.end()
        return header.sender, values

    @classmethod
    def _check_shape(cls, ctx: ThresholdContext, level: int, deg: int) -> None:
        """A declared (level, degree) must be possible and within the step's level budget."""
        ctx.check_level(level, deg)
        limit = getattr(ctx.params, cls.MAX_USED or "multiplicative_depth")
        if level + deg - 1 > limit:
            raise MalformedMessageError(
                f"{cls.STEP}: a ciphertext declared at level {level}, degree {deg} has used "
                f"more than the {limit} levels this step allows"
            )

    @classmethod
    def _moduli(cls, ctx: ThresholdContext, name: str, ints: dict[str, int]) -> Moduli:
        """The moduli of payload ``name``: from the class's ``MODULI`` table, else those of
        the context's layout method ``LAYOUT`` for the declared (level, degree), else the two
        towers ``q0, q1`` joint decryption keeps."""
        if name in cls.MODULI:
            return cls.MODULI[name](ctx)
        if not cls.LAYOUT:
            return ctx.q_moduli[:DECRYPTION_TOWERS]
        layout: wire.Layout = getattr(ctx, cls.LAYOUT)(ints["level"], ints["deg"])
        return layout.moduli


def _automorphism_b(ctx: ThresholdContext) -> Moduli:
    shape = ctx.automorphism_shape
    return shape.b_moduli if shape is not None else _NO_MODULI


@dataclass(frozen=True)
class KeyGenShare(_Message):
    """Key generation round 1, party -> server: the ``b`` halves of the party's public-key,
    key-switching (relinearisation, first pass) and automorphism-key contributions. Their
    ``a`` halves are the session's common reference polynomials. Reveals RLWE samples only."""

    STEP: ClassVar[str] = "keygen-share"
    public_key: bytes
    switch_key: bytes
    automorphism_keys: bytes

    MODULI: ClassVar[dict[str, Callable[[ThresholdContext], Moduli]]] = {
        "public_key": lambda ctx: ctx.public_key_shape.b_moduli,
        "switch_key": lambda ctx: ctx.switch_key_shape.b_moduli,
        "automorphism_keys": _automorphism_b,
    }


@dataclass(frozen=True)
class JointPublicKeys(_Message):
    """Key generation round 1 -> 2, server -> parties: the ``b`` halves of the joint public
    key (for encryption) and of the summed key-switching key (input of round 2)."""

    STEP: ClassVar[str] = "keygen-joint"
    public_key: bytes
    switch_key: bytes

    MODULI: ClassVar[dict[str, Callable[[ThresholdContext], Moduli]]] = {
        "public_key": lambda ctx: ctx.public_key_shape.b_moduli,
        "switch_key": lambda ctx: ctx.switch_key_shape.b_moduli,
    }


@dataclass(frozen=True)
class MultKeyShare(_Message):
    """Key generation round 2, party -> server: the party's share ``s_i * (a, b)`` of the
    relinearisation key (both halves: neither is a CRP)."""

    STEP: ClassVar[str] = "keygen-mult-share"
    mult_key: bytes

    MODULI: ClassVar[dict[str, Callable[[ThresholdContext], Moduli]]] = {
        "mult_key": lambda ctx: ctx.switch_key_shape.layout.moduli,
    }


@dataclass(frozen=True)
class EvaluationKeys(_Message):
    """Server -> a role that evaluates: the joint relinearisation key and the ``b`` halves of
    the joint automorphism (rotation / sum) keys. Public material."""

    STEP: ClassVar[str] = "eval-keys"
    mult_key: bytes
    automorphism_keys: bytes

    MODULI: ClassVar[dict[str, Callable[[ThresholdContext], Moduli]]] = {
        "mult_key": lambda ctx: ctx.switch_key_shape.layout.moduli,
        "automorphism_keys": _automorphism_b,
    }


@dataclass(frozen=True)
class _Shaped(_Message):
    """A message about one ciphertext: its level and scaling degree come first."""

    level: int
    deg: int


@dataclass(frozen=True)
class CiphertextMessage(_Shaped):
    """A ciphertext under the joint key: its level, scaling degree and both elements."""

    STEP: ClassVar[str] = "ciphertext"
    LAYOUT: ClassVar[str] = "ciphertext_layout"
    payload: bytes


@dataclass(frozen=True, eq=False)
class CiphertextRows:
    """A checked :class:`CiphertextMessage` whose payload stays an array (read-only,
    ``(vectors, ring)``): for a holder that adds uploads on their rows, without a copy into
    ``bytes`` (:meth:`CiphertextMessage.rows_from_bytes`)."""

    sender: str
    level: int
    deg: int
    rows: npt.NDArray[np.uint64]


def ciphertext_rows(
    data: bytes | memoryview, ctx: ThresholdContext, session: bytes
) -> CiphertextRows:
    """:meth:`CiphertextMessage.from_bytes`'s checks, the payload kept as rows."""
    sender, values = CiphertextMessage._decode(data, ctx, session)
    level, deg, rows = values
    if not isinstance(level, int) or not isinstance(deg, int) or isinstance(rows, int):
        raise MalformedMessageError("a ciphertext message has the wrong fields")
    rows.flags.writeable = False
    return CiphertextRows(sender, level, deg, rows)


@dataclass(frozen=True)
class _AboutCiphertext(_Shaped):
    """A step of a request about one ciphertext; the request id binds the shares to it."""

    MAX_USED: ClassVar[str] = "decrypt_max_level"
    request_id: int


@dataclass(frozen=True)
class DecryptionRequest(_AboutCiphertext):
    """Ciphertext holder -> parties: ``c1`` of the ciphertext compressed to two towers (a
    decryption share needs nothing else). Reveals nothing beyond the ciphertext."""

    STEP: ClassVar[str] = "decrypt-request"
    c1: bytes


@dataclass(frozen=True)
class DecryptionShare(_Message):
    """Party -> fuser: ``s_i * c1 + e_i`` with the flooding noise ``e_i``, possibly plus the
    parties' common mask (masked decryption); on its own it reveals nothing about ``s_i``."""

    STEP: ClassVar[str] = "decrypt-share"
    request_id: int
    share: bytes


@dataclass(frozen=True)
class MaskedDecryption(_AboutCiphertext):
    """Server -> parties: ``c0 + sum_i share_i`` where one party's share carries the parties'
    mask ``R`` (uniform modulo ``q0 q1``, from a seed the server does not know): to the server
    this is a uniformly random polynomial; a party subtracts ``R`` and decodes."""

    STEP: ClassVar[str] = "masked-result"
    masked: bytes


@dataclass(frozen=True)
class LeadDecryption(_AboutCiphertext):
    """Server -> the lead party (decryption for the parties only, without a shared mask):
    ``partial = c0 + sum`` of the other ``M - 1`` parties' decryption shares, and ``c1``
    (both compressed to two towers). Only the lead's own share ``s_L c1 + e_L`` completes
    it, and the lead never sends that share anywhere: the server holds ``c0`` and ``M - 1``
    shares, never a fusable set. Two polynomials, whatever ``M``."""

    STEP: ClassVar[str] = "lead-decrypt"
    partial: bytes
    c1: bytes


@dataclass(frozen=True)
class BootstrapRequest(_AboutCiphertext):
    """Owner -> parties (interactive bootstrapping): ``c1`` of the scale-adjusted ciphertext.
    The common random element ``a`` is the session's CRP for ``request_id``."""

    STEP: ClassVar[str] = "boot-request"
    MAX_USED: ClassVar[str] = "bootstrap_max_level"
    LAYOUT: ClassVar[str] = "boot_c1_layout"
    c1: bytes


@dataclass(frozen=True)
class BootstrapShare(_Message):
    """Party -> owner: ``h0 = s_i c1 - M_i`` and ``h1 = -s_i a + M_i + e_i`` with a fresh
    uniform mask ``M_i``: the owner learns only the re-encryption."""

    STEP: ClassVar[str] = "boot-share"
    request_id: int
    h0: bytes
    h1: bytes

    MODULI: ClassVar[dict[str, Callable[[ThresholdContext], Moduli]]] = {
        "h0": lambda ctx: ctx.boot_c1_layout(0, 1).moduli,
        "h1": lambda ctx: ctx.crp_layout.moduli,
    }
