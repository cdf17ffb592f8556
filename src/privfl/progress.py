"""Progress of long library calls: one optional callback type for every entry point.

A long call (``federated_auc``, the :mod:`privfl.metrics` functions, ``RevFRF.fit``,
``train_federated``) takes ``progress=`` (``None`` by default: nothing is reported). The
callback receives a :class:`ProgressEvent` after every protocol step that finishes: which
step (``"party_encrypt"``, ``"aggregator"``, ``"round"``, ...), how many steps are done and,
when known in advance, how many there are in all. It runs in the caller's thread between
steps; what it does (print, update a bar, log) costs the protocol nothing else. It sees only
step names and counts, never data. An exception it raises stops the call.

    import privfl
    res = privfl.federated_auc(parties, progress=lambda e: print(e.step, e.done))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass


@dataclass(frozen=True)
class ProgressEvent:
    """One finished step: its name, steps done so far, the total when known (else None)."""

    step: str
    done: int
    total: int | None = None

    @property
    def fraction(self) -> float | None:
        """``done / total`` in [0, 1], or None when the total is not known."""
        if not self.total:
            return None
        return min(1.0, self.done / self.total)


Progress = Callable[[ProgressEvent], None]


class Steps:
    """The steps of one call, counted: :meth:`tick` after each reports a
    :class:`ProgressEvent` (``step``, steps done, ``total``) to ``progress`` if there is one."""

    def __init__(self, progress: Progress | None, step: str, total: int | None) -> None:
        self.progress, self.step, self.total, self.done = progress, step, total, 0

    def tick(self) -> None:
        self.done += 1
        if self.progress is not None:
            self.progress(ProgressEvent(self.step, self.done, self.total))
