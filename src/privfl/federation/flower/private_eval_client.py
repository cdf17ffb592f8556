"""Private ROC-AUC inside a Flower training job: the client side.

``add_private_auc(app, score_fn)`` registers on a training ``ClientApp`` the query handlers
that :class:`privfl.federation.flower.private_eval.PrivateAUC` drives. ``score_fn(arrays,
context)`` returns ``(scores, labels)``: the node's *local validation set*, scored in [0, 1]
by the model in ``arrays`` (the global model the server sent at the join).

Node configuration: ``keys-dir`` (the party's folder from ``privfl keys init``; its name is
the party), ``output-dir`` (default ``.``: the per-round history
``private-auc-<party>.json`` goes there), ``reveal-to-server`` (``true`` to allow the server to
learn the AUC when it asks; default: refuse). Like the standalone app, node settings come only
from the node's own config, never from the server.

The node checks what the server announces: the evaluation round must grow (a join for a round
already evaluated is a replay and is refused), every later step must belong to the round the
node joined, and the protocol's own checks (signed joins, config digest, step order) run in
:class:`privfl.evaluation.fhauc.Party`. A failed step answers with a fixed code and the
party's name, never the exception's text.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from logging import ERROR, INFO
from pathlib import Path
from typing import Any

import numpy.typing as npt
from flwr.app import ArrayRecord, ConfigRecord, Context, Message
from flwr.clientapp import ClientApp
from flwr.common.logger import log

from privfl.errors import InputError, ProtocolError
from privfl.evaluation import fhauc
from privfl.evaluation.fhauc import roles
from privfl.federation.flower import timing
from privfl.federation.flower.client_app import failure_code, party_label
from privfl.federation.flower.payload import pack, unpack
from privfl.federation.flower.timing import Phases
from privfl.federation.provisioning import load_party_keys

PREFIX = "privauc"
STATE = "privfl-private-auc"
MODEL = "privfl-private-auc-model"  # node-local state: the model joined
CONTENT_MODEL = "model"  # the join's record holding the global model
ScoreFn = Callable[[ArrayRecord, Context], tuple[npt.ArrayLike, npt.ArrayLike]]


def _keys_dir(context: Context) -> Path:
    if "keys-dir" not in context.node_config:
        raise InputError("node config needs keys-dir (the party's folder from privfl keys init)")
    return Path(str(context.node_config["keys-dir"]))


def _allows_reveal(context: Context) -> bool:
    return str(context.node_config.get("reveal-to-server", "false")).lower() == "true"


def _saved(context: Context) -> tuple[int, bytes | None]:
    record = context.state.get(STATE)
    if not isinstance(record, ConfigRecord):
        return 0, None
    state = record.get("state")
    return int(str(record.get("round", 0))), state if isinstance(state, bytes) else None


def _write_history(context: Context, server_round: int, result: fhauc.PartyResult) -> Path:
    out = Path(str(context.node_config.get("output-dir", ".")))
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"private-auc-{result.party}.json"
    history: dict[str, Any] = {"party": result.party, "rounds": []}
    if path.is_file():
        history = json.loads(path.read_text())
    history["rounds"].append({"round": server_round, "run_id": context.run_id} | result.to_dict())
    path.write_text(json.dumps(history, indent=2) + "\n")
    return path


def eval_step(
    step: str, message: Message, context: Context, score_fn: ScoreFn
) -> tuple[str, bytes, float | None]:
    """One FHAUC step of a training job's evaluation round on this node: (party, answer,
    the AUC to reveal or None)."""
    blobs, meta = unpack(message.content, "the ServerApp")
    if len(blobs) != 1:
        raise InputError(f"step {step} carries {len(blobs)} messages, expected 1")
    server_round = int(meta.get("round", 0))
    if server_round < 1:
        raise InputError(f"step {step} names no evaluation round")
    reveal = bool(meta.get("reveal", 0))
    if reveal and not _allows_reveal(context):
        raise ProtocolError("the server asks for the AUC, and this node's config does not allow it")
    last, state = _saved(context)
    if step == "join":
        if server_round <= last:
            raise ProtocolError(
                f"evaluation round {server_round} announced after round {last}: refused as a replay"
            )
        model = message.content.get(CONTENT_MODEL)
        if not isinstance(model, ArrayRecord):
            raise InputError("the join carries no model to evaluate")
        context.state[MODEL] = model
        state = None  # every evaluation round is a fresh session
    elif server_round != last:
        raise ProtocolError(f"step {step} of round {server_round}, but this node joined {last}")
    model = context.state.get(MODEL)
    if not isinstance(model, ArrayRecord):
        raise ProtocolError(f"step {step} before any join")
    scores, labels = score_fn(model, context)
    keys = load_party_keys(_keys_dir(context))
    party = roles.make_party(
        "single", keys.name, keys.identity, keys.roster, keys.key_holder, scores, labels
    )
    party.receive_bundle(keys.bundle)
    party.restore(state)
    try:
        answer, result = fhauc.party_step(party, step, blobs[0])
    finally:
        if party.state is not None:
            saved = party.export_state()
            context.state[STATE] = ConfigRecord({"round": server_round, "state": saved})
    if result is None:
        return party.name, answer, None
    path = _write_history(context, server_round, result)
    log(INFO, "privfl private AUC of round %d for %s: %.8f (written to %s)",
        server_round, result.party, result.auc, path)  # fmt: skip
    return party.name, answer, result.auc if reveal else None


def _reply(step: str, message: Message, context: Context, score_fn: ScoreFn) -> Message:
    phases = Phases() if timing.wanted(context.node_config) else None
    try:
        name, answer, auc = eval_step(step, message, context, score_fn)
    except Exception as exc:  # reported to the ServerApp, which names this party
        party = party_label(context)
        log(ERROR, "privfl private AUC: %s failed: %s: %s", party, type(exc).__name__, exc)
        content = pack(status="error", reason=failure_code(exc), party=party)
        return Message(content, reply_to=message)
    report = phases.report() if phases is not None else None  # scoring and step: "work"
    content = pack([answer], status="ok", party=name, auc=auc, timings=report)
    return Message(content, reply_to=message)


def add_private_auc(app: ClientApp, score_fn: ScoreFn) -> None:
    """Register the private-AUC query handlers on ``app`` (see the module docstring)."""

    @app.query(f"{PREFIX}_hello")
    def hello(message: Message, context: Context) -> Message:
        try:
            name = load_party_keys(_keys_dir(context)).name
        except Exception as exc:
            reason = failure_code(exc)
            return Message(
                pack(status="error", reason=reason, party=party_label(context)), reply_to=message
            )
        return Message(pack(status="ok", party=name), reply_to=message)

    @app.query(f"{PREFIX}_join")
    def join(message: Message, context: Context) -> Message:
        return _reply("join", message, context, score_fn)

    @app.query(f"{PREFIX}_upload")
    def upload(message: Message, context: Context) -> Message:
        return _reply("upload", message, context, score_fn)

    @app.query(f"{PREFIX}_result")
    def result(message: Message, context: Context) -> Message:
        return _reply("result", message, context, score_fn)
