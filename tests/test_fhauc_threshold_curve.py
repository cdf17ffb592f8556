"""Threshold keys with the ``curve``/``metrics`` reveals (issue 27): the curve reveal's packing
and recovery under a joint key. A deviating aggregator is caught (the curve tamper suite), a
party refuses a reveal it did not consent to and a session beyond the key set's decryption
budget before any work, the lead reveals only the used slots and only to the parties, and
the reveal's decoder refuses every malformed plaintext. Insecure ``fhauc-test`` ring (fast)."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("openfhe")

import privfl.metrics as pm
from conftest import make_parties
from privfl.errors import InputError, MalformedMessageError, ProtocolError, VerificationError
from privfl.evaluation.fhauc import curve, curve_tamper
from privfl.evaluation.fhauc.aggregator import Aggregator
from privfl.evaluation.fhauc.policy import Policy, Security
from privfl.evaluation.fhauc.reveal import Reveal
from privfl.evaluation.fhauc.schedule import SessionRequest, run_session
from privfl.evaluation.fhauc.tamper import PerExecution, rotated
from privfl.evaluation.fhauc.threshold import curve as threshold_curve
from privfl.evaluation.fhauc.threshold import ops as threshold_ops
from privfl.evaluation.fhauc.threshold import reveal as threshold_reveal
from privfl.evaluation.fhauc.threshold.aggregator import ThresholdAggregator
from privfl.evaluation.fhauc.threshold.plan import plan
from privfl.evaluation.fhauc.uploads import Reply
from test_fhauc_threshold import deployment

TOL = 1e-6


@pytest.fixture(autouse=True)
def fast_ring(monkeypatch):
    monkeypatch.setattr(threshold_ops, "FHAUC_PARAMETER_SET", "fhauc-test")  # fast, insecure


# SwapExecutions rewrites the single-key Result message, which threshold mode never builds
THRESHOLD_CURVE_TAMPERS = [
    t for t in curve_tamper.CURVE_TAMPERS if t is not curve_tamper.SwapExecutions
]


@pytest.mark.parametrize(
    "tamper", [*THRESHOLD_CURVE_TAMPERS, *curve_tamper.EPSILON_TAMPERS], ids=lambda c: c.__name__
)
def test_a_deviating_aggregator_is_caught_in_a_threshold_curve_session(tamper):
    parties = make_parties(np.random.default_rng(11), 2, 300)
    agg = tamper()
    if isinstance(agg, curve_tamper.AddToOneSlotEverywhere):
        agg.epsilon, agg.total = 1e-4, 600.0
    with pytest.raises(VerificationError):
        pm.roc_curve(parties, 8, keys="threshold", security="malicious", splits=2, aggregator=agg)


def test_the_threshold_curve_equals_the_single_key_curve_with_many_parties():
    parties = make_parties(np.random.default_rng(3), 6, 150)
    single = pm.roc_curve(parties, 12, security="malicious", splits=2)
    joint = pm.roc_curve(parties, 12, keys="threshold", security="malicious", splits=2)
    assert joint.fpr == pytest.approx(single.fpr, abs=TOL)
    assert joint.tpr == pytest.approx(single.tpr, abs=TOL)
    assert joint.run["verified"] is True


def test_a_party_refuses_a_curve_session_it_did_not_consent_to(rng):
    _, parties, agg, rec, request = deployment(rng)  # parties consent to the AUC only
    curve_request = SessionRequest(
        request.parties, 10, (0.0, 1.0), Security.SEMI_HONEST, 1, Reveal.CURVE
    )
    with pytest.raises(ProtocolError, match="consented to"):
        run_session(agg, rec, curve_request)
    assert all(not p.keys.holds_key_share for p in parties)  # refused at the join


@pytest.mark.parametrize(("n_points", "executions", "decryptions"), [(1500, 3, 18), (4096, 2, 32)])
def test_a_curve_of_many_joint_decryptions_is_accepted(n_points, executions, decryptions):
    """Curves of more joint decryptions than 16, the bound the decryption requests, shares and
    reveal once had (an honest curve of 24 was refused after the upload as malformed): 3
    executions x 6 reply ciphertexts (N = 1,500 at 4 splits: 3 chunks of 2,048 slots per
    vector), and 2 x 16 (N = 4,096: 8 chunks), exactly the key set's budget of 32, the
    largest reveal the decoders bound (MAX_REPLY_CIPHERTEXTS) must carry."""
    parties = make_parties(np.random.default_rng(17), 2, 300)
    cfg_plan = plan(*_session(n_points, executions))
    assert cfg_plan.requests_per_execution * executions == decryptions
    assert decryptions <= cfg_plan.params.max_decryptions
    res = pm.roc_curve(
        parties, n_points, keys="threshold", security="malicious", splits=4, executions=executions
    )
    ref = pm.roc_curve(parties, n_points)
    np.testing.assert_allclose(res.tpr, ref.tpr, atol=TOL)
    np.testing.assert_allclose(res.fpr, ref.fpr, atol=TOL)


def test_the_decoders_carry_every_parameter_sets_whole_budget():
    """The decryption requests, shares and reveal are bounded by MAX_REPLY_CIPHERTEXTS, frozen
    from the "fhauc" set at import: no FHAUC set may allow more decryptions per key set."""
    from privfl.crypto.threshold.params import PARAMETER_SETS
    from privfl.evaluation.fhauc.threshold import messages as tmsg

    for name in ("fhauc", "fhauc-test"):
        assert PARAMETER_SETS[name].max_decryptions <= tmsg.MAX_REPLY_CIPHERTEXTS
    assert tmsg.MAX_REVEAL_BYTES >= 4 + tmsg.MAX_REPLY_CIPHERTEXTS * (4 + 8 * 4096) + 16
    # and no more: an aggregator's relay of one request beyond the budget is refused unread
    for step in ("th-decrypt", "th-lead"):
        n = tmsg.MAX_REPLY_CIPHERTEXTS
        ok = tmsg.Relay(bytes(16), (b"x",) * n, step).to_bytes()
        assert len(tmsg.Relay.from_bytes(ok, step, bytes(16)).items) == n
        over = tmsg.Relay(bytes(16), (b"x",) * (n + 1), step).to_bytes()
        with pytest.raises(MalformedMessageError, match="at most"):
            tmsg.Relay.from_bytes(over, step, bytes(16))


def test_a_session_beyond_the_decryption_budget_is_refused_before_any_work(rng):
    events: list[object] = []
    parties = make_parties(rng, 2, 100)
    # N = 4,096 with 4 splits: 16,380 slots per vector, 8 ciphertexts per vector, 3 executions
    with pytest.raises(InputError, match="joint decryptions"):
        pm.roc_curve(
            parties, 4096, keys="threshold", security="malicious", splits=4, executions=3,
            progress=events.append,
        )  # fmt: skip
    assert events == []


def test_the_lead_reveals_the_used_slots_of_every_reply_ciphertext_only():
    layout = curve.CurveLayout.for_curve(5000, 2048)  # three chunks, 904 slots in the last
    assert threshold_curve.used_slots(layout) == [2048, 2048, 2048, 904, 2048, 904]
    cfg_plan = _plan(Reveal.METRICS, Security.MALICIOUS)
    assert cfg_plan.requests_per_execution == 2
    assert threshold_curve.used_slots(cfg_plan.layout) == [4, 4]  # S=2 x (N-1)=2 per vector


def _plan(reveal, security):
    from privfl.evaluation.fhauc.messages import SessionConfig
    from privfl.evaluation.fhauc.policy import Policy

    cfg = SessionConfig(
        bytes(16), ("a", "b"), np.array([0.5]), security=security, splits=2, reveal=reveal
    )
    return plan(cfg, Policy(security, 1024, max_splits=4))


@given(st.binary(max_size=200))
@settings(max_examples=200, deadline=None)
def test_the_reveal_decoder_refuses_every_malformed_plaintext(data):
    try:
        out = threshold_curve.read_vectors(data, [4, 4])
    except MalformedMessageError:
        return
    assert [v.size for v in out] == [4, 4]
    assert threshold_curve.write_vectors(out) == data


def test_a_reveal_of_the_wrong_shape_is_refused():
    good = threshold_curve.write_vectors([np.ones(4), np.ones(4)])
    assert [v.size for v in threshold_curve.read_vectors(good, [4, 4])] == [4, 4]
    for lengths in ([4], [4, 4, 4], [4, 5]):
        with pytest.raises(MalformedMessageError):
            threshold_curve.read_vectors(good, lengths)
    with pytest.raises(MalformedMessageError):
        threshold_curve.read_vectors(good + b"\0", [4, 4])


def test_the_sealed_reveal_holds_the_used_slots_only_and_the_aggregator_sees_no_value(rng):
    from privfl.evaluation.fhauc.threshold import messages as tmsg
    from privfl.evaluation.metric_reference import binned_reference

    data, parties, agg, rec, request = deployment(rng, m=3, size=200)
    for p in parties:
        p.reveals = frozenset({Reveal.CURVE})
    curve_request = SessionRequest(
        request.parties, 10, (0.0, 1.0), Security.SEMI_HONEST, 1, Reveal.CURVE
    )
    run_session(agg, rec, curve_request)
    (fused,) = rec.up["fuse"].values()
    sealed = tmsg.Reveal.from_bytes(fused, agg.session_config.session, agg.roster).sealed
    values = 2 * 9  # T and F: N-1 = 9 used slots each, of one 2,048-slot ciphertext each
    assert len(sealed) == 4 + 2 * 4 + 8 * values + 16  # count, lengths, float64s, GCM tag
    ref = binned_reference(data, 10)
    for result in rec.results.values():
        assert result.outcome.curve.tp == pytest.approx(ref.tp, abs=TOL)
    held = {k: v for k, v in vars(agg).items() if k != "worker_cpu"}  # a timing, not a value
    assert not any(isinstance(v, float | np.ndarray) for v in held.values())


def test_a_threshold_curve_upload_is_one_ciphertext_per_group_and_the_reply_two(rng):
    """T and F share one upload ciphertext (CurveLayout joint: half the upload), and the 2
    malicious executions share it too (lanes): one ciphertext per party, and the aggregator's
    reply two ciphertexts for the group, T and the sum rotated to F."""
    from privfl.evaluation.fhauc.messages import SessionConfig
    from privfl.evaluation.fhauc.threshold import messages as tmsg
    from privfl.evaluation.metric_reference import binned_reference

    data, parties, agg, rec, request = deployment(rng, m=3, size=200, security="malicious")
    for p in parties:
        p.reveals = frozenset({Reveal.CURVE})
    curve_request = SessionRequest(
        request.parties, 10, (0.0, 1.0), Security.MALICIOUS, 2, Reveal.CURVE
    )
    run_session(agg, rec, curve_request)
    config = SessionConfig.from_bytes(rec.down["join"]["p0"])
    for answer in rec.up["upload"].values():
        step = tmsg.UploadStep.from_bytes(answer)
        upload = tmsg.ThresholdUpload.from_bytes(step.upload, config.session, agg.roster)
        assert [tuple(len(v) for v in e) for e in upload.executions] == [(1, 0, 0)]
    assert agg.plan is not None and (agg.plan.groups, agg.plan.requests) == (1, 2)
    ref = binned_reference(data, 10)
    for result in rec.results.values():
        assert result.outcome.verified is True
        assert result.outcome.curve.tp == pytest.approx(ref.tp, abs=TOL)
        assert result.outcome.curve.fp == pytest.approx(ref.fp, abs=TOL)


class ExtraDecryption(ThresholdAggregator):
    """Asks every party for one decryption share more than the session's plan has."""

    def request_decryptions(self):
        from privfl.evaluation.fhauc.threshold import messages as tmsg

        session = self.session_config.session
        relay = tmsg.Relay.from_bytes(super().request_decryptions(), "th-decrypt", session)
        return tmsg.Relay(session, (*relay.items, relay.items[0]), "th-decrypt").to_bytes()


def test_a_party_refuses_more_decryption_shares_than_the_curve_session_plans(rng):
    _, parties, agg, rec, request = deployment(rng, aggregator=ExtraDecryption())
    for p in parties:
        p.reveals = frozenset({Reveal.CURVE})
    curve_request = SessionRequest(
        request.parties, 10, (0.0, 1.0), Security.SEMI_HONEST, 1, Reveal.CURVE
    )
    with pytest.raises(MalformedMessageError, match="3 decryption requests, expected 2"):
        run_session(agg, rec, curve_request)
    assert "decrypt" not in rec.up  # no party answered with a share


def _session(n_points, executions):
    from privfl.evaluation.fhauc.messages import SessionConfig
    from privfl.evaluation.fhauc.policy import Policy

    cfg = SessionConfig(
        bytes(16), ("a", "b"), np.linspace(0.999, 0.001, n_points - 2),
        security=Security.MALICIOUS, splits=4, reveal=Reveal.CURVE,
    )  # fmt: skip
    return cfg, Policy(Security.MALICIOUS, 512, executions=executions)


@pytest.mark.parametrize(("n_points", "lanes"), [(100, 8), (3, 64)])
def test_the_malicious_executions_share_one_upload_ciphertext_and_one_reply(
    monkeypatch, n_points, lanes
):
    """The executions side by side (``CurveLayout`` lanes) on the default ``"fhauc"`` set: at
    N = 100 and 4 splits (T and F of 396 values in a region of 1,024 slots, 8 to a
    ciphertext of 8,192 slots) and for the metrics' N = 3, the three executions upload one
    ciphertext and are answered by one reply of two ciphertexts: 2 joint decryptions per
    session instead of 6 (a kept key set's session then moved 5.2 MB per party, over issue
    27's 2 MB)."""
    monkeypatch.setattr(threshold_ops, "FHAUC_PARAMETER_SET", "fhauc")  # a plan: no keys made
    p = plan(*_session(n_points, 3))
    assert (p.layout.lanes, p.groups, p.requests) == (lanes, 1, 2)
    assert p.layout.joint and p.upload_bytes == 2 * 3 * (1 << 14) * 8  # one 3-tower ciphertext
    semi = plan(replace(_session(n_points, 3)[0], security=Security.SEMI_HONEST), Policy(
        Security.SEMI_HONEST, 512))  # fmt: skip
    assert semi.layout.lanes == 1  # one execution: nothing to put side by side


def test_a_curve_in_lanes_equals_the_reference():
    """Three executions in one group (fast ring, N = 20, 4 splits: 76 values per vector,
    regions of 256 slots, 8 to a ciphertext; one reply of two ciphertexts): the verified
    curve equals the plaintext binned curve."""
    p = plan(*_session(20, 3))
    assert (p.layout.lanes, p.groups, p.requests) == (8, 1, 2)
    parties = make_parties(np.random.default_rng(5), 3, 400)
    res = pm.roc_curve(parties, 20, keys="threshold", security="malicious", executions=3)
    ref = pm.binned_reference(parties, 20)
    np.testing.assert_allclose(res.tpr, ref.tp / ref.tp[-1], atol=TOL)
    np.testing.assert_allclose(res.fpr, ref.fp / ref.fp[-1], atol=TOL)
    assert res.run["verified"] is True


class PlantAnUploadInTheUnusedLanes(Aggregator):
    """An honest curve reply plus party 0's own upload (times ``c``) in the unused lanes of the
    summed ciphertext, and consistently in its rotated copy: every value the lead reads stays
    honest, and the lead's process holds party 0's shares, which its session key unmasks."""

    def aggregate(self, uploads):
        reply = super().aggregate(uploads)
        layout, slots = self._layout(), self._keys().slots
        to_unused = slots - layout.lanes_used(self.execution, self.executions) * layout.region
        planted = rotated(uploads[0].t[0] * 3, to_unused, slots)
        return Reply(
            reply.session, reply.numerator + planted,
            reply.denominator + planted.rotate(layout.f_rotation), reply.execution, reply.sender,
        )  # fmt: skip


def test_values_planted_in_a_curve_replys_padding_are_refused(monkeypatch):
    """The lead decodes every slot of a malicious curve reply and checks the padding, the
    unused lanes and the rotated copy (shape.curve_reply_shape_ok): a reply carrying a
    party's upload where nobody reads is refused; without the check it was accepted."""
    parties = make_parties(np.random.default_rng(23), 2, 300)
    run = dict(keys="threshold", security="malicious", splits=2)
    with pytest.raises(VerificationError):
        pm.roc_curve(parties, 8, aggregator=PlantAnUploadInTheUnusedLanes(), **run)
    monkeypatch.setattr(threshold_reveal, "curve_reply_shape_ok", lambda *a: True)
    res = pm.roc_curve(parties, 8, aggregator=PlantAnUploadInTheUnusedLanes(), **run)
    assert res.run["verified"] is True  # accepted: the check is what refuses it


class AnswerTheSecondGroupFromTheFirst(PerExecution):
    """With more executions than lanes, every group but the first is answered from the first
    group's uploads: genuine sums, of the wrong executions."""

    def tamper(self, uploads):
        return self.honest(self.first if self.execution > 0 else uploads)


def test_a_group_answered_from_another_groups_uploads_is_refused():
    """Fast ring, N = 20 and 4 splits: 8 lanes to a ciphertext, so 9 executions take two
    groups; the tamper suite's other tests run with one."""
    p = plan(*_session(20, 9))
    assert (p.layout.lanes, p.groups) == (8, 2)
    parties = make_parties(np.random.default_rng(29), 2, 300)
    with pytest.raises(VerificationError):
        pm.roc_curve(
            parties, 20, keys="threshold", security="malicious", executions=9,
            aggregator=AnswerTheSecondGroupFromTheFirst(),
        )  # fmt: skip
    honest = pm.roc_curve(parties, 20, keys="threshold", security="malicious", executions=9)
    assert honest.run["verified"] is True
