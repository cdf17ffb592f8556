"""Flower ClientApp running an FHAUC party through :func:`privfl.evaluation.fhauc.schedule.
party_step`, the same step handler the in-process runner uses.

Node configuration (``flower-supernode --node-config '...'``); node-local settings come only
from here, never from the server's run configuration:

``keys-dir``       the party's folder written by ``privfl keys init`` (its name is the party)
``data-file``      CSV or Parquet with the party's scores and labels
``score-column``, ``label-column``   column names (default ``score`` and ``label``)
``output-dir``     where the result JSON is written (default: the current directory)
``reveals``        comma-separated disclosures this node consents to: ``auc`` (default),
                   ``curve``, ``metrics`` (:mod:`privfl.evaluation.fhauc.reveal`); a session
                   announcing another is refused at the join, before any upload

Simulation only (a virtual node has no ``keys-dir``, only ``partition-id`` and
``num-partitions``): virtual node ``k`` plays ``party-k`` with keys from
``<sim-keys-root>/party-k`` and the k-th of ``num-partitions`` random partitions of
``sim-data-file``, these and the column names and ``output-dir`` taken from the run
configuration (in a simulation one operator runs every node).

With threshold keys (``privfl keys init --keys threshold``) the node answers the extra
rounds ``fhauc_keygen``, ``fhauc_keycheck``, ``fhauc_decrypt`` and ``fhauc_fuse``; its key
share, generated in the session, is kept in the node-local ``context.state`` between rounds
(never sent), and after the session as the node's key set (share, decryption count, joint
public key: :mod:`privfl.evaluation.fhauc.threshold.keyset`), so a later ``flwr run`` on the
same federation whose aggregator announces that set reuses it within the budget; a session
that would exceed it is refused at the join (the aggregator then re-keys).

Every handler rebuilds the party from its key folder and data (a ClientApp may be a fresh
process per message); its progress through the session (which step it did last, its nonce)
is kept in the node-local ``context.state``, so steps out of order are refused. The AUC is
written to ``output-dir/fhauc-<session>-<party>.json`` and logged on the node; it is never
sent back. A failed step answers with a fixed code (:data:`FAILURE_CODES`), never the
exception's text, which may name the party's own counts or a value it decrypted.
"""

from __future__ import annotations

import io
import json
import os
from logging import ERROR, INFO
from pathlib import Path

import numpy as np
from flwr.app import ConfigRecord, Context, Message
from flwr.clientapp import ClientApp
from flwr.common.logger import log

from privfl._typing import FloatArray, Int8Array
from privfl.datasets import deal
from privfl.errors import (
    InputError,
    InsufficientPrecisionError,
    MalformedMessageError,
    ProtocolError,
    UnknownPartyError,
    VerificationError,
)
from privfl.evaluation import fhauc
from privfl.evaluation.fhauc import roles
from privfl.evaluation.fhauc.reveal import Reveal
from privfl.evaluation.fhauc.steps import Step
from privfl.federation.flower import timing
from privfl.federation.flower.node_table import read_columns
from privfl.federation.flower.payload import pack, unpack
from privfl.federation.flower.timing import Phases
from privfl.federation.provisioning import load_party_keys

app = ClientApp()
STATE = "privfl-fhauc"
DATA = "privfl-fhauc-data"  # node-local: the data file's columns, read once


def _setting(context: Context, key: str, default: str) -> str:
    """A node-local setting: node config only (plus the run config for virtual nodes)."""
    if key in context.node_config:
        return str(context.node_config[key])
    if "keys-dir" not in context.node_config and "partition-id" in context.node_config:
        return str(context.run_config.get(key, default))
    return default


def _party_files(context: Context) -> tuple[Path, tuple[FloatArray, Int8Array]]:
    """(key folder, (scores, labels)) for this node; the table is read once and then kept in
    the node-local state (:func:`_cached_columns`) while the file stays unchanged."""
    score_col = _setting(context, "score-column", "score")
    label_col = _setting(context, "label-column", "label")
    if "keys-dir" in context.node_config:
        keys_dir = Path(str(context.node_config["keys-dir"]))
        if "data-file" not in context.node_config:
            raise InputError("node config has keys-dir but no data-file")
        path = str(context.node_config["data-file"])
        return keys_dir, _cached_columns(context, path, (score_col, label_col), None)
    if "partition-id" not in context.node_config:
        raise InputError("node config needs keys-dir and data-file (or a simulation partition)")
    pid = int(context.node_config["partition-id"])
    parts = int(context.node_config["num-partitions"])
    keys_dir = Path(_setting(context, "sim-keys-root", "keys")) / f"party-{pid}"
    path = _setting(context, "sim-data-file", "scores.csv")
    return keys_dir, _cached_columns(context, path, (score_col, label_col), (pid, parts))


def _read_columns(
    path: str, columns: tuple[str, str], partition: tuple[int, int] | None
) -> tuple[FloatArray, Int8Array]:
    scores, labels = read_columns(path, columns)  # pandas only for what numpy cannot read
    if partition is None:
        return scores, labels
    pid, parts = partition
    return deal(scores, labels, parts, seed=0)[pid]


def _cached_columns(
    context: Context, path: str, columns: tuple[str, str], partition: tuple[int, int] | None
) -> tuple[FloatArray, Int8Array]:
    """The node's (scores, labels): read from ``path`` once, then from the node-local
    ``context.state`` (a ClientApp is a fresh process per message; re-reading the table would
    import pandas and parse the file every round). The cache is keyed by the file's path,
    size and modification time, the columns and the partition, so a changed file is read
    again. Arrays are stored with :func:`numpy.save` (dtype kept, no pickles): the party
    validates them exactly as if read from the file."""
    try:
        st = os.stat(path)
    except OSError as exc:
        raise InputError(f"cannot read the data file {path!r}: {exc.strerror}") from None
    key = json.dumps([path, st.st_size, st.st_mtime_ns, list(columns), partition])
    record = context.state.get(DATA)
    if isinstance(record, ConfigRecord) and record.get("key") == key:
        raw_s, raw_l = record.get("scores"), record.get("labels")
        if isinstance(raw_s, bytes) and isinstance(raw_l, bytes):
            return _load_array(raw_s), _load_array(raw_l)
    scores, labels = _read_columns(path, columns, partition)
    if scores.dtype != object and labels.dtype != object:
        context.state[DATA] = ConfigRecord(
            {"key": key, "scores": _dump_array(scores), "labels": _dump_array(labels)}
        )
    return scores, labels


def _dump_array(values: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, values, allow_pickle=False)
    return buf.getvalue()


def _load_array(raw: bytes) -> np.ndarray:
    values: np.ndarray = np.load(io.BytesIO(raw), allow_pickle=False)
    return values


def consents(context: Context) -> tuple[Reveal, ...]:
    """The reveal modes this node's operator consents to (node setting ``reveals``)."""
    text = _setting(context, "reveals", Reveal.AUC.value)
    return tuple(Reveal.parse(r.strip()) for r in text.split(",") if r.strip())


def _party(context: Context) -> fhauc.Party:
    """This node's party, built by the one role builder with the key backend its key folder
    was provisioned for, its kept key material and session progress restored from the
    node-local state."""
    keys_dir, (scores, labels) = _party_files(context)
    keys = load_party_keys(keys_dir)
    party = roles.make_party(
        keys.keys, keys.name, keys.identity, keys.roster, keys.key_holder, scores, labels,
        reveal=consents(context),
    )  # fmt: skip
    party.receive_bundle(keys.bundle)
    record = context.state.get(STATE)
    if not isinstance(record, ConfigRecord) or record.get("keys") != party.keys.mode:
        record = ConfigRecord()  # nothing saved, or saved by the node's other key mode
    kept = record.get("key-set")
    if isinstance(kept, bytes) and kept:  # the key set first: a reuse session's share is there
        party.keys.import_kept(kept)
    state = record.get("state")
    party.restore(state if isinstance(state, bytes) else None)
    return party


def _save(context: Context, party: fhauc.Party) -> None:
    """The party's session progress and its kept key material (threshold keys: the key set
    with its decryption count), into the node-local state: saved after every step, also a
    failed one, before any answer."""
    state, kept = party.export_state(), party.keys.export_kept()
    context.state[STATE] = ConfigRecord({"keys": party.keys.mode, "state": state, "key-set": kept})


# What a party tells the server when a step fails: a fixed code, never the exception's text
# (it may hold the party's own counts, score range or a value it decrypted).
FAILURE_CODES: tuple[tuple[type[Exception], str], ...] = (
    (VerificationError, "verification-failed"),
    (InsufficientPrecisionError, "refused-precision"),
    (UnknownPartyError, "unknown-party"),
    (MalformedMessageError, "malformed-message"),
    (ProtocolError, "refused"),
    (InputError, "bad-local-input"),
)


def failure_code(exc: Exception) -> str:
    return next((code for cls, code in FAILURE_CODES if isinstance(exc, cls)), "error")


def party_label(context: Context) -> str | None:
    """The party this node is configured to play (its key folder's name, or ``party-k`` for a
    virtual node), without loading any key: it names the party in a failure report."""
    if "keys-dir" in context.node_config:
        return Path(str(context.node_config["keys-dir"])).name or None
    if "partition-id" in context.node_config:
        return f"party-{context.node_config['partition-id']}"
    return None


def _fail(message: Message, exc: Exception, context: Context) -> Message:
    party = party_label(context)
    log(ERROR, "privfl party %s failed: %s: %s", party, type(exc).__name__, exc)  # local only
    return Message(pack(status="error", reason=failure_code(exc), party=party), reply_to=message)


def _write_result(context: Context, result: fhauc.PartyResult) -> Path:
    out_dir = Path(_setting(context, "output-dir", "."))
    out_dir.mkdir(parents=True, exist_ok=True)
    path = out_dir / f"fhauc-{result.session[:12]}-{result.party}.json"
    path.write_text(json.dumps(result.to_dict(), indent=2) + "\n")
    return path


def run_step(
    step: str, data: bytes, context: Context, phases: Phases | None = None
) -> tuple[str, bytes]:
    """One protocol step on this node: rebuild the party, restore its session state from the
    node-local ``context.state``, answer, save the state (also when the step fails, e.g. a
    result is accepted once) and write the result file after the last step. Returns the
    party's name and its answer (``phases``: marks where loading the party ended)."""
    party = _party(context)
    if phases is not None:
        phases.loaded()
    try:
        answer, result = fhauc.party_step(party, step, data)  # one step handler, both key modes
    finally:
        _save(context, party)
    if result is not None:
        path = _write_result(context, result)
        log(INFO, "privfl FHAUC result for %s: AUC = %.8f (written to %s)",
            result.party, result.auc, path)  # fmt: skip
    return party.name, answer


def _step(step: str, message: Message, context: Context) -> Message:
    phases = Phases() if timing.wanted(context.node_config) else None
    try:
        blobs, _ = unpack(message.content, "the ServerApp")
        if len(blobs) != 1:
            raise InputError(f"step {step} carries {len(blobs)} messages, expected 1")
        name, answer = run_step(step, blobs[0], context, phases)
    except Exception as exc:  # reported to the ServerApp, which names this node
        return _fail(message, exc, context)
    report = phases.report() if phases is not None else None
    return Message(pack([answer], status="ok", party=name, timings=report), reply_to=message)


@app.query("fhauc_join")
def join(message: Message, context: Context) -> Message:
    """Check the session config against the provisioned policy; answer with a signed join."""
    return _step(Step.JOIN, message, context)


@app.query("fhauc_upload")
def upload(message: Message, context: Context) -> Message:
    """Check every party's join; return this party's signed encrypted statistics."""
    return _step(Step.UPLOAD, message, context)


@app.query("fhauc_result")
def result(message: Message, context: Context) -> Message:
    """Decrypt (and, against a malicious aggregator, verify) the result; write it locally."""
    return _step(Step.RESULT, message, context)


# threshold keys (``privfl keys init --keys threshold``): the key-generation and decryption
# rounds of the one schedule (:mod:`privfl.evaluation.fhauc.rounds`)
@app.query("fhauc_keygen")
def keygen(message: Message, context: Context) -> Message:
    """Check every party's join, sample this party's key share, send its public part."""
    return _step(Step.KEYGEN, message, context)


@app.query("fhauc_keycheck")
def keycheck(message: Message, context: Context) -> Message:
    """Sketch this party's own key contribution against the joint key it received."""
    return _step(Step.KEYCHECK, message, context)


@app.query("fhauc_decrypt")
def decrypt(message: Message, context: Context) -> Message:
    """A non-lead party's decryption shares of the aggregator's replies."""
    return _step(Step.DECRYPT, message, context)


@app.query("fhauc_fuse")
def fuse(message: Message, context: Context) -> Message:
    """The lead party: fuse, decode and reveal the values to the parties only."""
    return _step(Step.FUSE, message, context)
