"""RevFRF across real Flower processes on 127.0.0.1: a SuperLink, SuperNodes for three
participants, the CC and a requester, and `flwr run` of examples/flower-revfrf.

Selected with ``-m flower``. Every process started here is killed in the fixture's
teardown, even when a test fails.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from _revfrf_deployment import (
    PARTICIPANTS,
    aligned_test_rows,
    in_process_forest,
    make,
)

pytestmark = pytest.mark.flower

flwr = pytest.importorskip("flwr")

BIN = Path(sys.executable).parent
APP = Path(__file__).resolve().parents[1] / "examples" / "flower-revfrf"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Deployment:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "flwr-home"
        self.home.mkdir()
        self.env = dict(os.environ, FLWR_HOME=str(self.home), PATH=f"{BIN}:{os.environ['PATH']}")
        self.env.pop("VIRTUAL_ENV", None)
        self.procs: dict[str, subprocess.Popen] = {}
        self.port = free_port()
        self.truth = make(root)
        (self.home / "config.toml").write_text(
            f'[superlink]\ndefault = "test"\n\n[superlink.test]\n'
            f'address = "127.0.0.1:{self.port}"\ninsecure = true\n'
        )

    def start(self, name: str, args: list[str]) -> None:
        log = open(self.root / f"{name}.log", "w")  # noqa: SIM115 - closed with the process
        self.procs[name] = subprocess.Popen(
            args, env=self.env, stdout=log, stderr=subprocess.STDOUT, cwd=self.root,
            start_new_session=True,
        )  # fmt: skip

    def start_all(self) -> None:
        self.start("superlink", [
            str(BIN / "flower-superlink"), "--insecure", "--host", "127.0.0.1",
            "--port", str(self.port), "--disable-runtime-dependency-installation",
        ])  # fmt: skip
        self.wait_for_port(self.port)
        out, keys = self.root / "out", self.root / "keys"
        nodes = {p: (f"role='participant' keys-dir='{keys / p}' "
                     f"data-file='{self.root / (p + '.csv')}' "
                     f"test-file='{self.root / (p + '-test.csv')}' output-dir='{out / p}'")
                 for p in PARTICIPANTS}  # fmt: skip
        nodes["CC"] = f"role='cc' keys-dir='{keys / 'CC'}' output-dir='{out / 'CC'}'"
        asker = self.root / "asker.csv"
        nodes["asker"] = (f"role='requester' keys-dir='{keys / 'asker'}' "
                          f"data-file='{asker}' output-dir='{out / 'asker'}'")  # fmt: skip
        for name, cfg in nodes.items():
            self.start(name, [
                str(BIN / "flower-supernode"), "--insecure", "--superlink",
                f"127.0.0.1:{self.port}", "--port", str(free_port()), "--node-config", cfg,
            ])  # fmt: skip

    @staticmethod
    def wait_for_port(port: int, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.2)
        raise TimeoutError(f"nothing listens on {port}")

    def flwr_run(self, extra: str, timeout: float = 60.0) -> subprocess.Popen:
        r = self.root
        cfg = (f"cs-keys='{r / 'keys' / 'CS'}' labels-file='{r / 'labels.csv'}' "
               f"output-dir='{r / 'out' / 'CS'}' seed=7 timeout={timeout} {extra}")  # fmt: skip
        return subprocess.Popen(
            [str(BIN / "flwr"), "run", str(APP), "test", "--run-config", cfg, "--stream"],
            env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
            cwd=self.root, start_new_session=True,
        )  # fmt: skip

    def kill(self, name: str) -> None:
        proc = self.procs.get(name)
        if proc and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)

    def close(self) -> None:
        for name in list(self.procs):
            self.kill(name)

    def results(self, node: str, what: str) -> list[dict]:
        return [json.loads(f.read_text()) for f in (self.root / "out" / node).glob(f"*{what}.json")]


@pytest.fixture
def deployment(tmp_path):
    if shutil.which("flower-superlink", path=str(BIN)) is None:
        pytest.skip("Flower's executables are not installed (pip install privfl[flower])")
    dep = Deployment(tmp_path)
    try:
        dep.start_all()
        yield dep
    finally:
        dep.close()


def _communicate(proc: subprocess.Popen, timeout: float) -> str:
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate()
        raise AssertionError("flwr run did not finish in time:\n" + out) from None
    return out


def test_revfrf_over_real_superlink_and_supernodes_equals_in_process(deployment):
    dep = deployment
    out = _communicate(dep.flwr_run("steps='train,test,revoke' revoke='site-a'"), 600)
    (summary,) = dep.results("CS", "summary")
    assert "revfrf: done" in out, out
    truth = dep.truth
    reference = in_process_forest(truth, summary["aligned_ids"])
    train, test, revoke = (s["result"] for s in summary["steps"])
    assert train["nodes_per_participant"] == reference.report().nodes_per_participant
    (ids,) = (r["ids"] for r in dep.results("site-a", "test-ids"))
    assert all(r["ids"] == ids for p in PARTICIPANTS for r in dep.results(p, "test-ids"))
    rows = aligned_test_rows(truth, ids)
    want = [str(v) for v in reference.predict(rows)]
    assert test["plain"] == want and test["secure"] == want
    # revocation over the deployment: no node of site-a is left, as in process
    reference.revoke("site-a", level=1)
    assert revoke["after"]["nodes_per_participant"]["site-a"] == 0
    assert revoke["after"]["nodes_per_participant"] == reference.report().nodes_per_participant
    assert revoke["after"]["revoked"] == ["site-a"]
    assert summary["bytes"]["cs->cc"] > 0 and summary["bytes"]["participant->cs"] > 0


def test_a_participant_killed_mid_growth_stops_the_run_naming_it(deployment):
    dep = deployment
    proc = dep.flwr_run("steps='train' grow-pause=8.0", timeout=45.0)
    assert proc.stdout is not None
    lines, deadline = [], time.monotonic() + 300
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if "ids aligned" in line:
            dep.kill("site-c")
            break
    text = "".join(lines) + _communicate(proc, 300)
    assert "ids aligned" in text, text
    assert "site-c" in text and "no reply" in text, text
    assert dep.results("CS", "summary") == []  # the failed run wrote no result
