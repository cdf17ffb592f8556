"""The lanes layout (issue 27): a malicious threshold AUC puts its executions side by side in one
pair of ciphertexts (:meth:`Layout.in_lanes`), and every execution still gets exactly its own
numerator and denominator: no slot of a lane ever holds another execution's value or a partial
sum, the aggregator's and the parties' arithmetic is the one-execution layout's with every
rotation times the lanes, and a session with more executions than lanes (several groups, the
last one partly empty) is exact with real ciphertexts."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import tenseal.sealapi as seal
from hypothesis import given, settings
from hypothesis import strategies as st

import privfl
from _shared import force_joint_lanes, record_calls
from conftest import make_parties
from privfl.crypto.ckks import window_steps
from privfl.crypto.ckks_ciphertext import Ciphertext
from privfl.crypto.threshold import ThresholdContext
from privfl.crypto.threshold.ciphertext import Ciphertext as ThresholdCrypto
from privfl.crypto.threshold.params import PARAMETER_SETS
from privfl.errors import MalformedMessageError, VerificationError
from privfl.evaluation.fhauc import shape, sizing, tamper
from privfl.evaluation.fhauc.aggregator import random_multiplier
from privfl.evaluation.fhauc.ciphertext import as_seal
from privfl.evaluation.fhauc.layout import MAX_LANES, Layout
from privfl.evaluation.fhauc.policy import Policy
from privfl.evaluation.fhauc.reveal import Reveal
from privfl.evaluation.fhauc.threshold import messages as tmsg
from privfl.evaluation.fhauc.threshold import ops as threshold_ops
from privfl.evaluation.fhauc.threshold import plan as plan_module
from privfl.evaluation.fhauc.threshold import reveal as threshold_reveal
from privfl.evaluation.fhauc.threshold.aggregator import ThresholdAggregator
from privfl.evaluation.fhauc.threshold.reply import decode_pairs
from privfl.evaluation.fhauc.uploads import Reply, summed_vectors
from privfl.evaluation.fhauc.variant import Packed, in_groups

TOL = 1e-6


def aggregate_plain(
    layout: Layout, t: np.ndarray, f: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray]:
    """The aggregator's computation on plaintext slots (rotation = np.roll left): F is the
    sum rotated by the window when joint (``f`` None); the rotate-and-sum over the window in
    steps of the lanes, and F rotated by half a window."""
    if f is None:
        f = np.roll(t, -layout.f_rotation)
    acc = t * f
    for step in window_steps(layout.window):
        acc = acc + np.roll(acc, -step * layout.lanes)
    return acc, t * np.roll(f, -layout.denominator_rotation)


@given(
    slots_bits=st.integers(6, 13),
    terms=st.integers(1, 600),
    executions=st.integers(1, 70),
    joint=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
@settings(max_examples=120, deadline=None)
def test_every_lane_holds_exactly_its_executions_numerator_and_denominator(
    slots_bits, terms, executions, joint, seed
):
    slots = 1 << slots_bits
    layout = Layout.in_lanes(terms, slots, joint)
    if not layout.folded:
        assert layout == Layout.for_terms(terms, slots)
        return
    assert layout.joint == (joint and 2 * layout.window <= slots)
    period = layout.window * (2 if layout.joint else 1)  # a lane's T period, then F's if joint
    assert layout.lanes == min(MAX_LANES, slots // period)
    assert all(s & (s - 1) == 0 for s in layout.rotation_steps)  # the sum keys' powers of two
    rng = np.random.default_rng(seed)
    values = []
    packed = []
    for _ in range(executions):
        t = rng.integers(-(10**6), 10**6, terms).astype(np.float64)
        f = rng.integers(-(10**6), 10**6, terms).astype(np.float64)
        tp, fp = float(rng.integers(1, 10**6)), float(rng.integers(1, 10**6))
        tv, fv, dv = layout.pack(t, f, tp, fp)
        assert tv[0].size == layout.lane_slots and dv == []
        assert len(fv) == layout.f_ciphertexts and all(v.size == layout.lane_slots for v in fv)
        packed.append(Packed(tv, fv, dv, None))
        values.append((float(np.dot(t, f)), tp * fp))
    groups = in_groups(packed, layout)
    assert len(groups) == layout.groups(executions) == -(-executions // layout.lanes)
    for g, group in enumerate(groups):
        num, den = aggregate_plain(layout, group.t[0], group.f[0] if group.f else None)
        used = layout.lanes_used(g, executions)
        for lane in range(layout.lanes):
            # every slot of a lane: its execution's numerator (zero in an empty lane)
            e = g * layout.lanes + lane
            want_num = values[e][0] if lane < used else 0.0
            np.testing.assert_array_equal(num[lane :: layout.lanes], want_num)
            lane_den = den[lane :: layout.lanes]
            want_den = np.zeros(layout.lane_slots)
            if lane < used:
                want_den[layout.denominator_slot :: period] = values[e][1]
            np.testing.assert_array_equal(lane_den, want_den)
        # the lead's decoding of the reply num + den, lane by lane
        for lane in range(used):
            x, y = decode_pairs(num + den, layout, 0, lane)
            assert (x, y) == values[g * layout.lanes + lane]


def test_one_lane_is_the_folded_layout_and_interleaving_is_the_identity():
    layout = Layout.for_terms(400, 4096)
    assert layout.lanes == 1 and layout.lane_slots == 4096
    assert layout.denominator_rotation == layout.window // 2
    v = np.arange(4096.0)
    assert layout.interleave([v]) is v
    with pytest.raises(privfl.errors.InputError):
        layout.interleave([v, v])


def test_the_plan_puts_three_executions_of_100_parties_in_one_group():
    """The default ring, 100 parties, N = 100, 4 splits (issue 27's figures): the three
    executions share one joint upload ciphertext (T and F in each of 4 lanes, where the
    joint layout pays) and one joint decryption."""
    config = plan_module.SessionConfig(
        bytes(16), tuple(f"p{i}" for i in range(100)),
        np.linspace(0, 1, 101)[1:-1], security=plan_module.Security.MALICIOUS, splits=4,
    )  # fmt: skip
    policy = privfl.evaluation.fhauc.policy.Policy(
        plan_module.Security.MALICIOUS, 1000, executions=3, min_pairs=10**6
    )
    plan = plan_module.plan(config, policy)
    assert plan_module.joint_pays(
        config,
        policy,
        plan.params,
        1 << 14,
        privfl.evaluation.fhauc.malicious.multiplier_bounds(policy.multiplier_bits),
    )
    assert (plan.layout.lanes, plan.layout.joint, plan.groups, plan.requests) == (4, True, 1, 1)
    assert plan.layout.ciphertexts_per_upload == 1
    # where the joint layout does not pay (2 parties: its coherent error), two ciphertexts
    # of 8 lanes
    two = plan_module.plan(replace(config, parties=config.parties[:2]), policy)
    assert (two.layout.lanes, two.layout.joint, two.groups) == (8, False, 1)
    # N = 200: two joint lanes would fit (and pay), but 3 executions would then take two
    # joint decryptions: two ciphertexts of 4 lanes take one (MIN_JOINT_LANES)
    wide = plan_module.plan(replace(config, thresholds=np.linspace(1, 0, 201)[1:-1]), policy)
    joint = plan_module.session_layout(wide.params, 100, wide.layout.terms, joint=True, lanes=True)
    assert joint.lanes == 2 < plan_module.MIN_JOINT_LANES
    assert (wide.layout.lanes, wide.layout.joint, wide.groups) == (4, False, 1)


@pytest.mark.parametrize(
    ("joint", "n_points", "executions"),
    [(False, 100, 3), (False, 100, 5), (False, 100, 9), (True, 50, 3), (True, 50, 5)],
)
def test_sessions_with_several_groups_are_exact(monkeypatch, joint, n_points, executions):
    """Real threshold ciphertexts on the fast insecure ring (2,048 slots), 4 executions to a
    group: in two ciphertexts (N = 100 at 2 splits) 3, 5 and 9 executions in 1, 2 and 3
    groups; joint (N = 50: T's and F's windows in each lane of one upload ciphertext) 3 and
    5 in 1 and 2; the last group partly empty, each equal to the binned reference and
    verified."""
    monkeypatch.setattr(threshold_ops, "FHAUC_PARAMETER_SET", "fhauc-test")
    if joint:
        force_joint_lanes(monkeypatch)
    parties = make_parties(np.random.default_rng(executions), 3, 400)
    seen = record_calls(monkeypatch, plan_module, "plan")
    res = privfl.federated_auc(
        parties, n_points, keys="threshold", security="malicious", splits=2,
        executions=executions, min_guarantee_bits=0,
    )  # fmt: skip
    assert res.verified is True and res.executions == executions
    assert res.auc == pytest.approx(privfl.binned_auc(parties, n_points), abs=TOL)
    used = seen[-1]
    assert used.layout.joint == joint and used.layout.ciphertexts_per_upload == 2 - joint
    assert used.layout.lanes == 4 and used.groups == -(-executions // 4)


# ------------------------------------------------------------------ deviations in lanes
LANE_TAMPERS = [
    tamper.ReplayFirstExecution,
    tamper.SwapTwoPartiesBetweenExecutions,
    tamper.ShiftLanes,
    tamper.ScaleNumeratorInSecondExecutionOnly,
]


@pytest.mark.parametrize("joint", [False, True], ids=["two-ciphertexts", "joint"])
@pytest.mark.parametrize("attack", LANE_TAMPERS, ids=lambda c: c.__name__)
def test_lane_deviations_are_refused_by_the_executions_checks(monkeypatch, attack, joint):
    """In lanes (2 parties, N = 10: every execution in one group; T and F in two
    ciphertexts or joint in one), the tampers that single out an execution give it another
    lane's values (or scale its lane only) while no lane is left empty: each is refused by
    the executions' disagreement or by the bound on TP·FP, never by an empty lane's zeros
    ("does not decrypt to a valid result")."""
    monkeypatch.setattr(threshold_ops, "FHAUC_PARAMETER_SET", "fhauc-test")
    if joint:
        force_joint_lanes(monkeypatch)
    parties = make_parties(np.random.default_rng(7), 2, 300)
    with pytest.raises(VerificationError, match=r"disagree|fewer positive") as err:
        privfl.federated_auc(
            parties, 10, keys="threshold", security="malicious", splits=2, aggregator=attack()
        )
    assert "valid result" not in str(err.value)


class PlantInDecodedSlots(tamper.PerExecution):
    """Every pair the parties read stays right, but other decrypted slots carry the unsummed
    products ``T^p·F^p`` (the per-bin AUC terms): positions 1..L-1 of the used lanes
    (``where = "read"``: among the slots read), L+2..2L+1 (``"beyond"``: past them), or lane
    0's in the first empty lane (``"empty"``). The multiplier and the masks are one plaintext
    product: the honest reply's levels."""

    where = "read"

    def tamper(self, uploads):
        layout, slots = self._layout(), self._keys().slots
        ts, fs = summed_vectors(uploads, layout)
        product = ts[0] * fs[0]
        num, den = self.numerator_and_denominator(uploads)
        c = random_multiplier(*self.multiplier_range) / 2.0**self.multiplier_scale_bits
        used, ds = layout.lanes_used(self.execution, self.executions), layout.denominator_slot
        keep, plant = np.full(slots, c), np.zeros(slots)
        source = product
        if self.where == "empty":  # lane 0's positions p + 1 land on lane `used`'s positions p
            source = tamper.rotated(product, layout.lanes - used, slots)
            spots = [(p, used) for p in range(ds + 2)]
        elif self.where == "beyond":  # position p + L + 2 shows position p's product
            source = tamper.rotated(product, slots - (ds + 2) * layout.lanes, slots)
            spots = [(p, g) for g in range(used) for p in range(ds + 2, 2 * ds + 2)]
        else:
            spots = [(p, g) for g in range(used) for p in range(1, ds)]
        for p, lane in spots:
            keep[layout.slot(p, lane)], plant[layout.slot(p, lane)] = 0.0, c
        numerator = num.scale_by_slots(keep) + source.scale_by_slots(plant)
        return Reply(
            self.session_config.session, numerator, den.scale_by_slots(np.full(slots, c)),
            self.execution,
        )  # fmt: skip


class PlantInEmptyLane(PlantInDecodedSlots):
    where = "empty"


class PlantBeyondTheReadSlots(PlantInDecodedSlots):
    where = "beyond"


class PlantInLeadsImaginaryParts(tamper.PerExecution):
    """The honest reply plus ``i·2^-31.5`` times the numerator in one slot: a complex
    plaintext (encoded by a context of the same parameters decoding COMPLEX; OpenFHE's REAL
    encoder drops imaginary parts) at the honest multiplier's level. OpenFHE's REAL decoding
    zeroes imaginary parts and adds noise of their root mean square to the real parts: here
    (2 parties x 300 rows, N = 10) a plant above about ``2^-30`` of the numerator breaks the
    verification through that noise, one below about ``2^-33`` is within the lead's
    tolerance, and in between (a fresh-eyes review's channel, about 30 times the tolerance in
    one slot on the default set) only the lead's check of the imaginary parts refuses it."""

    def tamper(self, uploads):
        layout, slots = self._layout(), self._keys().slots
        num, den = self.numerator_and_denominator(uploads)
        c = random_multiplier(*self.multiplier_range) / 2.0**self.multiplier_scale_bits
        full = np.full(slots, c)
        honest, source = num.scale_by_slots(full).ct, num.ct
        ctx = source.context
        twin = ThresholdContext.for_parameters(ctx.params, ctx.parties, complex_slots=True)
        mask = [0j] * slots
        mask[layout.slot(1, 0)] = complex(0.0, c * 2.0**-31.5)
        plain = twin.cc.MakeCKKSPackedPlaintext(mask, 1, source.level)
        planted = ThresholdCrypto(ctx, ctx.cc.EvalMult(source.native, plain))
        return Reply(
            self.session_config.session,
            threshold_ops.ThresholdCiphertext(honest + planted),
            den.scale_by_slots(full),
            self.execution,
        )


class PlantInOddCoefficients(tamper.PerExecution):
    """The honest reply plus ``c·T^p·F^p`` (the unsummed per-bin products) times a plaintext
    of every slot the ring holds, ``c`` in the first half and ``-c`` in the second: only odd
    plaintext coefficients, which a decoding of a sparse set's batch (4,096 of ring 2^14's
    8,192 slots) never reads. One plaintext product at the honest multiplier's level
    (a fresh-eyes review's attack: accepted while the lead decoded the batch only)."""

    def tamper(self, uploads):
        layout, slots = self._layout(), self._keys().slots
        ts, fs = summed_vectors(uploads, layout)
        source = (ts[0] * fs[0]).ct
        num, den = self.numerator_and_denominator(uploads)
        c = random_multiplier(*self.multiplier_range) / 2.0**self.multiplier_scale_bits
        cc, half = source.context.cc, source.context.ring // 2
        plain = cc.MakeCKKSPackedPlaintext(
            [c] * slots + [-c] * slots, 1, source.level, None, half
        )  # fmt: skip
        planted = ThresholdCrypto(source.context, cc.EvalMult(source.native, plain))
        full = np.full(slots, c)
        numerator = threshold_ops.ThresholdCiphertext(num.scale_by_slots(full).ct + planted)
        return Reply(
            self.session_config.session, numerator, den.scale_by_slots(full), self.execution
        )


@pytest.mark.parametrize(
    "attack",
    [
        PlantInDecodedSlots,
        PlantInEmptyLane,
        PlantBeyondTheReadSlots,
        PlantInLeadsImaginaryParts,
    ],
    ids=lambda c: c.__name__,
)
def test_values_planted_in_the_slots_the_lead_decodes_are_refused(monkeypatch, attack):
    """The lead decodes every slot of each reply and reveals two per execution; an
    aggregator that keeps those pairs right but plants other values in the rest (found by
    fresh-eyes reviews: the federation's per-bin products, accepted before) is refused: the
    lead's shape check (:func:`~privfl.evaluation.fhauc.shape.reply_shape_ok`) turns the
    group into NaN; so are values in the imaginary parts, which the lead decodes too. Without
    the check (for the imaginary parts, with the real parts' check alone) the same session is
    accepted (the test can fail)."""
    monkeypatch.setattr(threshold_ops, "FHAUC_PARAMETER_SET", "fhauc-test")
    parties = make_parties(np.random.default_rng(11), 2, 300)
    run = {"keys": "threshold", "security": "malicious", "splits": 2}
    with pytest.raises(VerificationError, match="valid result"):
        privfl.federated_auc(parties, 10, aggregator=attack(), **run)
    check = shape.reply_shape_ok

    def bypass(raw, *args):  # no check; against the imaginary parts, the real parts' check
        return attack is not PlantInLeadsImaginaryParts or check(np.real(raw), *args)

    monkeypatch.setattr(threshold_reveal, "reply_shape_ok", bypass)
    res = privfl.federated_auc(parties, 10, aggregator=attack(), **run)
    assert res.verified and res.auc == pytest.approx(privfl.binned_auc(parties, 10), abs=TOL)


def test_values_planted_in_the_plaintext_coefficients_a_sparse_batch_skips_are_refused(
    monkeypatch,
):
    """A set that packs 4,096 slots in ring 2^14 (the "fhauc" set before its batch became
    the ring's 8,192 slots, which leaves no coefficient unread): the lead decodes all 8,192
    slots the plaintext holds, where the batch repeats, so the per-bin products planted in
    the odd coefficients (:class:`PlantInOddCoefficients`) make every party refuse. With the
    lead's check of the batch alone the same session is accepted (the test can fail)."""
    default = PARAMETER_SETS["fhauc"]
    assert 2 * default.batch_size == 1 << 14  # the default set's batch is the whole ring
    monkeypatch.setitem(PARAMETER_SETS, "fhauc", replace(default, batch_size=1 << 12))
    parties = make_parties(np.random.default_rng(12), 2, 300)
    run = {"keys": "threshold", "security": "malicious", "splits": 2}
    with pytest.raises(VerificationError, match="valid result"):
        privfl.federated_auc(parties, 10, aggregator=PlantInOddCoefficients(), **run)
    check = shape.reply_shape_ok

    def batch_only(raw, layout, used, tolerance):  # the copies' mean: the batch's decoding
        return check(raw.reshape(-1, layout.slots).mean(axis=0), layout, used, tolerance)

    monkeypatch.setattr(threshold_reveal, "reply_shape_ok", batch_only)
    res = privfl.federated_auc(parties, 10, aggregator=PlantInOddCoefficients(), **run)
    assert res.verified and res.auc == pytest.approx(privfl.binned_auc(parties, 10), abs=TOL)


def test_the_shape_check_passes_honest_replies_and_refuses_a_planted_slot():
    """The pure check over every slot: an honest decoded reply (the numerator everywhere in a
    used lane but at the denominator's positions, which hold numerator plus denominator;
    zeros in empty lanes; each within noise) passes; one slot off by more than the
    tolerance, in a used lane, past the read slots or in an empty lane, fails."""
    layout = Layout.in_lanes(20, 2048)
    rng = np.random.default_rng(3)
    ds, used, tol = layout.denominator_slot, 3, 1.0
    rows = np.zeros((layout.lane_slots, layout.lanes))
    rows[:, :used] = [5e6, 6e6, 7e6]
    rows[ds :: layout.window, :used] += [1e6, 2e6, 3e6]
    honest = (rows + rng.uniform(-0.3, 0.3, rows.shape)).reshape(-1)
    assert shape.reply_shape_ok(honest, layout, used, tol)
    for slot in (layout.slot(3, 1), layout.slot(ds + 1, 0), layout.slot(ds + 5, 2)):
        bad = honest.copy()
        bad[slot] += 2.0
        assert not shape.reply_shape_ok(bad, layout, used, tol)
    bad = honest.copy()
    bad[layout.slot(7, used)] = 2.0  # an empty lane
    assert not shape.reply_shape_ok(bad, layout, used, tol)
    copies = np.tile(honest, 2)  # a sparse batch decoded at every slot: it repeats
    copies[honest.size :] += rng.uniform(-0.3, 0.3, honest.size)
    assert shape.reply_shape_ok(copies, layout, used, tol)
    copies[layout.slots + layout.slot(4, 0)] += 2.0  # the second copy differs
    assert not shape.reply_shape_ok(copies, layout, used, tol)
    assert not shape.reply_shape_ok(copies[:-1], layout, used, tol)
    assert not shape.reply_shape_ok(honest[:-1], layout, used, tol)


def test_single_key_parties_refuse_values_planted_in_slots_they_do_not_read(monkeypatch):
    """With single keys every party decrypts the whole reply; the same planted products
    (positions 1..L-1, pairs kept right) are refused by each party's own shape check
    (:func:`~privfl.evaluation.fhauc.shape.vectors_shape_ok`) and accepted without it."""
    from privfl.evaluation.fhauc import single_keys

    parties = make_parties(np.random.default_rng(13), 3, 300)
    with pytest.raises(VerificationError, match="other values than the agreed ones"):
        privfl.federated_auc(parties, 10, security="malicious", aggregator=PlantInDecodedSlots())
    monkeypatch.setattr(single_keys, "vectors_shape_ok", lambda *args: True)
    res = privfl.federated_auc(parties, 10, security="malicious", aggregator=PlantInDecodedSlots())
    assert res.verified and res.auc == pytest.approx(privfl.binned_auc(parties, 10), abs=TOL)


class PlantInImaginaryParts(tamper.PerExecution):
    """Single keys: the honest reply plus ``i`` times the unsummed products ``T^p·F^p``
    (``i`` is an exact plaintext at scale 1: no level); the real parts, all a party reads,
    stay honest (a fresh-eyes review's attack)."""

    def tamper(self, uploads):
        layout = self._layout()
        ts, fs = summed_vectors(uploads, layout)
        product = as_seal(ts[0] * fs[0])
        plain = seal.Plaintext()
        product.context.encoder.encode(complex(0, 1), product.seal.parms_id(), 1.0, plain)
        out = seal.Ciphertext()
        product.context.evaluator.multiply_plain(product.seal, plain, out)
        imaginary = Ciphertext(product.context, out)
        num, den = self.numerator_and_denominator(uploads)
        c = random_multiplier(*self.multiplier_range)
        session = self.session_config.session
        return Reply(session, (num + imaginary) * c, (den + imaginary) * c, self.execution)


def test_single_key_parties_refuse_values_planted_in_imaginary_parts(monkeypatch):
    from privfl.evaluation.fhauc import single_keys

    parties = make_parties(np.random.default_rng(13), 3, 300)
    with pytest.raises(VerificationError, match="other values than the agreed ones"):
        privfl.federated_auc(parties, 10, security="malicious", aggregator=PlantInImaginaryParts())
    monkeypatch.setattr(single_keys, "vectors_shape_ok", lambda *args: True)
    res = privfl.federated_auc(
        parties, 10, security="malicious", aggregator=PlantInImaginaryParts()
    )
    assert res.verified and res.auc == pytest.approx(privfl.binned_auc(parties, 10), abs=TOL)


class OneDecryptionPerExecution(ThresholdAggregator):
    """Asks for one decryption share per execution (the layout before lanes), i.e. more
    than the plan's one per ciphertext group: the same request repeated, which would let it
    average the flooding noise away."""

    def request_decryptions(self):
        session = self.session_config.session
        relay = tmsg.Relay.from_bytes(super().request_decryptions(), "th-decrypt", session)
        items = relay.items * self.plan.executions
        return tmsg.Relay(session, items, "th-decrypt").to_bytes()


def test_a_party_answers_one_decryption_per_group_and_refuses_more(monkeypatch):
    """In lanes (N = 10: 3 executions, 1 group) every party counts the requests against its
    own plan before it makes any share: three are refused, naming the count it expected."""
    monkeypatch.setattr(threshold_ops, "FHAUC_PARAMETER_SET", "fhauc-test")
    parties = make_parties(np.random.default_rng(17), 3, 300)
    with pytest.raises(MalformedMessageError, match="3 decryption requests, expected 1"):
        privfl.federated_auc(
            parties, 10, keys="threshold", security="malicious", splits=2,
            aggregator=OneDecryptionPerExecution(),
        )  # fmt: skip


@pytest.mark.parametrize(("parties", "n_points"), [(100, 100), (100, 400), (2, 100)])
def test_the_layout_is_the_same_for_every_number_of_executions(parties, n_points):
    """The malicious AUC's layout (joint lanes where they pay, else two ciphertexts) depends on
    public sizes and bounds, not on the executions: were it to, the sizing's count, chosen
    on the noise bound of 2 executions, could land on a wider bound the parties refuse (a
    review found 73 such policies at 100 parties, N = 400, when odd counts took one joint
    lane and even ones two ciphertexts)."""
    config = plan_module.SessionConfig(
        bytes(16), tuple(f"p{i}" for i in range(parties)),
        np.linspace(0, 1, n_points + 1)[1:-1], security=plan_module.Security.MALICIOUS,
        splits=4,
    )  # fmt: skip

    def planned(k: int) -> plan_module.Plan:
        return plan_module.plan(config, Policy(plan_module.Security.MALICIOUS, 100, executions=k))

    cap = planned(2).max_executions  # one joint lane: the key set's budget, 32
    assert {planned(k).layout for k in range(2, cap + 1)} == {planned(2).layout}


def test_the_sized_executions_pass_the_parties_join_check():
    """``sizing.sized_policy`` (what ``privfl.federated_auc`` and ``privfl keys init`` use) at
    100 parties, N = 400 and 4 splits on the default set (where one joint lane would fit, the
    count-dependent rule's failures): whenever some count up to 3 above the sized one passes
    the parties' join check, the sized one passes it too."""
    parties, n_points, splits = 100, 400, 4
    interior = np.linspace(1.0, 0.0, n_points)[1:-1]
    for rows in (64, 128):
        for bits in (8.0, 16.0):
            for exponent in range(18, 29):
                policy = Policy(
                    plan_module.Security.MALICIOUS, rows, executions=3, max_points=n_points,
                    max_splits=splits, min_pairs=2**exponent, min_guarantee_bits=bits,
                )  # fmt: skip
                sized = sizing.sized_policy(policy, parties, interior, splits, "threshold")
                k = sized.executions

                def passes(count: int, sized: Policy = sized) -> bool:
                    return sizing.passes_join(
                        replace(sized, executions=count), parties, n_points, splits,
                        "threshold", Reveal.AUC,
                    )  # fmt: skip

                if any(passes(c) for c in range(k + 1, min(k + 4, 65))):
                    assert passes(k), (rows, bits, exponent, k)
