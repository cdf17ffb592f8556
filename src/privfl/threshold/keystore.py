"""OpenFHE's process-global evaluation-key stores, with one holder count per key tag.

OpenFHE keeps relinearisation and automorphism keys in static maps keyed by tag, shared by
every crypto context of the process, and never frees an entry by itself. privfl tags each
joint key set with its session id, so every threshold session run in one process (a
notebook, a benchmark, ``federated_auc(..., keys="threshold")`` in a loop) used to leave its
keys behind: about 20 MB per session on the ``fhauc`` ring, 15 GB after a few hundred
sessions, until the kernel killed the process.

Every privfl role that installs joint evaluation keys does it through :func:`install`, which
returns a :class:`Lease`; the key set stays installed while one lease on its tag is open.
A role releases its lease when it is garbage-collected (``weakref.finalize``) or explicitly.
The Python bindings of OpenFHE 1.5 can clear the stores only as a whole
(``ClearEvalMultKeys``, ``ClearEvalAutomorphismKeys``), so releasing the last lease on a tag
clears both stores and re-inserts the key objects of the tags still held (pointer copies,
no deserialisation). The keys are public material: nothing here is secret, and clearing
them loses nothing a role needs later (a role that still needs a tag holds a lease).

One process should not release a tag while another thread of it evaluates under a different
tag: the re-insertion leaves a short window where the other tag's keys are absent. privfl
runs one session per thread of work; the upload pool's helper threads only load and add
ciphertexts, which needs no evaluation key.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from privfl.crypto.threshold.context import ThresholdContext

__all__ = ["Lease", "held_tags", "install"]


@dataclass
class _Entry:
    ctx: ThresholdContext
    mult: list[Any]
    automorphism: Any | None
    holders: int = 0


@dataclass
class _Store:
    lock: threading.Lock = field(default_factory=threading.Lock)
    entries: dict[str, _Entry] = field(default_factory=dict)


_STORE = _Store()


class Lease:
    """One holder's claim on the key set installed under ``tag``. :meth:`release` is
    idempotent."""

    def __init__(self, tag: str) -> None:
        self.tag = tag
        self._open = True

    def release(self) -> None:
        if self._open:
            self._open = False
            _release(self.tag)


def install(
    ctx: ThresholdContext,
    tag: str,
    mult: Callable[[], Any],
    automorphism: Callable[[], Any] | None,
    owner: object,
) -> Lease:
    """Install the evaluation keys of ``tag`` in OpenFHE's stores unless they are already
    held, and return ``owner``'s lease on them, released when ``owner`` is garbage-collected
    (or earlier by :meth:`Lease.release`). ``mult`` and ``automorphism`` build the key
    objects (the relinearisation key; the automorphism key map, or ``None`` without
    rotations); they run only for the first holder of the tag."""
    with _STORE.lock:
        entry = _STORE.entries.get(tag)
        if entry is None:
            entry = _Entry(ctx, [mult()], automorphism() if automorphism is not None else None)
            _insert(tag, entry)
            _STORE.entries[tag] = entry
        entry.holders += 1
    lease = Lease(tag)
    weakref.finalize(owner, lease.release)
    return lease


def held_tags() -> frozenset[str]:
    """The tags whose key sets are installed because a lease on them is open."""
    with _STORE.lock:
        return frozenset(_STORE.entries)


def _insert(tag: str, entry: _Entry) -> None:
    entry.ctx.cc.InsertEvalMultKey(entry.mult)
    if entry.automorphism is not None:
        entry.ctx.cc.InsertEvalAutomorphismKey(entry.automorphism, tag)


def _release(tag: str) -> None:
    with _STORE.lock:
        entry = _STORE.entries.get(tag)
        if entry is None:
            return
        entry.holders -= 1
        if entry.holders > 0:
            return
        del _STORE.entries[tag]
        entry.ctx.fhe.ClearEvalMultKeys()
        entry.ctx.cc.ClearEvalAutomorphismKeys()
        for other, kept in _STORE.entries.items():
            _insert(other, kept)
