"""The aggregator's upload workers: verify, load and sum party uploads on every core.

TenSEAL's SEAL bindings hold the GIL, so threads cannot load ciphertexts in parallel; a
persistent pool of helper *processes* can. :func:`shared_pool` starts them once per process
(fresh interpreters, ``python -m``: safe in notebooks, in scripts without a
``__main__`` guard and next to OpenFHE/TenSEAL threads) and keeps
them for every later session and aggregator. Per session the uploads (as received) are
handed out one at a time from a queue the aggregator's process owns
(:mod:`~privfl.evaluation.fhauc.upload_queue`): it takes the next one for itself, and grants
the next one to each helper that asks (its bytes appended to that helper's memory file,
``memfd``, which the helper reads at its own pace), so every process works until the queue is
empty. A helper verifies and loads each upload exactly as the aggregator would
(:meth:`UploadCheck.open`), adds them as they come and returns one serialised partial sum per
ciphertext. The aggregator adds the partial sums: SEAL's additions are exact modulo each
prime, so the result is bit-identical to the in-process sum, whoever took which upload.
(Feeding the uploads through the pipe itself was slower: the sending thread waited for the
GIL between pipe buffers while this process loaded ciphertexts, which starved the helper of
the 1.1 MB malicious uploads.)

What a worker holds: the public CKKS context (evaluation keys, no secret key) and the
session's public facts; it learns what the aggregator learns (nothing in plaintext). The
pipes and memory files between the aggregator and its helpers are local to the process tree
(a memory file is reachable only by processes of the same user).
"""

from __future__ import annotations

import atexit
import hashlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection

import privfl
from privfl import errors
from privfl.crypto.ckks import CKKSContext
from privfl.errors import InputError, MalformedMessageError, PrivflError, ProtocolError
from privfl.evaluation.fhauc.ciphertext import HECiphertext
from privfl.evaluation.fhauc.upload_checks import UploadCheck, sum_uploads
from privfl.evaluation.fhauc.upload_queue import MESSAGE_BYTES, MemFile, SharedQueue, serve_sum
from privfl.evaluation.fhauc.uploads import Upload
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


def worker_main(conn: Connection, out: Connection) -> None:
    """One upload worker's loop (runs in its own process, reads ``conn``, answers on
    ``out``): a ``context`` job replaces the public context; a ``sum`` job verifies, loads
    and sums the uploads the aggregator's process grants it
    (:func:`~privfl.evaluation.fhauc.upload_queue.serve_sum`)."""
    context: CKKSContext | None = None
    while True:
        try:
            job = Reader(conn.recv_bytes(), "upload job")
            kind = job.str_()
            if kind == "context":
                context = CKKSContext.deserialize(job.bytes_())
                continue
            c0 = time.process_time()
            w = serve_sum(context, job, conn, out)
            out.send_bytes(w.f64(time.process_time() - c0).getvalue())
        except (EOFError, OSError):
            return


def _load(
    context: CKKSContext, *vectors: list[bytes]
) -> tuple[list[HECiphertext], list[HECiphertext], list[HECiphertext]]:
    t, f, d = ([context.ciphertext_from_bytes(b) for b in v] for v in vectors)
    return list[HECiphertext](t), list[HECiphertext](f), list[HECiphertext](d)


def _read_reply(
    data: bytes, executions: int
) -> tuple[tuple[int, PrivflError] | None, list[Sums], float]:
    """A worker's final answer: its refusal (the upload's index and the error, as the
    worker raised it) or its partial sums (none if it was granted nothing), and its CPU
    seconds."""
    r = Reader(data, "upload worker reply")
    if r.str_() == "error":
        index = r.u64()
        cls = _ERRORS.get(r.str_(), ProtocolError)
        message = r.bytes_(MESSAGE_BYTES).decode("utf-8", errors="replace")
        cpu = r.f64()
        r.end()
        return (index, cls(message)), [], cpu
    count = r.u32()
    if count not in (0, executions):
        raise ProtocolError("upload worker: wrong number of executions")
    sums = [(r.list_(), r.list_(), r.list_()) for _ in range(count)]
    cpu = r.f64()
    r.end()
    return None, sums, cpu


@dataclass
class _Helper:
    """One helper process and the two pipe ends the caller talks to it through."""

    proc: subprocess.Popen[bytes]
    send: Connection
    recv: Connection
    file: MemFile
    context_key: bytes = b""


def _widen(fd: int) -> None:
    """Give the pipe to a helper Linux's largest buffer (``/proc/sys/fs/pipe-max-size``,
    1 MiB by default): the public context (several MB) goes over in fewer round trips."""
    try:
        import fcntl

        with open("/proc/sys/fs/pipe-max-size") as fh:
            fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, int(fh.read()))
    except (ImportError, AttributeError, OSError, ValueError):  # pragma: no cover - not Linux
        pass


HELPER_MODULE = "privfl.evaluation.fhauc.upload_helper"


def _start_helper() -> _Helper:
    """A fresh interpreter running :func:`worker_main` (``python -m`` :data:`HELPER_MODULE`,
    which the package never imports): unlike
    ``multiprocessing``'s spawn and forkserver it never re-imports the caller's ``__main__``
    script, and it inherits no thread and no lock of the caller."""
    to_child, from_child = os.pipe(), os.pipe()
    src = os.path.dirname(os.path.dirname(os.path.abspath(privfl.__file__)))
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p)
    proc = subprocess.Popen(  # noqa: S603 - this interpreter, a fixed module, two fd numbers
        [sys.executable, "-m", HELPER_MODULE, str(to_child[0]), str(from_child[1])],
        pass_fds=(to_child[0], from_child[1]),
        stdin=subprocess.DEVNULL,
        env=env,
    )
    os.close(to_child[0])
    os.close(from_child[1])
    _widen(to_child[1])
    return _Helper(
        proc,
        Connection(to_child[1], readable=False),
        Connection(from_child[0], writable=False),
        MemFile(),
    )


class UploadPool:
    """``helpers`` persistent upload worker processes next to the caller's (see the module
    docstring): with ``helpers + 1`` chunks the caller loads one itself."""

    def __init__(self, helpers: int) -> None:
        self._helpers = [_start_helper() for _ in range(helpers)]
        self._lock = threading.RLock()  # one session (or warm-up) at a time on the pipes
        self.pid = os.getpid()
        # the last public context hashed, and its digest: the aggregator passes the same
        # bytes object every session, so its several MB are hashed once, not per session
        self._context: tuple[bytes, bytes] | None = None

    @property
    def alive(self) -> bool:
        """True while every worker process runs."""
        return bool(self._helpers) and all(h.proc.poll() is None for h in self._helpers)

    def warm(self, public_context: bytes) -> None:
        """Hand the public context to every worker now (each loads it while the caller goes
        on), so that the first session does not wait for it. A helper that died is noticed
        by the next session (:func:`shared_pool` replaces the pool)."""
        if self._context is None or self._context[0] is not public_context:
            key = hashlib.sha256(public_context).digest()
            if type(public_context) is bytes:  # immutable: the same object, the same digest
                self._context = (public_context, key)
        else:
            key = self._context[1]
        with self._lock:
            for helper in self._helpers:
                if helper.context_key != key:
                    job = Writer().str_("context").bytes_(public_context).getvalue()
                    try:
                        helper.send.send_bytes(job)
                    except OSError:
                        continue
                    helper.context_key = key

    def sum_uploads(
        self,
        context: CKKSContext,
        public_context: bytes,
        check: UploadCheck,
        items: Sequence[tuple[str, bytes]],
    ) -> tuple[list[list[Upload]], float]:
        """Verify, load and add ``items`` ((claimed sender, upload bytes), in order) in this
        process (``context``: the caller's public context) and in the helpers, each taking
        the next upload when it is free (:class:`~.upload_queue.SharedQueue`). Returns per
        process that took any and per execution the partial sum as an :class:`Upload`, and
        the helpers' CPU seconds. The refusal of the first refused upload, in the order of
        ``items``, is raised as it was raised (every helper's answer is read first, so the
        pipes stay in step)."""
        with self._lock:  # one session at a time on the pipes
            helpers = self._helpers[: max(0, min(len(self._helpers), len(items) - 1))]
            queue = SharedQueue(items, [(h.send, h.recv, h.file) for h in helpers])
            refused: list[tuple[int, PrivflError]] = []
            local: list[Upload] = []
            try:
                self.warm(public_context)
                queue.start(check)
                try:
                    local = sum_uploads(
                        queue.own(lambda name, data: check.open(context, name, data)),
                        "partial sum 0",
                    )
                except PrivflError as exc:
                    refused.append((queue.current, exc))
                except (ValueError, RuntimeError, TypeError) as exc:  # as the helpers refuse
                    if not (queue.own_done and queue.current < 0):  # else: it took none
                        error = MalformedMessageError(f"the uploads cannot be combined ({exc})")
                        refused.append((queue.current, error))
                replies = queue.finish()
            except (EOFError, OSError) as exc:
                self.close()
                raise ProtocolError(f"an upload worker stopped ({exc!r})") from None
            except BaseException:  # the pipes may be out of step: start afresh next time
                self.close()
                raise
            finally:
                queue.close()
            partials, cpu = [local] if local else [], 0.0
            for w, data in enumerate(replies, 1):
                refusal, sums, seconds = _read_reply(data, check.executions)
                cpu += seconds
                if refusal is not None:
                    refused.append(refusal)
                if sums:
                    partials.append(
                        [
                            Upload(f"partial sum {w}", check.session, *_load(context, t, f, d), e)
                            for e, (t, f, d) in enumerate(sums)
                        ]
                    )
            if refused:
                raise min(refused, key=lambda r: r[0])[1]
            return partials, cpu

    def close(self) -> None:
        """Stop the helpers (their loops end when their pipe closes)."""
        for helper in self._helpers:
            helper.send.close()
            helper.recv.close()
            helper.file.close()
        for helper in self._helpers:
            try:
                helper.proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                helper.proc.kill()
                helper.proc.wait()
        self._helpers = []


_POOLS: dict[int, UploadPool] = {}


def shared_pool(workers: int) -> UploadPool:
    """This process's pool for ``workers`` loading processes in all (``workers - 1`` helper
    processes next to the caller's), started on first use and reused by every later session
    and aggregator (a pool whose helper died is replaced)."""
    if workers < 2:
        raise InputError("an upload pool needs at least 2 workers (1: in process)")
    pool = _POOLS.get(workers)
    if pool is not None and pool.pid != os.getpid():  # a forked child: its own helpers
        pool = None
    if pool is None or not pool.alive:
        if pool is not None:
            pool.close()
        pool = _POOLS[workers] = UploadPool(workers - 1)
    return pool


@atexit.register
def _close_pools() -> None:
    for pool in _POOLS.values():
        pool.close()
    _POOLS.clear()
