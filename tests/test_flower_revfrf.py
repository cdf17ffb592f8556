"""RevFRF across real Flower processes on 127.0.0.1: a SuperLink, SuperNodes for two
participants and the CC, and `flwr run` of examples/flower-revfrf; a participant killed right
after the hello round stops the run naming it. Two participants, the fewest RevFRF takes: every
extra node costs a SuperNode, its SuperExec and a fresh ClientApp process per round (issue 31), and
one killed of two stops the run all the same.

The protocol logic through the same apps (the forest equals the in-process one, prediction,
a requester's query, revocation) runs without processes in
``tests/test_flower_revfrf_memory.py``; a complete run over real processes is
``tests/test_flower_forest_local.py`` (``privfl forest local``). Selected with ``-m flower``.
Every process started here is killed in the fixture's teardown, even when a test fails.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from _revfrf_deployment import PARTICIPANTS as ALL_PARTICIPANTS
from _revfrf_deployment import make
from _shared import act_at_line

pytestmark = pytest.mark.flower

flwr = pytest.importorskip("flwr")

from privfl.federation.flower.local import LocalFederation  # noqa: E402

BIN = Path(sys.executable).parent
APP = Path(__file__).resolve().parents[1] / "examples" / "flower-revfrf"
PARTICIPANTS = ALL_PARTICIPANTS[:2]


class Deployment:
    """The files of ``_revfrf_deployment.make`` served by a :class:`LocalFederation` (the
    launcher ``privfl flower local`` and ``privfl forest local`` use: free ports, the SuperExec
    poll interval they set, every process stopped at the end)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.truth = make(root, participants=PARTICIPANTS)
        self.fed = LocalFederation(root)

    def start_all(self) -> None:
        self.fed.start_superlink()
        out, keys = self.root / "out", self.root / "keys"
        for p in PARTICIPANTS:
            self.fed.start_supernode(p, {
                "role": "participant", "keys-dir": str(keys / p), "leave": p == "site-a",
                "data-file": str(self.root / f"{p}.csv"),
                "test-file": str(self.root / f"{p}-test.csv"), "output-dir": str(out / p),
            })  # fmt: skip
        self.fed.start_supernode(
            "CC", {"role": "cc", "keys-dir": str(keys / "CC"), "output-dir": str(out / "CC")}
        )
        self.fed.wait_for_nodes(len(PARTICIPANTS) + 1)

    def flwr_run(self, extra: str, timeout: float = 180.0) -> subprocess.Popen:
        # ``timeout``: per round; under a load average of 40-60 on 2 cores one ClientApp
        # process alone took 30-40 s to start, and a 45-60 s round timeout failed honest runs
        r = self.root
        cfg = (f"cs-keys='{r / 'keys' / 'CS'}' labels-file='{r / 'labels.csv'}' "
               f"output-dir='{r / 'out' / 'CS'}' seed=7 timeout={timeout} {extra}")  # fmt: skip
        return self.fed.start_run(APP, cfg)

    def kill(self, name: str) -> None:
        self.fed.kill(name)

    def close(self) -> None:
        self.fed.close()

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


def test_a_participant_killed_mid_run_stops_the_run_naming_it(deployment):
    """Killed right after the hello round: the alignment's rounds, the first that need it,
    then get no reply from it (the growth's rounds fail through the same
    ``FlowerNodes.exchange``; killing it there cost 14 more ClientApp processes, 19 s of
    CPU of the test's 40.6 s alone, issue 31)."""
    dep = deployment
    proc = dep.flwr_run("steps='train'", timeout=90.0)
    lines = act_at_line(proc, "hello round complete", 300, lambda: dep.kill("site-b"))
    text = "".join(lines) + _communicate(proc, 300)
    assert "hello round complete" in text and "ids aligned" not in text, text
    # the run stops naming site-b: no reply in time, or Flower's own "Node Unavailable"
    failure = next(line for line in text.splitlines() if "RevFRF run failed" in line)
    assert "site-b" in failure and ("no reply" in failure or "Node Unavailable" in failure), text
    assert dep.results("CS", "summary") == []  # the failed run wrote no result
