"""The joint layout (issue 30): a single-key party uploads T and F in one ciphertext (semi-honest
always, malicious from ``JOINT_MIN_PARTIES`` parties on), and the aggregator's arithmetic on it
gives exactly the folded layout's replies; a malicious aggregator gains nothing from the
shared ciphertext."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import privfl
from conftest import make_parties
from privfl.errors import MalformedMessageError, VerificationError
from privfl.evaluation import fhauc
from privfl.evaluation.fhauc import malicious, tamper
from privfl.evaluation.fhauc.layout import Layout
from test_fhauc import Deployment

SLOTS = 4096


def aggregate_plain(layout: Layout, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The aggregator's joint computation on plaintext slots (rotation = np.roll left)."""
    t, f = x, np.roll(x, -layout.window)
    acc = t * f
    for step in layout.rotation_steps[:-1]:  # window_sum over W: 1, 2, ..., W/2
        acc = acc + np.roll(acc, -step)
    return acc, t * np.roll(f, -(layout.window // 2))


@given(
    terms=st.integers(2, 1023),
    seed=st.integers(0, 2**32 - 1),
)
@settings(max_examples=60, deadline=None)
def test_joint_layout_arithmetic_equals_the_numerator_and_the_denominator(terms, seed):
    layout = Layout.for_terms(terms, SLOTS, joint=True)
    assert layout.joint == (2 * layout.window <= SLOTS)
    if not layout.joint:
        return
    rng = np.random.default_rng(seed)
    t = rng.integers(-(10**6), 10**6, terms).astype(np.float64)
    f = rng.integers(-(10**6), 10**6, terms).astype(np.float64)
    tp, fp = float(rng.integers(1, 10**6)), float(rng.integers(1, 10**6))
    tv, fv, dv = layout.pack(t, f, tp, fp)
    assert (len(tv), len(fv), len(dv)) == (1, 0, 0) and tv[0].size == SLOTS
    num, den = aggregate_plain(layout, tv[0])
    np.testing.assert_array_equal(num, np.full(SLOTS, float(np.dot(t, f))))
    want = np.zeros(SLOTS)
    want[layout.denominator_slot :: 2 * layout.window] = tp * fp
    np.testing.assert_array_equal(den, want)
    assert layout.window in layout.rotation_steps and layout.ciphertexts_per_upload == 1


def test_semi_honest_upload_is_one_ciphertext_below_0_2_mb_and_exact(rng):
    data = make_parties(rng, 5, 300)
    res = privfl.federated_auc(data, 100)  # the defaults a user gets
    assert res.bytes["party_upload"] <= 200_000
    assert res.auc == pytest.approx(privfl.binned_auc(data, 100), abs=1e-9)


def malicious_config(parties: int) -> fhauc.SessionConfig:
    names = tuple(f"p{i}" for i in range(parties))
    return fhauc.SessionConfig(
        bytes(16), names, np.linspace(0.9, 0.1, 98), security=fhauc.Security.MALICIOUS, splits=4
    )


def test_small_malicious_sessions_and_threshold_plans_keep_two_ciphertexts():
    from privfl.evaluation.fhauc import curve

    small = malicious_config(malicious.JOINT_MIN_PARTIES - 1)
    layout = curve.layout_for(small, SLOTS, joint=True, rotations=[2048])
    assert not layout.joint
    big = malicious_config(malicious.JOINT_MIN_PARTIES)
    assert curve.layout_for(big, SLOTS, joint=True, rotations=[1024]).joint
    assert not Layout.for_terms(99, SLOTS).joint  # the threshold backend does not ask


def test_the_malicious_noise_bound_covers_the_rotation_exactly_when_joint_is_allowed():
    pol = fhauc.Policy(fhauc.Security.MALICIOUS, max_samples_per_party=128)
    for m in (malicious.JOINT_MIN_PARTIES - 1, malicious.JOINT_MIN_PARTIES, 100):
        sizes = fhauc.variant.Malicious.sizes(malicious_config(m), pol)
        assert sizes.rotated == (m >= malicious.JOINT_MIN_PARTIES)
        plain = replace(sizes, rotated=False).sigma_products()
        rotated = replace(sizes, rotated=True).sigma_products()
        ratio = np.sqrt(1 + malicious.ROTATION_NOISE**2 / m)
        assert rotated[0] == pytest.approx(plain[0] * ratio)
        assert rotated[1] > plain[1]


def malicious_parties(rng: np.random.Generator, m: int) -> list:
    return make_parties(rng, m, 60)


def test_a_malicious_single_key_upload_holds_k_ciphertexts_and_matches_the_reference(rng):
    """From JOINT_MIN_PARTIES parties on (defaults otherwise), each party uploads one
    ciphertext per execution (K = 3), the executions agree and the AUC is the binned one."""
    data = malicious_parties(rng, malicious.JOINT_MIN_PARTIES)
    res = privfl.federated_auc(data, 100, security="malicious")
    assert res.executions == 3 and res.verified
    one = 190_000  # a seeded ring-8192 ciphertext is about 184 KB
    assert res.bytes["party_upload"] < 3 * one  # the folded layout took 6 ciphertexts
    assert res.auc == pytest.approx(privfl.binned_auc(data, 100), abs=1e-6)


@pytest.mark.parametrize(
    "tamper",
    [tamper.AddToFalsePositiveHalf, tamper.RotateSummedVector, tamper.DropParty],
    ids=lambda c: c.__name__,
)
def test_a_tampered_joint_upload_sum_is_detected(tamper, rng):
    """The aggregator changes F's half of the joint ciphertext (or T's, or drops a party):
    every party refuses."""
    data = malicious_parties(rng, malicious.JOINT_MIN_PARTIES)
    with pytest.raises(VerificationError):
        privfl.federated_auc(data, 100, security="malicious", aggregator=tamper())


def test_a_tampered_false_positive_sum_is_detected_in_the_folded_layout(rng):
    data = make_parties(rng, 4, 1000)
    with pytest.raises(VerificationError):
        privfl.federated_auc(
            data, 50, security="malicious", aggregator=tamper.AddToFalsePositiveHalf()
        )


def test_an_upload_in_the_two_ciphertext_format_is_refused_before_loading(rng):
    d = Deployment(rng)
    ups = d.uploads()
    msg = fhauc.PartyUpload.from_bytes(ups["p1"], d.agg.config.session, d.roster)
    (joint,), f, dd = msg.executions[0]
    assert (f, dd) == ((), ())
    two = (((joint,), (joint,), ()),)  # a member signs a T and an F ciphertext
    forged = fhauc.PartyUpload(msg.session, "p1", msg.transcript, two).seal(d.ids["p1"])
    with pytest.raises(MalformedMessageError, match=r"upload from p1 has 1/1/0.*expected 1/0/0"):
        d.agg.handle_uploads(ups | {"p1": forged})
    # and a second T ciphertext in place of F's rotation is refused the same way
    two_t = (((joint, joint), (), ()),)
    forged = fhauc.PartyUpload(msg.session, "p1", msg.transcript, two_t).seal(d.ids["p1"])
    with pytest.raises(MalformedMessageError, match=r"upload from p1 has 2/0/0"):
        d.agg.handle_uploads(ups | {"p1": forged})


def test_a_key_set_without_the_joint_rotation_runs_two_ciphertexts(rng, monkeypatch):
    """Keys provisioned before the joint layout (no rotation by the window) still work:
    parties and aggregator both fall back to T and F in two ciphertexts."""
    from privfl.evaluation.fhauc import key_holder

    real = Layout.for_terms

    def old_layout(terms, slots, joint=False):
        return real(terms, slots)  # what the key holder provisioned before

    monkeypatch.setattr(key_holder.Layout, "for_terms", staticmethod(old_layout))
    d = Deployment(rng)
    monkeypatch.undo()
    assert d.agg.layout.window not in d.agg.context.rotation_steps
    assert not d.agg.layout.joint
    result = d.result()
    for p, (s, y) in zip(d.parties, d.data, strict=True):
        assert p.finish(result).auc == pytest.approx(
            privfl.binned_auc(d.data, d.n_points), abs=1e-9
        )
    msg = fhauc.PartyUpload.from_bytes(d.uploads()["p0"], d.agg.config.session, d.roster)
    assert [len(v) for v in msg.executions[0]] == [1, 1, 0]


def test_an_aggregator_whose_keys_lack_the_joint_rotation_gets_malformed_uploads(rng):
    """The layouts are decided from the same provisioning on both sides; an aggregator that
    claims other keys sees every upload refused by shape, before any ciphertext is loaded."""
    d = Deployment(rng)
    steps = d.agg.context.rotation_steps
    d.agg.context.rotation_steps = tuple(s for s in steps if s != d.agg.layout.window)
    d.new_session()
    assert not d.agg.layout.joint
    with pytest.raises(MalformedMessageError, match=r"has 1/0/0 .* expected 1/1/0"):
        d.agg.handle_uploads(d.uploads())
