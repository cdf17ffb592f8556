"""``--cpu-report=FILE``: CPU seconds (user + system, this process and its waited-for children)
spent by each test, setup and teardown included, as a table sorted by CPU, longest first.

Wall time (``--durations``) grows with the machine's load; CPU time does not, so this is the
figure to cut when the suite must fit a CPU budget. Under xdist every worker appends its rows
to ``FILE.rows`` and the controller writes the sorted table to ``FILE`` at the end.
"""

from __future__ import annotations

import json
import os
import resource
import time
from pathlib import Path

import pytest


def _cpu() -> float:
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--cpu-report",
        metavar="FILE",
        default=None,
        help="write each test's CPU seconds (user+sys, children included) to FILE, sorted",
    )


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None):
    path = item.config.getoption("--cpu-report")
    if not path:
        yield
        return
    cpu, wall = _cpu(), time.perf_counter()
    yield
    row = {
        "cpu": _cpu() - cpu,
        "wall": time.perf_counter() - wall,
        "test": item.nodeid,
        "worker": os.environ.get("PYTEST_XDIST_WORKER", "main"),
    }
    with open(f"{path}.rows", "a", encoding="utf-8") as out:
        out.write(json.dumps(row) + "\n")


def pytest_sessionstart(session: pytest.Session) -> None:
    path = session.config.getoption("--cpu-report")
    if path and not hasattr(session.config, "workerinput"):
        Path(f"{path}.rows").unlink(missing_ok=True)


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = session.config.getoption("--cpu-report")
    if not path or hasattr(session.config, "workerinput"):
        return
    rows_file = Path(f"{path}.rows")
    if not rows_file.exists():
        return
    rows = [json.loads(line) for line in rows_file.read_text(encoding="utf-8").splitlines()]
    rows.sort(key=lambda r: -r["cpu"])
    total = sum(r["cpu"] for r in rows)
    lines = [f"{'cpu s':>8} {'wall s':>8}  test   (total {total:.1f} s CPU in {len(rows)} tests)"]
    lines += [f"{r['cpu']:8.1f} {r['wall']:8.1f}  {r['test']}" for r in rows]
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")
