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

# What the SuperLink logs when a SuperNode comes online (Flower 1.41:
# ``[Fleet.ActivateNode] Activated node_id=N``).
_ACTIVATED = re.compile(r"Activated node_id=(\d+)")


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
    """The distinct SuperNodes a SuperLink's log says it activated (0 without the file)."""
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return 0
    return len(set(_ACTIVATED.findall(text)))


__all__ = ["activated_nodes", "port_open"]
