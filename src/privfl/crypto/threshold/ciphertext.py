"""Ciphertexts under the joint key, and what any ciphertext holder does with them.

:class:`Ciphertext` wraps an OpenFHE ciphertext with the few operations the protocols need
(additions, products, rotations, slot sums, Chebyshev sigmoid). :class:`CiphertextHolder` is
the part shared by parties and the server: encryption under the joint public key, turning a
ciphertext into a joint-decryption request and driving interactive bootstrapping as its owner.
A ciphertext that has consumed too many levels for the requested step is refused with
:class:`~privfl.crypto.threshold.context.LevelBudgetError` before OpenFHE is called (OpenFHE
itself would fail while decoding, or return noise).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from privfl.crypto.threshold.context import LevelBudgetError, ThresholdContext
from privfl.crypto.threshold.messages import (
    BootstrapRequest,
    BootstrapShare,
    CiphertextMessage,
    DecryptionRequest,
)
from privfl.crypto.threshold.params import DECRYPTION_TOWERS
from privfl.errors import InputError, ProtocolError, UnknownPartyError

__all__ = [
    "Ciphertext",
    "CiphertextHolder",
    "JointDecryptionError",
    "fuse_and_decode",
    "imaginary_parts",
]

Pending = BootstrapRequest | DecryptionRequest


_MAX_ABS = 2.0**56  # two towers of 60 + 59 bits at a 59-bit scale hold |x| < 2^57 (with sign)
_MIN_MAX_ABS = 2.0**-30  # a vector this small encodes below one unit of the 59-bit scale


def _plain_values(values: npt.ArrayLike, slots: int) -> list[float]:
    """Reals to encode: finite, ``|x| < 2^56``, at most ``slots``. A vector whose largest
    magnitude is below ``2^-30`` (far below any decryption error) is encoded as zeros:
    OpenFHE refuses to encode a vector that rounds to nothing at the scale."""
    vec = np.asarray(values, dtype=np.float64).ravel()
    if vec.size > slots or not np.all(np.isfinite(vec)):
        raise InputError(f"encrypt takes at most {slots} finite values")
    largest = float(np.max(np.abs(vec))) if vec.size else 0.0
    if largest >= _MAX_ABS:
        raise InputError("values must stay below 2^56 in magnitude (decryption capacity)")
    return [0.0] * vec.size if largest < _MIN_MAX_ABS else [float(v) for v in vec]


class JointDecryptionError(ProtocolError):
    """The fused shares do not decode: a share is missing, wrong or from another request."""


def fuse_and_decode(
    ctx: ThresholdContext, shares: Sequence[Any], length: int, every_slot: bool = False
) -> npt.NDArray[np.float64]:
    """OpenFHE's ``MultipartyDecryptFusion`` of decryption shares (native objects, the first
    carrying ``c0``) and the first ``length`` real slots of the plaintext. ``every_slot``:
    up to the ``ring / 2`` slots the plaintext holds, not only the set's batch (a batch
    smaller than that is packed sparsely: decoded at ``ring / 2`` slots it repeats, and
    what differs between the copies is in plaintext coefficients the batch's decoding never
    reads). It sets the first share's slots: pass a share made for this decoding."""
    limit = ctx.ring // 2 if every_slot else ctx.slots
    if not 1 <= length <= limit:
        raise InputError(f"length must be in 1..{limit}")
    if every_slot:
        shares[0].SetSlots(limit)
    return np.asarray(_decoded(ctx, shares, length, complex_values=False), dtype=np.float64)


def _decoded(
    ctx: ThresholdContext, shares: Sequence[Any], length: int, complex_values: bool
) -> npt.NDArray[Any]:
    """The first ``length`` slots of the fused ``shares``, real or complex (``ctx`` must
    decode COMPLEX for the latter); :class:`JointDecryptionError` when they do not decode."""
    try:
        plain = ctx.cc.MultipartyDecryptFusion(list(shares))
        plain.SetLength(length)
        got = plain.GetCKKSPackedValue() if complex_values else plain.GetRealPackedValue()
        values = np.asarray(got, dtype=np.complex128 if complex_values else np.float64)
    except RuntimeError as exc:
        raise JointDecryptionError(f"the decryption shares do not decode: {exc}") from exc
    if not np.all(np.isfinite(values)):
        raise JointDecryptionError("the decryption shares decode to non-finite values")
    return values


def imaginary_parts(
    ctx: ThresholdContext, share: Any, level: int, deg: int, tag: str
) -> npt.NDArray[np.float64]:
    """The imaginary parts of all ``ring / 2`` slots of the plaintext that ``share`` (one
    fused share: the lead's, carrying every other share and ``c0``; a ciphertext of
    :meth:`~ThresholdContext.c1_layout` ``(level, deg)``) decodes to, which ``ctx``'s REAL
    decoding zeroes: its coefficients decoded once more by the twin context that decodes
    complex slots (:meth:`ThresholdContext.for_parameters`, ``complex_slots``). Run beside
    :func:`fuse_and_decode` of the same share, whose refusals it does not make."""
    twin = ThresholdContext.for_parameters(ctx.params, ctx.parties, complex_slots=True)
    payload = ctx.dump(ctx.c1_layout(level, deg), share)
    copy = twin.load("ciphertext", twin.c1_layout(level, deg), payload, tag)
    copy.SetSlots(twin.ring // 2)
    values = _decoded(twin, [copy], twin.ring // 2, complex_values=True)
    return np.asarray(values.imag, dtype=np.float64).copy()


class Ciphertext:
    """A CKKS ciphertext under the joint key (``native`` is the OpenFHE object)."""

    __slots__ = ("context", "native")

    def __init__(self, context: ThresholdContext, native: Any) -> None:
        self.context = context
        self.native = native

    @property
    def level(self) -> int:
        """Rescalings done so far (OpenFHE's level)."""
        return int(self.native.GetLevel())

    @property
    def deg(self) -> int:
        """Scaling degree: 2 right after a product (FLEXIBLEAUTO rescales lazily)."""
        return int(self.native.GetNoiseScaleDeg())

    @property
    def levels_used(self) -> int:
        """Levels consumed, counting a pending rescale."""
        return self.level + self.deg - 1

    def rescaled(self) -> Ciphertext:
        """The same value with its pending rescale done now (FLEXIBLEAUTO rescales a product
        only when the next product needs it): one tower fewer, the same levels used, so
        later rotations and additions work on fewer towers. Adds the rescale's rounding
        error (about ``sqrt(N/12 (1 + 2N/3))`` in coefficient units at the new scale); a
        ciphertext with no pending rescale is returned as is."""
        if self.deg < 2:
            return self
        towers = self.context.params.multiplicative_depth + 1 - self.level
        return self._new(self.context.cc.Compress(self.native, towers - 1))

    def _other(self, other: Ciphertext | float | Sequence[float]) -> Any:
        if isinstance(other, Ciphertext):
            return other.native
        if isinstance(other, int | float):
            return _plain_values([other], 1)[0]
        vec = _plain_values(other, self.context.slots)
        return self.context.cc.MakeCKKSPackedPlaintext(vec, 1, self.level)

    def _new(self, native: Any) -> Ciphertext:
        return Ciphertext(self.context, native)

    def __add__(self, other: Ciphertext | float | Sequence[float]) -> Ciphertext:
        return self._new(self.context.cc.EvalAdd(self.native, self._other(other)))

    def __sub__(self, other: Ciphertext | float | Sequence[float]) -> Ciphertext:
        return self._new(self.context.cc.EvalSub(self.native, self._other(other)))

    def __neg__(self) -> Ciphertext:
        return self._new(self.context.cc.EvalNegate(self.native))

    def __mul__(self, other: Ciphertext | float | Sequence[float]) -> Ciphertext:
        """Product (ciphertext, plaintext vector or scalar): one level, relinearised."""
        depth = self.context.params.multiplicative_depth
        used = self.levels_used
        if isinstance(other, Ciphertext):
            used = max(used, other.levels_used)
        if used >= depth:
            raise LevelBudgetError(f"no level left for a product (depth {depth} used up)")
        return self._new(self.context.cc.EvalMult(self.native, self._other(other)))

    def rotate(self, steps: int) -> Ciphertext:
        """Slots rotated left by ``steps`` (needs the rotation key for ``steps``)."""
        if steps not in self.context.steps:
            raise InputError(
                f"no rotation key for step {steps}; keys exist for {self.context.steps}"
            )
        return self._new(self.context.cc.EvalRotate(self.native, steps))

    def sum_slots(self, width: int | None = None) -> Ciphertext:
        """Every slot receives the sum of ``width`` consecutive slots (OpenFHE ``EvalSum``;
        needs the set's sum keys); ``width`` defaults to the batch size."""
        width = width or self.context.slots
        if width & (width - 1) or not 1 <= width <= self.context.slots:
            raise InputError("width must be a power of two up to the batch size")
        if any(1 << k not in self.context.steps for k in range(int(math.log2(width)))):
            raise InputError("this parameter set has no sum keys")
        return self._new(self.context.cc.EvalSum(self.native, width))

    def logistic(self, low: float = -10.0, high: float = 10.0, degree: int = 13) -> Ciphertext:
        """Chebyshev approximation of the sigmoid on ``[low, high]`` (``EvalLogistic``);
        degree 13 uses 5 levels. Slots outside the interval make the result meaningless."""
        need = math.ceil(math.log2(degree + 1)) + 1
        if self.levels_used + need > self.context.params.multiplicative_depth:
            raise LevelBudgetError(f"a degree-{degree} sigmoid needs {need} levels")
        return self._new(self.context.cc.EvalLogistic(self.native, low, high, degree))

    def to_message(self, session: bytes, sender: str) -> CiphertextMessage:
        """The ciphertext as a message (refused if its scaling factor is not the canonical
        one for its level: the receiver rebuilds it from its own template)."""
        ctx = self.context
        layout = ctx.ciphertext_layout(self.level, self.deg)
        expected = ctx.scaling_factor(self.level, self.deg)
        if not math.isclose(self.native.GetScalingFactor(), expected, rel_tol=1e-9):
            raise ProtocolError("ciphertext has a non-canonical scaling factor")
        return CiphertextMessage(
            session, sender, self.level, self.deg, ctx.dump(layout, self.native)
        )

    @classmethod
    def from_message(cls, context: ThresholdContext, message: CiphertextMessage) -> Ciphertext:
        """Rebuild a ciphertext from a decoded (hence checked) message."""
        layout = context.ciphertext_layout(message.level, message.deg)
        native = context.load("ciphertext", layout, message.payload, message.session.hex())
        return cls(context, native)


class CiphertextHolder:
    """What every role holding ciphertexts does: encrypt under the joint key, ask for a joint
    decryption, own an interactive bootstrap. Request ids bind shares to requests."""

    def __init__(self, name: str, context: ThresholdContext, session: bytes) -> None:
        self.name = name
        self.context = context
        self.session = session
        self.public_key: Any | None = None
        self.public_key_rows = b""  # the joint public key's b half (this holder's own copy)
        self._next_id = 0
        self._decryptions: dict[int, Any] = {}
        self._bootstraps: dict[int, Any] = {}

    @property
    def tag(self) -> str:
        """OpenFHE key tag of every joint object of this session."""
        return self.session.hex()

    def use_joint_public_key(self, b_payload: bytes) -> None:
        """Encrypt under the joint public key whose ``b`` half is ``b_payload`` (the ``a``
        half is the session's common random element): a key kept from an earlier session."""
        self.public_key = self._load_joint_public_key(b_payload)

    def _load_joint_public_key(self, b_payload: bytes) -> Any:
        self.public_key_rows = bytes(b_payload)
        ctx = self.context
        shape = ctx.public_key_shape
        b = np.frombuffer(b_payload, dtype=np.uint64).reshape(len(shape.b_index), ctx.ring)
        payload = shape.merge(ctx.crp(shape, self.session, "public-key"), b)
        return ctx.load("public_key", shape.layout, payload, self.tag)

    def encrypt(self, values: npt.ArrayLike, level: int = 0) -> Ciphertext:
        """Public-key encryption of up to ``slots`` reals under the joint key, at ``level``
        (a higher level has fewer towers: a smaller ciphertext with fewer levels left)."""
        if self.public_key is None:
            raise ProtocolError(f"{self.name} has no joint public key yet (run key generation)")
        if not 0 <= level <= self.context.params.decrypt_max_level:
            raise InputError(f"level must be in 0..{self.context.params.decrypt_max_level}")
        vec = _plain_values(values, self.context.slots)
        plain = self.context.cc.MakeCKKSPackedPlaintext(vec, 1, level)
        return Ciphertext(self.context, self.context.cc.Encrypt(self.public_key, plain))

    @property
    def last_request_id(self) -> int:
        """The last request id this holder used (a party answers each id once per key set)."""
        return self._next_id

    def _request_id(self) -> int:
        self._next_id += 1
        return self._next_id

    def _register(self, store: dict[int, Any], prepared: Any) -> tuple[int, Any]:
        """A fresh request id for ``prepared`` (kept until the shares come back) and its
        ``c1`` alone (what the parties need)."""
        rid = self._request_id()
        store[rid] = prepared
        c1 = prepared.Clone()
        c1.RemoveElement(0)
        return rid, c1

    def request_decryption(self, ct: Ciphertext) -> DecryptionRequest:
        """Compress ``ct`` to two towers and ask every party for a decryption share of it."""
        ctx = self.context
        if ct.levels_used > ctx.params.decrypt_max_level:
            raise LevelBudgetError(
                f"ciphertext used {ct.levels_used} levels; joint decryption needs "
                f"{DECRYPTION_TOWERS} towers left (at most {ctx.params.decrypt_max_level} used)"
            )
        compressed = ctx.cc.Compress(ct.native, DECRYPTION_TOWERS)
        rid, c1 = self._register(self._decryptions, compressed)
        payload = ctx.dump(ctx.c1_layout(ct.level, ct.deg), c1)
        return DecryptionRequest(self.session, self.name, ct.level, ct.deg, rid, payload)

    def _pending_decryption(self, request: DecryptionRequest) -> Any:
        compressed = self._decryptions.pop(request.request_id, None)
        if compressed is None or request.sender != self.name:
            raise ProtocolError(
                f"no pending decryption request {request.request_id} of {self.name}"
            )
        return compressed

    def start_bootstrap(self, ct: Ciphertext) -> BootstrapRequest:
        """Owner: adjust the scale (``IntMPBootAdjustScale``) and ask every party for its
        bootstrapping shares of ``c1``. Refuses a ciphertext too deep to be refreshed."""
        ctx = self.context
        limit = ctx.params.bootstrap_max_level
        if ct.levels_used > limit:
            raise LevelBudgetError(
                f"ciphertext used {ct.levels_used} levels; interactive bootstrapping "
                f"(SLACK) can refresh it only up to {limit} of {ctx.params.multiplicative_depth}"
            )
        rid, c1 = self._register(self._bootstraps, ctx.cc.IntMPBootAdjustScale(ct.native))
        payload = ctx.dump(ctx.boot_c1_layout(ct.level, ct.deg), c1)
        return BootstrapRequest(self.session, self.name, ct.level, ct.deg, rid, payload)

    def finish_bootstrap(
        self, request: BootstrapRequest, shares: Sequence[BootstrapShare]
    ) -> Ciphertext:
        """Owner: add all parties' shares (``IntMPBootAdd``) and re-encrypt
        (``IntMPBootEncrypt``): a fresh ciphertext of the same values at level 0."""
        ctx = self.context
        adjusted = self._bootstraps.pop(request.request_id, None)
        if adjusted is None or self.public_key is None:
            raise ProtocolError(f"no pending bootstrap {request.request_id} of {self.name}")
        names = {s.sender for s in shares}
        if len(names) != len(shares) or len(shares) != ctx.parties:
            raise UnknownPartyError(
                f"bootstrapping needs one share from each of {ctx.parties} parties"
            )
        if any(s.request_id != request.request_id for s in shares):
            raise ProtocolError("a bootstrapping share answers another request")
        boot, crp = ctx.boot_c1_layout(0, 1), ctx.crp_layout
        pairs = [
            [
                ctx.load("ciphertext", boot, s.h0, self.tag),
                ctx.load("ciphertext", crp, s.h1, self.tag),
            ]
            for s in shares
        ]
        a = ctx.crp_boot_element(self.session, request.request_id)
        total = ctx.cc.IntMPBootAdd(pairs)
        return Ciphertext(ctx, ctx.cc.IntMPBootEncrypt(self.public_key, total, a, adjusted))
