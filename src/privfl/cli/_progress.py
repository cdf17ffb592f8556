"""Progress for long commands: a rich bar on a terminal, plain lines with rate and ETA
otherwise (CI logs, ``nohup``, pipes), always on stderr so stdout stays for tables or the one
JSON object.

``privfl --quiet COMMAND`` (or ``-q``) silences all of it: :attr:`Tracker.quiet` is set for the
process, and every tracker then prints nothing (errors and results are unaffected).

Plain mode prints a line when the work starts, at most every ``every`` seconds while it
advances (``label: 40/120 (33%), 2.1/s, ETA 38 s``) and one when it ends with the elapsed
time, so a log shows that a long command is alive and when it will finish.
"""

from __future__ import annotations

import sys
import time
from types import TracebackType
from typing import ClassVar

from rich.console import Console
from rich.progress import (
    BarColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from privfl.progress import Progress as StepCallback
from privfl.progress import ProgressEvent


def fmt_seconds(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.1f} h"


class Tracker:
    """``with Tracker("DPAUC runs", total=400) as t: ... t.advance(1)``; ``t.set_total(n)``
    when the amount is known only later; ``t.update("new label")`` for a status line."""

    quiet: ClassVar[bool] = False  # privfl --quiet: no bar and no lines

    def __init__(
        self,
        label: str,
        total: int | None = None,
        *,
        console: Console | None = None,
        every: float = 5.0,
        lazy: bool = False,
    ) -> None:
        """``lazy``: in plain mode, say nothing until the first step is done (so input
        checks that fail first leave only their one-line error on stderr)."""
        self.label, self.total, self.every, self.lazy = label, total, every, lazy
        self._announced = False
        self.console = console or Console(stderr=True)
        self.done = 0
        self.started = self.last = time.monotonic()
        self.plain = Tracker.quiet or not self.console.is_terminal
        self._bar: Progress | None = None
        self._task: TaskID | None = None

    # ------------------------------------------------------------------ context manager
    def __enter__(self) -> Tracker:
        self.started = self.last = time.monotonic()
        if self.plain:
            if not self.lazy:
                self._announce()
        else:
            self._bar = Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                TextColumn("{task.completed}/{task.total}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=self.console,
                transient=True,
            )
            self._bar.__enter__()
            self._task = self._bar.add_task(self.label, total=self.total)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._bar is not None:
            self._bar.__exit__(exc_type, exc, tb)
        elif exc_type is None:
            self._announce()
            elapsed = time.monotonic() - self.started
            count = f"{self.done} steps, " if self.done else ""
            self._line(f"{self.label}: done ({count}{fmt_seconds(elapsed)})")

    # ------------------------------------------------------------------ updates
    def advance(self, n: int = 1) -> None:
        self.done += n
        if self._bar is not None and self._task is not None:
            self._bar.advance(self._task, n)
            return
        self._announce()
        now = time.monotonic()
        finished = self.total is not None and self.done >= self.total
        if now - self.last >= self.every or finished:
            self.last = now
            self._line(self.describe(now))

    def set_total(self, total: int) -> None:
        self.total = total
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, total=total)

    def update(self, label: str) -> None:
        self.label = label
        if self._bar is not None and self._task is not None:
            self._bar.update(self._task, description=label)
        else:
            self._line(label)

    def describe(self, now: float | None = None) -> str:
        """``label: done/total (pct), rate/s, ETA`` (the plain progress line)."""
        elapsed = max((now or time.monotonic()) - self.started, 1e-9)
        rate = self.done / elapsed
        text = f"{self.label}: {self.done}"
        if self.total:
            text += f"/{self.total} ({100 * self.done / self.total:.0f}%)"
        text += f", {rate:.2f}/s"
        if self.total and rate > 0:
            text += f", ETA {fmt_seconds(max(self.total - self.done, 0) / rate)}"
        return text

    def _announce(self) -> None:
        if not self._announced:
            self._announced = True
            self._line(f"{self.label}: started" + (f" ({self.total} steps)" if self.total else ""))

    def _line(self, text: str) -> None:
        if Tracker.quiet:
            return
        stream = self.console.file if self.console.file is not None else sys.stderr
        stream.write(text + "\n")
        stream.flush()


def as_callback(tracker: Tracker) -> StepCallback:
    """The library's progress callback (:mod:`privfl.progress`) feeding ``tracker``: each
    finished protocol step advances it (and sets its total when the library knows one)."""

    def on_step(event: ProgressEvent) -> None:
        if event.total is not None and tracker.total != event.total:
            tracker.set_total(event.total)
        if event.done > tracker.done:
            tracker.advance(event.done - tracker.done)

    return on_step
