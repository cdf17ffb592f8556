"""The ServerApps' one round function (:mod:`privfl.federation.flower.rounds`), without
processes: the FHAUC ServerApp's logic against the real FHAUC ClientApp through an in-memory
grid that hands each pushed message to the ClientApp of its destination node (real keys, real
ciphertexts, the same message bytes as over the network), with single keys. The
process-level tests check the same apps across real SuperLink/SuperNode processes
(``tests/test_flower_netns.py``: threshold keys, a malicious aggregator and the curve reveal,
then a SuperNode killed mid-session; the README quickstart)."""

from __future__ import annotations

import json
import logging

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import privfl

pytest.importorskip("flwr")

from flwr.app import ConfigRecord, Context, RecordDict

from _memory_grid import MemoryGrid, node_context, task_identity
from privfl.errors import MalformedMessageError, ProtocolError
from privfl.evaluation.fhauc.policy import Policy, Security
from privfl.evaluation.fhauc.reveal import Reveal
from privfl.evaluation.metric_reference import binned_reference
from privfl.federation.flower import client_app, server_app
from privfl.federation.flower import rounds as rounds_mod
from privfl.federation.flower.payload import frame, pack, unframe, unpack
from privfl.federation.flower.quickstart import local_policy
from privfl.federation.flower.rounds import NodeFailure, exchange
from privfl.federation.flower.timing import Phases, phases, process_age
from privfl.federation.provisioning import provision

PARTIES = ("site-a", "site-b", "site-c")


def write_parties(root, keys: str = "single", policy=None, reveals="auc"):
    """Provision the keys, write each party's scores file; the grid of the parties' nodes
    and their data. (Threshold keys: sized for 150 rows, as ``privfl flower local`` does.)
    ``policy``: a Policy, or a function of the parties' labels returning one; ``reveals``:
    each node's consent (node setting)."""
    if keys == "threshold" and policy is None:
        policy = Policy(security=Security.SEMI_HONEST, max_samples_per_party=256)
    rng = np.random.default_rng(8)
    nodes, parts = {}, []
    for k, name in enumerate(PARTIES):
        y = rng.integers(0, 2, 150)
        s = np.clip(0.3 * y + 0.7 * rng.random(150), 0, 1)
        pd.DataFrame({"score": s, "label": y}).to_csv(root / f"{name}.csv", index=False)
        parts.append((s, y))
        nodes[k + 1] = node_context(5, k + 1, {
            "keys-dir": str(root / "keys" / name), "data-file": str(root / f"{name}.csv"),
            "output-dir": str(root / "out" / name), "report-timings": "true", "reveals": reveals,
        })  # fmt: skip
    if callable(policy):
        policy = policy([y for _, y in parts])
    provision(list(PARTIES), root / "keys", policy, keys=keys)
    return MemoryGrid(client_app.app, nodes), parts


@pytest.fixture
def federation(tmp_path):
    with task_identity(5):
        grid, parts = write_parties(tmp_path)
        yield grid, tmp_path, privfl.federated_auc(parts, 100).auc


def server_context(root, **config) -> Context:
    run_config = {"aggregator-keys": str(root / "keys" / "aggregator"), "timeout": 5.0, **config}
    return Context(run_id=5, node_id=0, state=RecordDict(), run_config=run_config, node_config={})


def test_the_fhauc_server_app_runs_a_session_through_push_and_pull(federation, caplog):
    grid, root, expected = federation
    context = server_context(root)
    with caplog.at_level(logging.INFO, logger="flwr"):
        server_app._run(grid, context)
    record = context.state["privfl"]
    assert isinstance(record, ConfigRecord) and record["completed"] == len(PARTIES)
    for name in PARTIES:
        (found,) = (root / "out" / name).glob("fhauc-*.json")
        assert json.loads(found.read_text())["auc"] == pytest.approx(expected, abs=1e-6)
    # one logged round per step, with the nodes' phases (they were asked to report them)
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("privfl round")]
    kinds = [line.split()[2] for line in logged]
    assert kinds == ["fhauc_join", "fhauc_upload", "fhauc_result"]  # the join maps the parties
    upload = json.loads(logged[1].split(" ", 3)[3])
    assert upload["in"] > 100_000 and {"start", "load", "work", "flower"} <= set(upload)


def malicious_curve_through_the_apps(root, keys: str, n_points: int):
    """Provision ``keys`` for a malicious curve session of ``n_points`` decision points (the
    nodes consent to both reveals), run it through the ServerApp and ClientApp; the parties'
    data, the binned reference and each party's result file."""
    with task_identity(5):
        grid, parts = write_parties(
            root,
            keys=keys,
            policy=lambda labels: local_policy(
                labels, Security.MALICIOUS, keys, n_points, Reveal.CURVE
            ),
            reveals="auc,curve",  # the node consents to both
        )
        context = server_context(root, thresholds=n_points, reveal="curve", security="malicious")
        server_app._run(grid, context)
    results = {}
    for name in PARTIES:
        (found,) = (root / "out" / name).glob("fhauc-*.json")
        results[name] = json.loads(found.read_text())
    return parts, binned_reference(parts, n_points), results


def test_a_single_key_malicious_curve_session_through_the_apps_equals_the_reference(tmp_path):
    """Single keys, the ``curve`` reveal against a malicious aggregator, through the same
    ServerApp and ClientApp as a deployment (the real-process test runs threshold keys):
    every party's result file holds the verified curve, equal to the binned reference."""
    parts, ref, results = malicious_curve_through_the_apps(tmp_path, "single", 12)
    for result in results.values():
        assert result["verified"] is True and result["security"] == "malicious"
        assert result["curve"]["tp"] == pytest.approx(list(ref.tp), abs=1e-6)
        assert result["curve"]["fp"] == pytest.approx(list(ref.fp), abs=1e-6)
        assert result["auc"] == pytest.approx(privfl.binned_auc(parts, 12), abs=1e-6)


def test_a_threshold_curve_of_more_joint_decryptions_than_16_runs_through_the_apps(
    tmp_path, monkeypatch
):
    """Threshold keys, the malicious curve at N = 1,500 (4 splits: 3 chunks of 2,048 slots per
    vector on the test ring, 6 reply ciphertexts an execution): more joint decryptions than
    the 16 the decryption requests, shares and reveal were once bounded by, through the
    ServerApp's and ClientApp's messages (an honest curve of 24 was refused as malformed)."""
    pytest.importorskip("openfhe")
    from privfl.evaluation.fhauc.threshold import ops as threshold_ops

    monkeypatch.setattr(threshold_ops, "FHAUC_PARAMETER_SET", "fhauc-test")  # fast, insecure
    _, ref, results = malicious_curve_through_the_apps(tmp_path, "threshold", 1500)
    for result in results.values():
        assert result["verified"] is True and result["executions"] * 6 > 16
        assert result["curve"]["tp"] == pytest.approx(list(ref.tp), abs=1e-6)


def test_a_node_refuses_a_reveal_its_operator_did_not_consent_to_before_any_upload(federation):
    grid, root, _ = federation  # the nodes consent to the AUC only (the default)
    with pytest.raises(server_app.PartyFailure, match="refused"):
        server_app._run(grid, server_context(root, reveal="curve", thresholds=12))
    assert not any((root / "out").rglob("fhauc-*.json"))


def test_a_node_that_never_answers_stops_the_round_naming_it_within_the_timeout(federation):
    grid, _, _ = federation
    grid.silent = {3}
    names = {3: "site-c"}
    with pytest.raises(NodeFailure, match=r"no reply from site-c \(node 3\) in round fhauc_join"):
        exchange(grid, "fhauc_join", {3: pack([b"config"])}, names, timeout=0.3)
    assert grid.pulls >= 3  # it polled, it did not wait once for the whole timeout


def test_a_round_waiting_for_a_reply_backs_off_to_the_longest_pause(federation):
    """Every pull is a SuperLink request: a round waiting 2 s pulls about a dozen times
    (pauses 0.05, 0.1, then 0.2 s), not 40 times as at a fixed 50 ms."""
    grid, _, _ = federation
    grid.silent = {3}
    with pytest.raises(NodeFailure, match="no reply from site-c"):
        exchange(grid, "fhauc_join", {3: pack([b"config"])}, {3: "site-c"}, timeout=2.0)
    # 13 pulls on time; a loaded machine oversleeps (fewer), a fixed 50 ms would make about 40
    assert 4 <= grid.pulls <= 14, grid.pulls


def test_a_refused_push_stops_the_round_before_waiting(federation):
    grid, _, _ = federation
    grid.refuse = True
    with pytest.raises(NodeFailure, match="did not accept"):
        exchange(grid, "fhauc_join", {1: pack([b"config"])}, {1: "site-a"}, timeout=60)
    assert grid.pulls == 0


def test_a_first_step_with_per_party_messages_is_refused_before_anything_is_sent(federation):
    grid, _, _ = federation
    transport = server_app.FlowerTransport(grid, None, 5.0, 0.0, [1, 2, 3])
    with pytest.raises(ProtocolError, match="first of the session"):
        transport.exchange("join", {"site-a": b"x", "site-b": b"y"})
    assert grid.pulls == 0 and not grid.replies  # nothing was pushed


def test_a_node_answering_with_an_error_is_named_with_its_fixed_code(federation):
    grid, root, _ = federation
    grid.nodes[2].node_config["data-file"] = str(root / "missing.csv")
    with pytest.raises(server_app.PartyFailure, match=r"site-b.*bad-local-input"):
        server_app._round(grid, "fhauc_join", {2: "site-b"}, {2: pack([b"config"])}, 5.0)


def test_the_node_reads_its_data_file_once_and_again_only_when_it_changes(federation, monkeypatch):
    grid, root, _ = federation
    context = grid.nodes[1]
    reads = []
    real = client_app._read_columns
    monkeypatch.setattr(client_app, "_read_columns", lambda *a: reads.append(a) or real(*a))
    first = client_app._party_files(context)[1]
    again = client_app._party_files(context)[1]
    assert len(reads) == 1
    assert np.array_equal(first[0], again[0]) and first[1].dtype == again[1].dtype
    path = root / "site-a.csv"
    pd.DataFrame({"score": [0.5, 0.25], "label": [1, 0]}).to_csv(path, index=False)
    assert len(client_app._party_files(context)[1][0]) == 2 and len(reads) == 2


def test_reported_phases_are_checked_and_a_process_knows_its_age():
    assert phases([0.5, 0.25, 1.0]) == (0.5, 0.25, 1.0)
    for bad in (None, "1,2,3", [1, 2, 3], [0.1, 0.2], [0.1, -0.2, 0.3], [0.1, 0.2, float("nan")]):
        assert phases(bad) is None
    assert 0.0 < process_age() < 365 * 86400
    start, load, work = Phases().report(load=0.5)
    assert load <= 0.5 and work >= 0.0 and start > 0.0
    # the ServerApp pulls far more often than Flower's own 3 s, and backs off to at most 0.2 s
    assert rounds_mod.POLL_S <= 0.1 and rounds_mod.POLL_S <= rounds_mod.POLL_MAX_S <= 0.25


def test_a_connected_node_outside_the_session_does_not_stop_it_and_learns_no_result(federation):
    grid, root, _ = federation
    context = server_context(root, parties="site-a,site-b")
    server_app._run(grid, context)  # site-c is connected and gets the join, which it refuses
    assert context.state["privfl"]["completed"] == 2
    assert list((root / "out" / "site-c").glob("fhauc-*.json")) == []
    results = [json.loads(next((root / "out" / p).glob("fhauc-*.json")).read_text()) for p in
               ("site-a", "site-b")]  # fmt: skip
    assert results[0]["auc"] == results[1]["auc"]
    assert results[0]["party_names"] == ["site-a", "site-b"]


def test_two_nodes_claiming_one_party_stop_the_run_at_the_join(federation):
    grid, root, _ = federation
    grid.nodes[3].node_config.update(grid.nodes[1].node_config)  # a second "site-a"
    with pytest.raises(server_app.PartyFailure, match="both claim to be 'site-a'"):
        server_app._run(grid, server_context(root))
    assert not (root / "out" / "site-a").exists()


@given(st.lists(st.binary(max_size=64), max_size=20))
@settings(max_examples=200, deadline=None)
def test_framing_round_trips_every_batch_in_one_array(blobs):
    content = pack(blobs, status="ok")
    assert list(content["privfl"].keys()) == ["frames"]  # one Flower object, whatever the batch
    assert unpack(content)[0] == blobs


@given(st.binary(max_size=200))
@settings(max_examples=500, deadline=None)
def test_the_frame_decoder_accepts_only_exact_frames(data):
    try:
        blobs = unframe(data)
    except MalformedMessageError:
        return
    assert frame(blobs) == data
