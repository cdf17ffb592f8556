"""What the lead reads from a decrypted threshold AUC reply (a pure function, run by the lead
on its own decoding): each execution's pair ``(c·X, c·Y)`` (:func:`decode_pairs`); whether the
decoded slots have the honest shape is :func:`~privfl.evaluation.fhauc.shape.reply_shape_ok`.
The slot layout is :class:`~privfl.evaluation.fhauc.layout.Layout`'s."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from privfl.evaluation.fhauc.layout import Layout


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
