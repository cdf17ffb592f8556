"""The upload pool's shared queue: uploads handed out one at a time, as each process is free.

The aggregator's process owns the queue (the uploads in the order they arrived). It takes
uploads for itself one at a time and, between two of its own, grants one more to each
helper that asked (:class:`SharedQueue`), so that no process idles while another still has
a backlog: an equal split made one process wait for the other whenever their speeds differed
(the aggregator's process also writes the helpers' uploads; on a loaded machine either core
may be the slower one).

Per session and helper, on the helper's pipe: a ``sum`` job (the public
:class:`~privfl.evaluation.fhauc.upload_checks.UploadCheck` and the path of a memory file),
then ``grant`` messages (the first upload's index, the claimed senders, the sizes and the
offset in the helper's memory file, where the aggregator's process wrote the uploads' bytes
just before) and one ``end``. The helper (:func:`serve_sum`) answers each grant when it
starts on it with ``more`` (so one more is queued while it works) and, after ``end``, with its
partial sums or with its first refusal and that upload's index. Uploads are handed out in
order and every granted upload is checked, so the refusal with the smallest index over all
processes is the one the in-process loop raises first.

What a helper holds and learns is the aggregator's (:mod:`.upload_pool`): public values only.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait

from privfl.crypto.ckks import CKKSContext
from privfl.errors import MalformedMessageError, PrivflError, ProtocolError
from privfl.evaluation.fhauc.ciphertext import as_seal
from privfl.evaluation.fhauc.upload_checks import UploadCheck, sum_uploads
from privfl.evaluation.fhauc.uploads import Upload
from privfl.messages import Reader, Writer

__all__ = ["MORE", "MemFile", "SharedQueue", "serve_sum"]

AHEAD = 2  # grants a helper holds when it starts on one: the one it works on and the next
MAX_UPLOADS = 1 << 20
MESSAGE_BYTES = 1 << 14  # a refusal's text, as the helper raised it
MORE = Writer().str_("more").getvalue()
_END = Writer().str_("end").getvalue()

Opener = Callable[[str, bytes], list[Upload]]


KEEP_BYTES = 32 << 20  # what a helper's memory file keeps allocated between sessions


class MemFile:
    """The memory file (``memfd``; elsewhere a private temporary file) through which one
    helper receives the bytes of its uploads, kept for the helper's lifetime: writing into
    pages a previous session allocated costs 0.050 instead of 0.074 ms per 184 KB upload
    (``benchmarks/fhauc_scale.py --load``). Each session writes from offset 0 and a helper
    reads only the ranges its grants name."""

    def __init__(self) -> None:
        if hasattr(os, "memfd_create"):
            self.fd = os.memfd_create("privfl-uploads")
            self.path = f"/proc/{os.getpid()}/fd/{self.fd}"
        else:  # pragma: no cover - not Linux: a private temporary file
            self.fd, self.path = tempfile.mkstemp(prefix="privfl-uploads-")

    def write_at(self, offset: int, data: bytes) -> None:
        """Write all of ``data`` at ``offset`` (finishing a short write)."""
        view, done = memoryview(data), 0
        while done < len(view):
            done += os.pwrite(self.fd, view[done:], offset + done)

    def trim(self) -> None:
        """Free what a large session left beyond :data:`KEEP_BYTES`."""
        if self.fd >= 0 and os.fstat(self.fd).st_size > KEEP_BYTES:
            os.ftruncate(self.fd, KEEP_BYTES)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            if not self.path.startswith("/proc/"):  # pragma: no cover - not Linux
                os.unlink(self.path)
            self.fd = -1


@dataclass
class _Lane:
    """One helper's side of the queue: its pipe ends, its memory file and how far this
    session has filled it."""

    send: Connection
    recv: Connection
    file: MemFile
    offset: int = 0
    ended: bool = False


class SharedQueue:
    """The aggregator process's side (see the module docstring): ``items`` are the
    (claimed sender, upload bytes) pairs in arrival order, ``lanes`` one (send pipe,
    receive pipe, memory file) per helper taking part. A pipe out of step or closed is an
    :class:`EOFError` (the pool then starts afresh), never an upload's refusal."""

    def __init__(
        self,
        items: Sequence[tuple[str, bytes]],
        lanes: Sequence[tuple[Connection, Connection, MemFile]],
    ) -> None:
        self._items = items
        self._next = 0  # the first upload nobody has taken yet
        self._lanes = [_Lane(send, recv, file) for send, recv, file in lanes]
        self.current = -1  # the index of the upload this process is on (its refusal's)
        self.own_done = False  # :meth:`own` has handed out its last upload

    def start(self, check: UploadCheck) -> None:
        """Send every helper its job and its first :data:`AHEAD` grants (round robin)."""
        header = check.to_bytes()
        for lane in self._lanes:
            job = Writer().str_("sum").bytes_(header).bytes_(lane.file.path.encode())
            lane.send.send_bytes(job.getvalue())
        for _ in range(AHEAD):
            for lane in self._lanes:
                self._grant(lane)

    def _grant(self, lane: _Lane) -> None:
        """The next upload for ``lane`` (its bytes appended to the lane's memory file), or
        ``end`` when none is left."""
        if lane.ended:
            return
        if self._next >= len(self._items):
            lane.send.send_bytes(_END)
            lane.ended = True
            return
        index, (name, data) = self._next, self._items[self._next]
        self._next += 1
        offset = lane.offset
        lane.file.write_at(offset, data)
        lane.offset += len(data)
        grant = Writer().str_("grant").u64(index).u32(1)
        grant.bytes_(name.encode("utf-8", "surrogatepass"))  # as it arrived
        lane.send.send_bytes(grant.u64(len(data)).u64(offset).getvalue())

    def _serve(self) -> None:
        """Grant one more upload for each ``more`` waiting from a helper (never blocks)."""
        busy = {id(lane.recv): lane for lane in self._lanes if not lane.ended}
        for conn in wait([lane.recv for lane in busy.values()], timeout=0):
            if not isinstance(conn, Connection):  # pragma: no cover - wait() returns them
                continue
            lane = busy[id(conn)]
            while not lane.ended and conn.poll():
                if conn.recv_bytes() != MORE:
                    raise EOFError("an upload worker answered before the end of the session")
                self._grant(lane)

    def own(self, open_one: Opener) -> Iterator[list[Upload]]:
        """This process's uploads, opened one at a time by ``open_one`` (the same checks as
        the helpers'), taken from the queue as the helpers' requests are served."""
        while True:
            self._serve()
            if self._next >= len(self._items):
                self.own_done = True
                return
            self.current = self._next
            self._next += 1
            name, data = self._items[self.current]
            yield open_one(name, data)

    def finish(self) -> list[bytes]:
        """Stop handing out uploads, end every helper's job and return each helper's final
        answer (its partial sums or its refusal), in lane order."""
        self._next = len(self._items)
        for lane in self._lanes:
            self._grant(lane)  # an `end` for every lane not ended yet
        replies = []
        for lane in self._lanes:
            data = lane.recv.recv_bytes()
            while data == MORE:  # a request sent before its `end` arrived
                data = lane.recv.recv_bytes()
            replies.append(data)
        return replies

    def close(self) -> None:
        """Free what this session left in the memory files beyond :data:`KEEP_BYTES`."""
        for lane in self._lanes:
            lane.file.trim()


def _text(message: str) -> bytes:
    return message.encode("utf-8")[:MESSAGE_BYTES]


def serve_sum(
    context: CKKSContext | None, job: Reader, conn: Connection, out: Connection
) -> Writer:
    """A helper's side of one ``sum`` job (runs in the helper process): open and add every
    upload it is granted, until ``end``; returns its final answer: per execution the
    serialised (T, F, D) partial sums (none if it was granted nothing), or its first
    refusal (the grants after it are read and left)."""
    current, ended, fd = -1, False, -1

    def granted() -> Iterator[list[Upload]]:
        nonlocal current, ended, fd
        check = UploadCheck.from_bytes(job.bytes_())
        path = job.bytes_(4096).decode()
        job.end()
        if context is None:
            raise ProtocolError("upload worker: no public context")
        fd = os.open(path, os.O_RDONLY)
        while True:
            grant = Reader(conn.recv_bytes(), "upload grant")
            if grant.str_() == "end":
                grant.end()
                ended = True
                return
            first = grant.u64()
            # a name as the transport delivered it, however long: refused by the same
            # check as in the aggregator's process, not by this pipe's format
            names = [grant.bytes_() for _ in range(grant.count(MAX_UPLOADS, "uploads"))]
            sizes = [grant.u64() for _ in names]
            offset = grant.u64()
            grant.end()
            out.send_bytes(MORE)
            for k, (name, size) in enumerate(zip(names, sizes, strict=True)):
                current = first + k
                data = os.pread(fd, size, offset)
                offset += size
                if len(data) != size:
                    raise ProtocolError("upload worker: the memory file is short")
                yield check.open(context, name.decode("utf-8", "surrogatepass"), data)

    try:
        sums = sum_uploads(granted(), "partial sum")
    except PrivflError as exc:
        return _refuse(conn, ended, current, exc)
    except (ValueError, RuntimeError, TypeError) as exc:
        if ended and current < 0:  # granted nothing: no partial sum
            sums = []
        else:  # SEAL refused to combine them, as the aggregator's own loop refuses
            refused = MalformedMessageError(f"the uploads cannot be combined ({exc})")
            return _refuse(conn, ended, current, refused)
    finally:
        if fd >= 0:
            os.close(fd)
    w = Writer().str_("ok").u32(len(sums))
    for u in sums:
        for vec in (u.t, u.f, u.d):
            w.list_([as_seal(c).to_bytes() for c in vec])
    return w


def _refuse(conn: Connection, ended: bool, index: int, exc: PrivflError) -> Writer:
    """The final answer for a refused upload (the index, the error's class and text),
    after reading (and leaving) the job's remaining grants up to its ``end``."""
    while not ended:
        ended = Reader(conn.recv_bytes(), "upload grant").str_() == "end"
    # a refusal before any upload (no context, a malformed job) counts as the first one's
    w = Writer().str_("error").u64(max(index, 0)).str_(type(exc).__name__)
    return w.bytes_(_text(str(exc)))
