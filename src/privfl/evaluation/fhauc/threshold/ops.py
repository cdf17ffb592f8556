"""Threshold FHAUC's arithmetic: ciphertexts the aggregator's unchanged code can use, the value
scaling every party applies, and the noise model of the verification (pure functions).

The aggregator's :meth:`~privfl.evaluation.fhauc.Aggregator.aggregate` (and every deviating
aggregator of :mod:`~privfl.evaluation.fhauc.tamper`) is written against SEAL ciphertexts.
:class:`ThresholdCiphertext` gives OpenFHE ciphertexts under the joint key the same
operations (``+``, ``*`` by a ciphertext or an integer, ``rotate``, ``window_sum``,
``scale_by``), so threshold mode runs the *same* aggregation code:

* a product consumes one level; the aggregator's integer multiplier ``c`` is applied by
  doubling and adding (no level, "at scale 1" as in single-key mode); ``scale_by`` multiplies
  by a real constant (one level). A reply decrypts as long as it has used at most 2 of the
  ``"fhauc"`` set's 3 levels (two towers stay for the flooding noise). Semi-honest uploads
  are fresh ciphertexts at level 1 (three towers: 738 KB each), malicious ones at level 0
  (the multiplier's level, and one so that a deviating aggregator's extra plaintext product
  still decrypts and is caught by the verification). An AUC upload is *one* ciphertext per
  execution (semi-honest; malicious where :func:`~.plan.joint_pays`), T and F sharing
  it in the joint layout
  (:mod:`~privfl.evaluation.fhauc.layout`: the aggregator rotates the sum by ``W`` with the
  joint key's sum keys, adding key-switching noise once, :data:`ROTATION_NOISE`).
* uploads stay *lazy* (checked coefficient rows) until an OpenFHE operation needs them;
  their sums are computed on the rows (:class:`ThresholdCiphertext`).
* the aggregator's reply for one execution is ``num + den`` in one ciphertext (``num`` in
  every slot, ``den`` added at :attr:`Layout.denominator_slot`): one joint decryption per
  execution (:func:`decode_pairs`).

Capacity, noise and scaling (why parties scale their values)
------------------------------------------------------------
Joint decryption keeps two towers at a 59-bit scale: a decrypted value must stay below
``2^56``, in practice far below (:func:`capacity_bits`, derived below), and OpenFHE's decoder
refuses a result whose error exceeds ``2^-5`` (value units). The aggregator's reply
holds ``c·(X + Y)`` with ``X + Y <= 4 (M C)^2`` (``M`` parties, ``C`` the provisioned size
bound) and ``c < 2^c_hi``, and its error is the product's error times ``c``: about
``c 2 sqrt(L) M B e`` for ``L`` slots of products of ``M`` summed values below ``B`` with
fresh error ``e`` (:func:`fresh_error_bits`). Every party therefore multiplies all its slot
values by ``2^-k`` with ``k`` the larger of what capacity and the decoder need
(:func:`value_shift`: public, the same for every party), and multiplies what it decrypts by
``2^2k``. The aggregator's multiplier is ``c`` in ``[2^20, 2^(20 + multiplier_bits))`` in
both modes (the malicious one's range of single-key mode); the flooding noise of the joint
decryption then costs ``2^2k / c`` in ``X/c`` units.

In the malicious variant an integer ``c`` applied at scale 1 made ``k`` grow by ``log2 c``
(the decoder sees ``c`` times the product's error), so the error of ``X/c`` grew as ``c``
times the *square* of the product's error: at 3 parties x 2,000 rows it was ``2^-5`` and
every honest session was refused for lack of guarantee. Malicious replies therefore apply
``c`` as the real ``c / 2^j`` at one level (``times_multiplier`` of the aggregator;
uploads are at level 0, so two levels remain for the product and the multiplier), with
``(k, j)`` chosen by :func:`~privfl.evaluation.fhauc.threshold.plan.multiplier_scaling`,
and parties multiply what they decode by ``2^{2k + j}``. The variant's tolerance uses these
terms (:func:`~.noise.sigma_products`); its acceptance rule and guarantee are the single-key ones,
and each party checks before uploading that they can be met (refusing otherwise, naming the
setting), never accepting more loosely.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from privfl.crypto.threshold import (
    Ciphertext,
    CiphertextMessage,
    ThresholdContext,
    ThresholdParameters,
    parameter_set,
)
from privfl.crypto.threshold.messages import CiphertextRows
from privfl.crypto.threshold.params import SCALING_MOD_BITS
from privfl.crypto.threshold.wire import add_mod
from privfl.errors import InputError, ProtocolError
from privfl.evaluation.fhauc.layout import Layout
from privfl.evaluation.fhauc.threshold.noise import FLOODING_MARGIN as FLOODING_MARGIN
from privfl.evaluation.fhauc.threshold.noise import ROTATION_NOISE as ROTATION_NOISE
from privfl.evaluation.fhauc.threshold.noise import fresh_error_bits
from privfl.evaluation.fhauc.threshold.noise import semi_honest_precision as semi_honest_precision
from privfl.evaluation.fhauc.threshold.noise import sigma_products as sigma_products

# Decode capacity, derived (docs/security/fhauc.md, "Why a reply decodes"): OpenFHE's decoder
# (CKKSPackedEncoding::Decode) refuses a reply whose imaginary part, read off m(X) - m(1/X)
# at scale 2^59, has a coefficient std above 2^(59-5): a per-slot imaginary error s is
# allowed up to 2^-5 sqrt(2n) (n slots). Encoding in doubles leaves every uploaded slot a
# relative error rho = 2^-49.7 (measured; ~ (log2 2n + 1) 2^-53), so a malicious reply
# c' 2^-2k sum_i T_i F_i has s <= c' 2^-2k rho sqrt(2 sum_i (T_i F_i)^2) (an upper estimate:
# OpenFHE's was 1.4-6 bits lower): the slot *products* of additive shares count, not the
# reply (replies of 2^31 were refused once products reached 2^50-2^52, 400 slots; fresh
# vectors decode to 2^50). Honest products grow as (M C)^2 2^(2 hiding_bits); their constant
# is the measured part: at hiding_bits = 0 replies of 2^37.8 decoded and 2^40 failed on ring
# 2^12: the bound is 2^38 there, 2^37 on ring 2^14 (1 bit of margin; the decoder allows half
# a bit more). Figures: benchmarks/threshold_decode_capacity.py.
DECODE_CAPACITY_BITS = 44.0


def capacity_bits(ring: int) -> float:
    """log2 of the largest ``c' 4 (M C)^2 2^(2 hiding_bits) 2^-2k`` a reply may reach."""
    return DECODE_CAPACITY_BITS - 0.5 * math.log2(ring)


FHAUC_PARAMETER_SET = "fhauc"


def fhauc_parameters() -> ThresholdParameters:
    """The threshold parameter set of FHAUC sessions (``"fhauc"``: ring 2^14, 128-bit;
    tests switch :data:`FHAUC_PARAMETER_SET` to the insecure ``"fhauc-test"``)."""
    return parameter_set(FHAUC_PARAMETER_SET)


@dataclass(frozen=True, eq=False)
class _Rows:
    """A fresh ciphertext's coefficient rows and shape, not yet handed to OpenFHE."""

    ctx: ThresholdContext
    level: int
    deg: int
    rows: npt.NDArray[np.uint64]
    tag: str

    @property
    def shape(self) -> tuple[int, int]:
        return self.level, self.deg


def _doubling_product(ct: Ciphertext, k: int) -> Ciphertext:
    """``k * ct`` for an integer ``k > 0`` by binary doubling: additions only, no level."""
    out: Ciphertext | None = None
    base = ct
    while k:
        if k & 1:
            out = base if out is None else out + base
        k >>= 1
        if k:
            base = base + base
    if out is None:
        raise ValueError("the multiplier must be a positive integer")
    return out


class ThresholdCiphertext:
    """An OpenFHE ciphertext under the joint key with the SEAL wrapper's operations.

    A ciphertext loaded from an upload stays *lazy* (its checked coefficient rows, RNS and
    NTT form) until an operation needs OpenFHE: adding two lazy ciphertexts of the same
    shape adds their rows modulo each prime, which is exactly OpenFHE's ``EvalAdd`` on
    ciphertexts of equal level and scale, so summing ``M`` uploads costs one OpenFHE
    deserialisation instead of ``M``."""

    __slots__ = ("_ct", "_factor", "_lazy", "_stride", "_window")

    def __init__(
        self,
        ct: Ciphertext | None = None,
        lazy: _Rows | None = None,
        factor: float = 1.0,
        window: int = 0,
        stride: int = 1,
    ) -> None:
        if (ct is None) == (lazy is None):
            raise ValueError("a ciphertext is either native or lazy")
        self._ct, self._lazy, self._factor, self._window = ct, lazy, factor, window
        self._stride = stride

    @classmethod
    def from_message(cls, ctx: ThresholdContext, message: CiphertextMessage) -> ThresholdCiphertext:
        """A lazy ciphertext from a decoded (hence checked) message."""
        layout = ctx.ciphertext_layout(message.level, message.deg)
        rows = np.frombuffer(message.payload, dtype=np.uint64).reshape(layout.vectors, ctx.ring)
        return cls(lazy=_Rows(ctx, message.level, message.deg, rows, message.session.hex()))

    @classmethod
    def from_rows(
        cls, ctx: ThresholdContext, message: CiphertextRows, session: bytes
    ) -> ThresholdCiphertext:
        """A lazy ciphertext from a checked message whose rows were never copied into bytes
        (:func:`~privfl.crypto.threshold.messages.ciphertext_rows`)."""
        vectors = ctx.ciphertext_layout(message.level, message.deg).vectors
        rows = message.rows.reshape(vectors, ctx.ring)
        return cls(lazy=_Rows(ctx, message.level, message.deg, rows, session.hex()))

    @property
    def ct(self) -> Ciphertext:
        """The OpenFHE ciphertext (built once from the rows of a lazy one; a pending real
        factor from :meth:`scale_by` is applied here, at one level, *then* a pending
        rotate-and-sum from :meth:`window_sum`, on the tower the factor's rescale dropped)."""
        if self._window:
            base = ThresholdCiphertext(self._ct, self._lazy, self._factor).ct
            scaled = base.rescaled() if self._factor != 1.0 else base
            summed = _rotate_and_sum(ThresholdCiphertext(scaled), self._window, self._stride)
            self._ct, self._lazy, self._factor, self._window = summed.ct, None, 1.0, 0
        if self._factor != 1.0:
            base = ThresholdCiphertext(self._ct, self._lazy).ct
            self._ct, self._lazy, self._factor = base * self._factor, None, 1.0
        if self._ct is None:
            lazy = self._lazy
            if lazy is None:
                raise ProtocolError("a threshold ciphertext holds neither rows nor a ciphertext")
            layout = lazy.ctx.ciphertext_layout(lazy.level, lazy.deg)
            native = lazy.ctx.load("ciphertext", layout, lazy.rows.tobytes(), lazy.tag)
            self._ct, self._lazy = Ciphertext(lazy.ctx, native), None
        return self._ct

    def __add__(self, other: object) -> ThresholdCiphertext:
        a, b = self._lazy, None
        plain = self._factor == 1.0 and not self._window
        if isinstance(other, ThresholdCiphertext) and plain:
            b = other._lazy if other._factor == 1.0 and not other._window else None
        if a is not None and b is not None and a.shape == b.shape and a.tag == b.tag:
            moduli = a.ctx.ciphertext_layout(a.level, a.deg).moduli
            rows = add_mod(a.rows, b.rows, moduli)
            return ThresholdCiphertext(lazy=_Rows(a.ctx, a.level, a.deg, rows, a.tag))
        return ThresholdCiphertext(self.ct + self._of(other))

    @property
    def scale(self) -> float:
        return float(2.0**SCALING_MOD_BITS)

    def _of(self, other: object) -> Ciphertext | list[float]:
        if isinstance(other, ThresholdCiphertext):
            return other.ct
        return [float(v) for v in np.asarray(other, dtype=np.float64).ravel()]

    def __sub__(self, other: object) -> ThresholdCiphertext:
        return ThresholdCiphertext(self.ct - self._of(other))

    def __mul__(self, other: object) -> ThresholdCiphertext:
        if isinstance(other, ThresholdCiphertext):
            return ThresholdCiphertext(self.ct * other.ct)
        if isinstance(other, int | np.integer) and not isinstance(other, bool):
            k = int(other)
            if self._window:  # k·(sum of rotations) = sum of rotations of k·x, exactly
                base = ThresholdCiphertext(self._ct, self._lazy) * k
                rescaled = base.ct.rescaled()
                return ThresholdCiphertext(rescaled, None, self._factor, self._window, self._stride)
            if k == 0:
                return ThresholdCiphertext(self.ct - self.ct)
            out = _doubling_product(self.ct, abs(k))
            return ThresholdCiphertext(out if k > 0 else -out)
        raise TypeError("multiply by a ciphertext or an integer (scale_by for reals)")

    def scale_by(self, factor: float, precision_bits: int = 30) -> ThresholdCiphertext:
        """Every slot times a real ``factor`` (one level; ``precision_bits`` is SEAL's).
        Consecutive real factors fold into one product, applied when the ciphertext is next
        used: an aggregator that rescales a reply spends no more levels than the honest
        multiplier does (as a deviating aggregator could by choosing its ``c``). A pending
        window sum runs after the factor's rescale, on one tower fewer (noise: as for an
        integer multiplier, :meth:`window_sum`)."""
        if not math.isfinite(factor):
            raise ValueError("factor must be finite")
        factor = self._factor * float(factor)
        return ThresholdCiphertext(self._ct, self._lazy, factor, self._window, self._stride)

    def scale_by_slots(
        self, factors: npt.ArrayLike, precision_bits: int = 30
    ) -> ThresholdCiphertext:
        """Slot ``i`` times ``factors[i]``: a plaintext product at one level, applied now
        (after any pending factor and window sum; ``precision_bits`` is SEAL's)."""
        vec = np.asarray(factors, dtype=np.float64).ravel()
        if not np.isfinite(vec).all():
            raise ValueError("factors must be finite")
        return ThresholdCiphertext(self.ct * [float(v) for v in vec])

    def rotate(self, steps: int) -> ThresholdCiphertext:
        return ThresholdCiphertext(self.ct.rotate(int(steps)))

    def window_sum(self, window: int, stride: int = 1) -> ThresholdCiphertext:
        """Rotate-and-sum over ``window`` slots ``stride`` apart (``log2 window`` rotations,
        by ``stride``, ``2 stride``, ...: the layout's lanes stay apart), done when the
        result is next used. An integer product that comes first (the aggregator's
        multiplier ``c``, :meth:`__mul__`) is applied *before* the rotations, then the
        pending rescale: ``c·sum_i rot(x, i) = sum_i rot(c·x, i)`` exactly, and the
        ``log2 window`` rotations then run on one tower fewer (a third less work on the
        ``"fhauc"`` set). Noise: the rotations' key-switching error now enters at scale
        2^59 after ``c`` (before: at 2^118, before ``c``); the rescale's rounding error
        enters after ``c`` as before (then at decryption), now summed over the window; both
        stay far below the flooding noise, and the measured ``X/c`` error is the same in
        both orders
        (docs/guide/threshold-ckks.md, ``benchmarks/threshold_window_order.py``)."""
        if window <= 1:
            return self
        if self._window or self._factor != 1.0:
            return _rotate_and_sum(ThresholdCiphertext(self.ct), window, stride)
        return ThresholdCiphertext(self._ct, self._lazy, window=window, stride=stride)


def _rotate_and_sum(x: ThresholdCiphertext, window: int, stride: int = 1) -> ThresholdCiphertext:
    """``sum_{i < window} rot(x, i·stride)`` by ``log2 window`` rotations and additions."""
    acc = x
    step = 1
    while step < window:
        acc = acc + acc.rotate(step * stride)
        step *= 2
    return acc


# ---------------------------------------------------------------------- session sizing
def session_layout(
    params: ThresholdParameters,
    parties: int,
    terms: int,
    joint: bool = False,
    lanes: bool = False,
) -> Layout:
    """A session's layout (:class:`InputError` when the parameter set cannot hold
    ``parties``); ``joint``: T and F in one ciphertext when they fit; ``lanes``: the
    executions side by side in two ciphertexts (:class:`~.layout.Layout`; the joint key's
    sum keys hold every rotation by a power of two, so the rotations by ``W`` and by
    multiples of the lanes too)."""
    params.check(parties)
    if lanes and params.sum_keys:
        return Layout.in_lanes(terms, params.batch_size, joint)
    return Layout.for_terms(terms, params.batch_size, joint and params.sum_keys)


def check_decryptions(params: ThresholdParameters, layout: Layout, executions: int) -> None:
    """:class:`InputError` before any work when ``executions`` need more joint decryptions
    (one per ciphertext group) than the key set's budget."""
    groups = layout.groups(executions)
    if groups > params.max_decryptions:
        raise InputError(
            f"refused before upload: {executions} executions need {groups} joint "
            f"decryptions, and the flooding noise of parameter set {params.name!r} allows "
            f"{params.max_decryptions} per key set: use a smaller min_guarantee_bits (fewer "
            "executions)"
        )


def value_shift(
    parties: int,
    max_samples: int,
    share_bound_bits: float,
    terms: int,
    c_high_bits: float,
    ring: int,
    malicious_mode: bool,
    hiding_bits: int = 0,
) -> int:
    """``k``: parties scale every slot value by ``2^-k`` (module docstring). The larger of
    what capacity needs (``c X 2^-2k``, times ``2^(2 hiding_bits)`` for the masks' bits in
    the slot products, below :func:`capacity_bits`) and what OpenFHE's
    decoder needs against noise: it refuses a result whose error exceeds ``2^-5`` (value
    units), and the reply's error is about ``c 2^-k 2 sqrt(L) M B e`` (``L`` slots of
    products of ``M`` summed values below ``B`` with fresh error ``e``); privfl keeps it
    below ``2^-8``."""
    x_max_bits = 2 * math.log2(parties * max_samples) + (2.0 if malicious_mode else 0.0)
    x_max_bits += 2.0 * hiding_bits  # the masks' extra bits reach the slot products
    capacity = math.ceil(max(0.0, c_high_bits + x_max_bits - capacity_bits(ring)) / 2)
    product = (
        1.0
        + 0.5 * math.log2(max(terms, 1))
        + math.log2(parties)
        + share_bound_bits
        + fresh_error_bits(ring, parties)
    )
    noise = math.ceil(c_high_bits + product + DECODE_MARGIN_BITS)
    return max(0, capacity, noise)


DECODE_MARGIN_BITS = 8.0
