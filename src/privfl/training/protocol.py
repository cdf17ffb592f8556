"""Direct calls between the roles of one training run, in one process: what
:meth:`TrainingResult.predict <privfl.training.result.TrainingResult.predict>` uses after
training (predictions for rows of party 0's choice, with every party's signed consent), and
what tests use to drive single steps (a batch, a reveal).

Training itself runs through the one step sequence of :mod:`~.schedule` (server and party
nodes over a transport). :class:`Session` holds the same role objects and moves every message
between them as bytes through :class:`privfl.runner.InProcessRunner`: channel
``"<sender>><receiver>:<kind>"`` (bytes per role), run key ``"<role>:<step>"`` (seconds per
role). A joint step: the requester's signed request goes to every other party, each answers
with a share sealed for the requester (:mod:`~.desk`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from privfl._typing import FloatArray
from privfl.crypto.threshold import CiphertextMessage
from privfl.errors import ProtocolError
from privfl.runner import InProcessRunner
from privfl.training.joint import Consent
from privfl.training.messages import GlobalPlainLayers
from privfl.training.party import Done, Party
from privfl.training.server import Server
from privfl.training.tickets import Purpose

T = TypeVar("T")


class Session:
    """The roles of one training run and the runner that carries their messages."""

    def __init__(self, server: Server, parties: Sequence[Party], runner: InProcessRunner) -> None:
        self.server = server
        self.parties = list(parties)
        self.runner = runner
        self._predicted: dict[str, int] = {}

    # ------------------------------------------------------------------ transport
    def _run(self, role: str, step: str, fn: Callable[..., T], *args: Any) -> T:
        return self.runner.run(f"{role}:{step}", fn, *args)

    def _send(self, sender: str, receiver: str, kind: str, data: bytes) -> bytes:
        return self.runner.send(f"{sender}>{receiver}:{kind}", data)

    def _ctx(self, party: Party) -> Any:
        if party.crypto is None:
            raise ProtocolError(f"{party.name} has no encrypted layer")
        return party.crypto.context

    # ------------------------------------------------------------------ model exchange
    def send_model(self, rnd: int) -> None:
        """Server -> every party: the global model of round ``rnd``."""
        server = self.server
        plain, secret = self._run("server", "global-model", server.global_model, rnd)
        plain_bytes = self._run("server", "encode", plain.to_bytes)
        secret_bytes = [self._run("server", "encode", m.to_bytes) for m in secret]
        for p in self.parties:
            data = self._send("server", p.name, "global-plain", plain_bytes)
            msg = self._run(
                p.name, "decode", GlobalPlainLayers.from_bytes, data, server.session, rnd,
                server.shapes,
            )  # fmt: skip
            cts = []
            for blob in secret_bytes:
                raw = self._send("server", p.name, "global-secret", blob)
                cts.append(
                    self._run(
                        p.name,
                        "decode",
                        CiphertextMessage.from_bytes,
                        raw,
                        self._ctx(p),
                        server.session,
                    )
                )
            self._run(p.name, "receive-model", p.receive_model, msg, cts)

    # ------------------------------------------------------------------ joint steps
    def _joint(self, p: Party, message: bytes | Done) -> Any:
        """Serve ``p``'s flow until it is done: each signed request goes to every other party
        (relayed by the server in a deployment), each sealed share comes back to ``p``."""
        while not isinstance(message, Done):
            kind = p.pending_kind
            sealed = [self._ask(p, q, message, kind) for q in self.parties if q is not p]
            message = self._run(p.name, "encrypted", p.advance, sealed)
        return message.value

    def _ask(self, owner: Party, q: Party, data: bytes, kind: str) -> bytes:
        """One round trip: ``owner``'s signed request to ``q``, ``q``'s sealed share back."""
        raw = self._send(owner.name, q.name, f"{kind}-request", data)
        share = self._run(q.name, f"{kind}-share", q.answer, raw)
        return self._send(q.name, owner.name, f"{kind}-share", share)

    # ------------------------------------------------------------------ flows
    def train_batch(self, p: Party, rnd: int, epoch: int, b: int) -> float:
        """Mini-batch ``b`` of ``epoch`` of party ``p``; returns ``max |e_T|`` (0 without a
        secret layer)."""
        request = self._run(p.name, "forward", p.start_batch, rnd, epoch, b)
        if request is None:
            return 0.0
        return float(self._joint(p, request))

    def predict(self, p: Party, x: FloatArray) -> FloatArray:
        """Pre-activations for rows of ``p``'s choice after training: every party signs a
        consent for that many more blocks (the caller runs them all, so it agrees)."""
        k = self._blocks(p)
        first = self._predicted.get(p.name, 0)
        blocks = -(-x.shape[0] // k)
        consents = self._consents(p, Purpose.PREDICT, first + blocks)
        out = []
        for j, start in enumerate(range(0, x.shape[0], k)):
            rows = x[start : start + k]
            rnd = p.schedule.rounds
            request = self._run(
                p.name, "predict", p.start_output, rnd, first + j, rows, Purpose.PREDICT, consents
            )
            out.append(self._joint(p, request))
        self._predicted[p.name] = first + blocks
        return np.concatenate(out, axis=0)

    def reveal(self, p: Party) -> list[tuple[FloatArray, FloatArray]]:
        """The final encrypted layers, jointly decrypted for party ``p`` (every party signs
        its consent; all take part)."""
        consents = self._consents(p, Purpose.REVEAL, p.schedule.secret_layers)
        return list(self._joint(p, self._run(p.name, "reveal", p.start_reveal, consents)))

    def _consents(self, p: Party, purpose: Purpose, limit: int) -> list[Consent]:
        out = []
        for q in self.parties:
            raw = self._run(q.name, "consent", q.consent, p.name, purpose, limit)
            if q is not p:
                raw = self._send(q.name, p.name, "consent", raw)
            out.append(Consent.from_bytes(raw, p.session))
        return out

    def _blocks(self, p: Party) -> int:
        if p.layout is None:
            raise ProtocolError(f"{p.name} has no encrypted layer")
        return p.layout.blocks
