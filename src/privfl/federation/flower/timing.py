"""A ClientApp's own phases in one message, for the per-round cost breakdown.

A node whose node config sets ``report-timings = true`` adds ``timings = [start, load,
work]`` (seconds, 3 decimals) to its replies: ``start`` is the age of the ClientApp process
when the handler began (Flower starts a fresh ``flwr-clientapp`` process per message: process
start, imports, loading the app), ``load`` privfl's node-state load (keys, data, session
state), ``work`` the protocol step. The node decides: by default nothing is reported (the
ServerApp sees only how long a round took, as it always does).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping

TIMINGS = "timings"


def process_age() -> float:
    """Seconds since this process started (Linux ``/proc``; 0.0 where unavailable)."""
    try:
        with open("/proc/self/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        with open("/proc/uptime", "rb") as fh:
            uptime = float(fh.read().split()[0])
        return max(0.0, uptime - int(fields[19]) / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return 0.0


def wanted(node_config: Mapping[str, object]) -> bool:
    """Whether this node's operator asked it to report its phases."""
    return str(node_config.get("report-timings", "false")).lower() == "true"


class Phases:
    """``Phases()`` at the handler's start, ``loaded()`` after the node state is loaded,
    ``report()`` at the end: ``[start, load, work]``."""

    def __init__(self) -> None:
        self.start = process_age()
        self.t0 = self.t1 = time.perf_counter()

    def loaded(self) -> None:
        self.t1 = time.perf_counter()

    def report(self, load: float | None = None) -> list[float]:
        """``[start, load, work]``; ``load`` given: the seconds of the handler spent loading
        (measured by the node where loading is interleaved with the work)."""
        end = time.perf_counter()
        total = end - self.t0
        spent = self.t1 - self.t0 if load is None else min(load, total)
        return [round(self.start, 3), round(spent, 3), round(total - spent, 3)]


def phases(value: object) -> tuple[float, float, float] | None:
    """A reported ``timings`` value, checked (anything else: ``None``)."""
    if not isinstance(value, list) or len(value) != 3:
        return None
    if not all(isinstance(v, float) and 0.0 <= v < 1e6 for v in value):
        return None
    return (value[0], value[1], value[2])
