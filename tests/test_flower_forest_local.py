"""``privfl forest local`` as a newcomer runs it: one command over real Flower processes (a
SuperLink, two participants, the CC and a requester on free loopback ports), quiet, typed
predictions, and nothing left running afterwards. Two participants (the fewest the command
accepts; its default is three): every extra node costs a SuperNode, its SuperExec and a fresh
ClientApp process per round (issue 31), and nothing checked here depends on their number.
(Equality with the in-process forest on the
same aligned rows, for the requester's batch of rows too, is
``tests/test_flower_revfrf_memory.py``'s, through the same apps: it needs ϱ at least the row
count, so that the participants' candidate splits are not sampled.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from _shared import leftover_processes
from privfl.datasets import load_tabular

pytestmark = pytest.mark.flower
pytest.importorskip("flwr")

BIN = Path(sys.executable).parent


def test_forest_local_grows_predicts_typed_and_stops_everything(tmp_path):
    d = load_tabular("wine", seed=0)
    df = pd.DataFrame(d.x_train[:80], columns=[f"f{i}" for i in range(d.x_train.shape[1])])
    df["quality"] = d.y_train[:80]
    df.to_csv(tmp_path / "wine.csv", index=False)
    work = tmp_path / "work"
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}")
    done = subprocess.run(
        [str(BIN / "privfl"), "forest", "local", str(tmp_path / "wine.csv"), "-l", "quality",
         "--participants", "2", "--trees", "1", "--depth", "1", "--predict", "2",
         "--key-bits", "512", "--insecure-key-bits",
         "--workdir", str(work), "--json"],
        capture_output=True, text=True, env=env, timeout=900, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    res = json.loads(done.stdout)
    labels = set(df.quality.iloc[:-1].tolist())
    assert len(res["predictions"]) == 2 and set(res["predictions"]) <= labels
    assert all(isinstance(p, int) for p in res["predictions"])  # typed as the labels, not "6"
    # both rows in one batch: request, open, one CC + one holder round per level, prediction
    assert res["rounds"]["query"] <= 3 + 2 * 1
    assert res["status"] == "finished:completed" and res["summary"]["trees"] == 1
    assert len(done.stderr.splitlines()) < 30  # quiet: Flower's log lines stay in the files
    assert (work / "run.log").is_file() and (work / "superlink.log").is_file()
    assert leftover_processes(str(work)) == []
