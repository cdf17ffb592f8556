"""RevFRF through its Flower apps without processes: the ServerApp's logic
(:mod:`privfl.federation.flower.revfrf_server`) against the RevFRF ClientApp of every node
(three participants, the CC, a requester) through an in-memory grid (real keys, real
ciphertexts, the same message bytes as over the network). The forest equals the in-process
one on the same aligned rows, predicts as it does, and revocation leaves no node of the
participant. Real processes: ``tests/test_flower_revfrf.py`` (a participant killed
after the hello round) and ``tests/test_flower_forest_local.py`` (``privfl forest local``)."""

from __future__ import annotations

import json

import pytest

from _revfrf_deployment import (
    COLUMNS,
    PARTICIPANTS,
    SETTINGS,
    aligned_test_rows,
    in_process_forest,
    make,
)

pytest.importorskip("flwr")

from _memory_grid import MemoryGrid, node_context, task_identity
from privfl.federation.flower import revfrf_client, revfrf_server

RUN = 9


@pytest.fixture
def deployment(tmp_path):
    truth = make(tmp_path)
    keys, out = tmp_path / "keys", tmp_path / "out"
    configs = [
        {"role": "participant", "keys-dir": str(keys / p), "leave": p == "site-a",
         "data-file": str(tmp_path / f"{p}.csv"), "test-file": str(tmp_path / f"{p}-test.csv"),
         "output-dir": str(out / p)}
        for p in PARTICIPANTS
    ] + [
        {"role": "cc", "keys-dir": str(keys / "CC"), "output-dir": str(out / "CC")},
        {"role": "requester", "keys-dir": str(keys / "asker"),
         "data-file": str(tmp_path / "asker.csv"), "output-dir": str(out / "asker")},
    ]  # fmt: skip
    nodes = {k + 1: node_context(RUN, k + 1, c) for k, c in enumerate(configs)}
    with task_identity(RUN):
        yield MemoryGrid(revfrf_client.app, nodes), tmp_path, truth


def results(root, node: str, what: str) -> list[dict]:
    return [json.loads(f.read_text()) for f in (root / "out" / node).glob(f"*{what}.json")]


def test_revfrf_through_the_flower_apps_equals_in_process(deployment):
    grid, root, truth = deployment
    run_config = {
        "cs-keys": str(root / "keys" / "CS"), "labels-file": str(root / "labels.csv"),
        "output-dir": str(root / "out" / "CS"), "seed": 7, "timeout": 30.0,
        "steps": "train,test,query,revoke", "revoke": "site-a", "requester": "asker",
    }  # fmt: skip
    revfrf_server._run(grid, node_context(RUN, 0, {}, run_config))
    (summary,) = results(root, "CS", "summary")
    reference = in_process_forest(truth, summary["aligned_ids"])
    train, test, query, revoke = (s["result"] for s in summary["steps"])
    assert train["nodes_per_participant"] == reference.report().nodes_per_participant
    (ids,) = (r["ids"] for r in results(root, "site-a", "test-ids"))
    assert all(r["ids"] == ids for p in PARTICIPANTS for r in results(root, p, "test-ids"))
    want = [str(v) for v in reference.predict(aligned_test_rows(truth, ids))]
    assert test["plain"] == want and test["secure"] == want
    assert query == {"requester": "asker", "answered": 2}
    # the asker's two rows in one batch (packed HoLT), as the in-process forest predicts them
    (asked,) = (r["predictions"] for r in results(root, "asker", "predictions"))
    asker_rows = {p: truth["xt"][:2][:, c] for p, c in COLUMNS.items()}
    assert asked == [str(v) for v in reference.predict_plain(asker_rows)]
    # batched: one round per tree level for both rows (+ request, open, prediction)
    assert summary["rounds"]["query"] <= 3 + 2 * SETTINGS["max_depth"]
    # revocation through the apps: no node of site-a is left, as in process
    reference.revoke("site-a", level=1)
    assert revoke["after"]["nodes_per_participant"]["site-a"] == 0
    assert revoke["after"]["nodes_per_participant"] == reference.report().nodes_per_participant
    assert revoke["after"]["revoked"] == ["site-a"]
    assert summary["bytes"]["cs->cc"] > 0 and summary["bytes"]["participant->cs"] > 0


def test_a_silent_participant_stops_the_run_naming_it_and_no_result_is_written(deployment):
    grid, root, _ = deployment
    grid.silent = {3}  # site-c answers nothing
    run_config = {
        "cs-keys": str(root / "keys" / "CS"), "labels-file": str(root / "labels.csv"),
        "output-dir": str(root / "out" / "CS"), "timeout": 0.5, "steps": "train",
    }  # fmt: skip
    with pytest.raises(revfrf_server.NodeFailure, match="node 3"):
        revfrf_server._run(grid, node_context(RUN, 0, {}, run_config))
    assert results(root, "CS", "summary") == []
