"""The README's Flower quickstart, run exactly as written (issue 19): the bash blocks between
``<!-- quickstart:NAME -->`` markers are extracted and run by bash in an empty folder, with
this environment's executables first on PATH. Every process a block starts is killed at the
end (its process group), also on failure or timeout."""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

import privfl

pytestmark = pytest.mark.flower
pytest.importorskip("flwr")

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent


def readme_block(name: str) -> str:
    text = (REPO / "README.md").read_text()
    found = re.search(
        rf"<!-- quickstart:{name} -->\n```bash\n(.*?)```\n<!-- /quickstart:{name} -->", text, re.S
    )
    assert found, f"README has no quickstart:{name} block"
    return found.group(1)


def run_bash(script: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}", PRIVFL_REPO=str(REPO))
    env.pop("VIRTUAL_ENV", None)
    env.pop("FLWR_HOME", None)
    proc = subprocess.Popen(
        ["bash", "-e", "-c", script], cwd=cwd, env=env, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, start_new_session=True,
    )  # fmt: skip
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"the README block did not finish in time:\n{out}\n{err}") from None
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # anything the block left running
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def leftover_processes(marker: str) -> list[str]:
    found = []
    for cmd in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmd.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in text and "flower" in text:
            found.append(text)
    return found


def test_the_readme_local_quickstart_runs_as_written(tmp_path):
    done = run_bash(readme_block("local"), tmp_path, 300)
    assert done.returncode == 0, done.stdout + done.stderr
    res = json.loads((tmp_path / "local.json").read_text())
    df = pd.read_csv(tmp_path / "scores.csv")
    parts = [(g.score.to_numpy(), g.label.to_numpy()) for _, g in df.groupby("site")]
    expected = privfl.federated_auc(parts, 100).auc
    assert set(res["parties"]) == {"site-a", "site-b", "site-c"}
    for r in res["parties"].values():
        assert r["auc"] == pytest.approx(expected, abs=1e-6)
        assert r["verified"] is None and r["security"] == "semi-honest"
    assert str(round(expected, 6)) in done.stdout  # the README's last line prints the AUCs
    workdir = Path(res["workdir"])
    try:
        assert not workdir.is_relative_to(REPO) and not (tmp_path / "keys").exists()
        log = (workdir / "run.log").read_text()
        assert "fhauc: done" in log and f"{expected:.6f}"[:8] not in log  # never the AUC
        assert leftover_processes(str(workdir)) == []  # everything started was stopped
    finally:
        subprocess.run(["rm", "-rf", str(workdir)], check=False)


def test_the_readme_simulation_runs_as_written(tmp_path):
    done = run_bash(readme_block("simulation"), tmp_path, 300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.strip().splitlines()[-1].strip() == "10"
    aucs = {json.loads(f.read_text())["auc"] for f in (tmp_path / "results").glob("*.json")}
    assert len(aucs) == 1
    assert leftover_processes(str(tmp_path)) == []
