"""The threshold aggregator's per-party work on every core: one function over the parties, in
threads (pure plumbing; no protocol logic).

What runs here is checking and decoding each party's message: the signature's SHA-256 over the
upload (``hashlib`` releases the GIL on large buffers), unpacking and range-checking the
coefficients (numpy releases it too). Each call sees only its own party's bytes and returns
its decoded message; the aggregator then combines the results in the config's party order, so
the outcome, and the first error raised (in that order), are those of the sequential loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

__all__ = ["map_parties"]

T = TypeVar("T")
R = TypeVar("R")


def map_parties(fn: Callable[[T], R], items: Sequence[T], workers: int) -> list[R]:
    """``[fn(x) for x in items]``, on up to ``workers`` threads when ``workers > 1``; an
    exception is raised for the first item (in order) whose call raised."""
    if workers <= 1 or len(items) < 2:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(workers, len(items))) as pool:
        return list(pool.map(fn, items))
