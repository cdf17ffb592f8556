"""Encrypted training across real Flower processes on 127.0.0.1, as a newcomer runs it:
``privfl flower train`` on one CSV with string labels starts 2 party processes, a SuperLink and
2 SuperNodes, trains one epoch on the insecure test ring (fast parameters) and stops
everything. The model the nodes wrote equals the in-process run with the same seed. Two
parties, the fewest training accepts: every extra node costs a fresh ClientApp process per
round (issue 31); three parties run through the same apps without processes in
``tests/test_flower_train.py``. About 20 Flower rounds: Flower's own cost per round (its 3 s
SuperNode poll and a fresh ClientApp process per message) dominates, so the test is marked
slow (it still runs in ``make test``).
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import privfl
from privfl.training.result import load_model
from privfl.training.table import load_table

pytestmark = [pytest.mark.flower, pytest.mark.slow]
pytest.importorskip("flwr")
pytest.importorskip("openfhe")

BIN = Path(sys.executable).parent
SETTINGS = dict(epochs=1, batch_size=4, learning_rate=1.0, seed=5, parameters="test")


def test_privfl_flower_train_writes_on_each_node_the_in_process_model():
    rng = np.random.default_rng(11)  # not secret: test data
    rows = []
    for site in ("north", "south"):
        for _ in range(4):
            rows.append({"site": site, **{f"f{j}": rng.uniform() for j in range(6)},
                         "animal": str(rng.choice(["cat", "dog", "owl", "fox"]))})  # fmt: skip
    with tempfile.TemporaryDirectory(dir="/tmp") as d:  # short paths: sockets live there
        root = Path(d)
        frame = pd.DataFrame(rows)
        frame.loc[:3, "animal"] = ["cat", "dog", "owl", "fox"]  # every class somewhere
        frame.to_csv(root / "data.csv", index=False)
        out = subprocess.run(
            [str(BIN / "privfl"), "flower", "train", str(root / "data.csv"), "--party-column",
             "site", "-l", "animal", "--layers", "6,5,4", "--epochs", "1", "--batch-size", "4",
             "--learning-rate", "1.0", "--seed", "5", "--parameters", "test",
             "--evaluate-every", "0", "--reveal-to", "party-0", "--workdir", str(root / "w"),
             "--json"],
            capture_output=True, text=True, timeout=900, check=False,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr[-3000:]
        res = json.loads(out.stdout)
        assert res["status"] == "finished:completed"
        assert sorted(res["parties"]) == ["party-0", "party-1"]
        table = load_table(root / "data.csv", "animal", "site")
        ref = privfl.train_federated(
            list(table.parties.values()), layers=(6, 5, 4), encrypted_layers=1, reveal=True,
            evaluate_every=0, **SETTINGS,
        )  # fmt: skip
        assert res["server"]["exchanges"] == ref.exchanges
        expected = [*ref.plain_weights, *ref.secret_weights]
        for name, info in res["parties"].items():
            model = load_model(info["model"])
            assert model.revealed is (name == "party-0")
            for got, want in zip(model.weights, expected, strict=False):
                np.testing.assert_allclose(got, want, atol=1e-4)
        # nothing is left running: the socket files are gone with their processes
        assert not list((root / "w" / "nodes").glob("*/party.sock"))
