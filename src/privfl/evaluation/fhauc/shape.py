"""Whether a decrypted malicious AUC reply has the honest shape in every slot a party decodes
(pure functions, run by the decrypting party on its own plaintext).

A party reads two values per execution, but a decryption shows it every slot, and an
aggregator can keep those two right while it puts other values it computed (the unsummed
per-bin products, say) in the rest: its masks fold into its multiplier's plaintext product, at
no extra level. In an honest reply every slot of an execution's lane holds that execution's
numerator, the denominator sits where the layout puts it, and empty lanes hold zero; a reply
that does not fit within :data:`SHAPE_SIGMAS` model standard deviations is refused by every
party. The decrypting party has seen it all the same: the check makes the deviation detected,
not unseen (docs/security/fhauc.md, *Limits*).
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from privfl.evaluation.fhauc.layout import Layout

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


def reply_shape_ok(raw: npt.ArrayLike, layout: Layout, used: int, tolerance: float) -> bool:
    """Whether one group's decoded reply ``num + den`` has the honest shape in the slots the
    lead decodes (the first ``(L + 2)·lanes``): in each of the ``used`` lanes, every position
    but the denominator's holds the same numerator (within ``tolerance`` of one another), and
    every slot of the other lanes is within ``tolerance`` of zero. A reply that carries
    anything else there (other values the aggregator computed, which the lead would see and
    no pair check would notice) fails. Threshold keys: run by the lead, on its own decoding."""
    ds = layout.denominator_slot
    width = (ds + 2) * layout.lanes
    values = np.asarray(raw, dtype=np.float64)
    if values.size < width or not np.isfinite(values[:width]).all():
        return False
    rows = values[:width].reshape(ds + 2, layout.lanes)  # positions x lanes
    numerators = np.delete(rows, ds, axis=0)
    for lane in range(layout.lanes):
        if lane < used:
            column = numerators[:, lane]
            if float(column.max() - column.min()) > tolerance:
                return False
        elif float(np.abs(rows[:, lane]).max()) > tolerance:
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
    the denominator ciphertext) has the honest shape: in each of the ``used`` lanes every
    numerator slot within ``tolerances[0]`` of the others, and every denominator slot within
    the larger tolerance of zero or of the lane's denominator (the layout's tiling repeats it;
    a slot away from it multiplies shares, whose product error is a numerator slot's, not
    the totals' of ``Y``); every slot of the other lanes within the tolerances of zero."""
    tol_x, tol_y = tolerances[0], max(tolerances)
    size = layout.slots
    num = np.asarray(numerator, dtype=np.float64)
    den = np.asarray(denominator, dtype=np.float64)
    if num.size < size or den.size < size:
        return False
    num, den = num[:size].reshape(-1, layout.lanes), den[:size].reshape(-1, layout.lanes)
    if not (np.isfinite(num).all() and np.isfinite(den).all()):
        return False
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
