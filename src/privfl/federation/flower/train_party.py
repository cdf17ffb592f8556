"""The long-lived party process of a training deployment (``privfl flower train-node``).

Why a process and not state on disk: Flower 1.41 starts a fresh ``flwr-clientapp`` process
for every message, but a party node holds, between two messages, Python generators in the
middle of a mini-batch (its homomorphic steps between two joint steps) and the joint
evaluation keys (2.6 GB on the secure ring). Reloading them per message would cost more than
the message's work (``benchmarks/flower_rounds.py train-state`` measures it). So each party
runs this process next to its SuperNode; the training ClientApp
(:mod:`~privfl.federation.flower.train_client`) only relays the envelope bytes to it over a
Unix socket in the node's own folder, and the process keeps the
:class:`~privfl.training.setup.NodeHost` in memory for the whole session.

The node folder (``NODE_DIR``), all node-local; nothing secret comes from anyone else:

``identity.key``  the party's identity key (X25519 + Ed25519), made here on first start
                  (mode 0600); ``identity.pub`` its public half (hex), to be pinned by the others
``roster.json``   ``{"party-0": "<hex identity>", ...}``: the identities this operator pins
                  (exchanged out of band; read when the session starts)
``data.npz``      ``x`` (float rows) and ``y`` (labels as ``0..C-1``, the agreed class order)
``party.sock``    the socket the ClientApp talks to (the folder must be the operator's alone)
``model.npz``     written at the end: the plaintext layers, and the encrypted ones if this
                  node received them (:func:`privfl.training.result.load_model` reads it)
``history.json``  written at the end: this party's own evaluations per round and the global
                  history the server reported

Wire format on the socket: :mod:`~privfl.federation.flower.train_wire` (the peer is the node's
own ClientApp, its bytes still read as hostile); kind ``step`` (an envelope for the node) or
``close`` (data: the server's history, JSON).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

from privfl.crypto.identity import IdentityKey
from privfl.errors import InputError, MalformedMessageError
from privfl.federation.flower.train_wire import read_frame, write_frame
from privfl.training.result import write_model
from privfl.training.setup import NodeHost

__all__ = ["PartyProcess", "load_roster", "node_identity"]

log = logging.getLogger(__name__)
SOCKET = "party.sock"
MAX_SOCKET_PATH = 100
FAILURE = "error"


def node_identity(node_dir: Path) -> IdentityKey:
    """This node's identity key: read from ``identity.key``, or made and written (0600)."""
    key, pub = node_dir / "identity.key", node_dir / "identity.pub"
    if key.is_file():
        identity = IdentityKey.from_private_bytes(key.read_bytes())
    else:
        identity = IdentityKey()
        fd = os.open(key, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(identity.private_bytes())
    pub.write_text(identity.public_bytes.hex() + "\n")
    return identity


def load_roster(path: Path) -> dict[str, bytes]:
    """The pinned roster (``{"party-k": "<hex>"}``); InputError when unreadable."""
    try:
        raw = json.loads(path.read_text())
        roster = {str(k): bytes.fromhex(str(v)) for k, v in raw.items()}
    except (OSError, ValueError, AttributeError) as exc:
        raise InputError(f"cannot read the pinned roster {path}: {exc}") from None
    return roster


class PartyProcess:
    """One party's process for one session (see the module doc). ``reveal_to``: the party
    this operator agrees may receive the final encrypted layers (None: no reveal)."""

    def __init__(
        self,
        node_dir: str | Path,
        name: str,
        reveal_to: str | None = None,
        parameters: str = "secure",
    ) -> None:
        """``parameters``: the parameter set this operator accepts (``"secure"``; the
        insecure ``"test"`` ring only when asked for here)."""
        self.dir = Path(node_dir)
        self.parameters = parameters
        self.name = name
        self.reveal_to = reveal_to
        self.identity = node_identity(self.dir)
        self.host: NodeHost | None = None
        self.closed = False
        self.seconds = 0.0
        self.messages = 0
        self.load_seconds = 0.0

    @property
    def socket_path(self) -> Path:
        return self.dir / SOCKET

    def _host(self) -> NodeHost:
        """The node's host, built at the session's first message (roster and data read
        then, so the operator may pin the roster after starting the process)."""
        if self.host is None:
            t0 = time.perf_counter()
            pinned = load_roster(self.dir / "roster.json")
            try:
                with np.load(self.dir / "data.npz", allow_pickle=False) as z:
                    x = np.asarray(z["x"], dtype=np.float64)
                    y = np.asarray(z["y"], dtype=np.int64)
            except (OSError, KeyError, ValueError) as exc:
                raise InputError(f"cannot read {self.dir / 'data.npz'}: {exc}") from None
            self.host = NodeHost(
                self.name, x, y, self.identity, pinned, self.reveal_to, parameters=self.parameters
            )
            self.load_seconds = time.perf_counter() - t0
        return self.host

    def handle(self, kind: str, data: bytes) -> bytes:
        """One request: an envelope for the node, or the close (writes the outputs)."""
        if kind == "step":
            return self._host().step(data)
        if kind == "close":
            self.write_outputs(data)
            self.closed = True
            return b""
        raise MalformedMessageError(f"unknown request {kind!r}")

    def write_outputs(self, server_history: bytes) -> None:
        """``model.npz`` and ``history.json`` in the node folder."""
        host = self._host()
        node, party = host.node, host.party
        if node is None or party is None:
            raise InputError("the session ended before its setup finished")
        w, b = party.plain_layers()
        layers = list(zip(w, b, strict=True))
        revealed = node.revealed is not None
        if node.revealed is not None:
            layers += node.revealed
        write_model(self.dir / "model.npz", party.schedule, layers, revealed)
        try:
            reported: Any = json.loads(server_history.decode()) if server_history else None
        except ValueError:
            reported = None
        history = {
            "party": self.name, "session": party.session.hex(), "revealed": revealed,
            "own_evaluations": [asdict(e) for e in node.evaluations],
            "own_boundary_errors": {str(r): v for r, v in node.boundary_errors.items()},
            "server_history": reported,
            "messages": self.messages, "seconds": round(self.seconds, 3),
            "load_seconds": round(self.load_seconds, 3),
        }  # fmt: skip
        (self.dir / "history.json").write_text(json.dumps(history, indent=2) + "\n")

    def serve(self, idle_timeout: float = 3600.0) -> None:
        """Answer requests on the node's socket until the close, or ``idle_timeout`` seconds
        without a request."""
        from privfl.federation.flower.client_app import failure_code

        path = self.socket_path
        bound = path.with_name(path.name + ".new")  # renamed once listening: no refused connect
        if len(str(bound)) > MAX_SOCKET_PATH:
            raise InputError(f"the node folder's path is too long for a socket: {path}")
        for stale in (path, bound):
            with contextlib.suppress(FileNotFoundError):
                stale.unlink()
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as srv:
            old = os.umask(0o177)
            try:
                srv.bind(str(bound))
            finally:
                os.umask(old)
            srv.listen(4)
            os.replace(bound, path)  # the socket's name appears only when it accepts
            srv.settimeout(idle_timeout)
            try:
                while not self.closed:
                    try:
                        conn, _ = srv.accept()
                    except TimeoutError:
                        return
                    with conn:
                        self._one(conn, failure_code)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    path.unlink()

    def _one(self, conn: socket.socket, failure_code: Any) -> None:
        conn.settimeout(60.0)
        try:
            request = read_frame(conn)
            if len(request) != 2:
                raise MalformedMessageError("a request is [kind, data]")
            t0 = time.perf_counter()
            answer = self.handle(request[0].decode(errors="replace"), request[1])
            self.seconds += time.perf_counter() - t0
            self.messages += 1
            reply = [b"ok", answer, self.name.encode()]
        except Exception as exc:  # reported as a fixed code; the text stays in the local log
            log.error("privfl party %s: %s: %s", self.name, type(exc).__name__, exc)
            reply = [FAILURE.encode(), failure_code(exc).encode(), self.name.encode()]
        with contextlib.suppress(OSError):
            write_frame(conn, reply)
