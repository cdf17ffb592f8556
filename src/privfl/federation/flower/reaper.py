"""A watchdog that kills a local federation's process groups when the Python process that
started them dies without cleaning up (SIGKILL, an OOM kill, a crash in C code).

:class:`~privfl.federation.flower.local.LocalFederation` starts every Flower process in its
own session, so that it can kill each one with its children. The price: nothing else stops
them. Its ``close`` runs on success, on an exception and on Ctrl-C, but not when its process
is killed outright. Then the SuperLink, the SuperNodes and their SuperExecs ran on for hours
(found twice on the project's own machine).

The watchdog is a small child process that reads process-group ids from a pipe, one per line.
Its stdin is the pipe's only reading end and the parent holds the only writing end, so when
the parent dies for any reason the kernel closes it, the watchdog reads end-of-file, and it
kills (SIGKILL) every group it was told about and not told to forget. It needs no signal
handler in the parent and no ``preexec_fn`` (which is unsafe with threads).
"""

from __future__ import annotations

import contextlib
import subprocess
import sys
from typing import IO

# The watchdog's whole program (run with ``python -S -c``: no site, nothing of privfl). Lines:
# "+PGID" remember a group, "-PGID" forget it, "-" forget all; at end-of-file, SIGKILL the
# remembered ones.
# A group's id is its leader's pid, which the kernel does not reuse while the group has a
# member; it may be reused once the group is gone. So the watchdog notes the leader's start
# time and, at the end, spares a group whose leader's pid now belongs to a later process.
_PROGRAM = """
import os, signal, sys
def started(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None
groups = {}
for line in sys.stdin:
    line = line.strip()
    if line[:1] == "+" and line[1:].isdigit():
        groups[int(line[1:])] = started(int(line[1:]))
    elif line == "-":
        groups.clear()
    elif line[:1] == "-" and line[1:].isdigit():
        groups.pop(int(line[1:]), None)
for pgid, start in groups.items():
    now = started(pgid)
    if now is not None and now != start:
        continue
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
"""


class Reaper:
    """The parent's end of the watchdog: :meth:`watch` a process group after starting it,
    :meth:`forget` it once it is known dead, :meth:`close` once everything is stopped."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(  # noqa: S603 - fixed program
            [sys.executable, "-S", "-c", _PROGRAM],
            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True, close_fds=True,
        )  # fmt: skip

    def _send(self, line: str) -> None:
        proc = self._proc
        stdin: IO[bytes] | None = proc.stdin if proc is not None else None
        if stdin is None:
            return
        with contextlib.suppress(BrokenPipeError, ValueError):
            stdin.write(line.encode() + b"\n")
            stdin.flush()

    def watch(self, pgid: int) -> None:
        """Kill process group ``pgid`` if this process dies before :meth:`forget`."""
        self._send(f"+{pgid}")

    def forget(self, pgid: int) -> None:
        """Group ``pgid`` is gone (its id may be reused): never kill it."""
        self._send(f"-{pgid}")

    def close(self) -> None:
        """Forget every group and stop the watchdog (once the groups were stopped: a stopped
        group's id may be reused by an unrelated process)."""
        self._send("-")
        proc, self._proc = self._proc, None
        if proc is None:
            return
        if proc.stdin is not None:
            with contextlib.suppress(BrokenPipeError, ValueError):
                proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


__all__ = ["Reaper"]
