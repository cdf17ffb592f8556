"""Readiness probes of a local federation's processes, for
:class:`~privfl.federation.flower.local.LocalFederation`: whether the SuperLink's port accepts
connections, and how many SuperNodes its log says it activated. Both read what the launcher
owns (a port it chose, a log file it writes); neither starts a ``flwr`` process (about 1.1 s
of CPU each, issue 31).
"""

from __future__ import annotations

import re
import socket
import subprocess
import sys
from pathlib import Path

# What the SuperLink logs when a SuperNode comes online or leaves (Flower 1.41: a whole line
# ``INFO :      [Fleet.ActivateNode] Activated node_id=N`` / ``[Fleet.DeactivateNode]
# Deactivated node_id=N``). Anchored to whole lines: other log lines quote text a node sends.
_EVENT = re.compile(
    r"^(?:\x1b\[[0-9;]*m)?[A-Z]+\s*(?:\x1b\[[0-9;]*m)?:\s+"  # the level, maybe coloured
    r"\[Fleet\.(Activate|Deactivate)Node\] (?:Activated|Deactivated) "
    r"node_id=(\d+)\s*$",
    re.MULTILINE,
)


def port_open(address: str, port: int, prefix: list[str]) -> bool:
    """Whether ``address:port`` accepts a TCP connection, probed from this process or, with a
    ``prefix`` (e.g. ``ip netns exec NS``), from a tiny Python process run through it."""
    if not prefix:
        with socket.socket() as s:
            s.settimeout(2.0)
            return s.connect_ex((address, port)) == 0
    probe = (
        "import socket, sys; s = socket.socket(); s.settimeout(2.0); "
        f"sys.exit(s.connect_ex(({address!r}, {port})))"
    )
    try:
        done = subprocess.run(  # noqa: S603 - fixed executables, no shell
            [*prefix, sys.executable, "-S", "-c", probe], capture_output=True, timeout=30,
            check=False,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return False
    return done.returncode == 0


def activated_nodes(log: Path) -> int:
    """The distinct SuperNodes a SuperLink's log says are active: activated and not
    deactivated since (0 without the file). A hint for the launcher's wait only: a node that
    can reach the SuperLink could still forge a line through text the SuperLink logs for it,
    and then the run starts early and Flower's own wait for nodes applies."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return 0
    active: set[str] = set()
    for kind, node in _EVENT.findall(text):
        if kind == "Activate":
            active.add(node)
        else:
            active.discard(node)
    return len(active)


__all__ = ["activated_nodes", "port_open"]
