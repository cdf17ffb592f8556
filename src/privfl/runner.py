"""In-process runner: moves real message bytes between role objects, timing each role.

Protocols call :meth:`InProcessRunner.run` to execute one role's step (its wall time is
added to that role's counter) and :meth:`InProcessRunner.send` to pass bytes from one role
to another (the size is recorded per channel). Nothing is shared between roles except the
bytes passed through :meth:`send`.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import ParamSpec, TypeVar

from privfl.progress import Progress, ProgressEvent

P = ParamSpec("P")
R = TypeVar("R")


@dataclass
class InProcessRunner:
    """Records per-(role, step) wall seconds, process CPU seconds (``cpu``: what the step
    costs on a loaded machine) and per-channel bytes; ``progress`` (optional) is told after
    every step (:mod:`privfl.progress`)."""

    seconds: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    cpu: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    sizes: dict[str, list[int]] = field(default_factory=lambda: defaultdict(list))
    progress: Progress | None = None
    steps_done: int = 0

    def run(self, key: str, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R:
        """Run ``fn`` and record its wall time under ``key`` (e.g. ``"party_encrypt"``)."""
        start, cpu = time.perf_counter(), time.process_time()
        try:
            out = fn(*args, **kwargs)
        finally:
            self.seconds[key].append(time.perf_counter() - start)
            self.cpu[key].append(time.process_time() - cpu)
        self.steps_done += 1
        if self.progress is not None:
            self.progress(ProgressEvent(key, self.steps_done))
        return out

    def send(self, channel: str, data: bytes) -> bytes:
        """Pass ``data`` along ``channel`` (a copy, as a network would) and count its size."""
        if not isinstance(data, bytes | bytearray):
            raise TypeError(f"only bytes travel between roles, got {type(data).__name__}")
        self.sizes[channel].append(len(data))
        return bytes(data)

    def max_seconds(self, key: str) -> float:
        return max(self.seconds.get(key, [0.0]))

    def total_seconds(self, key: str) -> float:
        return sum(self.seconds.get(key, [0.0]))

    def max_bytes(self, channel: str) -> int:
        return max(self.sizes.get(channel, [0]))
