"""Flower ClientApp running an FHAUC party.

Node configuration (``flower-supernode --node-config '...'``):

``keys-dir``       the party's folder written by ``privfl keys init`` (its name is the party)
``data-file``      CSV or Parquet with the party's scores and labels
``score-column``, ``label-column``   column names (default ``score`` and ``label``)
``output-dir``     where the result JSON is written (default: the current directory)

In simulation (no ``keys-dir``), virtual node ``partition-id = k`` plays party
``party-k`` with keys from ``<sim-keys-root>/party-k`` and the k-th of
``num-partitions`` random partitions of ``sim-data-file`` (run configuration).

Every handler rebuilds the party from its key folder and data (a ClientApp may be a fresh
process per message), so nothing secret is kept in Flower's state. The AUC is written to
``output-dir/fhauc-<session>-<party>.json`` and logged on the node; it is never sent back.
"""

from __future__ import annotations

import json
from logging import ERROR, WARNING
from pathlib import Path
from typing import Any

import numpy as np
from flwr.app import Context, Message
from flwr.clientapp import ClientApp
from flwr.common.logger import log

from privfl.datasets import deal, read_table
from privfl.evaluation import fhauc
from privfl.federation.flower.payload import pack, unpack
from privfl.federation.provisioning import load_party_keys

app = ClientApp()


def _setting(context: Context, key: str, default: Any = None) -> Any:
    if key in context.node_config:
        return context.node_config[key]
    return context.run_config.get(key, default)


def _party_files(context: Context) -> tuple[Path, tuple[np.ndarray, np.ndarray]]:
    """(key folder, (scores, labels)) for this node."""
    score_col = str(_setting(context, "score-column", "score"))
    label_col = str(_setting(context, "label-column", "label"))
    if "keys-dir" in context.node_config:
        keys_dir = Path(str(context.node_config["keys-dir"]))
        df = read_table(str(context.node_config["data-file"]))
        return keys_dir, (df[score_col].to_numpy(), df[label_col].to_numpy())
    pid = int(context.node_config["partition-id"])
    parts = int(context.node_config["num-partitions"])
    keys_dir = Path(str(context.run_config["sim-keys-root"])) / f"party-{pid}"
    df = read_table(str(context.run_config["sim-data-file"]))
    split = deal(df[score_col].to_numpy(), df[label_col].to_numpy(), parts, seed=0)
    return keys_dir, split[pid]


def _party(context: Context, config: bytes | None) -> fhauc.Party:
    keys_dir, (scores, labels) = _party_files(context)
    keys = load_party_keys(keys_dir)
    party = fhauc.Party(keys.name, keys.identity, keys.roster, keys.key_holder, scores, labels)
    party.receive_bundle(keys.bundle)
    if config is not None:
        party.receive_config(config)
    return party


def _fail(message: Message, exc: Exception) -> Message:
    log(ERROR, "privfl party failed: %s", exc)
    return Message(pack(status="error", reason=f"{type(exc).__name__}: {exc}"), reply_to=message)


@app.query("fhauc_hello")
def hello(message: Message, context: Context) -> Message:
    """Say which party this node is."""
    try:
        keys_dir, _ = _party_files(context)
        name = load_party_keys(keys_dir).name
    except Exception as exc:  # reported to the ServerApp, which names this node
        return _fail(message, exc)
    return Message(pack(status="ok", party=name), reply_to=message)


@app.query("fhauc_upload")
def upload(message: Message, context: Context) -> Message:
    """Check the session configuration and return this party's encrypted statistics."""
    try:
        blobs, _ = unpack(message.content, "the ServerApp")
        party = _party(context, blobs[0])
        uploads = party.uploads()
    except Exception as exc:
        return _fail(message, exc)
    return Message(pack(uploads, status="ok", party=party.name), reply_to=message)


@app.query("fhauc_result")
def result(message: Message, context: Context) -> Message:
    """Decrypt (and, against a malicious aggregator, verify) the result; write it locally."""
    try:
        blobs, _ = unpack(message.content, "the ServerApp")
        config, replies = blobs[0], blobs[1:]
        party = _party(context, config)
        party.restore_session()
        auc = party.finish_all(replies)
        assert party.config is not None
        out_dir = Path(str(_setting(context, "output-dir", ".")))
        out_dir.mkdir(parents=True, exist_ok=True)
        session = party.config.session.hex()[:12]
        record = {
            "party": party.name,
            "auc": auc,
            "session": party.config.session.hex(),
            "security": party.config.security,
            "thresholds": party.config.num_points,
            "parties": list(party.config.parties),
            "verified": party.config.security == "malicious",
        }
        path = out_dir / f"fhauc-{session}-{party.name}.json"
        path.write_text(json.dumps(record, indent=2))
        log(
            WARNING, "privfl FHAUC result for %s: AUC = %.8f (written to %s)", party.name, auc, path
        )
    except Exception as exc:
        return _fail(message, exc)
    return Message(pack(status="ok", party=party.name), reply_to=message)
