"""The aggregator's upload workers: verify, load and sum party uploads on every core.

TenSEAL's SEAL bindings hold the GIL, so threads cannot load ciphertexts in parallel; a
persistent pool of worker *processes* can. :func:`shared_pool` starts the workers once per
process (``forkserver`` context: safe in notebooks and next to OpenFHE/TenSEAL threads),
and keeps them for every later session and aggregator. Per session the aggregator hands each
worker a contiguous chunk of the uploads (as received) and the public
:class:`~privfl.evaluation.fhauc.upload_checks.UploadCheck`; the worker verifies and loads
each upload exactly as the aggregator would (:meth:`UploadCheck.open`), adds them and returns
one serialised partial sum per ciphertext. The aggregator adds the partial sums: SEAL's
additions are exact modulo each prime, so the result is bit-identical to the in-process sum.

What a worker holds: the public CKKS context (evaluation keys, no secret key) and the
session's public facts; it learns what the aggregator learns (nothing in plaintext). The
pipe between the aggregator and its workers is local and private to the process tree.
"""

from __future__ import annotations

import atexit
import hashlib
import multiprocessing
import os
import time
from collections.abc import Sequence
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess

from privfl import errors
from privfl.crypto.ckks import CKKSContext
from privfl.errors import InputError, PrivflError, ProtocolError
from privfl.evaluation.fhauc.ciphertext import as_seal
from privfl.evaluation.fhauc.upload_checks import UploadCheck, sum_uploads
from privfl.messages import Reader, Writer

__all__ = ["MAX_WORKERS", "UploadPool", "default_workers", "resolve_workers", "shared_pool"]

MAX_WORKERS = 64
# Parallel only from this many upload ciphertexts on (all executions): below, the pipe
# transfer and the partial sums cost more than they save
# (``benchmarks/fhauc_scale.py --crossover``).
MIN_PARALLEL_CIPHERTEXTS = 48
# An aggregator provisioned for at least this many parties starts its workers at key setup.
WARM_ROSTER = 16

# one worker's partial sums for one execution: the serialised T, F and D sums
Sums = tuple[list[bytes], list[bytes], list[bytes]]


def default_workers() -> int:
    """The cores this process may run on (``os.sched_getaffinity``, else ``os.cpu_count``),
    at most 8: 1 means the aggregator loads the uploads in its own process."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not Linux
        cores = os.cpu_count() or 1
    return max(1, min(cores, 8))


def resolve_workers(workers: int | None) -> int:
    """``workers`` validated (an int in 1..64), or :func:`default_workers` for ``None``."""
    if workers is None:
        return default_workers()
    if isinstance(workers, bool) or not isinstance(workers, int):
        raise InputError(f"workers must be an integer, got {type(workers).__name__}")
    if not 1 <= workers <= MAX_WORKERS:
        raise InputError(f"workers must be between 1 and {MAX_WORKERS}, got {workers}")
    return workers


_ERRORS: dict[str, type[PrivflError]] = {
    cls.__name__: cls
    for cls in (
        errors.ProtocolError,
        errors.MalformedMessageError,
        errors.WrongProtocolError,
        errors.WrongSessionError,
        errors.UnexpectedStepError,
        errors.UnknownPartyError,
        errors.DecryptionNotPermittedError,
        errors.VerificationError,
        errors.InputError,
    )
}


def _sum_chunk(context: CKKSContext | None, job: Reader, items: list[bytes]) -> Writer:
    """A worker's answer to one ``sum`` job: per execution the serialised (T, F, D) sums."""
    check = UploadCheck.from_bytes(job.bytes_())
    claimed = [job.str_() for _ in range(job.count(1 << 20, "uploads"))]
    if context is None:
        raise ProtocolError("upload worker: no public context")
    if len(claimed) != len(items):
        raise ProtocolError("upload worker: the chunk does not match its names")
    opened = [check.open(context, name, data) for name, data in zip(claimed, items, strict=True)]
    del items[:]
    w = Writer().str_("ok").u32(len(opened[0]))
    for u in sum_uploads(opened, "partial sum"):
        for vec in (u.t, u.f, u.d):
            w.list_([as_seal(c).to_bytes() for c in vec])
    return w


def _worker_main(conn: Connection) -> None:
    """One upload worker's loop (runs in its own process): a ``context`` job replaces the
    public context; a ``sum`` job verifies, loads and sums a chunk of uploads."""
    context: CKKSContext | None = None
    while True:
        try:
            job = Reader(conn.recv_bytes(), "upload job")
            kind = job.str_()
            if kind == "context":
                context = CKKSContext.deserialize(job.bytes_())
                continue
            items = [conn.recv_bytes() for _ in range(job.u32())]  # the chunk, then work
        except (EOFError, OSError):
            return
        c0 = time.process_time()
        try:
            w = _sum_chunk(context, job, items)
        except PrivflError as exc:
            w = Writer().str_("error").str_(type(exc).__name__).str_(str(exc)[:2000])
        except (ValueError, RuntimeError, TypeError) as exc:  # SEAL refused to combine them
            w = Writer().str_("error").str_("MalformedMessageError")
            w.str_(f"the uploads cannot be combined ({exc})"[:2000])
        conn.send_bytes(w.f64(time.process_time() - c0).getvalue())


def _read_reply(data: bytes, executions: int) -> tuple[list[Sums], float]:
    """A worker's reply: its partial sums and CPU seconds; a refusal is raised as the worker
    raised it."""
    r = Reader(data, "upload worker reply")
    if r.str_() == "error":
        cls, message = _ERRORS.get(r.str_(), ProtocolError), r.str_()
        raise cls(message)
    if r.u32() != executions:
        raise ProtocolError("upload worker: wrong number of executions")
    sums = [(r.list_(), r.list_(), r.list_()) for _ in range(executions)]
    cpu = r.f64()
    r.end()
    return sums, cpu


class UploadPool:
    """``workers`` persistent upload worker processes (see the module docstring)."""

    def __init__(self, workers: int) -> None:
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["privfl.evaluation.fhauc.upload_pool"])
        self.workers = workers
        self._conns: list[Connection] = []
        self._procs: list[BaseProcess] = []
        self._context_key: list[bytes] = []
        for _ in range(workers):
            mine, theirs = ctx.Pipe(duplex=True)
            proc = ctx.Process(target=_worker_main, args=(theirs,), daemon=True)
            proc.start()
            theirs.close()
            self._conns.append(mine)
            self._procs.append(proc)
            self._context_key.append(b"")

    @property
    def alive(self) -> bool:
        """True while every worker process runs."""
        return bool(self._procs) and all(p.is_alive() for p in self._procs)

    def warm(self, public_context: bytes) -> None:
        """Hand the public context to every worker now (each loads it while the caller goes
        on), so that the first session does not wait for it."""
        key = hashlib.sha256(public_context).digest()
        for w, conn in enumerate(self._conns):
            if self._context_key[w] != key:
                conn.send_bytes(Writer().str_("context").bytes_(public_context).getvalue())
                self._context_key[w] = key

    def sum_uploads(
        self, public_context: bytes, check: UploadCheck, items: Sequence[tuple[str, bytes]]
    ) -> tuple[list[list[Sums]], float]:
        """Split ``items`` ((claimed sender, upload bytes), in order) into contiguous chunks,
        one per worker; returns each worker's serialised partial sums per execution and the
        workers' CPU seconds. The first refusal, in the order of ``items``, is raised as the
        worker raised it (every worker's answer is read first, so the pipes stay in step)."""
        n = min(self.workers, len(items))
        bounds = [len(items) * w // n for w in range(n + 1)]
        header = check.to_bytes()
        try:
            self.warm(public_context)
            for w in range(n):
                chunk = items[bounds[w] : bounds[w + 1]]
                job = Writer().str_("sum").u32(len(chunk)).bytes_(header).u32(len(chunk))
                for name, _ in chunk:
                    job.str_(name)
                self._conns[w].send_bytes(job.getvalue())
                for _, data in chunk:
                    self._conns[w].send_bytes(data)
            replies = [self._conns[w].recv_bytes() for w in range(n)]
        except (EOFError, OSError) as exc:
            self.close()
            raise ProtocolError(f"an upload worker stopped ({exc!r})") from None
        partials, cpu = [], 0.0
        for data in replies:
            sums, seconds = _read_reply(data, check.executions)
            partials.append(sums)
            cpu += seconds
        return partials, cpu

    def close(self) -> None:
        """Stop the workers (their loops end when the pipe closes)."""
        for conn in self._conns:
            conn.close()
        for proc in self._procs:
            proc.join(timeout=2)
            if proc.is_alive():
                proc.terminate()
        self._conns, self._procs, self._context_key = [], [], []


_POOLS: dict[int, UploadPool] = {}


def shared_pool(workers: int) -> UploadPool:
    """This process's pool of ``workers`` upload workers, started on first use and reused by
    every later session and aggregator (a pool whose worker died is replaced)."""
    pool = _POOLS.get(workers)
    if pool is None or not pool.alive:
        if pool is not None:
            pool.close()
        pool = _POOLS[workers] = UploadPool(workers)
    return pool


@atexit.register
def _close_pools() -> None:
    for pool in _POOLS.values():
        pool.close()
    _POOLS.clear()
