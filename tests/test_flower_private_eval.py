"""The private evaluation of a training job without processes: the example's ServerApp logic
(stock FedAvg + :class:`PrivateAUC`) against its ClientApp through an in-memory grid that hands
each message to the ClientApp of its destination node (same handlers, same message bytes as
over the network). Covers what the process-level test does not: revealing to the server,
a node refusing to reveal, a replayed evaluation round, ``on_failure="stop"``."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

import privfl

pytest.importorskip("flwr")

from flwr.app import Array, ArrayRecord, Message
from flwr.serverapp.strategy import FedAvg

from _memory_grid import MemoryGrid, node_context, task_identity
from privfl.federation.flower.payload import pack, unpack
from privfl.federation.flower.private_eval import PrivateAUC
from privfl.federation.flower.server_app import PartyFailure
from privfl.federation.provisioning import provision

APP = Path(__file__).resolve().parents[1] / "examples" / "flower-train-private-auc"
sys.path.insert(0, str(APP))
from trainauc import task  # noqa: E402
from trainauc.client_app import app as client_app  # noqa: E402

PARTIES = ["site-a", "site-b"]
ROWS, N = 300, 20
RUN = {"max-rows": ROWS, "local-epochs": 5, "lr": 0.5}


@pytest.fixture
def grid(tmp_path):
    provision(PARTIES, tmp_path / "keys")
    nodes = {}
    for k, p in enumerate(PARTIES):
        node_config = {
            "keys-dir": str(tmp_path / "keys" / p), "partition-id": k,
            "num-partitions": len(PARTIES), "output-dir": str(tmp_path / p),
            "reveal-to-server": "true",
        }  # fmt: skip
        nodes[k + 1] = node_context(7, k + 1, node_config, RUN)
    with task_identity(7):
        yield MemoryGrid(client_app, nodes), tmp_path


def train_with_private_auc(grid, root, rounds=2, **kwargs):
    private_auc = PrivateAUC(
        grid, root / "keys" / "aggregator", thresholds=N, timeout=5.0,
        history_file=root / "server" / "history.json", **kwargs,
    )  # fmt: skip
    result = FedAvg(fraction_evaluate=0.0).start(
        grid, ArrayRecord({"w": Array(task.initial_weights(14))}), num_rounds=rounds,
        evaluate_fn=private_auc,
    )  # fmt: skip
    private_auc.write_history(result)
    return result, json.loads((root / "server" / "history.json").read_text())


def expected_auc(w: np.ndarray) -> float:
    parts = [task.load_partition(k, len(PARTIES), ROWS) for k in range(len(PARTIES))]
    return privfl.binned_auc([(task.predict(w, p.x_val), p.y_val) for p in parts], N)


def test_revealed_to_the_server_the_auc_lands_in_the_strategy_result_and_the_history(grid):
    g, root = grid
    result, history = train_with_private_auc(g, root, reveal="server")
    auc = result.evaluate_metrics_serverapp[2]["private-auc"]
    assert auc == pytest.approx(expected_auc(result.arrays["w"].numpy()), abs=1e-6)
    assert history["reveal"] == "server" and history["rounds"][1]["auc"] == auc
    client = json.loads((root / "site-a" / "private-auc-site-a.json").read_text())
    assert [r["round"] for r in client["rounds"]] == [1, 2] and client["rounds"][1]["auc"] == auc


def test_by_default_only_the_clients_learn_the_auc(grid):
    g, root = grid
    result, history = train_with_private_auc(g, root, rounds=1)
    assert "private-auc" not in result.evaluate_metrics_serverapp[1]
    assert history["rounds"][0]["auc"] is None and history["rounds"][0]["status"] == "ok"
    client = json.loads((root / "site-b" / "private-auc-site-b.json").read_text())
    assert client["rounds"][0]["auc"] == pytest.approx(
        expected_auc(result.arrays["w"].numpy()), abs=1e-6
    )


def test_a_node_that_does_not_allow_revealing_refuses_naming_itself_and_training_goes_on(grid):
    g, root = grid
    del g.nodes[2].node_config["reveal-to-server"]
    result, history = train_with_private_auc(g, root, reveal="server")
    assert [r["status"] for r in history["rounds"]] == ["failed", "failed"]
    assert "site-b" in history["rounds"][0]["error"] and "refused" in history["rounds"][0]["error"]
    assert len(result.train_metrics_clientapp) == 2  # both training rounds completed
    assert not (root / "site-a" / "private-auc-site-a.json").exists()  # no AUC anywhere


def test_on_failure_stop_ends_the_job(grid):
    g, root = grid
    del g.nodes[2].node_config["reveal-to-server"]
    with pytest.raises(PartyFailure, match="site-b"):
        train_with_private_auc(g, root, reveal="server", on_failure="stop")


def test_a_replayed_evaluation_round_is_refused(grid):
    g, root = grid
    train_with_private_auc(g, root, rounds=1)
    stale = Message(
        content=pack([b"x"], round=1, reveal=0), dst_node_id=1, message_type="query.privauc_join"
    )
    _, meta = unpack(client_app(stale, g.nodes[1]).content)
    assert meta["status"] == "error" and meta["reason"] == "refused"
    assert meta["party"] == "site-a"
