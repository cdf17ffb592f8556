"""SmartCryptNN's party: its data, the plaintext layers, its threshold key share.

What a party holds: its samples; the plaintext layers in the clear (the global ones each round,
then its local updates); its own share of the threshold-CKKS secret key (inside its
:class:`~privfl.threshold.ThresholdParty`, never serialised); the encrypted layers,
ciphertexts it cannot decrypt alone, which it computes itself (the public initial ones, then
``W + T/N`` from each checked aggregate ``T``, :mod:`~.sumcheck`).

What a party learns: the global plaintext layers; for each of its own mini-batches the
boundary error ``e_T = dL/da_T`` (the only value jointly decrypted during training, and only
for the party that owns the batch); when the caller asks for evaluation or predictions, the
pre-activations ``u`` of the last layer for the rows it evaluates (the same as a prediction
reveals); the decrypted last layer only if every party signed its consent to a reveal. Its
bootstrapping shares are masked, its decryption shares carry flooding noise, and both are
sealed for the requester: answering other parties' requests teaches it nothing, and the
relaying server gets nothing it can fuse. Which requests it answers (signed by a party of the
roster, for a ticket of the public schedule, once) is decided by its
:class:`~.desk.ShareDesk`; a party cannot check that a boundary-error request's ``c1`` is
``e_T`` (only the batch owner holds the rows it comes from): see
``docs/security/training.md`` for what that leaves.

A mini-batch, an evaluation or a reveal is a *flow*: a generator of the party's own steps that
yields ``("boot", ct)`` (interactive bootstrapping) or ``("decrypt", ct)`` (joint decryption for
this party) and receives the refreshed ciphertext or the plaintext. :meth:`start_batch` /
:meth:`start_output` / :meth:`start_reveal` return the first signed request (bytes, with its
schedule ticket), :meth:`advance` takes the other parties' sealed shares (bytes) and returns
the next request or :class:`Done`; :meth:`answer` serves another party's request. One secret
layer: bootstrap ``u``, bootstrap ``a``, decrypt ``e_T``; two: five bootstraps (``u1, a1, u2,
a2, g1``) and ``e_T``. Without a secret layer :meth:`start_batch` does the whole step.
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from privfl._typing import FloatArray, IntArray
from privfl.crypto.threshold import (
    BootstrapRequest,
    BootstrapShare,
    Ciphertext,
    CiphertextMessage,
    DecryptionRequest,
    DecryptionShare,
)
from privfl.errors import PrivflError, ProtocolError
from privfl.threshold import ThresholdParty
from privfl.training import secret as enc
from privfl.training.desk import ShareDesk
from privfl.training.joint import Consent, SealedShare, SignedRequest
from privfl.training.messages import GlobalPlainLayers, PartyPlainLayers
from privfl.training.mlp import one_hot
from privfl.training.packing import LayerLayout, TwoLayerPacking
from privfl.training.tickets import Purpose, Ticket
from privfl.training.twin import Schedule, batch_order, plain_backward, plain_forward

# In range, |e_T| <= max|sigma'| * (|a - y| + Chebyshev error) * sum_j |W_ji| (about 0.27 * 10 *
# max|W| for 10 outputs); a slot outside the sigmoid's interval makes the polynomial explode
# (degree 13: p(12) = 13.5, then g ~ a^3): |e_T| above this is reported as leaving the range.
E_T_LIMIT = 100.0


class SigmoidRangeError(PrivflError):
    """A pre-activation of an encrypted layer left the Chebyshev sigmoid's declared range."""


Flow = Generator[tuple[str, Ciphertext], Any, Any]
Request = BootstrapRequest | DecryptionRequest


@dataclass(frozen=True)
class Done:
    """A flow's result (e.g. ``max |e_T|`` of a batch, outputs, revealed weights)."""

    value: Any


class Party:
    """One data holder (see the module doc for what it holds and learns)."""

    def __init__(
        self,
        index: int,
        session: bytes,
        x: FloatArray,
        y: IntArray,
        schedule: Schedule,
        desk: ShareDesk | None,
        layout: LayerLayout | None,
    ) -> None:
        crypto = desk.crypto if desk is not None else None
        self.index = index
        self.desk = desk
        self.name = crypto.name if crypto is not None else f"party-{index}"
        self.session = session
        self._x = np.asarray(x, dtype=np.float64)
        self._y = np.asarray(y, dtype=np.int64)
        self._yo = one_hot(self._y, schedule.sizes[-1])
        self.schedule = schedule
        self.crypto = crypto
        self.layout = layout
        self._weights: list[FloatArray] = []
        self._biases: list[FloatArray] = []
        self.two = TwoLayerPacking(layout) if layout is not None and layout.next_out else None
        self._secret: list[Ciphertext] = []
        self._global: list[Ciphertext] = []
        self._update: list[Ciphertext] = []
        self._flow: Flow | None = None
        self._pending: tuple[Ticket, str, Request] | None = None
        self._mode: tuple[Purpose, int, int, int] | None = None
        self._steps = 0
        self._consents: tuple[Consent, ...] = ()
        self.max_boundary_error = 0.0

    @property
    def samples(self) -> int:
        return int(self._y.size)

    @property
    def rows(self) -> tuple[FloatArray, IntArray]:
        """This party's own samples (features, labels)."""
        return self._x, self._y

    @property
    def plain_shapes(self) -> list[tuple[int, int]]:
        """``(out, in)`` of each plaintext layer (what a global model must carry)."""
        sizes = self.schedule.sizes
        return [(sizes[i + 1], sizes[i]) for i in range(self.schedule.plain_layers)]

    # ------------------------------------------------------------------ model exchange
    def receive_model(self, plain: GlobalPlainLayers, secret: Sequence[CiphertextMessage]) -> None:
        """Start a round from the server's global model (plaintext layers, encrypted layers)."""
        self._weights = [w.copy() for w in plain.weights]
        self._biases = [b.copy() for b in plain.biases]
        if self.crypto is not None:
            if len(secret) != self.schedule.secret_layers:
                raise ProtocolError("the global model lacks its encrypted layers")
            self._secret = [Ciphertext.from_message(self.crypto.context, m) for m in secret]
            self._global = list(self._secret)
        self._update = []

    def start_initial(self, plain: GlobalPlainLayers) -> None:
        """Round 0: the server's plaintext layers and the public initial encrypted layers,
        which this party computes itself (:func:`~.secret.initial_layers`)."""
        layout = self.layout
        if self.crypto is not None and layout is not None:
            self._global = enc.initial_layers(self.crypto, self.schedule, layout)
        self.receive_plain(plain)

    def receive_plain(self, plain: GlobalPlainLayers) -> None:
        """Start a round from the server's plaintext layers and this party's own global
        encrypted layers (the ones it computed with :meth:`apply_sum`)."""
        self._weights = [w.copy() for w in plain.weights]
        self._biases = [b.copy() for b in plain.biases]
        self._secret = list(self._global)
        self._update = []

    def apply_sum(self, totals: Sequence[CiphertextMessage], parties: int) -> None:
        """The new global encrypted layers ``W + T * (1/N)``, computed by this party from the
        layers it holds and the checked aggregates ``T`` (:mod:`~.sumcheck`): the server does
        not choose them. Deterministic: every party gets the same bytes."""
        ctx = self._crypto().context
        if len(totals) != len(self._global):
            raise ProtocolError("the aggregate has the wrong number of encrypted layers")
        self._global = [
            w + Ciphertext.from_message(ctx, t) * (1.0 / parties)
            for w, t in zip(self._global, totals, strict=True)
        ]
        self._secret = list(self._global)

    def upload(self, session: bytes, rnd: int) -> tuple[PartyPlainLayers, list[CiphertextMessage]]:
        """End of a round: the plaintext layers and the encrypted sums of this round's updates
        of the secret layers (the server averages them under encryption)."""
        plain = PartyPlainLayers(session, self.name, rnd, tuple(self._weights), tuple(self._biases))
        if self.crypto is None:
            return plain, []
        if len(self._update) != len(self._secret):
            raise ProtocolError(f"{self.name} trained no batch this round")
        return plain, [u.to_message(session, self.name) for u in self._update]

    def batches(self, epoch: int) -> list[IntArray]:
        s = self.schedule
        return batch_order(s.seed, self.index, epoch, self.samples, s.batch_size)

    # ------------------------------------------------------------------ flows
    def start_batch(self, rnd: int, epoch: int, b: int) -> bytes | None:
        """Plaintext forward of batch ``b`` of ``epoch`` (in round ``rnd``); with secret layers,
        the encrypted flow's first signed request. Without one, the whole SGD step (None)."""
        idx = self.batches(epoch)[b]
        acts = plain_forward(self._weights, self._biases, self._x[idx])
        y = self._yo[idx]
        if self.desk is None:
            plain_backward(self._weights, self._biases, acts, acts[-1] - y, self._lr)
            return None
        return self._start(self._batch_flow(acts, y), (Purpose.BOOT, rnd, epoch, b))

    def start_output(
        self,
        rnd: int,
        block: int,
        x: FloatArray,
        purpose: Purpose = Purpose.OUTPUT,
        consents: Sequence[Consent] = (),
    ) -> bytes:
        """Flow: the last layer's pre-activations for up to ``K`` rows of ``x`` (network
        inputs), decrypted for this party only: its own rows after round ``rnd``
        (``OUTPUT``, block ``block``) or rows of its choice (``PREDICT``, with every party's
        consent)."""
        mode = (purpose, rnd, 0, block)
        return self._start(self._output_flow(self.plain_outputs(x)), mode, consents)

    def start_reveal(self, consents: Sequence[Consent]) -> bytes:
        """Flow: the final encrypted layers, jointly decrypted for this party (every party's
        signed consent naming it is attached to each request)."""
        mode = (Purpose.REVEAL, self.schedule.rounds, 0, 0)
        return self._start(self._reveal_flow(), mode, consents)

    @property
    def pending_kind(self) -> str:
        """``"boot"`` or ``"decrypt"``: the kind of the pending joint step."""
        if self._pending is None:
            raise ProtocolError(f"{self.name} has no pending request")
        return self._pending[1]

    def advance(self, sealed: Sequence[bytes]) -> bytes | Done:
        """The other parties' sealed shares for the pending request -> the next signed
        request, or Done. Each share is checked (signature, recipient, ticket, request id)
        and opened by the desk."""
        crypto, desk = self._crypto(), self._desk()
        if self._flow is None or self._pending is None:
            raise ProtocolError(f"{self.name} has no pending request")
        ticket, kind, request = self._pending
        messages = [SealedShare.from_bytes(s, self.session) for s in sealed]
        shares = desk.open(ticket, request.request_id, kind, messages)
        value: Any
        if isinstance(request, BootstrapRequest):
            boot = [s for s in shares if isinstance(s, BootstrapShare)]
            own = crypto.bootstrap_share(request)
            value = crypto.finish_bootstrap(request, [own, *boot])
        else:
            dec = [s for s in shares if isinstance(s, DecryptionShare)]
            value = crypto.fuse(request, dec, self._slots)
        return self._next(value)

    def _start(
        self, flow: Flow, mode: tuple[Purpose, int, int, int], consents: Sequence[Consent] = ()
    ) -> bytes:
        if self._flow is not None:
            raise ProtocolError(f"{self.name} is already in the middle of a flow")
        self._flow, self._mode, self._steps, self._consents = flow, mode, 0, tuple(consents)
        out = self._next(None)
        if isinstance(out, Done):  # pragma: no cover - every flow asks at least once
            raise ProtocolError("a flow finished without joint work")
        return out

    def _next(self, value: Any) -> bytes | Done:
        if self._flow is None:
            raise ProtocolError(f"{self.name} has no step in progress")
        try:
            kind, ct = self._flow.send(value)
        except StopIteration as stop:
            self._flow, self._pending = None, None
            return Done(stop.value)
        except BaseException:
            self._flow, self._pending = None, None
            raise
        crypto = self._crypto()
        request = crypto.start_bootstrap(ct) if kind == "boot" else crypto.request_decryption(ct)
        ticket = self._ticket(kind)
        self._steps += 1
        consents = self._consents if ticket.purpose in (Purpose.REVEAL, Purpose.PREDICT) else ()
        desk = self._desk()
        signed = desk.sign(ticket, kind, request.to_bytes(), consents)
        self._pending = (ticket, kind, request)
        return signed.to_bytes()

    def _ticket(self, kind: str) -> Ticket:
        """The schedule's ticket for the flow's next joint step."""
        if self._mode is None:
            raise ProtocolError(f"{self.name} has no step in progress")
        purpose, rnd, epoch, index = self._mode
        step = self._steps
        if purpose is Purpose.BOOT and kind == "decrypt":
            purpose = Purpose.BOUNDARY
        if purpose is Purpose.REVEAL:
            index, step = step, 0
        return Ticket(purpose, rnd, epoch, index, step)

    def _batch_flow(self, acts: list[FloatArray], y: FloatArray) -> Flow:
        layout, w = self._layout_and_weights()
        x, n, lr = acts[-1], y.shape[0], self._lr
        low, high = self.schedule.sigmoid_range
        deg = self.schedule.sigmoid_degree
        u = yield ("boot", enc.forward_u(w[0], x, layout))
        a = yield ("boot", enc.sigmoid(u, low, high, deg))
        deltas: list[Ciphertext] = []
        if self.two is not None:
            rep_h = enc.hidden_input(a, layout, self.two, n)
            u2 = yield ("boot", enc.forward_u2(rep_h, w[1], layout, self.two, n))
            a2 = yield ("boot", enc.sigmoid(u2, low, high, deg))
            rep_g2 = enc.output_gradient2(a2, y, self.two, -lr / n)
            deltas.append(enc.weight_update2(rep_g2, rep_h, layout))
            g = yield ("boot", enc.hidden_gradient(rep_g2, w[1], a, layout, n, -n / lr))
        else:
            g = enc.output_gradient(a, y, layout)
        rep = enc.replicate(g, layout)
        e_t_ct = enc.boundary_error(rep, w[0], layout, n)
        deltas.insert(0, enc.weight_update(rep, x, lr, layout))
        self._secret = [wi + d for wi, d in zip(w, deltas, strict=True)]
        if self._update:
            deltas = [u_ + d for u_, d in zip(self._update, deltas, strict=True)]
        self._update = deltas
        plain = yield ("decrypt", e_t_ct)
        e_t = layout.unpack_boundary(plain, n)
        largest = float(np.max(np.abs(e_t)))
        self.max_boundary_error = max(self.max_boundary_error, largest)
        if not largest <= E_T_LIMIT:
            raise SigmoidRangeError(
                f"{self.name}: boundary error {largest:.3g} exceeds {E_T_LIMIT}: a "
                f"pre-activation left the sigmoid range {self.schedule.sigmoid_range} "
                "(lower the learning rate or declare a wider range)"
            )
        plain_backward(self._weights, self._biases, acts, e_t, lr)
        return largest

    def _output_flow(self, h: FloatArray) -> Flow:
        layout, w = self._layout_and_weights()
        n = h.shape[0]
        u = enc.forward_u(w[0], h, layout)
        if self.two is not None:
            low, high = self.schedule.sigmoid_range
            u = yield ("boot", u)
            a = yield ("boot", enc.sigmoid(u, low, high, self.schedule.sigmoid_degree))
            rep_h = enc.hidden_input(a, layout, self.two, n)
            plain = yield ("decrypt", enc.forward_u2(rep_h, w[1], layout, self.two, n))
            return self.two.unpack_outputs(plain, n)
        plain = yield ("decrypt", u)
        return layout.unpack_outputs(plain, n)

    def _reveal_flow(self) -> Flow:
        layout, w = self._layout_and_weights()
        plain = yield ("decrypt", w[0])
        out = [layout.unpack_weights(plain)]
        if self.two is not None:
            plain = yield ("decrypt", w[1])
            out.append(self.two.unpack_weights(plain))
        return out

    # ------------------------------------------------------------------ serving the others
    def consent(self, recipient: str, purpose: Purpose, limit: int) -> bytes:
        """This party's signed consent that ``recipient`` may ask ``limit`` reveal or
        prediction steps (a decision of this party's operator)."""
        return self._desk().consent(recipient, purpose, limit).to_bytes()

    def answer(self, data: bytes) -> bytes:
        """Another party's signed request -> this party's share sealed for it, or a refusal
        (:class:`~.desk.ShareDesk` decides; a refused request makes no share)."""
        return self._desk().answer(SignedRequest.from_bytes(data, self.session)).to_bytes()

    # ------------------------------------------------------------------ outputs
    def plain_outputs(self, x: FloatArray) -> FloatArray:
        """Last activation of the plaintext layers for ``x`` (the secret layer's input)."""
        return plain_forward(self._weights, self._biases, np.asarray(x, dtype=np.float64))[-1]

    def plain_layers(self) -> tuple[list[FloatArray], list[FloatArray]]:
        return [w.copy() for w in self._weights], [b.copy() for b in self._biases]

    # ------------------------------------------------------------------ helpers
    @property
    def _lr(self) -> float:
        return self.schedule.learning_rate

    def _crypto(self) -> ThresholdParty:
        return self._desk().crypto

    def _desk(self) -> ShareDesk:
        if self.desk is None:
            raise ProtocolError(f"{self.name} has no encrypted layer")
        return self.desk

    @property
    def _slots(self) -> int:
        if self.layout is None:
            raise ProtocolError(f"{self.name} has no encrypted layer")
        return self.layout.slots

    def _layout_and_weights(self) -> tuple[LayerLayout, list[Ciphertext]]:
        if self.layout is None or not self._secret:
            raise ProtocolError(f"{self.name} has no encrypted layer (receive the model first)")
        return self.layout, self._secret
