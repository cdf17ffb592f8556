"""What the lead reads from a decrypted threshold AUC reply (pure functions, run by the lead
on its own decoding): each execution's pair ``(c·X, c·Y)`` (:func:`decode_pairs`) and, in the
malicious variant, whether the decoded slots have the honest shape (:func:`reply_shape_ok`).
The slot layout is :class:`~privfl.evaluation.fhauc.layout.Layout`'s."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from privfl.evaluation.fhauc.layout import Layout

# an honest reply's decoded slots stay within this many model standard deviations (of one
# slot's X/c error, times sqrt 2 for a difference) of the values the layout puts there
SHAPE_SIGMAS = 10.0


def reply_shape_ok(raw: npt.ArrayLike, layout: Layout, used: int, tolerance: float) -> bool:
    """Whether one group's decoded reply ``num + den`` has the honest shape in the slots the
    lead decodes (the first ``(L + 2)·lanes``): in each of the ``used`` lanes, every position
    but the denominator's holds the same numerator (within ``tolerance`` of one another), and
    every slot of the other lanes is within ``tolerance`` of zero. A reply that carries
    anything else there (other values the aggregator computed, which the lead would see and
    no pair check would notice) fails. Run by the lead, on its own decoding."""
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


def decode_pairs(
    raw: npt.ArrayLike, layout: Layout, shift_k: int, lane: int = 0
) -> tuple[float, float]:
    """``(c·X, c·Y)`` of the execution in ``lane`` from one decrypted reply: the reply is
    ``num + den`` where ``num`` fills every slot of the lane and ``den`` only its
    :attr:`Layout.denominator_slot`."""
    values = np.asarray(raw, dtype=np.float64)
    ds = layout.slot(layout.denominator_slot, lane)
    ns = layout.slot(layout.denominator_slot + 1, lane)
    factor = 2.0 ** (2 * shift_k)
    return float(values[ns]) * factor, (float(values[ds]) - float(values[ns])) * factor
