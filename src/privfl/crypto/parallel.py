"""Independent big-integer work (DT-PKC packs) on several cores from one process: a thread
pool whose threads let gmpy2 release the GIL during its arithmetic (gmpy2's
``allow_release_gil``, set only in these threads; the inputs are immutable mpz values, so
no two threads share a mutable integer). Results come back in the items' order; an
exception in any item is raised by :func:`thread_map`.

Threads: ``PRIVFL_DTPKC_THREADS`` if set (1 = no pool), else the cores this process may run
on, at most 8."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

import gmpy2

from privfl.errors import InputError

T = TypeVar("T")
R = TypeVar("R")
MAX_THREADS = 64


def default_threads() -> int:
    """``PRIVFL_DTPKC_THREADS`` (1..64), else the usable cores, at most 8."""
    raw = os.environ.get("PRIVFL_DTPKC_THREADS")
    if raw is not None:
        if not raw.isdigit() or not 1 <= int(raw) <= MAX_THREADS:
            raise InputError(f"PRIVFL_DTPKC_THREADS must be 1..{MAX_THREADS}, got {raw!r}")
        return int(raw)
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, 8))


def _release_gil() -> None:
    gmpy2.get_context().allow_release_gil = True


@functools.lru_cache(maxsize=4)
def _pool(threads: int) -> ThreadPoolExecutor:
    return ThreadPoolExecutor(threads, "privfl-dtpkc", initializer=_release_gil)


def thread_map(fn: Callable[[T], R], items: Sequence[T], threads: int | None = None) -> list[R]:
    """``[fn(x) for x in items]``, spread over ``threads`` threads (default
    :func:`default_threads`) when there are at least two items and two threads."""
    n = default_threads() if threads is None else threads
    if n < 2 or len(items) < 2:
        return [fn(x) for x in items]
    return list(_pool(n).map(fn, items))
