"""What a threshold FHAUC party packs, what the lead reveals and what every party recovers, for
each ``reveal`` mode (the party's steps call these; one strategy per mode, the single-key
code underneath).

* ``auc``: the variant's packing and recovery (:mod:`.variant`); one reply ciphertext per
  ciphertext group (``num + den``: one execution, or one per lane,
  :mod:`~privfl.evaluation.fhauc.layout`), of which the lead reveals the two values
  ``(c·X, c·Y)`` of every execution.
* ``curve``/``metrics``: :mod:`.curve`'s packing and recovery with the threshold noise term
  (:mod:`.curve`); ``2·chunks`` reply ciphertexts per ciphertext group (one execution, or
  the malicious executions side by side, :class:`~privfl.evaluation.fhauc.layout.CurveLayout`),
  of which the lead reveals each execution's used slots.

Every function is run by a party on its own state; the lead's plaintext goes to the parties
only (sealed under the session key by the caller).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from privfl import threshold as tr
from privfl.crypto import threshold as th
from privfl.errors import ProtocolError
from privfl.evaluation.fhauc import curve
from privfl.evaluation.fhauc.messages import AGGREGATOR, SessionConfig
from privfl.evaluation.fhauc.policy import Policy, Security
from privfl.evaluation.fhauc.reveal import Reveal
from privfl.evaluation.fhauc.shape import batch_view, curve_reply_shape_ok, reply_shape_ok
from privfl.evaluation.fhauc.threshold import curve as threshold_curve
from privfl.evaluation.fhauc.threshold import messages as tmsg
from privfl.evaluation.fhauc.threshold.plan import Plan
from privfl.evaluation.fhauc.threshold.reply import decode_pairs
from privfl.evaluation.fhauc.variant import Malicious, Outcome, Packed, PartyView, in_groups
from privfl.evaluation.statistics import PartyCounts

__all__ = ["check_at_join", "encrypt", "lead_plaintext", "pack", "recover"]


def _curve_layout(plan: Plan) -> curve.CurveLayout:
    if not isinstance(plan.layout, curve.CurveLayout):
        raise ProtocolError("a curve session needs the curve layout")
    return plan.layout


def check_at_join(plan: Plan, config: SessionConfig, policy: Policy) -> None:
    """Refuse now, before any upload, a malicious session whose verification could refuse
    an honest result (the variant's check, or the curve's with the threshold noise term)."""
    if config.reveal is Reveal.AUC:
        if isinstance(plan.variant, Malicious):
            plan.variant.check_before_upload(config, policy, plan.max_executions)
    elif config.security is Security.MALICIOUS:
        curve.check_before_upload(config, policy, plan.slot_sigma, plan.max_executions)


def pack(plan: Plan, counts: PartyCounts, view: PartyView) -> list[Packed]:
    """The party's slot vectors of every execution (values before the ``2^-k`` shift)."""
    if view.config.reveal is Reveal.AUC:
        return plan.variant.pack(counts, plan.layout, view)
    tp, fp = counts.tp.astype(np.float64), counts.fp.astype(np.float64)
    layout = _curve_layout(plan)
    return in_groups(curve.pack(tp, fp, layout, view), layout)


Vectors = tuple[bytes, ...]


def encrypt(
    keys: tr.ThresholdParty, plan: Plan, counts: PartyCounts, view: PartyView
) -> tuple[tuple[Vectors, Vectors, Vectors], ...]:
    """The party's upload: every execution's packed T, F and D vectors, shifted by
    ``2^-k``, encrypted under the joint key at the plan's level (ciphertext messages)."""
    factor = 2.0 ** (-plan.shift_k)

    def seal(vec: Sequence[np.ndarray]) -> Vectors:
        return tuple(
            keys.encrypt(np.asarray(v) * factor, plan.upload_level)
            .to_message(keys.session, keys.name)
            .to_bytes()
            for v in vec
        )

    return tuple((seal(p.t), seal(p.f), seal(p.d)) for p in pack(plan, counts, view))


def lead_plaintext(
    keys: tr.ThresholdParty, items: Sequence[bytes], plan: Plan, reveal: Reveal
) -> bytes:
    """The lead: fuse its own share into every reply ciphertext and decode what the parties
    are entitled to (``auc``: the pair per execution; ``curve``: the used slots of every
    ciphertext). A reply that does not decrypt becomes NaN, and so (malicious AUC) does one
    whose decoded slots (every slot the plaintext holds, ``ring / 2``, real and imaginary
    parts) do not have the honest shape (:func:`~privfl.evaluation.fhauc.shape.reply_shape_ok`):
    the parties' checks refuse it. The lead has decoded those slots all the same: what it saw
    is the limit stated in docs/security/fhauc.md."""
    if reveal is Reveal.AUC:
        layout = plan.layout  # each group's lanes hold one execution each
        width = layout.slots
        # malicious: every slot the plaintext holds, as complex numbers, shape checked (the
        # batch of a sparse set repeats; what differs between the copies, and the imaginary
        # parts, the batch's REAL decoding never shows)
        checked = plan.reply_tolerance > 0
        everything = keys.context.ring // 2 if checked else width
        pairs = []
        for group, item in enumerate(items):
            decoded = _fuse(keys, item, everything, checked)
            used = layout.lanes_used(group, plan.executions)
            if checked and not reply_shape_ok(decoded, layout, used, plan.reply_tolerance):
                decoded = np.full(everything, np.nan)  # other values; every party refuses
            values = batch_view(decoded, width)
            for lane in range(used):
                pairs.append(decode_pairs(values, layout, 0, lane))
        return tmsg.write_pairs(
            [(x, y) if np.isfinite([x, y]).all() else (0.0, 0.0) for x, y in pairs]
        )
    layout = _curve_layout(plan)
    lengths = threshold_curve.used_slots(layout)  # per reply ciphertext of one execution
    per = len(lengths)
    if len(items) != plan.groups * per:
        raise ProtocolError(f"{len(items)} lead requests, expected {plan.groups * per}")
    # malicious with T and F in one ciphertext: every slot decoded and shape checked (the
    # padding, the unused lanes, the rotated copy, imaginary parts), as for the AUC
    checked = plan.reply_tolerance > 0
    vectors = []
    for group in range(plan.groups):
        used = layout.lanes_used(group, plan.executions)
        mine = items[group * per : (group + 1) * per]
        if checked:
            raw = [_fuse(keys, item, keys.context.ring // 2, True) for item in mine]
            honest = curve_reply_shape_ok((raw[0], raw[-1]), layout, used, plan.reply_tolerance)
            full = [
                batch_view(r, layout.slots) if honest else np.full(layout.slots, np.nan)
                for r in raw
            ]  # other values: every party refuses NaN
        else:
            span = (used - 1) * layout.region  # lanes: the regions before the last one used
            full = [_fuse(keys, item, span + n) for item, n in zip(mine, lengths, strict=True)]
        for lane in range(used):  # each execution's used slots, never the padding
            lo = lane * layout.region
            vectors += [v[lo : lo + n] for v, n in zip(full, lengths, strict=True)]
    return threshold_curve.write_vectors(vectors)


def _fuse(
    keys: tr.ThresholdParty, item: bytes, length: int, every_slot: bool = False
) -> np.ndarray:
    message = th.LeadDecryption.from_bytes(item, keys.context, keys.session)
    if message.sender != AGGREGATOR:
        raise ProtocolError("lead requests must come from the aggregator")
    try:
        return keys.lead_decrypt(message, length, every_slot)
    except th.JointDecryptionError:
        return np.full(length, np.nan)


def recover(plain: bytes, plan: Plan, counts: PartyCounts, view: PartyView) -> Outcome:
    """Every party: the revealed result from the lead's plaintext, with the mode's checks
    (the malicious ones verify every execution)."""
    if view.config.reveal is Reveal.AUC:
        factor = 2.0 ** (2 * plan.shift_k + plan.multiplier_scale_bits)
        pairs = tmsg.read_pairs(plain, plan.executions)
        products = [(x * factor, y * factor) for x, y in pairs]
        totals = PartyCounts(
            np.array([0, counts.positives], dtype=np.int64),
            np.array([0, counts.negatives], dtype=np.int64),
        )
        return plan.variant.recover(products, totals, view)
    layout = _curve_layout(plan)
    per = plan.requests_per_execution
    lengths = threshold_curve.used_slots(layout) * plan.executions
    vectors = threshold_curve.read_vectors(plain, lengths)
    factor = 2.0**plan.shift_k
    decoded = [
        curve.reply_vectors(_padded(vectors[e * per : (e + 1) * per], layout.slots), layout)
        for e in range(plan.executions)
    ]
    scaled = [(t * factor, f * factor) for t, f in decoded]
    own = float(counts.positives + counts.negatives)
    return curve.recover(scaled, own, view, plan.slot_sigma)


def _padded(vectors: Sequence[np.ndarray], slots: int) -> list[np.ndarray]:
    out = []
    for v in vectors:
        full = np.zeros(slots)
        full[: v.size] = v
        out.append(full)
    return out
