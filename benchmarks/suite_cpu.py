"""The whole CPU a pytest run costs, by process kind, including the processes no test waits for.

``--cpu-report`` (tests/_cpu_report.py) counts each test's own CPU and that of the children it
waited for. A real-process Flower test starts processes whose CPU never reaches it: the
SuperLink's SuperExec starts each run's ``flwr-serverapp`` in a session of its own, and each
SuperNode's SuperExec starts a ``flwr-clientapp`` per message and is killed, not waited for,
at the end. This script runs pytest inside a cgroup (cgroup v1 ``cpuacct``, as root) whose
counter holds every descendant's CPU, and samples each process of the cgroup every 0.1 s to
sum their own CPU by kind (processes shorter than 0.1 s are missed by the sampling, not by
the total).

    sudo .venv/bin/python benchmarks/suite_cpu.py -- -q -n 4 tests/test_flower_revfrf.py

It prints the cgroup's total, the wall time and the load average, then one line per kind.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import secrets
import subprocess
import sys
import threading
import time
from pathlib import Path

CGROUPS = Path("/sys/fs/cgroup/cpuacct")
TICK = os.sysconf("SC_CLK_TCK")


def kind(pid: str) -> str:
    """A process's kind: its program, or the script a Python process runs."""
    try:
        argv = [
            a.decode(errors="replace")
            for a in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            if a
        ]
    except OSError:
        return "?"
    if not argv:
        return "?"
    name = os.path.basename(argv[0])
    if name.startswith("python") and len(argv) > 1:
        if "exec(eval(" in " ".join(argv):  # execnet's bootstrap of an xdist worker
            return "pytest worker"
        if argv[1] == "-c":
            return "python -c"
        rest = [a for a in argv[1:] if not a.startswith("-")]
        if rest:
            return os.path.basename(rest[0])
    return name


def sample(group: Path, seen: dict[tuple[str, str], list], stop: threading.Event) -> None:
    """Every 0.1 s: each process of ``group``, its own CPU so far (user + system)."""
    while not stop.is_set():
        for pid in (group / "cgroup.procs").read_text().split():
            try:
                fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            key = (pid, fields[19])  # pid and start time: a reused pid is another process
            if key not in seen:
                seen[key] = [kind(pid), 0.0]
            seen[key][1] = (int(fields[11]) + int(fields[12])) / TICK
        stop.wait(0.1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("pytest_args", nargs=argparse.REMAINDER, help="after --: pytest's arguments")
    args = ap.parse_args()
    pytest_args = [a for a in args.pytest_args if a != "--"]
    if not CGROUPS.is_dir() or os.geteuid() != 0:
        sys.exit("needs root and cgroup v1's cpuacct hierarchy at /sys/fs/cgroup/cpuacct")
    group = CGROUPS / f"privfl-suite-{secrets.token_hex(4)}"
    group.mkdir()
    seen: dict[tuple[str, str], list] = {}
    stop = threading.Event()
    try:
        load = os.getloadavg()
        started = time.monotonic()
        proc = subprocess.Popen(
            [sys.executable, "-m", "pytest", *pytest_args],
            preexec_fn=lambda: (group / "tasks").write_text(str(os.getpid())),
        )
        sampler = threading.Thread(target=sample, args=(group, seen, stop), daemon=True)
        sampler.start()
        code = proc.wait()
        wall = time.monotonic() - started
        stop.set()
        sampler.join()
        total = int((group / "cpuacct.usage").read_text()) / 1e9
    finally:
        leftovers = _release(group)
    if leftovers:  # a test left these running after pytest ended (moved out, not killed)
        print("still running after pytest: " + ", ".join(sorted(leftovers)))
    print(f"pytest exit {code}; cgroup CPU {total:.1f} s, wall {wall:.1f} s; load average "
          f"{load[0]:.2f} at the start, {os.getloadavg()[0]:.2f} at the end")  # fmt: skip
    by: dict[str, list[float]] = {}
    for name, cpu in seen.values():
        row = by.setdefault(name, [0.0, 0])
        row[0] += cpu
        row[1] += 1
    for name, (cpu, count) in sorted(by.items(), key=lambda kv: -kv[1][0]):
        if cpu >= 0.5:
            print(f"{cpu:8.1f} s {int(count):5d} processes  {name}")
    print(f"{sum(c for c, _ in by.values()):8.1f} s sampled in all")


def _release(group: Path) -> set[str]:
    """Move every process still in ``group`` to the root group, all its threads at once
    (cgroup v1 ``cgroup.procs``: writing to ``tasks`` would move one thread and leave the
    group busy), until none is left (a process may fork while it is moved; at most 10 s),
    then remove the group; returns the kinds of the processes moved. A group that stays busy
    is left in place with a warning, so the measurement is still printed."""
    moved: set[str] = set()
    deadline = time.monotonic() + 10.0
    while True:
        for pid in (group / "cgroup.procs").read_text().split():
            name = kind(pid)
            with contextlib.suppress(OSError):  # it may have ended meanwhile
                (CGROUPS / "cgroup.procs").write_text(pid)
                if name != "?":
                    moved.add(name)
        try:
            group.rmdir()
            return moved
        except OSError as exc:
            if time.monotonic() > deadline:
                print(f"warning: could not remove {group} ({exc}); left in place")
                return moved
            time.sleep(0.1)


if __name__ == "__main__":
    main()
