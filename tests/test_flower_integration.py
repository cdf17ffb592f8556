"""FHAUC across real Flower processes on 127.0.0.1: a SuperLink, 3 SuperNodes, `flwr run`.

Selected with ``-m flower`` and part of ``make test``. Every process started here is killed
in the fixture's teardown, even when a test fails.
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

import numpy as np
import pandas as pd
import pytest

import privfl
from privfl.federation.provisioning import provision

pytestmark = pytest.mark.flower

flwr = pytest.importorskip("flwr")

BIN = Path(sys.executable).parent
APP = Path(__file__).resolve().parents[1] / "examples" / "flower-fhauc"
PARTIES = ["site-a", "site-b", "site-c"]


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
        provision(PARTIES, root / "keys")
        rng = np.random.default_rng(42)
        self.data = []
        for p in PARTIES:
            y = rng.integers(0, 2, 400)
            s = np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1)
            pd.DataFrame({"score": s, "label": y}).to_csv(root / f"{p}.csv", index=False)
            self.data.append((s, y))
        (self.home / "config.toml").write_text(
            f'[superlink]\ndefault = "test"\n\n[superlink.test]\n'
            f'address = "127.0.0.1:{self.port}"\ninsecure = true\n'
        )

    def start(self, name: str, args: list[str]) -> None:
        log = open(self.root / f"{name}.log", "w")  # noqa: SIM115 - closed with the process
        self.procs[name] = subprocess.Popen(
            args,
            env=self.env,
            stdout=log,
            stderr=subprocess.STDOUT,
            cwd=self.root,
            start_new_session=True,
        )

    def start_all(self) -> None:
        self.start(
            "superlink",
            [
                str(BIN / "flower-superlink"),
                "--insecure",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--disable-runtime-dependency-installation",
            ],
        )
        self.wait_for_port(self.port)
        for p in PARTIES:
            cfg = (
                f"keys-dir='{self.root / 'keys' / p}' data-file='{self.root / (p + '.csv')}' "
                f"output-dir='{self.root / 'out' / p}'"
            )
            self.start(
                p,
                [
                    str(BIN / "flower-supernode"),
                    "--insecure",
                    "--superlink",
                    f"127.0.0.1:{self.port}",
                    "--port",
                    str(free_port()),
                    "--node-config",
                    cfg,
                ],
            )

    @staticmethod
    def wait_for_port(port: int, timeout: float = 30.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    return
            time.sleep(0.2)
        raise TimeoutError(f"nothing listens on {port}")

    def flwr_run(self, extra: str = "", timeout: float = 60.0) -> subprocess.Popen:
        cfg = f"aggregator-keys='{self.root / 'keys' / 'aggregator'}' timeout={timeout} {extra}"
        return subprocess.Popen(
            [str(BIN / "flwr"), "run", str(APP), "test", "--run-config", cfg, "--stream"],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            cwd=self.root,
            start_new_session=True,
        )

    def kill(self, name: str) -> None:
        proc = self.procs.get(name)
        if proc and proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)

    def results(self) -> dict[str, dict]:
        out = {}
        for p in PARTIES:
            for f in (self.root / "out" / p).glob("*.json"):
                out[p] = json.loads(f.read_text())
        return out

    def close(self) -> None:
        for name in list(self.procs):
            self.kill(name)


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


def test_fhauc_over_real_superlink_and_supernodes_then_a_killed_node(deployment):
    # --- a complete run: every SuperNode writes the same AUC as the in-process protocol
    out = _communicate(deployment.flwr_run(), 240)
    results = deployment.results()
    assert set(results) == set(PARTIES), out
    expected = privfl.federated_auc(deployment.data, 100).auc
    for r in results.values():
        assert r["auc"] == pytest.approx(expected, abs=1e-6)
        assert r["parties"] == PARTIES
    assert "fhauc: done" in out
    assert f"{expected:.6f}"[:8] not in out  # the ServerApp's log never carries the AUC
    for p in PARTIES:
        for f in (deployment.root / "out" / p).glob("*.json"):
            f.unlink()

    # --- error path: a SuperNode dies between the hello and the upload rounds
    proc = deployment.flwr_run("step-pause=8.0", timeout=15.0)
    assert proc.stdout is not None
    lines = []
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if "hello round complete" in line:
            deployment.kill("site-c")
            break
    rest = _communicate(proc, 240)
    text = "".join(lines) + rest
    assert "hello round complete" in text, text
    assert "site-c" in text and ("no reply" in text or "failed" in text), text
    assert deployment.results() == {}  # no AUC anywhere
