"""FHAUC with threshold keys (issue 16): every party holds its own key share, the aggregator
computes as in single-key mode and never holds a share or a fusable set of shares, the AUC
is revealed to the parties only. Runs on the insecure ring-2^12 ``fhauc-test`` set (the
``fhauc`` set's chain, so the same code paths) to stay fast."""

from __future__ import annotations

import gc
import secrets

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("openfhe")

import privfl
from _shared import force_joint_lanes
from conftest import make_parties
from privfl import threshold as tr
from privfl.crypto import keywrap
from privfl.crypto import threshold as th
from privfl.crypto.threshold.ciphertext import fuse_and_decode
from privfl.errors import (
    InputError,
    InsufficientPrecisionError,
    ProtocolError,
    VerificationError,
)
from privfl.evaluation.fhauc.aggregator import Aggregator
from privfl.evaluation.fhauc.messages import SessionConfig
from privfl.evaluation.fhauc.policy import Policy, Security
from privfl.evaluation.fhauc.roles import make_party
from privfl.evaluation.fhauc.schedule import SessionRequest, party_step, run_session
from privfl.evaluation.fhauc.steps import Step
from privfl.evaluation.fhauc.tamper import TAMPERS
from privfl.evaluation.fhauc.threshold import intake
from privfl.evaluation.fhauc.threshold import ops as threshold_ops
from privfl.evaluation.fhauc.threshold import transcript as tt
from privfl.evaluation.fhauc.threshold.aggregator import ThresholdAggregator
from privfl.evaluation.fhauc.threshold.messages import KeyCheck, Relay
from privfl.evaluation.fhauc.threshold.ops import ThresholdCiphertext
from privfl.evaluation.fhauc.threshold.setup import provision
from privfl.evaluation.fhauc.transport import Transport
from privfl.evaluation.fhauc.upload_checks import UploadSum

TOL = 1e-6


@pytest.fixture(scope="module", autouse=True)
def fast_ring():
    saved = threshold_ops.FHAUC_PARAMETER_SET
    threshold_ops.FHAUC_PARAMETER_SET = "fhauc-test"
    yield
    threshold_ops.FHAUC_PARAMETER_SET = saved


class Recorder(Transport):
    """In-process transport that keeps every message of every step."""

    def __init__(self, parties):
        self.parties = {p.name: p for p in parties}
        self.down: dict[str, dict[str, bytes]] = {}
        self.up: dict[str, dict[str, bytes]] = {}
        self.results = {}

    def exchange(self, step, messages):
        self.down[step] = dict(messages)
        out = {}
        for name, data in messages.items():
            answer, result = party_step(self.parties[name], step, data)
            if result is not None:
                self.results[name] = result
            out[name] = answer
        self.up[step] = dict(out)
        return out


def deployment(rng, m=3, size=200, security="semi-honest", aggregator=None, n_points=10):
    data = make_parties(rng, m, size)
    names = [f"p{i}" for i in range(m)]
    ids = {n: keywrap.IdentityKey() for n in names}
    roster = {n: k.public_bytes for n, k in ids.items()}
    mode = Security.parse(security)
    positives = sum(int(y.sum()) for _, y in data)
    pairs = positives * (m * size - positives)  # min_pairs: provisioned, as in a deployment
    policy = Policy(mode, 1 << (size - 1).bit_length(), max_splits=4,
                    min_pairs=1 << (pairs.bit_length() - 1))  # fmt: skip
    public, bundles = provision("p0", ids["p0"], roster, policy)
    parties = [
        make_party("threshold", n, ids[n], roster, "p0", s, y) for n, (s, y) in zip(names, data)
    ]
    for p in parties:
        p.receive_bundle(bundles[p.name])
    agg = aggregator or ThresholdAggregator()
    agg.receive_setup(public)
    rec = Recorder(parties)
    splits = 2 if mode is Security.MALICIOUS else 1
    request = SessionRequest(tuple(names), n_points, (0.0, 1.0), mode, splits)
    return data, parties, agg, rec, request


# ------------------------------------------------------------------ correctness
@given(st.integers(2, 20), st.sampled_from([3, 10, 100, 1000]), st.integers(0, 2**32 - 1))
@settings(max_examples=2)
def test_threshold_semi_honest_equals_binned_reference(m, n_points, seed):
    rng = np.random.default_rng(seed)
    parties = make_parties(rng, m, int(rng.integers(3, 300)))
    res = privfl.federated_auc(parties, n_points, keys="threshold")
    assert res.auc == pytest.approx(privfl.binned_auc(parties, n_points), abs=TOL)


@given(
    st.integers(2, 20),
    st.integers(2, 4),
    st.sampled_from([3, 10, 50, 100, 1000]),
    st.integers(0, 2**32 - 1),
)
@settings(max_examples=1)
def test_threshold_malicious_equals_binned_reference(m, splits, n_points, seed):
    rng = np.random.default_rng(seed)
    parties = make_parties(rng, m, int(rng.integers(20, 300)))
    res = privfl.federated_auc(
        parties, n_points, keys="threshold", security="malicious", splits=splits,
        min_guarantee_bits=0,
    )  # fmt: skip
    assert res.verified is True
    assert res.auc == pytest.approx(privfl.binned_auc(parties, n_points), abs=TOL)


# ------------------------------------------------------------------ tamper suite
@pytest.mark.parametrize("joint", [False, True], ids=["plan", "joint-lanes"])
@pytest.mark.parametrize("tamper", TAMPERS, ids=lambda c: c.__name__)
def test_tampering_aggregator_is_detected_in_threshold_mode(monkeypatch, tamper, joint):
    """The whole AUC tamper suite, on the layout the plan chooses (2 parties: two
    ciphertexts in lanes) and on the joint lanes layout it chooses where the joint noise
    bound pays (from about 64 parties on the default set)."""
    if joint:
        force_joint_lanes(monkeypatch)
    parties = make_parties(np.random.default_rng(7), 2, 300)
    with pytest.raises(VerificationError):
        privfl.federated_auc(
            parties, 10, keys="threshold", security="malicious", splits=2, aggregator=tamper()
        )


# ------------------------------------------------------------------ who holds what
def test_aggregator_holds_no_key_share_and_never_a_fusable_set_of_shares(rng):
    data, parties, agg, rec, request = deployment(rng, m=3, size=400, security="malicious")
    run_session(agg, rec, request)
    outcome = rec.results["p1"].outcome  # honest: verified, far inside the tolerance
    assert outcome.verified and outcome.guarantee_log2 <= -8
    assert outcome.spread < outcome.tolerance / 5
    # every party generated (and used) its own share; the aggregator's objects hold none
    seen = []

    def walk(obj, depth=0):
        if depth > 4:
            return
        if isinstance(obj, tr.ThresholdParty):
            seen.append(obj)
        values = obj.values() if isinstance(obj, dict) else getattr(obj, "__dict__", {}).values()
        for v in list(values):
            if isinstance(v, dict | list | tuple):
                for x in v.values() if isinstance(v, dict) else v:
                    walk(x, depth + 1)
            elif hasattr(v, "__dict__"):
                walk(v, depth + 1)

    walk(agg)
    assert seen == [] and not hasattr(agg.server, "_secret")
    # only the transcript-chosen lead fused; it never sent a decryption share, and the
    # aggregator got exactly M - 1 of them per reply
    assert [p.name for p in parties if p.keys.is_lead] == [agg.lead]
    assert agg.lead not in rec.down["decrypt"] and set(rec.down["fuse"]) == {agg.lead}
    assert len(rec.up["decrypt"]) == len(parties) - 1
    # c0 plus the sum the aggregator built does not decrypt to the reply
    lead = next(p for p in parties if p.name == agg.lead)
    ctx = th.ThresholdContext.for_parameters(th.parameter_set("fhauc-test"), len(parties))
    relay = Relay.from_bytes(rec.down["fuse"][agg.lead], "th-lead", agg.config.session)
    msg = th.LeadDecryption.from_bytes(relay.items[0], ctx, agg.server.session)
    c1 = ctx.c1_layout(msg.level, msg.deg)
    attempt = ctx.load("ciphertext", c1, msg.partial, agg.server.tag)
    with pytest.raises(th.JointDecryptionError):  # m - s_L c1: noise under the lead's share
        fuse_and_decode(ctx, [attempt], 2)
    assert rec.results[lead.name].auc == pytest.approx(privfl.binned_auc(data, 10), abs=TOL)
    # one reply per ciphertext group (N = 10: the 3 executions side by side in one), each
    # one sum of M - 1 shares
    assert agg.plan.layout.lanes >= 3 and agg.plan.groups == 1
    assert len(relay.items) == 1


class SubstitutingAggregator(ThresholdAggregator):
    """Returns a joint public key that is not the sum of the parties' contributions."""

    def finish_keygen(self):
        data = super().finish_keygen()
        joint = th.JointPublicKeys.from_bytes(data, self.server.context, self.server.session)
        pk = bytearray(joint.public_key)
        pk[0] = 0 if pk[0] else 1
        forged = th.JointPublicKeys(joint.session, joint.sender, bytes(pk), joint.switch_key)
        return forged.to_bytes()


def test_a_joint_key_other_than_the_sum_of_the_shares_is_refused_before_any_upload(rng):
    _, _parties, agg, rec, request = deployment(rng, aggregator=SubstitutingAggregator())
    with pytest.raises(ProtocolError, match="not the sum"):
        run_session(agg, rec, request)
    assert "upload" not in rec.up


class TamperedReveal(ThresholdAggregator):
    def relay_reveal(self, reveal):
        out = bytearray(super().relay_reveal(reveal))
        out[-80] ^= 1
        return bytes(out)


def test_a_reveal_altered_by_the_aggregator_is_refused(rng):
    _, _, agg, rec, request = deployment(rng, aggregator=TamperedReveal())
    with pytest.raises(ProtocolError):
        run_session(agg, rec, request)


def test_an_unknown_keys_value_is_an_input_error(rng):
    with pytest.raises(InputError, match="keys"):
        privfl.federated_auc(make_parties(rng, 2, 50), 10, keys="dealer")


# ------------------------------------------------------------------ command line
def test_cli_keys_init_and_auc_curve_and_metrics_with_threshold_keys(tmp_path):
    import json

    import pandas as pd
    from typer.testing import CliRunner

    from privfl.cli import app
    from privfl.federation.provisioning import load_aggregator_keys, load_party_keys

    runner = CliRunner()
    out = runner.invoke(
        app, ["keys", "init", "--parties", "a,b", "--out", str(tmp_path / "k"), "--keys",
              "threshold", "--json"],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    party, agg = (
        load_party_keys(tmp_path / "k" / "a"),
        load_aggregator_keys(tmp_path / "k" / "aggregator"),
    )
    assert party.keys == agg.keys == "threshold"
    assert b"CKKS" not in agg.public_setup and len(party.bundle) < 2048  # seed + policy only
    rng = np.random.default_rng(2)
    y = rng.integers(0, 2, 300)
    s = np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1)
    site = np.repeat(["a", "b"], 150)
    pd.DataFrame({"score": s, "label": y, "site": site}).to_csv(tmp_path / "s.csv", index=False)
    args = ["auc", str(tmp_path / "s.csv"), "-s", "score", "-l", "label", "--party-column", "site"]
    out = runner.invoke(app, [*args, "--keys", "threshold", "--thresholds", "10", "--json"])
    assert out.exit_code == 0, out.output
    res = json.loads(out.stdout)
    parts = [(s[:150], y[:150]), (s[150:], y[150:])]
    assert res["keys"] == "threshold"
    assert res["auc"] == pytest.approx(privfl.binned_auc(parts, 10), abs=TOL)
    curve_args = ["--keys", "threshold", "--security", "malicious", "--reveal", "curve"]
    out = runner.invoke(app, [*args, *curve_args, "--thresholds", "10", "--json"])
    assert out.exit_code == 0, out.output
    res = json.loads(out.stdout)
    assert res["reveal"] == "curve" and res["verified"] is True
    assert res["auc"] == pytest.approx(privfl.binned_auc(parts, 10), abs=TOL)
    metric_args = ["--keys", "threshold", "--reveal", "metrics", "--metrics-at", "0.5"]
    out = runner.invoke(app, [*args, *metric_args, "--json"])
    assert out.exit_code == 0, out.output
    pos = np.concatenate([p[0][p[1] == 1] for p in parts])
    assert json.loads(out.stdout)["metrics"]["recall"] == pytest.approx(
        np.mean(pos >= 0.5), abs=TOL
    )
    out = runner.invoke(app, [*args, "--keys", "dealer"])
    assert out.exit_code == 2


# ------------------------------------------------------------------ Flower ClientApp logic
def test_flower_client_runs_threshold_rounds_with_a_fresh_party_per_round(tmp_path):
    """Every round rebuilds the party from its key folder, data and node-local state (a
    ClientApp may be a fresh process per message): the key share survives between rounds,
    a replayed round is refused, and the AUC is written on the node only."""
    import json

    import pandas as pd

    pytest.importorskip("flwr")
    from flwr.app import Context, RecordDict

    from privfl.federation.flower import client_app
    from privfl.federation.provisioning import load_aggregator_keys
    from privfl.federation.provisioning import provision as provision_dirs

    names = ["site-a", "site-b", "site-c"]
    provision_dirs(names, tmp_path / "keys", Policy(max_samples_per_party=256), keys="threshold")
    rng = np.random.default_rng(4)
    contexts, data = {}, []
    for p in names:
        y = rng.integers(0, 2, 200)
        s = np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1)
        data.append((s, y))
        pd.DataFrame({"score": s, "label": y}).to_csv(tmp_path / f"{p}.csv", index=False)
        node = {"keys-dir": str(tmp_path / "keys" / p), "data-file": str(tmp_path / f"{p}.csv"),
                "output-dir": str(tmp_path / "out" / p)}  # fmt: skip
        contexts[p] = Context(run_id=1, node_id=1, node_config=node, state=RecordDict(),
                              run_config={})  # fmt: skip

    class Nodes(Transport):
        def exchange(self, step, messages):
            return {p: client_app.run_step(step, m, contexts[p])[1] for p, m in messages.items()}

    agg = ThresholdAggregator()
    agg.receive_setup(load_aggregator_keys(tmp_path / "keys" / "aggregator").public_setup)
    nodes = Nodes()
    run_session(agg, nodes, SessionRequest(tuple(names), 10))
    written = json.loads(next((tmp_path / "out" / "site-b").glob("*.json")).read_text())
    assert written["auc"] == pytest.approx(privfl.binned_auc(data, 10), abs=TOL)
    with pytest.raises(ProtocolError, match="out of order"):
        client_app.run_step("keygen", b"", contexts["site-a"])


class Streaming(Recorder):
    """A transport that hands each answer on as soon as the party has produced it."""

    def __init__(self, parties, extra=None):
        super().__init__(parties)
        self.events: list[tuple[str, str, str]] = []
        self.extra = extra

    def stream(self, step, messages, consume):
        for name, data in messages.items():
            answer, _ = party_step(self.parties[name], step, data)
            self.events.append(("ran", step, name))
            consume(name, answer)
            self.events.append(("consumed", step, name))
            if self.extra and step == self.extra[0]:
                consume(self.extra[1], answer)


def test_key_shares_are_added_one_by_one_as_they_arrive(rng):
    _, parties, agg, _, request = deployment(rng)
    transport = Streaming(parties)
    added: list[str] = []
    original = agg.add_keygen_share

    def add(party, raw):
        added.append(party)
        return original(party, raw)

    agg.add_keygen_share = add
    run_session(agg, transport, request)
    keygen = [e for e in transport.events if e[1] == "keygen"]
    # party k's share is added before party k + 1 runs: never M shares in memory at once
    assert keygen == [(kind, "keygen", p.name) for p in parties for kind in ("ran", "consumed")]
    assert added == [p.name for p in parties]
    assert "keygen" not in transport.up  # nothing collected by the transport


def test_uploads_are_checked_and_summed_as_they_arrive(rng, monkeypatch):
    """The aggregator adds each upload into running sums as it arrives (a batch of them at a
    time): the honest computation gets one summed upload per execution, and
    whenever an upload is added the ciphertexts alive are those of the pending batch and the
    sums, never those of all M uploads."""
    data, parties, agg, _, request = deployment(rng, m=7, n_points=10)
    agg.computation.workers = 2
    monkeypatch.setattr(intake, "BATCH_PER_WORKER", 1)  # batches of 2, and 1 left at the end
    transport = Streaming(parties)
    seen: list[int] = []
    live: list[int] = []
    aggregate, add = Aggregator.aggregate, UploadSum.add

    def count() -> int:
        gc.collect()
        return sum(isinstance(o, ThresholdCiphertext) for o in gc.get_objects())

    def spy_aggregate(self, uploads):
        seen.append(len(uploads))
        return aggregate(self, uploads)

    def spy_add(self, uploads):
        live.append(count())
        return add(self, uploads)

    monkeypatch.setattr(Aggregator, "aggregate", spy_aggregate)  # still the honest one
    monkeypatch.setattr(UploadSum, "add", spy_add)
    report = run_session(agg, transport, request)
    assert seen == [1] * report.executions
    layout = agg.plan.layout
    one_upload = report.executions * (
        layout.chunks + layout.f_ciphertexts + layout.denominator_ciphertexts
    )
    assert len(live) == len(parties)
    assert max(live) <= 3 * one_upload < len(parties) * one_upload  # a batch of 2 + the sums
    for result in transport.results.values():
        assert result.auc == pytest.approx(privfl.binned_auc(data, 10), abs=TOL)


class Reversed(Streaming):
    """Hands the answers on in the reverse of the parties' order."""

    def stream(self, step, messages, consume):
        super().stream(step, dict(reversed(list(messages.items()))), consume)


def test_a_computation_that_overrides_aggregate_gets_every_upload_in_party_order(rng):
    seen: list[list[str]] = []

    class Watching(Aggregator):
        def aggregate(self, uploads):
            seen.append([u.sender for u in uploads])
            return super().aggregate(uploads)

    agg = ThresholdAggregator(Watching())
    data, parties, agg, _, request = deployment(rng, m=4, aggregator=agg)
    transport = Reversed(parties)
    report = run_session(agg, transport, request)
    assert [e[2] for e in transport.events if e[:2] == ("ran", "upload")] == [
        "p3",
        "p2",
        "p1",
        "p0",
    ]
    assert seen == [[p.name for p in parties]] * report.executions
    for result in transport.results.values():
        assert result.auc == pytest.approx(privfl.binned_auc(data, 10), abs=TOL)


@pytest.mark.parametrize("step", ["keygen", "upload"])
def test_a_second_answer_from_one_party_is_refused(rng, step):
    _, parties, agg, _, request = deployment(rng)
    with pytest.raises(ProtocolError, match=r"unexpected answer|second"):
        run_session(agg, Streaming(parties, extra=(step, "p0")), request)


def test_an_answer_from_outside_the_session_is_refused(rng):
    _, parties, agg, _, request = deployment(rng)
    with pytest.raises(ProtocolError, match="unexpected answer"):
        run_session(agg, Streaming(parties, extra=("keygen", "mallory")), request)


@pytest.mark.parametrize("bound", [512, 10**5])
def test_the_semi_honest_threshold_auc_comes_with_a_precision_that_bounds_its_error(bound):
    parties = make_parties(np.random.default_rng(5), 3, 400)
    res = privfl.federated_auc(parties, 20, keys="threshold", max_samples_per_party=bound)
    assert res.precision is not None and 0 < res.precision <= 1e-6
    assert abs(res.auc - privfl.binned_auc(parties, 20)) <= res.precision


def test_a_size_bound_far_above_the_data_is_refused_not_answered_coarsely():
    """With C = 10^7 and 100 rows per party the flooding noise, scaled for C, leaves the AUC
    accurate to ~1e-5 only (the random multiplier moves it by 2x at most): every party
    refuses it, naming the fix."""
    parties = make_parties(np.random.default_rng(5), 3, 100)
    with pytest.raises(InsufficientPrecisionError, match="closer to the real party sizes"):
        privfl.federated_auc(parties, 20, keys="threshold", max_samples_per_party=10**7)


def test_the_product_error_bound_uses_the_global_floor_on_the_class_counts():
    """A party with one positive learns from ``y = c P N`` (``c < 2^hi``) and the bound
    ``P, N <= M C`` that the global classes are larger than its own: the bound tightens."""
    params = threshold_ops.fhauc_parameters()
    args = (params, 1 << 14, 1000, 101, 15, 0.8)
    alone = threshold_ops.semi_honest_precision(*args, 2.0**21, (1, 1), 21.0, 128)
    big_y = 2.0**21 * 50_000.0**2
    floored = threshold_ops.semi_honest_precision(*args, big_y, (1, 1), 21.0, 128)
    own = threshold_ops.semi_honest_precision(*args, big_y, (10**6, 10**6), 21.0, 128)
    assert floored < alone / 1000 and own <= floored


def _key_round(agg, parties, request):
    """join -> keygen -> keycheck; returns the key checks (they reveal the lead secrets)."""
    config = agg.start_session(request.parties, 10, security=request.security, splits=1)
    start = agg.collect_joins({p.name: p.join(config) for p in parties})
    assert agg.lead == ""  # unknown to the aggregator when it relays the joins
    for p in parties:
        agg.add_keygen_share(p.name, party_step(p, Step.KEYGEN, start)[0])
    joint = agg.finish_keygen()
    assert agg.lead == ""  # and still unknown with the joint key
    return config, {p.name: party_step(p, Step.KEYCHECK, joint)[0] for p in parties}


def test_the_lead_is_fixed_by_secrets_the_parties_committed_to_before_the_aggregator_saw_them(
    rng,
):
    """Item 5 of issue 27: each party's join nonce commits to a secret ``r_i`` that its key
    check reveals after every join was relayed; the lead is ``H(transcript, r_1..r_M) mod M``.
    The aggregator learns it only from the key checks, every party opens every commitment,
    and abandoning the session then is recorded by every party."""
    _, parties, agg, _rec, request = deployment(rng)
    config, checks = _key_round(agg, parties, request)
    relay = agg.relay_checks(checks)
    # the lead depends on the opened secrets and the transcript only (not on the joint key,
    # which a party colluding with the aggregator could grind by re-sampling its share)
    cfg = SessionConfig.from_bytes(config)
    opened = [KeyCheck.from_bytes(checks[p], cfg.session, agg.roster).lead_secret
              for p in cfg.parties]  # fmt: skip
    commits = [tt.lead_commitment(r) for r in opened]
    seed = tt.check_reveals(cfg.parties, commits, opened)
    transcript = tt.threshold_transcript(agg.transcript)
    assert agg.lead == cfg.parties[tt.lead_index(transcript, len(cfg.parties), seed)]
    for p in parties:
        p.upload(relay)
    assert [p.name for p in parties if p.keys.is_lead] == [agg.lead]
    # abandoning now (to get another lead) is recorded by every party
    agg.start_session(request.parties, 10, security=request.security, splits=1)
    again = agg.start_session(request.parties, 10, security=request.security, splits=1)
    for p in parties:
        p.join(again)
        assert p.abandoned == [SessionConfig.from_bytes(config).session.hex()]


def test_a_lead_secret_that_does_not_open_its_commitment_aborts_the_session(rng):
    """A party colluding with the aggregator sees the others' secrets in the relayed key
    checks; a secret changed after that (to pick the lead) no longer opens its join's
    commitment: the aggregator refuses it, and so does every honest party, before any
    upload."""
    _, parties, agg, _rec, request = deployment(rng)
    config, checks = _key_round(agg, parties, request)
    cfg = SessionConfig.from_bytes(config)
    honest = KeyCheck.from_bytes(checks["p2"], cfg.session, parties[0].roster)
    forged = KeyCheck(cfg.session, "p2", honest.sketch, bytes(32))
    checks["p2"] = forged.seal(parties[2]._identity)
    with pytest.raises(ProtocolError, match="'p2' does not open its join's commitment"):
        agg.relay_checks(checks)
    relayed = Relay(cfg.session, tuple(checks[p] for p in cfg.parties), "th-keychecks")
    for p in parties[:2]:
        with pytest.raises(ProtocolError, match="'p2' does not open"):
            p.upload(relayed.to_bytes())
        assert p.stage.value == "keycheck"  # nothing was uploaded


def test_an_aggregator_steering_the_lead_by_silent_restarts_gets_it_at_chance_rate():
    """Today's steering strategy: re-announce until the hash names the wanted lead. Before
    the key checks the aggregator holds only commitments (the join nonces): whatever
    transcript it settles for, the lead is uniform over the parties given one honest party's
    secret. Here it picks, among 64 silent re-announcements per session, the transcript
    whose hash it likes best (without the secrets that is all it can rank); over 3,000
    sessions the target is lead at the 1/3 chance rate (binomial, 5 sigma)."""
    parties, target, hits, sessions = 3, 0, 0, 3000
    for _ in range(sessions):
        transcripts = [secrets.token_bytes(32) for _ in range(64)]
        chosen = min(transcripts, key=lambda t: tt.lead_index(t, parties, b"") != target)
        opened = [secrets.token_bytes(tt.LEAD_SECRET_BYTES) for _ in range(parties)]
        commits = [tt.lead_commitment(r) for r in opened]
        seed = tt.check_reveals(["p0", "p1", "p2"], commits, opened)
        hits += tt.lead_index(chosen, parties, seed) == target
    sd = (sessions * (1 / 3) * (2 / 3)) ** 0.5
    assert abs(hits - sessions / 3) < 5 * sd


def test_the_record_of_abandoned_sessions_survives_the_node_state(rng):
    """A Flower ClientApp runs each step in a fresh process: the record of sessions a party
    joined and never finished travels in the node-local state, with its key share."""
    names = ["p0", "p1"]
    ids = {n: keywrap.IdentityKey() for n in names}
    roster = {n: k.public_bytes for n, k in ids.items()}
    public, bundles = provision("p0", ids["p0"], roster, Policy(max_samples_per_party=256))
    agg = ThresholdAggregator()
    agg.receive_setup(public)
    s, y = make_parties(rng, 1, 200)[0]

    def fresh_process(state):
        p = make_party("threshold", "p0", ids["p0"], roster, "p0", s, y)
        p.receive_bundle(bundles["p0"])
        p.restore(state)
        return p

    state, sessions = None, []
    for _ in range(3):  # joined, then abandoned for the next announcement
        config = agg.start_session(names, 10)
        sessions.append(SessionConfig.from_bytes(config).session.hex())
        p = fresh_process(state)
        p.join(config)
        state = p.export_state()
    assert fresh_process(state).abandoned == sessions[:2]
