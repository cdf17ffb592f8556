"""Attacks on the curve/metrics reveals with real ciphertexts (issue 18 review): a malicious
aggregator trying to get a wrong curve accepted as verified, and sessions trying to make a
party disclose more than the reveal it agreed to. Every test fails if the attack works."""

from __future__ import annotations

import numpy as np
import pytest

import privfl
import privfl.metrics as pm
from conftest import make_parties
from privfl.errors import InputError, MalformedMessageError, ProtocolError, VerificationError
from privfl.evaluation import curves
from privfl.evaluation.fhauc import curve_tamper
from privfl.evaluation.fhauc.messages import CODEC, SessionConfig, Start
from privfl.evaluation.fhauc.party_state import SessionState, Stage
from privfl.evaluation.fhauc.reveal import Reveal
from privfl.evaluation.fhauc.uploads import Reply, Result
from privfl.messages import Writer
from test_metrics import TOL, wire


def run(agg, parties, start):
    return agg.handle_uploads({p.name: p.upload(start) for p in parties})


def relabel(result: bytes, agg, old: bytes, session: bytes) -> bytes:
    """Session ``old``'s replies (another session, or mode) under ``session``'s id: what a
    malicious aggregator can always do, since it builds the Result."""
    res = Result.from_bytes(result, agg.context, old)
    replies = tuple(
        Reply(session, r.numerator, r.denominator, r.execution, r.sender, r.extra)
        for r in res.replies
    )
    return Result(session, replies).to_bytes()


# ----------------------------------------------------------------------------- wrong curves
@pytest.mark.parametrize(
    "attack",
    # SwapExecutions (genuine aggregates of the wrong executions) and RotateTSum (decision
    # points shifted by one slot) are in CURVE_TAMPERS, run by test_metrics.py
    [
        curve_tamper.ScaleFalsePositivesEverywhere,  # TP and FP scaled differently, 1e-6
        curve_tamper.AddToOneSlotEverywhere,
    ],
    ids=lambda c: c.__name__,
)
def test_a_consistent_deviation_in_every_execution_is_caught(rng, attack):
    agg = attack()
    if isinstance(agg, curve_tamper.AddToOneSlotEverywhere):
        agg.epsilon, agg.total = 1e-4, 2100.0
    tamper, parties, _, start = wire(rng, "curve", "malicious", n_points=8, agg=agg)
    result = run(tamper, parties, start)
    for p in parties:
        with pytest.raises(VerificationError):
            p.finish(result)


def test_a_curve_reply_from_another_session_is_refused(rng):
    agg, parties, _, start = wire(rng, "curve", "malicious", n_points=8)
    old, old_id = run(agg, parties, start), agg.config.session
    assert parties[0].finish(old).outcome.verified
    for p in parties[1:]:
        p.finish(old)
    cfg = agg.start_session([p.name for p in parties], 8, security="malicious", splits=2,
                            reveal="curve")  # fmt: skip
    start = agg.collect_joins({p.name: p.join(cfg) for p in parties})
    for p in parties:
        p.upload(start)
    with pytest.raises(ProtocolError):  # the old session id
        parties[0].finish(old)
    with pytest.raises(VerificationError):  # relabelled: the old session's key
        parties[1].finish(relabel(old, agg, old_id, agg.config.session))


def test_a_metrics_reply_replayed_into_a_one_threshold_curve_session_is_refused(rng):
    # a curve at one threshold and the metrics have the same layout: only the key differs
    agg, parties, _, start = wire(rng, "metrics", "malicious")
    old, old_id = run(agg, parties, start), agg.config.session
    for p in parties:
        p.reveals = frozenset({Reveal.METRICS, Reveal.CURVE})
    cfg = agg.start_session([p.name for p in parties], np.array([0.5]), security="malicious",
                            splits=2, reveal="curve")  # fmt: skip
    start = agg.collect_joins({p.name: p.join(cfg) for p in parties})
    for p in parties:
        p.upload(start)
    with pytest.raises(VerificationError):
        parties[0].finish(relabel(old, agg, old_id, agg.config.session))


def test_an_auc_mode_reply_mixed_into_a_curve_session_is_refused(rng):
    auc_agg, auc_parties, _, auc_start = wire(rng, "auc", "malicious", n_points=8)
    auc_result, old_id = run(auc_agg, auc_parties, auc_start), auc_agg.config.session
    for p in auc_parties:
        p.reveals = frozenset({Reveal.AUC, Reveal.CURVE})
    cfg = auc_agg.start_session([p.name for p in auc_parties], 8, security="malicious",
                                splits=2, reveal="curve")  # fmt: skip
    start = auc_agg.collect_joins({p.name: p.join(cfg) for p in auc_parties})
    for p in auc_parties:
        p.upload(start)
    with pytest.raises(VerificationError):
        auc_parties[0].finish(relabel(auc_result, auc_agg, old_id, auc_agg.config.session))


@pytest.fixture(scope="module")
def two_chunks():
    # N = 2100, S = 2: 2·2099 slots per vector need two ciphertexts each (4096 slots)
    agg, parties, _, start = wire(np.random.default_rng(5), "curve", "malicious",
                                     n_points=2100, count=2)  # fmt: skip
    ups = {p.name: p.upload(start) for p in parties}
    states = [p.state for p in parties]
    return agg, parties, states, agg.handle_uploads(ups)


def _edit(agg, result, fn):
    res = Result.from_bytes(result, agg.context, agg.config.session)
    return Result(res.session, tuple(fn(r) for r in res.replies)).to_bytes()


def test_a_two_chunk_curve_with_its_extra_chunks_dropped_or_swapped_is_refused(two_chunks):
    agg, parties, states, result = two_chunks
    assert len(Result.from_bytes(result, agg.context, agg.config.session).replies[0].extra) == 2
    p = parties[0]
    p.restore(states[0].to_bytes())
    assert p.finish(result).outcome.verified  # the honest reply passes
    dropped = _edit(agg, result, lambda r: Reply(r.session, r.numerator, r.denominator,
                                                 r.execution, r.sender, ()))  # fmt: skip
    swapped = _edit(agg, result, lambda r: Reply(r.session, r.numerator, r.denominator,
                                                 r.execution, r.sender, r.extra[::-1]))  # fmt: skip
    p.restore(states[0].to_bytes())
    with pytest.raises(ProtocolError, match="2 extra ciphertext"):
        p.finish(dropped)
    p.restore(states[0].to_bytes())
    with pytest.raises(VerificationError):
        p.finish(swapped)


# ----------------------------------------------------------------------------- decoder sizes
def test_a_result_with_more_ciphertexts_than_the_session_has_is_refused_before_loading(
    rng, monkeypatch
):
    # a transparent ciphertext serialises to ~100 bytes and loads as ~400 KB (ring 8192, 3
    # primes): thousands of them in one small message must be refused on their count
    agg, parties, _, start = wire(rng, "auc")
    result = Result.from_bytes(run(agg, parties, start), agg.context, agg.config.session)
    r = result.replies[0]
    num, den = r.numerator.to_bytes(), r.denominator.to_bytes()

    def result_bytes(executions: int, extra: int) -> bytes:
        w = Writer().u32(executions)
        for e in range(executions):
            w.u32(e).bytes_(num).bytes_(den).list_([b"\x00" * 113] * extra)
        return CODEC.encode("result", r.session, "aggregator", w.getvalue())

    loaded = []
    real = type(agg.context).ciphertext_from_bytes

    def counting(self, data):
        loaded.append(len(data))
        return real(self, data)

    monkeypatch.setattr(type(agg.context), "ciphertext_from_bytes", counting)
    with pytest.raises(ProtocolError, match="carries 0 extra ciphertext"):
        parties[0].finish(result_bytes(1, 5000))
    assert len(loaded) <= 2  # the reply's own two, never the 5000
    loaded.clear()
    with pytest.raises(ProtocolError, match="must hold 1 executions"):
        parties[1].finish(result_bytes(8, 0))
    assert not loaded


# ----------------------------------------------------------------------------- consent
def test_a_curve_config_cannot_reach_an_auc_only_party_through_start_or_restore(rng):
    agg, parties, _, _ = wire(rng, "auc", n_points=12)
    names = [p.name for p in parties]
    auc_cfg = agg.start_session(names, 12)
    p = parties[0]
    p.join(auc_cfg)
    curve_cfg = SessionConfig.from_bytes(auc_cfg)
    curve_cfg = SessionConfig(curve_cfg.session, curve_cfg.parties, curve_cfg.thresholds,
                              curve_cfg.score_range, curve_cfg.security, curve_cfg.splits,
                              reveal=Reveal.CURVE)  # fmt: skip
    start = Start(curve_cfg.session, curve_cfg.to_bytes(), ()).to_bytes()
    with pytest.raises(ProtocolError, match="another configuration"):
        p.upload(start)
    forged = SessionState(Stage.UPLOADED, curve_cfg.to_bytes(), b"\x00" * 32, b"\x00" * 32)
    with pytest.raises(ProtocolError, match="consented to \\['auc'\\] only"):
        p.restore(forged.to_bytes())


def test_a_metrics_config_with_more_than_one_threshold_or_outside_the_range_is_refused(rng):
    agg, parties, _, _ = wire(rng, "metrics")
    cfg = SessionConfig.from_bytes(agg.start_session([p.name for p in parties], np.array([0.5]),
                                                     reveal="metrics"))  # fmt: skip
    for thresholds, score_range in (
        (np.array([0.6, 0.4]), (0.0, 1.0)),  # a curve in disguise
        (np.array([1.5]), (0.0, 1.0)),
        (np.array([np.nan]), (0.0, 1.0)),
    ):
        bad = SessionConfig(cfg.session, cfg.parties, thresholds, score_range, cfg.security,
                            cfg.splits, reveal=Reveal.METRICS)  # fmt: skip
        with pytest.raises(MalformedMessageError):
            parties[0].join(bad.to_bytes())


def test_the_honest_metrics_reveal_is_its_three_ratios_only(rng):
    agg, parties, data, start = wire(rng, "metrics")
    out = parties[0].finish(run(agg, parties, start)).outcome.curve
    assert out is not None and out.tp.size == out.fp.size == 3
    ref = pm.binned_reference(data, np.array([0.5]))
    assert np.allclose(out.tp, ref.tp, atol=TOL) and np.allclose(out.fp, ref.fp, atol=TOL)


# ----------------------------------------------------------------------------- keys="threshold"
def test_threshold_keys_run_every_reveal_and_equal_the_reference(rng, monkeypatch):
    pytest.importorskip("openfhe")
    from privfl.evaluation.fhauc.threshold import ops as threshold_ops

    monkeypatch.setattr(threshold_ops, "FHAUC_PARAMETER_SET", "fhauc-test")  # fast, insecure
    parties = make_parties(rng, 2, 60)
    score = pm.roc_auc_score(parties, 10, keys="threshold")
    assert score.reveal == "auc" and score.run["keys"] == "threshold"
    assert float(score) == pytest.approx(privfl.binned_auc(parties, 10), abs=TOL)
    by_curve = pm.roc_auc_score(parties, 10, keys="threshold", reveal="curve")
    assert by_curve.reveal == "curve" and float(by_curve) == pytest.approx(float(score), abs=TOL)
    ref = pm.binned_reference(parties, 10)
    ap = pm.average_precision_score(parties, 10, keys="threshold")
    assert float(ap) == pytest.approx(curves.average_precision(ref.tp, ref.fp), abs=TOL)
    at = pm.threshold_metrics(parties, 0.5, keys="threshold")
    one = pm.binned_reference(parties, np.array([0.5]))
    assert at.recall == pytest.approx(one.tp[1] / one.tp[-1], abs=TOL)
    assert at.fpr == pytest.approx(one.fp[1] / one.fp[-1], abs=TOL)
    with pytest.raises(InputError, match="keys must be 'single' or 'threshold'"):
        pm.roc_auc_score(parties, 10, keys="dealer")
