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

Process groups are not enough: Flower starts some processes in sessions of their own. The
SuperLink starts its SuperExec detached (``start_new_session``), and that SuperExec starts each
run's ``flwr-serverapp``; those only watch their parent's pid, and a ``flwr-serverapp`` waiting
for nodes outlived the SuperLink's teardown (issue 31: found after a network-namespace test that
timed out). So the launcher also *marks* its processes: :meth:`Reaper.mark` puts a random token
in the environment they start with, which every process they start inherits (Flower passes its
environment on, also through ``ip netns exec``). When the pipe closes (the parent died, or
:meth:`Reaper.close` after a teardown), the watchdog kills every process whose environment, read
from ``/proc/PID/environ``, holds a token it was given, until none is left. A token is never
reused, so unlike a group id it cannot name an unrelated process.
"""

from __future__ import annotations

import contextlib
import secrets
import subprocess
import sys
from collections.abc import MutableMapping
from typing import IO

# The environment variable that marks a federation's processes (value: a random token).
MARK_ENV = "PRIVFL_FEDERATION"

# The watchdog's whole program (run with ``python -S -c``: no site, nothing of privfl). Lines:
# "+PGID" remember a group, "-PGID" forget it, "-" forget all groups, "=TOKEN" remember a mark;
# at end-of-file, SIGKILL the remembered groups, then every process marked with a remembered
# token (``PRIVFL_FEDERATION=TOKEN`` in its environment), again until none is left (one may
# have been starting a child), at most 50 passes 0.1 s apart.
# A group's id is its leader's pid, which the kernel does not reuse while the group has a
# member; it may be reused once the group is gone. So the watchdog notes the leader's start
# time and, at the end, spares a group whose leader's pid now belongs to a later process.
_PROGRAM = """
import os, signal, sys, time
def started(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None
def kill_marked(marks):
    # a pidfd pins the process: the environ read and the kill then reach the same process,
    # even if the pid is reused in between (no pidfd: a plain kill, the pid read just before)
    found = 0
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        fd = None
        try:
            fd = os.pidfd_open(int(name)) if hasattr(os, "pidfd_open") else None
            with open("/proc/%s/environ" % name, "rb") as f:
                if not marks.intersection(f.read().split(b"\\0")):
                    continue
            found += 1
            if fd is not None:
                signal.pidfd_send_signal(fd, signal.SIGKILL)
            else:
                os.kill(int(name), signal.SIGKILL)
        except OSError:
            pass
        finally:
            if fd is not None:
                os.close(fd)
    return found
groups, marks = {}, set()
for line in sys.stdin:
    line = line.strip()
    if line[:1] == "+" and line[1:].isdigit():
        groups[int(line[1:])] = started(int(line[1:]))
    elif line == "-":
        groups.clear()
    elif line[:1] == "-" and line[1:].isdigit():
        groups.pop(int(line[1:]), None)
    elif line[:1] == "=" and line[1:].isalnum():
        marks.add(("%s=%s" % (MARK, line[1:])).encode())
for pgid, start in groups.items():
    now = started(pgid)
    if now is not None and now != start:
        continue
    try:
        os.killpg(pgid, signal.SIGKILL)
    except OSError:
        pass
for _ in range(50 if marks else 0):
    if not kill_marked(marks):
        break
    time.sleep(0.1)
"""


class Reaper:
    """The parent's end of the watchdog: :meth:`watch` a process group after starting it,
    :meth:`forget` it once it is known dead, :meth:`close` once everything is stopped."""

    def __init__(self) -> None:
        self._proc: subprocess.Popen[bytes] | None = subprocess.Popen(  # noqa: S603 - fixed program
            [sys.executable, "-S", "-c", f"MARK = {MARK_ENV!r}\n{_PROGRAM}"],
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

    def mark(self, env: MutableMapping[str, str]) -> None:
        """Put a fresh random token in ``env`` (as ``PRIVFL_FEDERATION``): every process started
        with ``env``, and every process those start, is killed once the pipe closes."""
        token = secrets.token_hex(16)
        env[MARK_ENV] = token
        self._send(f"={token}")

    def forget(self, pgid: int) -> None:
        """Group ``pgid`` is gone (its id may be reused): never kill it."""
        self._send(f"-{pgid}")

    def close(self) -> None:
        """Forget every group and stop the watchdog (once the groups were stopped: a stopped
        group's id may be reused by an unrelated process); before it exits, the watchdog kills
        what is left of the marked processes (e.g. a ``flwr-serverapp`` in a session of its
        own, whose parent was stopped) and this call waits for it (at most 10 s)."""
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


__all__ = ["MARK_ENV", "Reaper"]
