"""SmartCryptNN's party: its data, the plaintext layers, its threshold key share.

What a party holds: its samples; the plaintext layers in the clear (the global ones each round,
then its local updates); its own share of the threshold-CKKS secret key (inside its
:class:`~privfl.crypto.threshold.ThresholdParty`, never serialised); a copy of the encrypted
layers, ciphertexts it cannot decrypt alone.

What a party learns: the global plaintext layers; for each of its own mini-batches the
boundary error ``e_T = dL/da_T`` (the only value jointly decrypted during training, and only
for the party that owns the batch); when the caller asks for evaluation or predictions, the
pre-activations ``u`` of the last layer for the rows it evaluates (the same as a prediction
reveals); the decrypted last layer only if the caller asks to reveal it at the end. Its
bootstrapping shares are masked, its decryption shares carry flooding noise: answering other
parties' requests teaches it nothing. Semi-honest model (as the paper): a decryption request
carries only ``c1``, so the parties cannot check *what* they help decrypt; a party that asked
for the weights instead of ``e_T`` would get them (out of scope, as in SmartCryptNN).

A mini-batch, an evaluation or a reveal is a *flow*: a generator of the party's own steps that
yields ``("boot", ct)`` (interactive bootstrapping) or ``("decrypt", ct)`` (joint decryption for
this party) and receives the refreshed ciphertext or the plaintext. :meth:`start_batch` /
:meth:`start_output` / :meth:`start_reveal` return the first request, :meth:`advance` takes
the other parties' shares and returns the next request or :class:`Done`. One secret layer:
bootstrap ``u``, bootstrap ``a``, decrypt ``e_T``; two: five bootstraps (``u1, a1, u2, a2, g1``)
and ``e_T``. Without a secret layer :meth:`start_batch` does the whole step.
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
    ThresholdParty,
)
from privfl.errors import PrivflError, ProtocolError
from privfl.training import secret as enc
from privfl.training.messages import GlobalPlainLayers, PartyPlainLayers
from privfl.training.mlp import one_hot
from privfl.training.packing import LayerLayout, TwoLayerPacking
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
        crypto: ThresholdParty | None,
        layout: LayerLayout | None,
    ) -> None:
        self.index = index
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
        self._update: list[Ciphertext] = []
        self._flow: Flow | None = None
        self._request: Request | None = None
        self.max_boundary_error = 0.0

    @property
    def samples(self) -> int:
        return int(self._y.size)

    # ------------------------------------------------------------------ model exchange
    def receive_model(self, plain: GlobalPlainLayers, secret: Sequence[CiphertextMessage]) -> None:
        """Start a round from the server's global model (plaintext layers, encrypted layers)."""
        self._weights = [w.copy() for w in plain.weights]
        self._biases = [b.copy() for b in plain.biases]
        if self.crypto is not None:
            if len(secret) != self.schedule.secret_layers:
                raise ProtocolError("the global model lacks its encrypted layers")
            self._secret = [Ciphertext.from_message(self.crypto.context, m) for m in secret]
        self._update = []

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
    def start_batch(self, idx: IntArray) -> Request | None:
        """Plaintext forward; with secret layers, the encrypted flow's first request. Without
        one, the whole SGD step (returns None)."""
        acts = plain_forward(self._weights, self._biases, self._x[idx])
        y = self._yo[idx]
        if self.crypto is None:
            plain_backward(self._weights, self._biases, acts, acts[-1] - y, self._lr)
            return None
        return self._start(self._batch_flow(acts, y))

    def start_output(self, x: FloatArray) -> Request:
        """Flow: the last layer's pre-activations for up to ``K`` rows of ``x`` (network
        inputs), decrypted for this party only."""
        return self._start(self._output_flow(self.plain_outputs(x)))

    def start_reveal(self) -> Request:
        """Flow: the current encrypted layers, jointly decrypted for this party."""
        return self._start(self._reveal_flow())

    def advance(
        self, shares: Sequence[BootstrapShare] | Sequence[DecryptionShare]
    ) -> Request | Done:
        """The other parties' shares for the pending request -> the next request, or Done."""
        crypto = self._crypto()
        if self._flow is None or self._request is None:
            raise ProtocolError(f"{self.name} has no pending request")
        request = self._request
        if isinstance(request, BootstrapRequest):
            value: Any = crypto.finish_bootstrap(request, shares)  # type: ignore[arg-type]
        else:
            value = crypto.fuse(request, shares, self._slots)  # type: ignore[arg-type]
        return self._next(value)

    def _start(self, flow: Flow) -> Request:
        if self._flow is not None:
            raise ProtocolError(f"{self.name} is already in the middle of a flow")
        self._flow = flow
        out = self._next(None)
        if isinstance(out, Done):  # pragma: no cover - every flow asks at least once
            raise ProtocolError("a flow finished without joint work")
        return out

    def _next(self, value: Any) -> Request | Done:
        if self._flow is None:
            raise ProtocolError(f"{self.name} has no step in progress")
        try:
            kind, ct = self._flow.send(value)
        except StopIteration as stop:
            self._flow, self._request = None, None
            return Done(stop.value)
        except BaseException:
            self._flow, self._request = None, None
            raise
        crypto = self._crypto()
        self._request = (
            crypto.start_bootstrap(ct) if kind == "boot" else crypto.request_decryption(ct)
        )
        return self._request

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
    def bootstrap_share(self, request: BootstrapRequest) -> BootstrapShare:
        """Masked bootstrapping shares for another party's (or its own) ciphertext."""
        return self._crypto().bootstrap_share(request)

    def decryption_share(self, request: DecryptionRequest) -> DecryptionShare:
        """A flooded decryption share for the requester (learns nothing)."""
        return self._crypto().decryption_share(request)

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
        if self.crypto is None:
            raise ProtocolError(f"{self.name} has no encrypted layer")
        return self.crypto

    @property
    def _slots(self) -> int:
        if self.layout is None:
            raise ProtocolError(f"{self.name} has no encrypted layer")
        return self.layout.slots

    def _layout_and_weights(self) -> tuple[LayerLayout, list[Ciphertext]]:
        if self.layout is None or not self._secret:
            raise ProtocolError(f"{self.name} has no encrypted layer (receive the model first)")
        return self.layout, self._secret
