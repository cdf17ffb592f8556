"""Private AUC inside a real Flower training job (issue 19): the example
``examples/flower-train-private-auc`` (stock FedAvg, logistic regression on UCI Adult) for 2
rounds on a real SuperLink and 2 SuperNodes on loopback, FHAUC on every round (2 clients, the
fewest FHAUC accepts: every extra node costs a fresh ClientApp process per message, issue 31).

Checked: every evaluation round's AUC on the clients equals in-process ``federated_auc`` on the
same validation partitions scored by the same global model (the whole FedAvg run is replayed
in process: training is deterministic); the server's history and log never hold an AUC
(default: revealed to the clients only); a client killed during round 2's evaluation stops
that round with an error naming it, and the training state is intact (the final model equals
the replayed one). Every process is killed when the federation closes, also on failure.
More rounds, revealing to the server, a refusing node, a replayed round and
``on_failure="stop"`` run without processes in ``tests/test_flower_private_eval.py``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

import privfl
from _shared import act_at_line
from privfl.federation.provisioning import provision

pytestmark = pytest.mark.flower
pytest.importorskip("flwr")

from flwr.app import Array, ArrayRecord  # noqa: E402

from privfl.federation.flower.local import LocalFederation  # noqa: E402
from privfl.federation.flower.private_eval import model_digest  # noqa: E402

APP = Path(__file__).resolve().parents[1] / "examples" / "flower-train-private-auc"
sys.path.insert(0, str(APP))
from trainauc import task  # noqa: E402

PARTIES = ["site-a", "site-b"]
ROWS, N, ROUNDS, EPOCHS, LR = 600, 50, 2, 20, 0.5


def replay() -> list[np.ndarray]:
    """The global model after each round, computed in process (FedAvg by num-examples)."""
    parts = [task.load_partition(k, len(PARTIES), ROWS) for k in range(len(PARTIES))]
    w = task.initial_weights(parts[0].x_train.shape[1])
    models = []
    for _ in range(ROUNDS):
        local = [task.train(w, p.x_train, p.y_train, EPOCHS, LR) for p in parts]
        sizes = [len(p.y_train) for p in parts]
        w = sum(wi * ni / sum(sizes) for wi, ni in zip(local, sizes))
        models.append(w)
    return models


def validation(w: np.ndarray) -> list[tuple[np.ndarray, np.ndarray]]:
    parts = [task.load_partition(k, len(PARTIES), ROWS) for k in range(len(PARTIES))]
    return [(task.predict(w, p.x_val), p.y_val) for p in parts]


def test_fedavg_with_private_auc_every_round_then_a_client_killed_during_evaluation(tmp_path):
    provision(PARTIES, tmp_path / "keys")
    with LocalFederation(tmp_path) as fed:
        fed.start_superlink()
        for k, p in enumerate(PARTIES):
            fed.start_supernode(
                p,
                {"keys-dir": str(tmp_path / "keys" / p), "partition-id": k,
                 "num-partitions": len(PARTIES), "output-dir": str(tmp_path / "out" / p)},
            )  # fmt: skip
        fed.wait_for_nodes(len(PARTIES))
        proc = fed.start_run(
            APP,
            {"aggregator-keys": str(tmp_path / "keys" / "aggregator"), "num-server-rounds": ROUNDS,
             "thresholds": N, "max-rows": ROWS, "local-epochs": EPOCHS, "lr": LR,
             "timeout": 60.0, "output-dir": str(tmp_path / "server")},
        )  # fmt: skip
        # site-b dies between round 2's join and upload
        marker = "private AUC round 2: join step complete"
        lines = act_at_line(proc, marker, 400, lambda: fed.kill("site-b"))
        outcome = fed.finish_run(proc, timeout=400, lines=lines)
    log = outcome.log
    assert outcome.ok, log  # the failed evaluation did not end the training job

    models = replay()
    history = json.loads(next((tmp_path / "server").glob("history-*.json")).read_text())
    rounds = {r["round"]: r for r in history["rounds"]}
    assert [rounds[r]["status"] for r in (1, 2)] == ["ok", "failed"], history
    assert "site-b" in rounds[2]["error"], rounds[2]
    assert all(r["auc"] is None for r in history["rounds"]) and history["reveal"] == "clients"

    # every completed evaluation round: the clients' AUC is the in-process federated AUC
    expected = {1: privfl.federated_auc(validation(models[0]), N).auc}
    for p in PARTIES:
        got = json.loads((tmp_path / "out" / p / f"private-auc-{p}.json").read_text())
        aucs = {r["round"]: r["auc"] for r in got["rounds"]}
        assert set(aucs) == {1}, got  # round 2 never produced an AUC anywhere
        assert aucs[1] == pytest.approx(expected[1], abs=1e-6)
    assert f"{expected[1]:.6f}"[:8] not in log  # the server never held it

    # training state intact: the final model is the replayed one, and the one round 2 evaluated
    final = np.load(next((tmp_path / "server").glob("final-model-*.npy")))
    np.testing.assert_allclose(final, models[-1], rtol=1e-9, atol=1e-12)
    assert history["final_model_sha256"] == model_digest(ArrayRecord({"w": Array(final)}))
    assert rounds[2]["model_sha256"] == history["final_model_sha256"]
    assert "train-loss" in history["train_metrics"]["2"]
