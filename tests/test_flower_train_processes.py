"""Encrypted training across real Flower processes on 127.0.0.1, as a newcomer runs it: the
"On one machine" blocks of docs/guide/training-deployment.md, read from the page and run as
written (they carry ``not-run`` markers naming this test, so the docs run does not start the
same processes a second time). ``privfl flower train`` on one CSV with string labels starts 2
party processes, a SuperLink and 2 SuperNodes, trains one epoch on the insecure test ring
(fast parameters), reveals the encrypted layer to ``party-0`` and stops everything.

Checked: the page's last block prints exactly the output the page shows; the model each node
wrote equals the in-process run with the same seed (both layers on ``party-0``, the plaintext
layer only on ``party-1``), with the same exchanges; nothing is left running. Two parties, the
fewest training accepts: every extra node costs a fresh ClientApp process per round (issue
31); three parties run through the same apps without processes in
``tests/test_flower_train.py``. About 18 Flower rounds: Flower's own cost per round (its 3 s
SuperNode poll and a fresh ClientApp process per message) dominates, so the test is marked
slow (it still runs in ``make test``).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from pathlib import Path

import numpy as np
import pytest

import privfl
from _shared import leftover_processes
from privfl.training.result import load_model
from privfl.training.table import load_table
from test_docs import REPO, checkout_like, parse, run_page

pytestmark = [pytest.mark.flower, pytest.mark.slow]
pytest.importorskip("flwr")
pytest.importorskip("openfhe")

PAGE = "docs/guide/training-deployment.md"
MARK = "tests/test_flower_train_processes.py runs this block as written"
# the settings of the page's command, for the in-process reference (the command's default seed)
SETTINGS = dict(epochs=1, batch_size=4, learning_rate=1.0, seed=0, parameters="test")


def page_blocks():
    """The page's blocks this test runs, and the output block that follows the last one."""
    blocks = parse(PAGE, (REPO / PAGE).read_text())
    mine = [b for b in blocks if b.not_run == MARK]
    assert [b.lang for b in mine] == ["python", "bash", "python"], mine
    shown = blocks[blocks.index(mine[-1]) + 1]
    assert shown.lang == "text"
    return mine, shown


def test_the_pages_blocks_are_the_command_this_test_checks():
    mine, _ = page_blocks()
    command = " ".join(mine[1].code.replace("\\\n", " ").split())
    for part in ("privfl flower train sites.csv", "--layers 6,5,4", "--epochs 1",
                 "--batch-size 4", "--learning-rate 1.0", "--parameters test",
                 "--reveal-to party-0", "--json-out train.json"):  # fmt: skip
        assert part in command, part
    assert "--seed" not in command  # the reference below uses the default seed


def test_privfl_flower_train_writes_on_each_node_the_in_process_model():
    mine, shown = page_blocks()
    with tempfile.TemporaryDirectory(dir="/tmp") as d:  # short paths: sockets live there
        folder = Path(d) / "w"
        folder.mkdir()
        checkout_like(folder)
        outputs: list[str] = []
        run_page(mine, folder, outputs)
        assert outputs[-1] == shown.code, outputs[-1]
        res = json.loads((folder / "train.json").read_text())
        workdir = Path(res["workdir"])
        try:
            assert res["status"] == "finished:completed"
            assert sorted(res["parties"]) == ["party-0", "party-1"]
            table = load_table(folder / "sites.csv", "animal", "site")
            ref = privfl.train_federated(
                list(table.parties.values()), layers=(6, 5, 4), encrypted_layers=1,
                reveal=True, evaluate_every=0, **SETTINGS,
            )  # fmt: skip
            assert res["server"]["exchanges"] == ref.exchanges
            expected = [*ref.plain_weights, *ref.secret_weights]
            for name, info in res["parties"].items():
                model = load_model(info["model"])
                assert model.revealed is (name == "party-0")
                assert len(model.weights) == (2 if name == "party-0" else 1)
                for got, want in zip(model.weights, expected, strict=False):
                    np.testing.assert_allclose(got, want, atol=1e-4)
            # nothing is left running: no process, no socket file
            assert leftover_processes(str(workdir)) == []
            assert not list((workdir / "nodes").glob("*/party.sock"))
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
