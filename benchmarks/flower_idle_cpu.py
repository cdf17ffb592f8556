"""CPU that an idle local Flower federation burns (a SuperLink and K SuperNodes started by
``privfl.federation.flower.local.LocalFederation``, no run), per SuperExec task poll interval.

Every process of the federation (each started in its own session, children included) is read
from ``/proc`` before and after ``--seconds`` of idleness; the figure is CPU seconds per wall
second, i.e. how much of one core the idle federation keeps busy. The test suite's real-process
tests keep such a federation up for minutes while they wait for a round or a timeout.

    python benchmarks/flower_idle_cpu.py --nodes 4 --seconds 20 --poll 0.05 --poll 1
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from privfl.federation.flower.local import TASK_POLL_ENV, LocalFederation

TICK = os.sysconf("SC_CLK_TCK")


def session_cpu(sids: set[int]) -> float:
    """CPU seconds (user + system, with reaped children) of every process in ``sids``."""
    total = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()
        if int(fields[3]) in sids:  # field 6 of stat: the session id
            total += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    return total / TICK


def measure(nodes: int, seconds: float, poll: float) -> tuple[float, float]:
    """(CPU seconds per wall second while idle, wall seconds it took to bring the nodes up)."""
    os.environ[TASK_POLL_ENV] = str(poll)
    with tempfile.TemporaryDirectory() as tmp, LocalFederation(tmp) as fed:
        start = time.perf_counter()
        fed.start_superlink()
        for k in range(nodes):
            fed.start_supernode(f"node-{k}", {"role": "idle"})
        fed.wait_for_nodes(nodes)
        up = time.perf_counter() - start
        time.sleep(2.0)  # let start-up settle
        sids = {p.pid for p in fed.procs.values()}
        cpu0, wall0 = session_cpu(sids), time.perf_counter()
        time.sleep(seconds)
        return (session_cpu(sids) - cpu0) / (time.perf_counter() - wall0), up


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--seconds", type=float, default=20.0)
    ap.add_argument("--poll", type=float, action="append", help="SuperExec task poll (s)")
    args = ap.parse_args()
    for poll in args.poll or [0.05, 1.0]:
        rate, up = measure(args.nodes, args.seconds, poll)
        print(
            f"{args.nodes} SuperNodes, task poll {poll:g} s: idle federation uses "
            f"{rate:.3f} CPU s per wall s ({rate * 60:.1f} CPU s per idle minute; "
            f"nodes up in {up:.1f} s)",
            flush=True,
        )
    print(f"load average: {os.getloadavg()}")


if __name__ == "__main__":
    main()
