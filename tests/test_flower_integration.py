"""Real Flower processes on 127.0.0.1 through
:class:`privfl.federation.flower.local.LocalFederation` (the process management of ``privfl
flower local``: free ports, readiness, the run's final status, teardown): Ctrl-C, a port taken
before it was bound, the watchdog, a federation closed mid-run.

A complete FHAUC run is the README quickstart (``tests/test_docs.py``) and, with TLS and node
authentication, ``tests/test_flower_netns.py``, which also kills a SuperNode mid-session and
checks a failed run's report on the same federation. The apps' protocol logic (single and
threshold keys, silent and failing nodes) runs without processes in
``tests/test_flower_rounds.py``. Selected with ``-m flower`` and part of ``make test``. Every
process started here is killed when the federation closes, even when a test fails.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from privfl.federation.provisioning import provision

pytestmark = pytest.mark.flower
pytest.importorskip("flwr")

from privfl.federation.flower.local import LocalFederation  # noqa: E402
from privfl.federation.flower.quickstart import APP_PYPROJECT  # noqa: E402

PARTIES = ["site-a", "site-b"]
BIN = Path(sys.executable).parent


def test_ctrl_c_stops_every_process_the_federation_started(tmp_path):
    started = []
    with pytest.raises(KeyboardInterrupt), LocalFederation(tmp_path) as fed:
        fed.start_superlink()
        fed.start_supernode("site-a", {"keys-dir": str(tmp_path / "nowhere")})
        started = list(fed.procs.values())
        raise KeyboardInterrupt  # what Ctrl-C raises in `privfl flower local`
    assert started and all(p.poll() is not None for p in started)


def test_a_server_whose_port_was_taken_first_starts_again_on_another(tmp_path, monkeypatch):
    """A port free when chosen can be bound by another process before the SuperLink or a
    SuperNode binds it (a CI run failed so: "address already in use"); the federation starts
    that process again on a fresh port instead of failing the run."""
    import socket

    import privfl.federation.flower.local as local
    from privfl.federation.flower.launch import free_port

    taken = []
    for _ in range(2):  # bound, not listening: the probe cannot mistake it for the SuperLink
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        taken.append(s)
    # the SuperLink: taken, then free; the SuperNode: taken, then free
    ports = iter([taken[0].getsockname()[1], free_port(), taken[1].getsockname()[1]])
    monkeypatch.setattr(local, "free_port", lambda: next(ports, None) or free_port())
    provision(["site-a", "site-b"], tmp_path / "keys")
    try:
        with LocalFederation(tmp_path) as fed:
            first = fed.port
            fed.start_superlink()
            assert fed.port != first and fed._restarts == {"superlink": 1}
            fed.start_supernode("site-a", {"keys-dir": str(tmp_path / "keys" / "site-a")})
            deadline = time.monotonic() + 60
            while fed._restarts.get("site-a") != 1 and time.monotonic() < deadline:
                fed._alive("site-a")
                time.sleep(0.2)
            assert fed._restarts.get("site-a") == 1
            time.sleep(1.0)
            fed._alive("site-a")  # the second start holds its port
    finally:
        for s in taken:
            s.close()


def test_free_ports_are_below_the_kernel_s_ephemeral_range():
    from privfl.federation.flower.launch import _ephemeral_low, free_port

    low = _ephemeral_low()
    assert all(20000 <= free_port() < low for _ in range(50))


_KILLED_PARENT = """
import sys, time
from privfl.federation.flower.local import LocalFederation
fed = LocalFederation(sys.argv[1])
fed._start("sleeper", ["sleep", "120"])  # the path every Flower process takes
print(fed.procs["sleeper"].pid, flush=True)
time.sleep(120)
"""


def _gone(pid: int, within: float) -> bool:
    import os

    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        try:  # a zombie of its (dead) parent's is reaped by init: check its state too
            if Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z":
                return True
        except OSError:
            return True
        time.sleep(0.1)
    return False


def test_processes_die_with_the_python_process_that_started_them(tmp_path):
    """Each Flower process runs in its own session, so a Python process killed outright
    (SIGKILL: `close` never runs) used to leave its SuperLink and SuperNodes running for
    hours. Its watchdog kills them: here within seconds."""
    import contextlib
    import os
    import signal

    parent = subprocess.Popen(
        [sys.executable, "-c", _KILLED_PARENT, str(tmp_path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert parent.stdout is not None
        child = int(parent.stdout.readline())
        assert not _gone(child, 0.5)  # running while its parent lives
        parent.send_signal(signal.SIGKILL)
        parent.wait(timeout=10)
        assert _gone(child, 10.0)
    finally:
        parent.kill()
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child, signal.SIGKILL)


def test_a_closed_federation_leaves_no_watchdog_and_kills_nothing_later(tmp_path):
    with LocalFederation(tmp_path) as fed:
        fed._start("sleeper", ["sleep", "120"])
        watchdog = fed._reaper._proc
        assert watchdog is not None and watchdog.poll() is None
    assert fed._reaper._proc is None and watchdog.poll() == 0  # told to forget, then stopped
    assert fed.procs["sleeper"].poll() is not None
    assert _gone(fed.procs["sleeper"].pid, 5.0)


def test_the_watchdog_spares_a_group_it_was_told_to_forget():
    """A group this process killed itself is forgotten (its id may be reused later by an
    unrelated process); only the groups still watched die when the parent's pipe closes."""
    import contextlib
    import os
    import signal

    from privfl.federation.flower.reaper import Reaper

    spared, killed = (subprocess.Popen(["sleep", "120"], start_new_session=True) for _ in "ab")
    reaper = Reaper()
    try:
        reaper.watch(spared.pid)
        reaper.watch(killed.pid)
        reaper.forget(spared.pid)
        assert reaper._proc is not None and reaper._proc.stdin is not None
        reaper._proc.stdin.close()  # what the parent's death does to the pipe
        reaper._proc.wait(timeout=10)
        assert killed.wait(timeout=10) == -signal.SIGKILL
        assert spared.poll() is None
    finally:
        for proc in (spared, killed):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)


def _flower_processes(home: Path) -> list[str]:
    """Every live process started for the federation whose Flower home is ``home`` (its
    environment says so: Flower passes it on to every process it starts), by command line."""
    import os

    found = []
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")
        except OSError:
            continue
        if f"FLWR_HOME={home}".encode() in env:
            found.append(f"{pid} {cmd.decode(errors='replace')[:160]}")
    return found


def _start_waiting_run(fed: LocalFederation, root: Path) -> subprocess.Popen[str]:
    """A run whose ServerApp waits for SuperNodes that never come; returns once its
    ``flwr-serverapp`` process is up (the SuperLink's SuperExec starts it in a session of its
    own: not in any process group the federation started)."""
    provision(PARTIES, root / "keys")
    (root / "app").mkdir(exist_ok=True)
    (root / "app" / "pyproject.toml").write_text(APP_PYPROJECT)
    proc = fed.start_run(
        root / "app", {"aggregator-keys": str(root / "keys" / "aggregator"), "timeout": 300.0}
    )
    deadline = time.monotonic() + 120
    while not any("flwr-serverapp" in p for p in _flower_processes(fed.home)):
        assert time.monotonic() < deadline, "no flwr-serverapp started"
        time.sleep(0.2)
    return proc


def test_a_federation_closed_mid_run_leaves_no_flower_process(tmp_path):
    """What a test's teardown does when the test timed out mid-run (issue 31: a
    ``flwr-serverapp`` outlived a network-namespace test that way): ``close`` stops every
    process the federation caused, the ServerApp Flower started for the run included."""
    with LocalFederation(tmp_path) as fed:
        fed.start_superlink()
        _start_waiting_run(fed, tmp_path)
    assert _flower_processes(fed.home) == []


def test_nodes_are_waited_for_by_asking_the_superlink_when_its_log_shows_none(
    tmp_path, monkeypatch
):
    """A SuperLink log without the activation lines (another Flower version): the wait asks
    ``flwr supernode list`` instead, every ``_ASK_EVERY_S``, and gives up at the timeout; so
    does a log that shows fewer nodes than awaited."""
    import privfl.federation.flower.local as local
    from privfl.errors import ProtocolError

    monkeypatch.setattr(local, "_ASK_EVERY_S", 0.05)
    fed = LocalFederation(tmp_path)
    try:
        (tmp_path / "superlink.log").write_text("INFO: a node came up in other words\n")
        online = iter([0, 1, 2])
        monkeypatch.setattr(fed, "online_nodes", lambda: next(online))
        fed.wait_for_nodes(2, timeout=30)
        assert next(online, None) is None  # asked until the SuperLink listed both
        monkeypatch.setattr(fed, "online_nodes", lambda: 1)
        with pytest.raises(ProtocolError, match="fewer than 2 SuperNodes"):
            fed.wait_for_nodes(2, timeout=0.3)
        # a log that shows fewer nodes than awaited (one forged or lost line) is checked
        # against the SuperLink too
        (tmp_path / "superlink.log").write_text(
            "INFO :      [Fleet.ActivateNode] Activated node_id=11\n"
        )
        online = iter([1, 2])
        monkeypatch.setattr(fed, "online_nodes", lambda: next(online))
        fed.wait_for_nodes(2, timeout=30)
        assert next(online, None) is None
    finally:
        fed.close()


def test_the_log_readiness_counts_whole_activation_lines_of_nodes_still_active(tmp_path):
    """Only the SuperLink's own activation lines count (coloured or not), a node deactivated
    since does not, and text a node makes the SuperLink log (a FAB hash) forges nothing."""
    from privfl.federation.flower.ready import activated_nodes

    log = tmp_path / "superlink.log"
    log.write_text(
        "\x1b[92mINFO \x1b[0m:      [Fleet.ActivateNode] Activated node_id=11\n"
        "INFO :      [Fleet.ActivateNode] Activated node_id=22\n"
        "INFO :      [Fleet.ActivateNode] Activated node_id=33\n"
        "INFO :      [Fleet.GetFab] Requesting FAB for fab_hash=x Activated node_id=44\n"
        "INFO :      [Fleet.DeactivateNode] Deactivated node_id=33\n"
    )
    assert activated_nodes(log) == 2
    assert activated_nodes(tmp_path / "missing.log") == 0
