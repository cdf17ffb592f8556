"""One round of a privfl ServerApp: push one message per node, pull the replies from 50 ms on.

Every ServerApp (FHAUC, the private evaluation inside a training job, RevFRF) sends its
rounds through :func:`exchange`, so they share one delivery and one failure rule. Flower's
``grid.send_and_receive`` polls for replies every 3 s (fixed in Flower 1.41); pushing the
messages and pulling the replies after :data:`POLL_S`, then at doubling intervals up to
:data:`POLL_MAX_S` (back to :data:`POLL_S` after each reply), leaves only the SuperNodes' own
cost (their idle poll, the ClientApp process per message) in a round. Every pull is a request
the SuperLink answers from its database: pulling every 50 ms for the whole of a 5 s round
made the SuperLink and the ServerApp the largest CPU cost after the ClientApps in the
real-process tests (issue 31), and a real round's reply cannot come sooner than a fresh
ClientApp process.

Failures, decided on what the ServerApp sees (never on a node's secret): a reply that is a
Flower error (e.g. the SuperLink's "Node Unavailable" for a dead node) or a privfl status
other than ``ok`` stops the round with ``failure`` naming the node (its party once known); a
node without a reply within ``timeout`` seconds stops it naming every missing node.

A node may report its own phases (``timings``: ClientApp process age when the handler began,
node-state load, protocol work; only with its node config ``report-timings = true``, see
:mod:`privfl.federation.flower.timing`): each round is then logged at INFO as ``privfl round
KIND {json}`` with the ServerApp's wall time, the bytes each way and those phases, for
``benchmarks/flower_rounds.py``; otherwise the line goes to DEBUG.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from logging import DEBUG, INFO
from typing import Any

from flwr.app import ArrayRecord, Message, RecordDict
from flwr.common.logger import log
from flwr.serverapp import Grid

from privfl.errors import ProtocolError
from privfl.federation.flower.payload import BLOBS, unpack
from privfl.federation.flower.timing import TIMINGS, phases

POLL_S = 0.05
POLL_MAX_S = 0.2
STREAM_PULL = 16  # replies per pull when each is handed on as it comes (exchange's on_reply)
MAX_REASON = 200  # characters of a node's failure reason or claim quoted in errors

Reply = tuple[list[bytes], dict[str, Any]]


class NodeFailure(ProtocolError):
    """A node did not answer in time, or answered with an error or a malformed message."""


def node_label(node: int, names: Mapping[int, str]) -> str:
    """How errors name a node: its party or role name once known, and its node id."""
    who = names.get(node, f"node {node}")
    return who if who.startswith("node ") else f"{who} (node {node})"


def _bytes(content: RecordDict) -> int:
    record = content.get(BLOBS)
    if not isinstance(record, ArrayRecord):
        return 0
    return sum(int(array.numpy().nbytes) for array in record.values())


def exchange(
    grid: Grid,
    kind: str,
    contents: Mapping[int, RecordDict],
    names: Mapping[int, str],
    timeout: float,
    *,
    failure: type[ProtocolError] = NodeFailure,
    label: str | None = None,
    keep_errors: bool = False,
    on_reply: Callable[[int, list[bytes], dict[str, Any]], None] | None = None,
) -> dict[int, Reply]:
    """Send node ``n`` the content ``contents[n]`` (message type ``query.<kind>``) and return
    every node's checked reply (blobs, metadata). ``names`` names the nodes in errors;
    ``label`` names the round in them (default: ``kind``). ``keep_errors``: a node's error is
    returned (no blobs, metadata ``status``/``reason``/``party``) for the caller to judge with
    :func:`check_reply`; only a missing reply stops the round. ``on_reply(node, blobs,
    meta)``: each checked reply, as it is pulled (at most :data:`STREAM_PULL` per pull); its
    blobs are then not kept (the returned replies hold no blobs), so a round of large replies
    never sits in memory whole; the time it takes moves the round's deadline on (no node is
    late for this process's own work). Runs on the ServerApp."""
    round_name = label or kind
    started = time.perf_counter()
    messages = [
        Message(content=content, dst_node_id=node, message_type=f"query.{kind}")
        for node, content in contents.items()
    ]
    pushed = list(grid.push_messages(messages))  # in order; None (or nothing) if refused
    if len(pushed) != len(messages) or None in pushed:
        refused = [node_label(n, names) for n, i in zip(contents, pushed, strict=False) if not i]
        raise failure(
            f"the SuperLink did not accept the round {round_name} messages for "
            f"{', '.join(refused) or 'every node'} (too large, or malformed); stopping the run"
        )
    ids = [str(i) for i in pushed]
    node_of = dict(zip(ids, contents, strict=True))
    got: dict[int, Reply] = {}
    received = 0  # bytes of the replies' blobs
    handling = 0.0  # seconds in on_reply: this process's own work, not waiting for the round
    deadline = time.monotonic() + timeout
    pause = POLL_S
    while len(got) < len(ids):
        pending = [i for i in ids if node_of[i] not in got]
        size = len(pending) if on_reply is None else STREAM_PULL
        before = len(got)
        swept_at = time.monotonic()  # every reply in by now is pulled below
        for k in range(0, len(pending), size):  # with on_reply: a few replies per pull
            for reply in grid.pull_messages(pending[k : k + size]):
                node = node_of.get(reply.metadata.reply_to_message_id)
                if node is None or node in got:
                    continue  # not a reply to this round's messages
                who = node_label(node, names)
                blobs: list[bytes] = []
                meta: dict[str, Any] = {"status": "error", "reason": ""}
                if reply.has_error():
                    meta["reason"] = str(reply.error.reason)
                else:
                    blobs, meta = unpack(reply.content, who)
                if not keep_errors:
                    check_reply(meta, who, round_name, failure)
                received += sum(len(b) for b in blobs)
                if on_reply is not None:
                    t0 = time.monotonic()
                    on_reply(node, blobs, meta)
                    spent = time.monotonic() - t0
                    handling += spent
                    deadline += spent  # a node is not late for the time this process worked
                    blobs = []
                got[node] = (blobs, meta)
        if len(got) < len(ids):
            if swept_at > deadline:  # a node is silent only if a sweep after the deadline missed it
                missing = [node_label(n, names) for n in contents if n not in got]
                raise failure(
                    f"no reply from {', '.join(missing)} in round {round_name} within "
                    f"{timeout:g} s; stopping the run before any result is produced"
                )
            if len(got) > before:
                pause = POLL_S  # the other replies tend to follow (the nodes run in parallel)
            time.sleep(pause)
            pause = min(2 * pause, POLL_MAX_S)
    wall = time.perf_counter() - started - handling
    _log_round(kind, wall, contents, got, received, handling)
    return got


def check_reply(
    meta: Mapping[str, Any], who: str, round_name: str, failure: type[ProtocolError]
) -> None:
    """Stop the round unless the node answered ``ok``; the error names the node (and the
    party it claims) and the node's fixed failure code, never more."""
    if meta.get("status") == "ok":
        return
    claim = meta.get("party")
    if isinstance(claim, str) and claim not in who:
        who = f"{claim[:MAX_REASON]!r} ({who}, its own claim)"
    reason = str(meta.get("reason", "no reason given"))[:MAX_REASON]  # the node's own text
    raise failure(f"{who} failed in round {round_name}: {reason}")


def _log_round(
    kind: str,
    wall: float,
    contents: Mapping[int, RecordDict],
    got: Mapping[int, Reply],
    received: int,
    handling: float,
) -> None:
    """One line per round: wall time (without ``handling``, the ServerApp's own work on the
    replies as they came, logged apart as ``serverapp``), bytes each way, and the slowest
    node's phases."""
    reported = [p for p in (phases(meta.get(TIMINGS)) for _, meta in got.values()) if p]
    record: dict[str, float] = {
        "wall": round(wall, 3),
        "out": sum(_bytes(c) for c in contents.values()),
        "in": received,
    }
    if handling:
        record["serverapp"] = round(handling, 3)
    if reported:
        slowest = max(reported, key=sum)
        record.update(start=slowest[0], load=slowest[1], work=slowest[2])
        record["flower"] = round(max(0.0, wall - sum(slowest)), 3)
    log(INFO if reported else DEBUG, "privfl round %s %s", kind, json.dumps(record))
