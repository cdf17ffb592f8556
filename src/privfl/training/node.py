"""A party's node: runs the party's side of the training schedule, one envelope at a time.

Run by each party, in process (:func:`~.federated.train_federated`) or inside a Flower
ClientApp; it holds the :class:`~.party.Party` (data, plaintext layers, key share, identity)
and nothing of any other role. :meth:`PartyNode.step` takes the server's envelope and
returns this party's. What the server sees of a party: its envelopes (routing fields,
signed requests and sealed shares it cannot open, the plaintext-layer upload and the
encrypted update, its consent). Evaluation figures (loss, accuracy, ``max |u|``) and the
largest boundary error are data-dependent values computed under the global model the server
sent, which the party cannot check: a server that sent a crafted encrypted layer (a target
ciphertext times a one-hot slot) would read the target through them. They stay on the node
(:attr:`PartyNode.evaluations`, :attr:`PartyNode.boundary_errors`) for its operator.

Steps (the server's :func:`~.schedule.run_training` sends them in this order):

``train``     (round r, the global model unless already delivered) -> start the round's
              batches: the first signed request, to every other party
``relay``     requests from others (answered with shares sealed for them) and shares for
              this party's pending request (when all are in: the next request, or the
              next batch); ``done`` once every batch (or block) of the step has finished.
              The envelope that ends a training step (and every later one of that step)
              carries the round's upload as its body: the plaintext layers and the
              encrypted update (no separate round for it)
``sum``       (round r: the sum ``T`` of the encrypted updates and every party's signed
              commitment) -> this party's signed sketch of its own update; the sketches of
              every party come back with the next global model, and the node computes the
              new encrypted layer ``W + T/N`` itself only once they add up (:mod:`~.sumcheck`,
              :class:`~.verifier.SumVerifier`); the server never sends an encrypted layer
``evaluate``  (round r, the new global model) -> the last layer's outputs on this party's
              own rows; its loss sum, correct count, rows and ``max |u|`` stay **on the node**
              (:attr:`PartyNode.evaluations`): the server gets only ``done``
``consent``   (recipient, limit) -> this party's signed consent, if its operator agreed to
              reveal to that recipient
``reveal``    (consents) -> the final layers decrypted for this party (kept on the node)
``finish``    (the final global model) -> done; the node keeps the model
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import numpy as np

from privfl._typing import FloatArray
from privfl.crypto.threshold import CiphertextMessage
from privfl.errors import DecryptionNotPermittedError, ProtocolError
from privfl.messages import Reader
from privfl.training.envelope import Envelope, Item, pack_parts, unpack_parts
from privfl.training.joint import Consent
from privfl.training.messages import GlobalPlainLayers
from privfl.training.packing import chebyshev_sigmoid
from privfl.training.party import Done, Party
from privfl.training.sumcheck import SumCheck, UpdateCommitment
from privfl.training.tickets import Purpose
from privfl.training.twin import plain_forward
from privfl.training.verifier import SumVerifier

__all__ = ["LocalEvaluation", "PartyNode"]

Job = Callable[[], bytes | None]


class PartyNode:
    """The party's side of the schedule (see the module doc). ``reveal_to``: the party this
    node's operator agrees may receive the final layers (None: no reveal); the server only
    relays the consent, it cannot choose the recipient."""

    def __init__(self, party: Party, names: tuple[str, ...], reveal_to: str | None = None):
        self.party = party
        self.name = party.name
        self.others = tuple(n for n in names if n != party.name)
        self.reveal_to = reveal_to
        self._jobs: list[Job] = []
        self._busy = False
        self._shares: dict[str, bytes] = {}
        self._finish: Callable[[Any], None] = self._note_boundary_error
        self._mode = "train"
        self._body = b""
        self._uploading = False
        self._outputs: list[FloatArray] = []
        self.largest_boundary_error = 0.0
        self.revealed: list[tuple[FloatArray, FloatArray]] | None = None
        self.model_round = -1
        self._round = 0
        self.evaluations: list[LocalEvaluation] = []
        self.boundary_errors: dict[int, float] = {}
        desk = party.desk
        self.verifier = (
            SumVerifier(self.name, party.session, desk.plan, desk.crypto.context, desk.endorse)
            if desk is not None
            else None
        )

    # ------------------------------------------------------------------ dispatch
    def step(self, data: bytes) -> bytes:
        """The server's envelope -> this party's envelope."""
        env = Envelope.from_bytes(data, self.party.session, "server")
        handlers = {
            "train": self._train,
            "relay": self._relay,
            "sum": self._sum,
            "evaluate": self._evaluate,
            "consent": self._consent,
            "reveal": self._reveal,
            "finish": self._final,
        }
        items, done = handlers[env.step](env)
        return Envelope(
            self.party.session, self.name, env.step, env.round, tuple(items), done, self._body
        ).to_bytes()

    # ------------------------------------------------------------------ steps
    def _model(self, env: Envelope) -> None:
        """Install the global model of round ``env.round`` from the body (if it has one)."""
        if not env.body:
            if self.model_round != env.round:
                raise ProtocolError(f"{self.name} has no global model of round {env.round}")
            return
        p = self.party
        parts = unpack_parts(env.body)
        if not parts:
            raise ProtocolError("a global model without layers")
        plain = GlobalPlainLayers.from_bytes(parts[0], p.session, env.round, p.plain_shapes)
        v = self.verifier
        if v is None or p.crypto is None:
            if len(parts) > 1:
                raise ProtocolError("encrypted layers in a run without them")
            p.receive_model(plain, [])
        elif v.pending is not None:
            # the parties' signed sketches of the last aggregate: this party computes the new
            # encrypted layers itself, only from a checked aggregate
            if v.pending + 1 != env.round:
                raise ProtocolError(f"a model of round {env.round} after round {v.pending}")
            totals = v.verify([SumCheck.from_bytes(b, p.session) for b in parts[1:]])
            p.apply_sum(totals, len(self.others) + 1)
            p.receive_plain(plain)
        elif env.round == 0 and self.model_round < 0 and len(parts) == 1:
            p.start_initial(plain)  # the public initial layers, computed by this party
        else:
            raise ProtocolError(
                f"a model of round {env.round} without a checked aggregate: the server never "
                "sends an encrypted layer (each party computes the initial one itself)"
            )
        self.model_round = env.round

    def _train(self, env: Envelope) -> tuple[list[Item], bool]:
        self._require_idle()
        self._model(env)
        p, s = self.party, self.party.schedule
        rnd = self._round = env.round
        epochs = range(rnd * s.local_epochs, (rnd + 1) * s.local_epochs)
        self._body = b""
        self._finish = self._note_boundary_error
        self._mode = "train"
        self._jobs = [
            partial(p.start_batch, rnd, e, b) for e in epochs for b in range(len(p.batches(e)))
        ]
        self._uploading = True
        items = self._next_job()
        self._upload_when_done()
        return items, self._idle()

    def _relay(self, env: Envelope) -> tuple[list[Item], bool]:
        out: list[Item] = []
        for item in env.items:
            if item.peer not in self.others:
                raise ProtocolError(f"an item from {item.peer!r}, not a peer of {self.name}")
            if item.kind == "request":
                out.append(Item(item.peer, "share", self.party.answer(item.data)))
            elif not self._busy or item.peer in self._shares:
                raise ProtocolError(f"an unexpected share from {item.peer}")
            else:
                self._shares[item.peer] = item.data
        if self._busy and len(self._shares) == len(self.others):
            sealed = [self._shares[n] for n in self.others]
            self._shares = {}
            result = self.party.advance(sealed)
            if isinstance(result, Done):
                self._busy = False
                self._finish(result.value)
                out.extend(self._next_job())
            else:
                out.extend(self._broadcast(result))
        self._upload_when_done()
        return out, self._idle()

    def _upload_when_done(self) -> None:
        """Once this party's batches of the round are done: its upload (plaintext layers and
        encrypted update) becomes the body of this and every later envelope of the step."""
        if self._uploading and self._idle():
            self._uploading = False
            plain, update = self.party.upload(self.party.session, self._round)
            parts = [plain.to_bytes(), *(u.to_bytes() for u in update)]
            if self.verifier is not None:
                parts.append(self.verifier.commit(self._round, update).to_bytes())
            self._body = pack_parts(parts)

    def _sum(self, env: Envelope) -> tuple[list[Item], bool]:
        """The server's aggregate ``T`` (one per encrypted layer) and every party's signed
        commitment -> this party's signed sketch (:mod:`~.sumcheck`)."""
        self._require_idle()
        p, v = self.party, self.verifier
        if v is None or p.crypto is None:
            raise ProtocolError("an aggregate check in a run without encrypted layers")
        halves = unpack_parts(env.body, 2)
        ctx = p.crypto.context
        totals = [CiphertextMessage.from_bytes(b, ctx, p.session) for b in unpack_parts(halves[0])]
        commits = [UpdateCommitment.from_bytes(b, p.session) for b in unpack_parts(halves[1])]
        self._body = v.answer(env.round, totals, commits).to_bytes()
        return [], True

    def _evaluate(self, env: Envelope) -> tuple[list[Item], bool]:
        self._require_idle()
        if env.round < 1:
            raise ProtocolError("evaluation follows a round: its model is of round 1 or later")
        self._model(env)
        p = self.party
        x, _ = p.rows
        self._outputs, self._body = [], b""
        self._round = env.round
        if p.layout is None:
            self._outputs = [self._plain_outputs(x)]
            self.evaluations.append(self._counts())
            return [], True
        k, rnd = p.layout.blocks, env.round - 1  # the model of round r + 1 evaluates round r

        self._mode = "evaluate"
        self._jobs = [
            partial(p.start_output, rnd, j, x[j * k : (j + 1) * k])
            for j in range(-(-x.shape[0] // k))
        ]
        self._finish = self._collect_output
        return self._next_job(), self._idle()

    def _consent(self, env: Envelope) -> tuple[list[Item], bool]:
        self._require_final_model(env)
        r = Reader(env.body, "consent request")
        recipient, limit = r.str_(), r.u32()
        r.end()
        if self.reveal_to is None or recipient != self.reveal_to:
            raise DecryptionNotPermittedError(
                f"{self.name}'s operator did not agree to reveal the layers to {recipient!r}"
            )
        self._body = self.party.consent(recipient, Purpose.REVEAL, limit)
        return [], True

    def _reveal(self, env: Envelope) -> tuple[list[Item], bool]:
        self._require_idle()
        self._require_final_model(env)
        p = self.party
        consents = [Consent.from_bytes(c, p.session) for c in unpack_parts(env.body)]
        self._body = b""
        self._mode = "reveal"
        self._jobs = [partial(p.start_reveal, consents)]
        self._finish = self._keep_revealed
        return self._next_job(), self._idle()

    def _require_final_model(self, env: Envelope) -> None:
        """Consent and reveal act on the final layer only: the model of this round installed
        (step ``finish``) and the last aggregate checked. A server skipping ``finish`` would
        otherwise have the recipient reveal its own unchecked local layer."""
        pending = None if self.verifier is None else self.verifier.pending
        if self.model_round != env.round or pending is not None:
            raise ProtocolError(
                f"{self.name}: no checked final model of round {env.round} (step 'finish' "
                "first): consent and reveal refused"
            )

    def _final(self, env: Envelope) -> tuple[list[Item], bool]:
        self._require_idle()
        self._model(env)
        self._body = b""  # the last upload is not repeated
        return [], True

    # ------------------------------------------------------------------ jobs
    def _next_job(self) -> list[Item]:
        while self._jobs:
            request = self._jobs.pop(0)()
            if request is not None:
                self._busy = True
                return self._broadcast(request)
        if self._mode == "evaluate":
            self.evaluations.append(self._counts())
        self._mode = "idle"
        return []

    def _broadcast(self, request: bytes) -> list[Item]:
        return [Item(n, "request", request) for n in self.others]

    def _idle(self) -> bool:
        return not self._busy and not self._jobs

    def _require_idle(self) -> None:
        if not self._idle():
            raise ProtocolError(f"{self.name} is still in the middle of a step")

    def _note_boundary_error(self, value: Any) -> None:
        self.largest_boundary_error = max(self.largest_boundary_error, float(value))
        rnd = self._round + 1  # reported with the round's metrics (rounds count from 1)
        self.boundary_errors[rnd] = max(self.boundary_errors.get(rnd, 0.0), float(value))

    def _collect_output(self, value: Any) -> None:
        self._outputs.append(np.asarray(value, dtype=np.float64))

    def _keep_revealed(self, value: Any) -> None:
        self.revealed = list(value)

    def _plain_outputs(self, x: FloatArray) -> FloatArray:
        w, b = self.party.plain_layers()
        h = plain_forward(w[:-1], b[:-1], x)[-1]
        return np.asarray(h @ w[-1].T + b[-1], dtype=np.float64)

    def _counts(self) -> LocalEvaluation:
        """Loss sum, correct predictions, rows and ``max |u|`` on this party's own rows."""
        p = self.party
        _, y = p.rows
        u = np.concatenate(self._outputs, axis=0)
        if p.layout is None:
            a = 1.0 / (1.0 + np.exp(-np.clip(u, -60, 60)))
        else:
            low, high = p.schedule.sigmoid_range
            a = chebyshev_sigmoid(u, low, high, p.schedule.sigmoid_degree)
        yo = np.eye(p.schedule.sizes[-1])[y]
        loss = float(0.5 * np.sum((a - yo) ** 2))
        correct = int(np.sum(np.argmax(u, axis=1) == y))
        return LocalEvaluation(self._round, loss, correct, int(y.size), float(np.max(np.abs(u))))


@dataclass(frozen=True)
class LocalEvaluation:
    """One evaluation on a node's own rows, after round ``round`` (counted from 1): the loss
    sum ``½||a - y||²``, correct predictions, rows and ``max |u|``. Kept on the node."""

    round: int
    loss_sum: float
    correct: int
    rows: int
    max_abs_u: float
