"""Batched conversations of the center server (CS).

A :data:`~privfl.forest.messages.Job` yields one message at a time. Independent
conversations (the trees of a forest, the two children of a node, the rows of a test set)
need not wait for each other, so the CS runs them as :data:`Par` jobs, which yield a *batch*
of messages (a tuple of :class:`~privfl.forest.messages.Outgoing`) and receive the replies
in the same order. :func:`gather` runs several ``Par`` jobs in lockstep; :func:`lift` turns
a single-message job into a ``Par`` job.

The batching changes neither the messages nor what any role learns: every role answers the
messages addressed to it one by one, in the batch's order. It only decides how many network
rounds a deployment needs: one per batch (depth-many for a whole forest), not one per
message. The in-process runner and the Flower ServerApp drive the same ``Par`` jobs, so a
deployment grows exactly the forest the in-process runner grows from the same seed.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable
from typing import TypeVar

from privfl.errors import ProtocolError
from privfl.forest.messages import Job, Outgoing

T = TypeVar("T")
Batch = tuple[Outgoing, ...]
Par = Generator[Batch, tuple[bytes, ...], T]


def lift(job: Job[T]) -> Par[T]:
    """A one-message-at-a-time job as a job of one-message batches."""
    try:
        out = next(job)
        while True:
            replies = yield (out,)
            if len(replies) != 1:
                raise ProtocolError(f"one reply expected, got {len(replies)}")
            out = job.send(replies[0])
    except StopIteration as stop:
        result: T = stop.value
        return result


def gather(jobs: Iterable[Par[T]]) -> Par[list[T]]:
    """Run ``jobs`` in lockstep: each round sends every unfinished job's batch (in the jobs'
    order) as one batch, and hands each job its own replies. Returns their results."""
    todo = list(jobs)
    results: list[T | None] = [None] * len(todo)
    pending: dict[int, Batch] = {}

    def advance(i: int, replies: tuple[bytes, ...] | None) -> None:
        try:
            batch = next(todo[i]) if replies is None else todo[i].send(replies)
        except StopIteration as stop:
            results[i] = stop.value
            return
        if not batch:
            raise ProtocolError("a conversation yielded an empty batch")
        pending[i] = batch

    for i in range(len(todo)):
        advance(i, None)
    while pending:
        order = list(pending)
        sent = {i: pending.pop(i) for i in order}
        replies = yield tuple(o for i in order for o in sent[i])
        if len(replies) != sum(len(b) for b in sent.values()):
            raise ProtocolError(f"{len(replies)} replies to a batch of another size")
        pos = 0
        for i in order:
            k = len(sent[i])
            advance(i, tuple(replies[pos : pos + k]))
            pos += k
    return results  # type: ignore[return-value]
