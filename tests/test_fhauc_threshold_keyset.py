"""Threshold key sets reused across FHAUC sessions within their decryption budget (issue 27,
item 4): a second session generates no key and costs each party little traffic; each party
counts its own decryption shares and refuses a session that would exceed the budget, before
any upload, whatever the aggregator counts; re-keying then works. Insecure ``fhauc-test``
ring (fast)."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

pytest.importorskip("openfhe")

import privfl
from privfl.crypto.threshold import params as threshold_params
from privfl.errors import ProtocolError
from privfl.evaluation.fhauc.messages import SessionConfig
from privfl.evaluation.fhauc.schedule import run_session
from privfl.evaluation.fhauc.steps import Step
from privfl.evaluation.fhauc.threshold import ops as threshold_ops
from test_fhauc_threshold import Recorder, deployment

TOL = 1e-6


@pytest.fixture(autouse=True)
def fast_ring(monkeypatch):
    monkeypatch.setattr(threshold_ops, "FHAUC_PARAMETER_SET", "fhauc-test")  # fast, insecure


def traffic(rec: Recorder, party: str) -> int:
    """Bytes a party received and sent in one session."""
    return sum(len(m.get(party, b"")) for box in (rec.down, rec.up) for m in box.values())


def session(agg, parties, request):
    rec = Recorder(parties)
    run_session(agg, rec, request)
    return rec


def test_a_second_session_reuses_the_key_set_without_key_generation():
    data, parties, agg, _, request = deployment(np.random.default_rng(5))
    first = session(agg, parties, request)
    key_id = agg.key_set.key_id
    second = session(agg, parties, request)
    assert Step.KEYGEN in first.down and Step.KEYGEN not in second.down  # no key generation
    config = SessionConfig.from_bytes(second.down[Step.JOIN]["p0"])
    assert config.key_set == key_id and all(p.keys.key_set.key_id == key_id for p in parties)
    expected = privfl.binned_auc(data, request.thresholds)
    for rec in (first, second):
        assert all(r.auc == pytest.approx(expected, abs=TOL) for r in rec.results.values())
    assert max(traffic(second, p.name) for p in parties) < 2_000_000
    assert max(traffic(second, p.name) for p in parties) < min(
        traffic(first, p.name) for p in parties
    )
    assert agg.key_set.used == 2 and all(
        p.keys.key_set.keys.decryption_shares_made == 2 for p in parties
    )


def test_a_party_refuses_a_reused_key_set_beyond_its_own_budget_and_re_keying_works(monkeypatch):
    # the test ring with a budget of 4 shares (the default 32 is 32 sessions of this test)
    small = dataclasses.replace(threshold_params.parameter_set("fhauc-test"), name="fhauc-b4",
                                max_decryptions=4)  # fmt: skip
    monkeypatch.setitem(threshold_params.PARAMETER_SETS, "fhauc-b4", small)
    monkeypatch.setattr(threshold_ops, "FHAUC_PARAMETER_SET", "fhauc-b4")
    data, parties, agg, _, request = deployment(np.random.default_rng(6))
    session(agg, parties, request)
    budget = agg.key_set.server.context.params.max_decryptions
    assert budget == 4
    while agg.key_set.used < budget:  # honest sessions until the budget is spent
        session(agg, parties, request)
    assert all(p.keys.key_set.remaining == 0 for p in parties)
    # an aggregator that miscounts (or cheats) and announces the spent key set again
    agg.key_set.used = 0
    spent = agg.key_set.key_id
    config = agg.start_session(request.parties, request.thresholds, security=request.security)
    assert SessionConfig.from_bytes(config).key_set == spent
    for p in parties:
        with pytest.raises(ProtocolError, match="re-key"):
            p.join(config)
    # re-keying: the honest aggregator's own count refuses reuse and generates a fresh set
    agg.key_set.used = budget
    rec = session(agg, parties, request)
    assert Step.KEYGEN in rec.down and agg.key_set.key_id != spent
    assert all(p.keys.key_set.key_id == agg.key_set.key_id for p in parties)
    expected = privfl.binned_auc(data, request.thresholds)
    assert all(r.auc == pytest.approx(expected, abs=TOL) for r in rec.results.values())


def test_a_party_refuses_a_key_set_it_does_not_hold_or_for_other_parties():
    _, parties, agg, _, request = deployment(np.random.default_rng(7))
    session(agg, parties, request)
    agg.key_set.key_id = bytes(len(agg.key_set.key_id))  # a key set nobody generated
    config = agg.start_session(request.parties, request.thresholds, security=request.security)
    with pytest.raises(ProtocolError, match="does not hold"):
        parties[0].join(config)


def restart_after_the_lead_draw(agg, parties, request) -> str:
    """A steering aggregator's cheap try: announce a reuse session, relay the joins and the key
    checks (the lead is now known to it), then abandon the session."""
    config = agg.start_session(request.parties, request.thresholds, security=request.security)
    assert SessionConfig.from_bytes(config).key_set == agg.key_set.key_id
    start = agg.collect_joins({p.name: p.join(config) for p in parties})
    agg.relay_checks({p.name: p.handlers()[Step.KEYCHECK](start) for p in parties})
    return agg.lead


def test_a_steering_aggregator_restarting_reuse_sessions_is_refused_after_the_abandon_limit():
    """Item 2 of the review: with a kept key set the lead is drawn one cheap round after the
    join. Each party counts the sessions on the set abandoned after it revealed its lead secret
    (not those abandoned before: nothing was drawn), shows the count in its result, and refuses
    the set at the join, before any upload, once ABANDON_LIMIT were abandoned; re-keying then
    works and starts a clean count."""
    from privfl.evaluation.fhauc.threshold.keyset import (
        ABANDON_LIMIT,
        export_key_set,
        import_key_set,
    )

    assert ABANDON_LIMIT == 2  # the documented default
    data, parties, agg, _, request = deployment(np.random.default_rng(8))
    expected = privfl.binned_auc(data, request.thresholds)
    session(agg, parties, request)  # generates the key set
    kept = agg.key_set.key_id
    config = agg.start_session(request.parties, request.thresholds, security=request.security)
    for p in parties:  # abandoned right after the join: the lead was not drawn, not counted
        p.join(config)
    restart_after_the_lead_draw(agg, parties, request)  # abandon 1
    rec = session(agg, parties, request)  # a completed session reports the count
    assert Step.KEYGEN not in rec.down and agg.key_set.key_id == kept
    assert all(r.abandoned == 1 and r.to_dict()["abandoned_sessions"] == 1
               for r in rec.results.values())  # fmt: skip
    assert all(r.auc == pytest.approx(expected, abs=TOL) for r in rec.results.values())
    restart_after_the_lead_draw(agg, parties, request)  # abandon 2: the limit
    config = agg.start_session(request.parties, request.thresholds, security=request.security)
    assert SessionConfig.from_bytes(config).key_set == kept  # the aggregator tries again
    made = [p.keys.key_set.keys.decryption_shares_made for p in parties]
    for p in parties:  # the join notes abandon 2 and refuses
        with pytest.raises(ProtocolError, match=r"abandoned after the lead was drawn.*re-key"):
            p.join(config)
    assert [p.keys.key_set.keys.decryption_shares_made for p in parties] == made
    params = threshold_ops.fhauc_parameters()
    for p in parties:  # the count survives the node-local storage
        assert import_key_set(export_key_set(p.keys.key_set), p.name, params).abandoned == 2
        with pytest.raises(ProtocolError, match="abandoned"):
            p.join(config)  # and stays: no new abandon, still refused
    agg.reuse_keys = False  # re-keying works, with a clean count
    rec = session(agg, parties, request)
    assert Step.KEYGEN in rec.down and agg.key_set.key_id != kept
    assert all(r.abandoned == 0 for r in rec.results.values())
    assert all(r.auc == pytest.approx(expected, abs=TOL) for r in rec.results.values())


def test_a_semi_honest_upload_is_one_ciphertext_per_execution_and_a_malicious_one_keeps_two():
    """Item 4 (session 2 under 2 MB per party): a semi-honest AUC upload carries T and F in
    one ciphertext (the joint layout), half the bytes of the folded layout's two; the
    malicious variant keeps two below 64 parties (malicious.joint_allowed, as single keys:
    at 2 parties the joint layout's honest sessions disagreed beyond the tolerance). Both
    equal the reference."""
    from privfl.evaluation.fhauc.threshold import messages as tmsg

    for security, shape in (("semi-honest", (1, 0, 0)), ("malicious", (1, 1, 0))):
        data, parties, agg, _, request = deployment(np.random.default_rng(8), security=security)
        rec = session(agg, parties, request)
        config = SessionConfig.from_bytes(rec.down[Step.JOIN]["p0"])
        roster = parties[0].roster
        for answer in rec.up[Step.UPLOAD].values():
            upload = tmsg.ThresholdUpload.from_bytes(
                tmsg.UploadStep.from_bytes(answer).upload, config.session, roster
            )
            assert {tuple(len(v) for v in e) for e in upload.executions} == {shape}
        expected = privfl.binned_auc(data, request.thresholds)
        assert all(r.auc == pytest.approx(expected, abs=TOL) for r in rec.results.values())


def test_a_curve_session_spends_many_shares_and_the_next_one_re_keys_when_they_do_not_fit():
    """The default budget (32) with a curve of 4 executions x 6 reply ciphertexts (N = 1,500
    at 4 splits on the test ring: 24 shares): every party and the aggregator count 24, the
    next such session re-keys (24 more do not fit the 8 left), and a party refuses an
    aggregator that announces the spent set anyway, at the join, before any upload."""
    from conftest import make_parties
    from privfl.crypto import keywrap
    from privfl.evaluation.fhauc.policy import Policy, Security
    from privfl.evaluation.fhauc.reveal import Reveal
    from privfl.evaluation.fhauc.roles import make_party
    from privfl.evaluation.fhauc.schedule import SessionRequest
    from privfl.evaluation.fhauc.threshold.aggregator import ThresholdAggregator
    from privfl.evaluation.fhauc.threshold.setup import provision

    data = make_parties(np.random.default_rng(11), 2, 400)
    names = ["p0", "p1"]
    ids = {n: keywrap.IdentityKey() for n in names}
    roster = {n: k.public_bytes for n, k in ids.items()}
    positives = sum(int(y.sum()) for _, y in data)
    pairs = positives * (800 - positives)
    policy = Policy(Security.MALICIOUS, 512, max_splits=4, executions=4,
                    min_pairs=1 << (pairs.bit_length() - 1))  # fmt: skip
    public, bundles = provision("p0", ids["p0"], roster, policy)
    parties = [make_party("threshold", n, ids[n], roster, "p0", s, y, reveal=Reveal.CURVE)
               for n, (s, y) in zip(names, data)]  # fmt: skip
    for p in parties:
        p.receive_bundle(bundles[p.name])
    agg = ThresholdAggregator()
    agg.receive_setup(public)
    request = SessionRequest(tuple(names), 1500, (0.0, 1.0), Security.MALICIOUS, 4, Reveal.CURVE)
    first = session(agg, parties, request)
    assert agg.key_set.used == 24 and len(first.results) == 2
    assert all(p.keys.key_set.keys.decryption_shares_made == 24 for p in parties)
    assert all(p.keys.key_set.remaining == 8 for p in parties)
    spent = agg.key_set.key_id
    second = session(agg, parties, request)
    assert Step.KEYGEN in second.down and agg.key_set.key_id != spent
    assert len(second.results) == 2
    agg.key_set.used = 0  # a miscounting aggregator announces the set with 8 left anyway
    config = agg.start_session(request.parties, request.thresholds, security=request.security,
                               splits=4, reveal=Reveal.CURVE)  # fmt: skip
    for p in parties:
        with pytest.raises(ProtocolError, match="re-key"):
            p.join(config)


def test_a_key_set_stored_under_other_parameters_of_the_same_name_is_not_reused():
    """A stored key set names its parameter set with a digest of every parameter: a set kept
    under one budget is dropped when read under another of the same name (None: the next
    session re-keys) instead of being given a budget its shares' flooding noise was not sized
    for (here kept under this release's 32 and read as by a release whose "fhauc-test"
    allowed 16; tests/test_flower_keyset.py runs the upgrade the other way)."""
    from privfl.evaluation.fhauc.threshold.keyset import (
        export_key_set,
        export_server_key_set,
        import_key_set,
        import_server_key_set,
    )

    _, parties, agg, _, request = deployment(np.random.default_rng(9))
    session(agg, parties, request)
    params = threshold_ops.fhauc_parameters()
    older = dataclasses.replace(params, max_decryptions=16)
    party_bytes = export_key_set(parties[0].keys.key_set)
    server_bytes = export_server_key_set(agg.key_set)
    assert import_key_set(party_bytes, parties[0].name, params) is not None
    assert import_server_key_set(server_bytes, params) is not None
    assert import_key_set(party_bytes, parties[0].name, older) is None
    assert import_server_key_set(server_bytes, older) is None
