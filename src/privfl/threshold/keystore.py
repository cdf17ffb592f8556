"""OpenFHE's process-global evaluation-key stores, with one holder count per key tag.

OpenFHE keeps relinearisation and automorphism keys in static maps keyed by tag, shared by
every crypto context of the process, and never frees an entry by itself. privfl tags each
joint key set with its session id, so every threshold session run in one process (a
notebook, a benchmark, ``federated_auc(..., keys="threshold")`` in a loop) used to leave its
keys behind: about 20 MB per session on the ``fhauc`` ring, 15 GB after a few hundred
sessions, until the kernel killed the process.

Every privfl role that installs joint evaluation keys does it through :func:`install`, which
returns a :class:`Lease`; the key set stays installed while one lease on its tag is open.
A role's lease ends when the role is garbage-collected or by :meth:`Lease.release`.

How a key set leaves the stores:

- A garbage-collected role's finaliser only *queues* its tag (a list append, which takes no
  lock): collection can start at any allocation, in any thread, also while this module holds
  its lock, so a finaliser that took the lock could wait on itself.
- Queued releases are applied at the next :func:`install`, :meth:`Lease.release` or
  :func:`held_tags`, by the thread calling it: when a tag's last lease is gone, both stores are
  cleared (the Python bindings of OpenFHE 1.5 clear only a whole store:
  ``ClearEvalMultKeys``, ``ClearEvalAutomorphismKeys``) and the key objects of the tags still
  held are re-inserted (pointer copies, no deserialisation).
- New keys are rebuilt from their bytes outside the lock.

The keys are public material: nothing here is secret, and no refusal depends on what is
installed. Limits: (1) clearing removes *every* evaluation key of the process, also keys
that code other than privfl's threshold roles inserted (a user's own OpenFHE keys, OpenFHE
calls of :func:`privfl.crypto.threshold.estimate_noise_bits` still running in another
thread): keep such code in its own process, or re-insert its keys after a privfl threshold
session; (2) a release applied while another thread evaluates under a different tag leaves
that thread a window of a few bytecodes without its keys; privfl itself starts and ends
sessions from the thread that runs them, and the upload pool's helper threads only load and
add ciphertexts, which needs no evaluation key.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from privfl.crypto.threshold.context import ThresholdContext

__all__ = ["Lease", "held_tags", "holders", "install"]


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
    # tags whose leases ended in a finaliser; list.append and list.pop take no lock
    pending: list[str] = field(default_factory=list)


_STORE = _Store()


class Lease:
    """One holder's claim on the key set installed under ``tag``. Ends once: by
    :meth:`release` or when its owner is garbage-collected, whichever comes first."""

    def __init__(self, tag: str, owner: object) -> None:
        self.tag = tag
        self._finalizer = weakref.finalize(owner, _STORE.pending.append, tag)

    def release(self) -> None:
        """End this lease now (idempotent) and apply every queued release."""
        if self._finalizer.detach() is not None:
            _STORE.pending.append(self.tag)
        _drain()


def install(
    ctx: ThresholdContext,
    tag: str,
    mult: Callable[[], Any],
    automorphism: Callable[[], Any] | None,
    owner: object,
) -> Lease:
    """Install the evaluation keys of ``tag`` in OpenFHE's stores unless they are already
    held, and return ``owner``'s lease on them, which ends when ``owner`` is
    garbage-collected (or earlier by :meth:`Lease.release`). ``mult`` and ``automorphism``
    build the key objects (the relinearisation key; the automorphism key map, or ``None``
    without rotations); they run only when no lease on the tag is open."""
    _drain()
    with _STORE.lock:
        entry = _STORE.entries.get(tag)
        if entry is not None:
            entry.holders += 1
            return Lease(tag, owner)
    built = _Entry(ctx, [mult()], automorphism() if automorphism is not None else None)
    with _STORE.lock:
        entry = _STORE.entries.get(tag)
        if entry is None:  # no other thread installed it while this one built it
            entry = _STORE.entries[tag] = built
            _insert(tag, entry)
        entry.holders += 1
        return Lease(tag, owner)


def held_tags() -> frozenset[str]:
    """The tags whose key sets are installed because a lease on them is open (after applying
    every queued release)."""
    _drain()
    with _STORE.lock:
        return frozenset(_STORE.entries)


def holders(tag: str) -> int:
    """How many open leases hold ``tag`` (after applying every queued release)."""
    _drain()
    with _STORE.lock:
        entry = _STORE.entries.get(tag)
        return 0 if entry is None else entry.holders


def _insert(tag: str, entry: _Entry) -> None:
    entry.ctx.cc.InsertEvalMultKey(entry.mult)
    if entry.automorphism is not None:
        entry.ctx.cc.InsertEvalAutomorphismKey(entry.automorphism, tag)


def _drain() -> None:
    """Apply the queued releases; clear and re-insert the stores once if a tag lost its last
    lease."""
    with _STORE.lock:
        gone: list[_Entry] = []
        while _STORE.pending:
            tag = _STORE.pending.pop()
            entry = _STORE.entries.get(tag)
            if entry is None:
                continue
            entry.holders -= 1
            if entry.holders <= 0:
                gone.append(_STORE.entries.pop(tag))
        if not gone:
            return
        gone[0].ctx.fhe.ClearEvalMultKeys()
        gone[0].ctx.cc.ClearEvalAutomorphismKeys()
        for other, kept in _STORE.entries.items():
            _insert(other, kept)
