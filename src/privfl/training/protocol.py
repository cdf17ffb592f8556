"""The step sequence of partially encrypted training, driven in one process.

:class:`Session` holds the roles (one :class:`~.server.Server`, the :class:`~.party.Party`
objects) and moves every message between them as bytes through
:class:`privfl.runner.InProcessRunner`: channel ``"<sender>><receiver>:<kind>"`` (bytes per
role), run key ``"<role>:<step>"`` (seconds per role). Each receiver decodes (and so checks)
what it gets. Joint steps: interactive bootstrapping (the batch owner sends ``c1``, every other
party returns its masked shares, the owner adds its own), joint decryption (the requester sends
``c1`` to the others, fuses their shares with its own: only it learns the plaintext).
Messages between parties are relayed by the server in a deployment (star topology); they are
counted once, as party-to-party bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import numpy as np

from privfl._typing import FloatArray
from privfl.crypto.threshold import (
    BootstrapRequest,
    BootstrapShare,
    CiphertextMessage,
    DecryptionRequest,
    DecryptionShare,
)
from privfl.errors import ProtocolError
from privfl.runner import InProcessRunner
from privfl.training.messages import GlobalPlainLayers, PartyPlainLayers
from privfl.training.party import Done, Party, Request
from privfl.training.server import Server

T = TypeVar("T")
RequestT = TypeVar("RequestT", BootstrapRequest, DecryptionRequest)
ShareT = TypeVar("ShareT", BootstrapShare, DecryptionShare)


class Session:
    """The roles of one training run and the runner that carries their messages."""

    def __init__(self, server: Server, parties: Sequence[Party], runner: InProcessRunner) -> None:
        self.server = server
        self.parties = list(parties)
        self.runner = runner

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

    def aggregate(self, rnd: int) -> None:
        """Every party -> server: plaintext layers and encrypted update; the server averages."""
        server = self.server
        plains, updates = [], []
        for p in self.parties:
            plain, update = self._run(p.name, "upload", p.upload, server.session, rnd)
            data = self._send(p.name, "server", "party-plain", plain.to_bytes())
            plains.append(
                self._run(
                    "server",
                    "decode",
                    PartyPlainLayers.from_bytes,
                    data,
                    server.session,
                    rnd,
                    server.shapes,
                )
            )
            cts = []
            for u in update:
                raw = self._send(p.name, "server", "party-update", u.to_bytes())
                cts.append(
                    self._run(
                        "server",
                        "decode",
                        CiphertextMessage.from_bytes,
                        raw,
                        self._ctx(p),
                        server.session,
                    )
                )
            updates.append(cts)
        self._run("server", "aggregate", server.aggregate, plains, updates)

    # ------------------------------------------------------------------ joint steps
    def bootstrap(self, owner: Party, request: BootstrapRequest) -> list[BootstrapShare]:
        """Every party's bootstrapping shares for ``owner``'s request."""
        data = self._run(owner.name, "encode", request.to_bytes)
        return [
            self._run(q.name, "boot-share", q.bootstrap_share, request)
            if q is owner
            else self._ask(owner, q, data, "boot", Party.bootstrap_share, BootstrapRequest)
            for q in self.parties
        ]

    def decryption_shares(
        self, requester: Party, request: DecryptionRequest
    ) -> list[DecryptionShare]:
        """The other parties' decryption shares for ``requester``'s request."""
        data = self._run(requester.name, "encode", request.to_bytes)
        return [
            self._ask(requester, q, data, "decrypt", Party.decryption_share, DecryptionRequest)
            for q in self.parties
            if q is not requester
        ]

    def _ask(
        self,
        owner: Party,
        q: Party,
        data: bytes,
        kind: str,
        answer: Callable[[Party, RequestT], ShareT],
        request_type: type[RequestT],
    ) -> ShareT:
        """One round trip: ``owner``'s encoded request to ``q`` (decoded against ``q``'s own
        context), ``q``'s ``answer`` back (decoded against ``owner``'s), as real bytes."""
        raw = self._send(owner.name, q.name, f"{kind}-request", data)
        req = self._run(q.name, "decode", request_type.from_bytes, raw, self._ctx(q), q.session)
        share = self._run(q.name, f"{kind}-share", answer, q, req)
        back = self._send(q.name, owner.name, f"{kind}-share", share.to_bytes())
        decoded: ShareT = self._run(
            owner.name, "decode", type(share).from_bytes, back, self._ctx(owner), owner.session
        )
        return decoded

    # ------------------------------------------------------------------ flows
    def _joint(self, p: Party, request: Request | Done) -> Any:
        """Serve ``p``'s flow: bootstrapping and decryption shares until it is done."""
        while not isinstance(request, Done):
            shares: list[BootstrapShare] | list[DecryptionShare]
            if isinstance(request, BootstrapRequest):
                shares = self.bootstrap(p, request)
            else:
                shares = self.decryption_shares(p, request)
            request = self._run(p.name, "encrypted", p.advance, shares)
        return request.value

    def train_batch(self, p: Party, idx: Any) -> float:
        """One mini-batch of party ``p``; returns ``max |e_T|`` (0 without a secret layer)."""
        request = self._run(p.name, "forward", p.start_batch, idx)
        if request is None:
            return 0.0
        return float(self._joint(p, request))

    def outputs(self, p: Party, x: FloatArray) -> FloatArray:
        """Pre-activations of the encrypted last layer for the rows of ``x``, decrypted for
        party ``p`` only (blocks of ``K`` rows per ciphertext)."""
        if p.layout is None:
            raise ProtocolError(f"{p.name} has no encrypted layer")
        k = p.layout.blocks
        out = []
        for start in range(0, x.shape[0], k):
            request = self._run(p.name, "output", p.start_output, x[start : start + k])
            out.append(self._joint(p, request))
        return np.concatenate(out, axis=0)

    def reveal(self, p: Party) -> list[tuple[FloatArray, FloatArray]]:
        """The final encrypted layers, jointly decrypted for party ``p`` (all parties share)."""
        return list(self._joint(p, self._run(p.name, "reveal", p.start_reveal)))
