"""The Flower ClientApp's own logic, without processes: node-local settings (issue 14,
finding 8) and the party's step order kept across fresh ClientApp invocations (finding 1:
a replayed result round, or one with no upload round, is refused)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("flwr")

from flwr.app import Context, RecordDict

from privfl.errors import ProtocolError
from privfl.evaluation import fhauc
from privfl.federation.flower import client_app
from privfl.federation.flower.server_app import PartyFailure, _claims
from privfl.federation.provisioning import load_aggregator_keys, provision

PARTIES = ["site-a", "site-b"]


def context(node_config, run_config=None):
    return Context(
        run_id=1, node_id=1, node_config=node_config, state=RecordDict(),
        run_config=run_config or {},
    )  # fmt: skip


def test_a_deployed_node_never_takes_local_settings_from_the_server(tmp_path):
    node = {"keys-dir": str(tmp_path / "k"), "data-file": str(tmp_path / "d.csv")}
    server = {"output-dir": "/etc", "score-column": "hiv_status", "label-column": "x"}
    ctx = context(node, server)
    assert client_app._setting(ctx, "output-dir", ".") == "."
    assert client_app._setting(ctx, "score-column", "score") == "score"
    ctx = context(node | {"output-dir": str(tmp_path / "out")}, server)
    assert client_app._setting(ctx, "output-dir", ".") == str(tmp_path / "out")


def test_a_simulated_node_reads_the_simulation_settings_from_the_run_config():
    ctx = context({"partition-id": 0, "num-partitions": 2}, {"sim-data-file": "s.csv"})
    assert client_app._setting(ctx, "sim-data-file", "scores.csv") == "s.csv"


@pytest.fixture
def nodes(tmp_path):
    provision(PARTIES, tmp_path / "keys")
    rng = np.random.default_rng(0)
    contexts = {}
    for p in PARTIES:
        y = rng.integers(0, 2, 200)
        s = np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1)
        pd.DataFrame({"score": s, "label": y}).to_csv(tmp_path / f"{p}.csv", index=False)
        contexts[p] = context(
            {
                "keys-dir": str(tmp_path / "keys" / p),
                "data-file": str(tmp_path / f"{p}.csv"),
                "output-dir": str(tmp_path / "out" / p),
            }
        )
    agg = fhauc.Aggregator()
    agg.receive_setup(load_aggregator_keys(tmp_path / "keys" / "aggregator").public_setup)
    return agg, contexts, tmp_path


def run(agg, contexts):
    """One session through client_app.run_step, each step a fresh party object."""
    config = agg.start_session(PARTIES, 20)
    joins = {p: client_app.run_step("join", config, contexts[p])[1] for p in PARTIES}
    start = agg.collect_joins(joins)
    uploads = {p: client_app.run_step("upload", start, contexts[p])[1] for p in PARTIES}
    return agg.handle_uploads(uploads)


def test_the_node_keeps_the_step_order_across_fresh_invocations(nodes):
    agg, contexts, root = nodes
    result = run(agg, contexts)
    client_app.run_step("result", result, contexts["site-a"])
    text = next((root / "out" / "site-a").glob("*.json")).read_text()
    written = json.loads(text)
    assert 0 <= written["auc"] <= 1 and written["party"] == "site-a"
    assert text.endswith("}\n") and written["verified"] is None  # semi-honest: not verified
    with pytest.raises(ProtocolError, match="out of order"):  # a replayed result round
        client_app.run_step("result", result, contexts["site-a"])


def test_a_result_round_with_no_upload_round_is_refused(nodes):
    agg, contexts, _ = nodes
    result = run(agg, contexts)
    fresh = context(dict(contexts["site-b"].node_config))  # a node that saw no upload round
    with pytest.raises(ProtocolError, match="out of order"):
        client_app.run_step("result", result, fresh)
    config = agg.start_session(PARTIES, 20)
    client_app.run_step("join", config, fresh)
    with pytest.raises(ProtocolError, match="out of order"):
        client_app.run_step("result", result, fresh)


def test_the_server_refuses_a_first_reply_without_a_party_or_a_doubly_claimed_party():
    with pytest.raises(PartyFailure, match="without naming"):
        _claims({1: ([], {"status": "ok"})})
    with pytest.raises(PartyFailure, match="both claim"):
        _claims({1: ([], {"party": "site-b"}), 2: ([], {"party": "site-b"})})


def test_a_failing_node_names_its_party_not_only_its_node_id(tmp_path):
    deployed = context({"keys-dir": str(tmp_path / "keys" / "site-b"), "data-file": "x.csv"})
    assert client_app.party_label(deployed) == "site-b"
    assert client_app.party_label(context({"partition-id": 3, "num-partitions": 5})) == "party-3"
    from privfl.federation.flower.server_app import party_of

    assert party_of(7, {7: "site-b"}) == "site-b (node 7)"
    assert party_of(8, {7: "site-b"}) == "node 8"


def test_node_local_state_written_by_the_other_key_mode_is_ignored_not_fatal(nodes):
    """A node re-provisioned from threshold to single keys (or back) finds the other mode's
    record in its state: it starts afresh instead of failing every step on those bytes."""
    from flwr.app import ConfigRecord

    agg, contexts, _ = nodes
    other = {"keys": "threshold", "state": b"\x01threshold-state", "key-set": b"\x02key-set"}
    for p in PARTIES:
        contexts[p].state[client_app.STATE] = ConfigRecord(other)
    config = agg.start_session(PARTIES, 20)
    joins = {p: client_app.run_step("join", config, contexts[p])[1] for p in PARTIES}
    assert agg.collect_joins(joins)
    assert contexts["site-a"].state[client_app.STATE]["keys"] == "single"
