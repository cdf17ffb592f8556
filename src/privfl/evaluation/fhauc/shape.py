"""Whether a decrypted malicious AUC reply has the honest shape in every slot a party decodes
(pure functions, run by the decrypting party on its own plaintext); likewise a malicious
curve reply with threshold keys (:func:`curve_reply_shape_ok`).

A party reads two values per execution, but a decryption shows it every slot, and an
aggregator can keep those two right while it puts other values it computed (the unsummed
per-bin products, say) in the rest: its masks fold into its multiplier's plaintext product, at
no extra level. In an honest reply every slot of an execution's lane holds that execution's
numerator, the denominator sits where the layout puts it, empty lanes and imaginary parts
hold zero; a reply that does not fit within :data:`SHAPE_SIGMAS` model standard deviations is
refused by every party (threshold keys: the lead decodes the imaginary parts with a twin
context, since OpenFHE's REAL decoding zeroes them). What this does not do
(docs/security/fhauc.md, *Limits*): the decrypting party has seen a refused reply all the
same, and values planted *within* the tolerance pass (the tolerance bounds the numerator's
error, far above the honest spread between slots): a bound on what a deviating aggregator
can show, not a proof that it showed nothing.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from privfl.evaluation.fhauc.layout import CurveLayout, Layout

# an honest reply's decoded slots stay within this many model standard deviations (of one
# slot's X/c error, times sqrt 2 for a difference) of the values the layout puts there
SHAPE_SIGMAS = 10.0


def tolerances(
    sigmas: tuple[float, float], c_high_bits: float, scale_bits: float = 0.0
) -> tuple[float, float]:
    """The shape check's tolerances on decoded numerator and denominator slots:
    :data:`SHAPE_SIGMAS` times ``sqrt 2`` (a difference of two slots) times the model's std of
    ``X/c`` and ``Y/c`` (``sigmas``), times the largest multiplier ``c < 2^c_high_bits``,
    divided by ``2^scale_bits`` when the decoded values carry that factor less (threshold
    keys: ``2^(2k + j)``)."""
    factor = SHAPE_SIGMAS * 2.0**0.5 * 2.0 ** (c_high_bits - scale_bits)
    return sigmas[0] * factor, sigmas[1] * factor


def batch_view(raw: npt.ArrayLike, slots: int) -> npt.NDArray[np.float64]:
    """The ``slots`` values a decoding of the batch alone gives, from a decoding of every slot
    the plaintext holds (the batch's copies, real parts): their mean."""
    copies = np.real(np.asarray(raw)).astype(np.float64).reshape(-1, slots)
    return np.asarray(copies.mean(axis=0), dtype=np.float64)


def checked_batch(
    raw: npt.ArrayLike, slots: int, tolerance: float
) -> npt.NDArray[np.float64] | None:
    """The batch's ``slots`` values (:func:`batch_view`) of one decoding of every slot a
    plaintext holds, or ``None`` when it cannot be an honest reply's: not a whole number of
    batches, not finite, an imaginary part or a difference between the batch's copies
    beyond ``tolerance``."""
    decoded = np.asarray(raw)
    if decoded.size % slots or not decoded.size or not np.isfinite(decoded).all():
        return None
    if np.iscomplexobj(decoded) and float(np.abs(decoded.imag).max()) > tolerance:
        return None
    copies = np.real(decoded).astype(np.float64).reshape(-1, slots)
    if float(np.abs(copies - copies[0]).max()) > tolerance:
        return None
    return batch_view(copies, slots)


def reply_shape_ok(raw: npt.ArrayLike, layout: Layout, used: int, tolerance: float) -> bool:
    """Whether one group's decoded reply ``num + den`` (threshold keys: run by the lead on
    its own decoding of every slot the plaintext holds, as complex numbers, the layout's
    slots repeated when the batch is sparse) has the honest shape: every imaginary part
    within ``tolerance`` of zero, every repetition within ``tolerance`` of the first, and in
    their mean (what a decoding of the batch alone gives), in each of the ``used`` lanes,
    every slot within ``tolerance`` of the lane's numerator (read next to its denominator)
    or of numerator plus denominator (where the layout puts the denominator; its tiling
    repeats it), and every slot of the other lanes within ``tolerance`` of zero."""
    values = checked_batch(raw, layout.slots, tolerance)
    if values is None:
        return False
    rows = values.reshape(-1, layout.lanes)  # positions x lanes
    ds = layout.denominator_slot
    for lane in range(layout.lanes):
        column = rows[:, lane]
        if lane >= used:
            if float(np.abs(column).max()) > tolerance:
                return False
            continue
        num, both = column[ds + 1], column[ds]
        if float(np.minimum(np.abs(column - num), np.abs(column - both)).max()) > tolerance:
            return False
    return True


def vectors_shape_ok(
    numerator: npt.ArrayLike,
    denominator: npt.ArrayLike,
    layout: Layout,
    used: int,
    tolerances: tuple[float, float],
) -> bool:
    """Single keys: whether one group's decrypted reply (every slot of the numerator and of
    the denominator ciphertext, decoded as complex numbers) has the honest shape: imaginary
    parts within the tolerances of zero; in each of the ``used`` lanes every
    numerator slot within ``tolerances[0]`` of the others, and every denominator slot within
    twice the larger tolerance of zero or of the lane's denominator (the layout's tiling
    repeats it; a slot away from it multiplies shares, whose product error is a numerator
    slot's, not the totals' of ``Y``); every slot of the other lanes within the tolerances of
    zero."""
    # a denominator slot away from its value multiplies a share (up to M times the share
    # bound) by the other vector's noise: measured up to half of the larger tolerance at 2
    # parties, N = 3 (the numerator slots' spread: at most 0.19 of theirs), hence twice it
    tol_x, tol_y = tolerances[0], 2.0 * max(tolerances)
    size = layout.slots
    num_c = np.asarray(numerator, dtype=np.complex128)
    den_c = np.asarray(denominator, dtype=np.complex128)
    if num_c.size != size or den_c.size != size:
        return False
    if not (np.isfinite(num_c).all() and np.isfinite(den_c).all()):
        return False
    # honest imaginary parts are noise: values planted there would not show in the real parts
    if float(np.abs(num_c.imag).max()) > tol_x or float(np.abs(den_c.imag).max()) > tol_y:
        return False
    num, den = num_c.real.reshape(-1, layout.lanes), den_c.real.reshape(-1, layout.lanes)
    for lane in range(layout.lanes):
        n, d = num[:, lane], den[:, lane]
        if lane >= used:
            if float(np.abs(n).max()) > tol_x or float(np.abs(d).max()) > tol_y:
                return False
            continue
        y = d[layout.denominator_slot]
        if float(n.max() - n.min()) > tol_x:
            return False
        if float(np.minimum(np.abs(d), np.abs(d - y)).max()) > tol_y:
            return False
    return True


def curve_reply_shape_ok(
    raw: tuple[npt.ArrayLike, npt.ArrayLike], layout: CurveLayout, used: int, tolerance: float
) -> bool:
    """Whether one group's decoded curve reply (threshold keys, joint layout: the sum times
    ``c`` and the sum rotated by ``H`` times ``c``; run by the lead on its own decoding of
    every slot each plaintext holds, as complex numbers) has the honest shape: every
    imaginary part within ``tolerance`` of zero, every repetition of a sparse batch within
    ``tolerance`` of the first, in the first ciphertext every slot outside the ``used``
    regions' T and F values (the padding after each vector, the unused lanes) within
    ``tolerance`` of zero, and the second ciphertext within ``tolerance`` of the first
    rotated by ``H`` in every slot (it is the same sum, rotated). What the lead reads (each
    execution's T and F slots) is then all a reply holds beyond noise, up to the
    tolerance."""
    if not layout.joint or layout.chunks != 1:
        return False
    summed, rotated = (checked_batch(one, layout.slots, tolerance) for one in raw)
    if summed is None or rotated is None:
        return False
    padding = np.ones(layout.slots, dtype=bool)
    h, n = layout.f_rotation, layout.terms
    for lane in range(used):
        lo = lane * layout.region
        padding[lo : lo + n] = False
        padding[lo + h : lo + h + n] = False
    if padding.any() and float(np.abs(summed[padding]).max()) > tolerance:
        return False
    return float(np.abs(rotated - np.roll(summed, -h)).max()) <= tolerance
