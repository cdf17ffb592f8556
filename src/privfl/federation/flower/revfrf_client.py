"""Flower ClientApp running a RevFRF node: a participant (its feature columns), the
computation provider (CC) or a requester, chosen by the node config, through
:class:`privfl.federation.revfrf_node.Node` (the same role objects as in process).

Node configuration (``flower-supernode --node-config '...'``), node-local only:

``role``        ``participant``, ``cc`` or ``requester``
``keys-dir``    the node's folder written by ``privfl forest keys init`` (a participant's or
                requester's name is its folder's name; the CC's folder is ``CC``)
``data-file``   participant: CSV/Parquet with ``id-column`` and its feature columns (in the
                order provisioned); requester: one row per query, every feature of the forest
                in the participants' order, no id column
``test-file``   participant: its test rows (same columns), aligned by PSI for FRF-Test
``id-column``   default ``id``;  ``output-dir``: where its results go (default ``.``)
``leave``       participant: ``true`` to sign a revocation request when the CS asks (its
                own consent to leave the forest; default ``false``: it refuses)

A ClientApp may be a fresh process per message, so every batch rebuilds the node from its
folder and files; its progress (PSI scalar and order, aligned rows, pending candidates and
thresholds, CC's revocations) stays in the node-local ``context.state``. A failed step
answers with a fixed code, never the exception's text (it may hold the node's own data).
"""

from __future__ import annotations

import time
from logging import ERROR
from pathlib import Path

from flwr.app import ConfigRecord, Context, Message
from flwr.clientapp import ClientApp
from flwr.common.logger import log

from privfl.errors import (
    InputError,
    MalformedMessageError,
    ProtocolError,
    UnknownPartyError,
    VerificationError,
)
from privfl.federation.flower import timing
from privfl.federation.flower.payload import pack, unpack
from privfl.federation.flower.timing import Phases
from privfl.federation.revfrf_keys import load_node
from privfl.federation.revfrf_node import Node, NodeFiles

app = ClientApp()
STATE = "privfl-revfrf"

FAILURE_CODES: tuple[tuple[type[Exception], str], ...] = (
    (VerificationError, "verification-failed"),
    (UnknownPartyError, "unknown-party"),
    (MalformedMessageError, "malformed-message"),
    (ProtocolError, "refused"),
    (InputError, "bad-local-input"),
)


def failure_code(exc: Exception) -> str:
    return next((code for cls, code in FAILURE_CODES if isinstance(exc, cls)), "error")


def _setting(context: Context, key: str, default: str | None = None) -> str | None:
    value = context.node_config.get(key)
    return default if value is None else str(value)


def _node(context: Context, state: dict[str, bytes]) -> Node:
    role = _setting(context, "role")
    keys_dir = _setting(context, "keys-dir")
    if not role or not keys_dir:
        raise InputError("node config needs role and keys-dir")
    files = NodeFiles(
        _setting(context, "data-file"), _setting(context, "test-file"),
        _setting(context, "id-column", "id") or "id", _setting(context, "output-dir", ".") or ".",
        str(context.node_config.get("leave", "false")).lower() == "true",
    )  # fmt: skip
    return Node(role, load_node(Path(keys_dir), role), files, state)


def _fail(message: Message, exc: Exception) -> Message:
    log(ERROR, "privfl RevFRF node failed: %s: %s", type(exc).__name__, exc)  # local log only
    return Message(pack(status="error", reason=failure_code(exc)), reply_to=message)


@app.query("revfrf_hello")
def hello(message: Message, context: Context) -> Message:
    """Say which role and name this node has."""
    try:
        node = _node(context, {})
    except Exception as exc:
        return _fail(message, exc)
    return Message(pack(status="ok", role=node.role, name=node.name), reply_to=message)


def answer(blobs: list[bytes], context: Context) -> tuple[list[bytes], dict[str, object]]:
    """This node's replies to a batch (and the reply's metadata: status, name, the node's own
    seconds, or a fixed failure code); its state is saved in ``context.state`` either way."""
    record = context.state.get(STATE)
    state = {k: v for k, v in dict(record).items() if isinstance(v, bytes)} if isinstance(
        record, ConfigRecord
    ) else {}  # fmt: skip
    phases = Phases()
    try:
        node = _node(context, state)
        built = time.perf_counter() - phases.t0
        try:
            replies = node.handle_all(blobs)
        finally:
            context.state[STATE] = ConfigRecord(dict(state))
    except Exception as exc:  # reported to the ServerApp, which names this node
        log(ERROR, "privfl RevFRF node failed: %s: %s", type(exc).__name__, exc)  # local only
        return [], {"status": "error", "reason": failure_code(exc)}
    seconds = time.perf_counter() - phases.t0  # the node's own work, for the figures
    meta: dict[str, object] = {"status": "ok", "name": node.name, "seconds": seconds}
    if timing.wanted(context.node_config):
        meta[timing.TIMINGS] = phases.report(load=built + node.load_s)
    return replies, meta


@app.query("revfrf_batch")
def batch(message: Message, context: Context) -> Message:
    """Answer every protocol message of the batch, in order; keep the node's state."""
    try:
        blobs, _ = unpack(message.content, "the ServerApp")
    except Exception as exc:
        return _fail(message, exc)
    replies, meta = answer(blobs, context)
    return Message(pack(replies, **meta), reply_to=message)
