"""OpenFHE's threading, chosen by privfl: how many OpenMP threads and how idle ones wait.

OpenFHE parallelises its inner loops (per RNS tower, per key digit) with OpenMP; the wheel
bundles its own ``libgomp``, which reads ``OMP_NUM_THREADS`` and ``OMP_WAIT_POLICY`` from
the environment **once, when the library is loaded** (the first ``import openfhe`` of a
process). Its defaults, one thread per core and idle threads that spin before they sleep,
are fragile on a shared machine: with one other CPU-bound process on 2 cores, every
parallel loop waits for a thread that is descheduled or spinning against it, and the
threshold FHAUC aggregator was measured 36 times slower than single-key FHAUC
(``benchmarks/fhauc_threshold.py --busy``).

So before the first import of ``openfhe`` (:func:`privfl.crypto.threshold.params.require_openfhe`)
privfl sets, for OpenFHE's runtime only:

* ``OMP_WAIT_POLICY=passive``: an idle thread sleeps at once instead of spinning;
* ``OMP_NUM_THREADS=``:data:`DEFAULT_THREADS` (1): FHAUC's and the training protocol's
  OpenFHE calls are many short loops over a few towers, where a second thread gains little on
  a quiet machine and loses much on a busy one (see docs/guide/performance.md).

Each is set only if the user has not set it (their value wins); ``PRIVFL_OPENFHE_THREADS``, if
set, chooses the thread count for OpenFHE alone (over ``OMP_NUM_THREADS``). Both
variables are restored right after the import, so neither subprocesses nor OpenMP libraries
loaded later see privfl's choice. If ``openfhe`` was imported before privfl could choose
(by the user's own code), nothing can be changed any more: :func:`import_openfhe` logs it.
"""

from __future__ import annotations

import importlib
import logging
import os
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from types import ModuleType

from privfl.errors import InputError

__all__ = ["DEFAULT_THREADS", "THREADS_VARIABLE", "OpenMPChoice", "import_openfhe"]

log = logging.getLogger(__name__)

DEFAULT_THREADS = 1
DEFAULT_WAIT_POLICY = "passive"
MAX_THREADS = 1024
THREADS_VARIABLE = "PRIVFL_OPENFHE_THREADS"
_LOCK = threading.Lock()


@dataclass(frozen=True)
class OpenMPChoice:
    """What OpenFHE's OpenMP runtime was loaded with in this process, and who chose it."""

    threads: str
    wait_policy: str
    chosen_by: str  # "privfl", "user", "both" or "unknown" (openfhe imported before privfl)


_choice: OpenMPChoice | None = None


def choice() -> OpenMPChoice | None:
    """The settings OpenFHE was loaded with through privfl (None before the first import)."""
    return _choice


def planned(environ: dict[str, str] | None = None) -> dict[str, str]:
    """The OpenMP variables privfl would set for an import now (the user's own win;
    ``PRIVFL_OPENFHE_THREADS`` over ``OMP_NUM_THREADS``)."""
    env = dict(os.environ if environ is None else environ)
    out = {}
    if THREADS_VARIABLE in env:  # the most specific setting wins
        threads = env[THREADS_VARIABLE].strip()
        if not (threads.isascii() and threads.isdigit() and 1 <= int(threads) <= MAX_THREADS):
            raise InputError(
                f"{THREADS_VARIABLE}={threads!r}: give a number of OpenFHE threads between 1 "
                f"and {MAX_THREADS}"
            )
        out["OMP_NUM_THREADS"] = threads
    elif "OMP_NUM_THREADS" not in env:
        out["OMP_NUM_THREADS"] = str(DEFAULT_THREADS)
    if "OMP_WAIT_POLICY" not in env:
        out["OMP_WAIT_POLICY"] = DEFAULT_WAIT_POLICY
    return out


@contextmanager
def _environment(values: dict[str, str]) -> Iterator[None]:
    """``values`` in ``os.environ`` for the duration, then the previous state back."""
    before = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def import_openfhe() -> ModuleType:
    """Import ``openfhe`` with privfl's OpenMP choice (see the module docstring); raises
    ImportError if it is not installed."""
    global _choice
    with _LOCK:
        module = sys.modules.get("openfhe")
        if module is not None:
            if _choice is None:
                _choice = OpenMPChoice(
                    os.environ.get("OMP_NUM_THREADS", "default"),
                    os.environ.get("OMP_WAIT_POLICY", "default"),
                    "unknown",
                )
                log.info(
                    "openfhe was imported before privfl: its OpenMP threads keep the settings "
                    "of that import (set OMP_NUM_THREADS/OMP_WAIT_POLICY before it)"
                )
            return module
        ours = planned()
        with _environment(ours):
            module = importlib.import_module("openfhe")
            _choice = OpenMPChoice(
                os.environ["OMP_NUM_THREADS"],
                os.environ["OMP_WAIT_POLICY"],
                ("user", "both", "privfl")[(len(ours) > 0) + (len(ours) == 2)],
            )
        return module
