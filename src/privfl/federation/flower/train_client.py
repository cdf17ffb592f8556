"""Flower ClientApp of a training deployment: a thin relay to the node's party process.

Flower starts a fresh process for every message; the party's state (its data, key share,
identity and its steps in flight) lives in the long-lived party process of
:mod:`~privfl.federation.flower.train_party` on the same node. This app passes each
message's bytes to it over the node's Unix socket and returns its answer. It holds nothing
and decides nothing: every check is the party process's.

Node configuration (``flower-supernode --node-config``; node-local, never from the server):

``party-socket``    the party process's socket (``NODE_DIR/party.sock``)
``party-timeout``   seconds to wait for the party process's answer (default 3600)
``report-timings``  ``true``: report this app's phases to the ServerApp
                    (:mod:`~privfl.federation.flower.timing`; ``load`` is the time to reach
                    the party process, ``work`` the party's step)

Message types: ``query.train`` (one setup step or training envelope) and
``query.train_close`` (the end of the session: the server's history as metadata; the party
writes its model and history files and exits).
"""

from __future__ import annotations

from logging import ERROR

from flwr.app import Context, Message
from flwr.clientapp import ClientApp
from flwr.common.logger import log

from privfl.errors import InputError
from privfl.federation.flower import timing
from privfl.federation.flower.payload import pack, unpack
from privfl.federation.flower.timing import Phases
from privfl.federation.flower.train_wire import ask

app = ClientApp()


def _relay(kind: str, message: Message, context: Context) -> Message:
    phases = Phases() if timing.wanted(context.node_config) else None
    try:
        if "party-socket" not in context.node_config:
            raise InputError("node config needs party-socket (the party process's socket)")
        path = str(context.node_config["party-socket"])
        wait = float(str(context.node_config.get("party-timeout", 3600)))
        blobs, meta = unpack(message.content, "the ServerApp")
        if kind == "close":
            data = str(meta.get("history", "")).encode()
        elif len(blobs) == 1:
            data = blobs[0]
        else:
            raise InputError(f"a training message carries {len(blobs)} messages, expected 1")
        if phases is not None:
            phases.loaded()
        status, payload, party = ask(path, kind, data, wait)
    except Exception as exc:  # reported to the ServerApp as a fixed code, the text stays here
        log(ERROR, "privfl training relay failed: %s: %s", type(exc).__name__, exc)
        code = "bad-local-input" if isinstance(exc, InputError) else "relay-failed"
        return Message(pack(status="error", reason=code), reply_to=message)
    if status != "ok":
        reason = payload.decode(errors="replace")[:64]
        return Message(pack(status="error", reason=reason, party=party), reply_to=message)
    report = phases.report() if phases is not None else None
    content = pack([payload], status="ok", party=party, timings=report)
    return Message(content, reply_to=message)


@app.query("train")
def train(message: Message, context: Context) -> Message:
    """One setup step or training envelope, answered by the node's party process."""
    return _relay("step", message, context)


@app.query("train_close")
def close(message: Message, context: Context) -> Message:
    """The session is over: the party process writes its model and history and exits."""
    return _relay("close", message, context)
