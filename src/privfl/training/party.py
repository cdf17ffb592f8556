"""SmartCryptNN's party: its data, the plaintext layers, its threshold key share.

What a party holds: its samples; the plaintext layers in the clear (the global ones each round,
then its local updates); its own share of the threshold-CKKS secret key (inside its
:class:`~privfl.crypto.threshold.ThresholdParty`, never serialised); a copy of the encrypted
last layer, a ciphertext it cannot decrypt alone.

What a party learns: the global plaintext layers; for each of its own mini-batches the
boundary error ``e_T = dL/da_T`` (the only value jointly decrypted during training, and only
for the party that owns the batch); when the caller asks for evaluation or predictions, the
pre-activations ``u`` of the last layer for the rows it evaluates (the same as a prediction
reveals); the decrypted last layer only if the caller asks to reveal it at the end. Its
bootstrapping shares are masked, its decryption shares carry flooding noise: answering other
parties' requests teaches it nothing.

One mini-batch with a secret last layer is four steps with joint work between them:
:meth:`start_batch` (plaintext forward, encrypted ``u``) -> bootstrap ->
:meth:`sigmoid_step` (Chebyshev sigmoid) -> bootstrap -> :meth:`backward_step` (encrypted
backward, weight update, ``e_T``) -> joint decryption -> :meth:`finish_batch` (plaintext
backward). Without a secret layer :meth:`start_batch` does the whole step.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

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
from privfl.training.packing import LayerLayout
from privfl.training.twin import Schedule, batch_order, plain_backward, plain_forward

# In range, |e_T| <= max|sigma'| * (|a - y| + Chebyshev error) * sum_j |W_ji| (about 0.27 * 10 *
# max|W| for 10 outputs); a slot outside the sigmoid's interval makes the polynomial explode
# (degree 13: p(12) = 13.5, then g ~ a^3): |e_T| above this is reported as leaving the range.
E_T_LIMIT = 100.0


class SigmoidRangeError(PrivflError):
    """A pre-activation of an encrypted layer left the Chebyshev sigmoid's declared range."""


@dataclass
class _Batch:
    x: FloatArray  # input of the secret layer (last plaintext activation)
    y: FloatArray  # one-hot targets
    acts: list[FloatArray]
    ct: Ciphertext | None = None
    request: DecryptionRequest | BootstrapRequest | None = None


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
        self._secret: Ciphertext | None = None
        self._update: Ciphertext | None = None
        self._batch: _Batch | None = None
        self._pending_output: tuple[int, DecryptionRequest] | None = None
        self.max_boundary_error = 0.0

    @property
    def samples(self) -> int:
        return int(self._y.size)

    # ------------------------------------------------------------------ model exchange
    def receive_model(self, plain: GlobalPlainLayers, secret: CiphertextMessage | None) -> None:
        """Start a round from the server's global model (plaintext layers, encrypted layer)."""
        self._weights = [w.copy() for w in plain.weights]
        self._biases = [b.copy() for b in plain.biases]
        if self.crypto is not None:
            if secret is None:
                raise ProtocolError("the global model lacks its encrypted layer")
            self._secret = Ciphertext.from_message(self.crypto.context, secret)
        self._update = None

    def upload(self, session: bytes, rnd: int) -> tuple[PartyPlainLayers, CiphertextMessage | None]:
        """End of a round: the plaintext layers and the encrypted sum of this round's updates
        of the last layer (the server averages them under encryption)."""
        plain = PartyPlainLayers(session, self.name, rnd, tuple(self._weights), tuple(self._biases))
        if self.crypto is None:
            return plain, None
        if self._update is None:
            raise ProtocolError(f"{self.name} trained no batch this round")
        return plain, self._update.to_message(session, self.name)

    def batches(self, epoch: int) -> list[IntArray]:
        s = self.schedule
        return batch_order(s.seed, self.index, epoch, self.samples, s.batch_size)

    # ------------------------------------------------------------------ one mini-batch
    def start_batch(self, idx: IntArray) -> BootstrapRequest | None:
        """Plaintext forward; with a secret layer, ``u`` under encryption and the request to
        bootstrap it. Without one, the whole SGD step (returns None)."""
        acts = plain_forward(self._weights, self._biases, self._x[idx])
        y = self._yo[idx]
        if self.crypto is None:
            plain_backward(self._weights, self._biases, acts, acts[-1] - y, self._lr)
            return None
        layout, w = self._layout_and_weights()
        u = enc.forward_u(w, acts[-1], layout)
        request = self.crypto.start_bootstrap(u)
        self._batch = _Batch(acts[-1], y, acts, request=request)
        return request

    def sigmoid_step(self, shares: Sequence[BootstrapShare]) -> BootstrapRequest:
        """Refreshed ``u`` -> Chebyshev sigmoid -> request to bootstrap ``a``."""
        batch, crypto = self._current(BootstrapRequest)
        assert isinstance(batch.request, BootstrapRequest)
        u = crypto.finish_bootstrap(batch.request, shares)
        low, high = self.schedule.sigmoid_range
        a = enc.sigmoid(u, low, high, self.schedule.sigmoid_degree)
        batch.request = crypto.start_bootstrap(a)
        return batch.request

    def backward_step(self, shares: Sequence[BootstrapShare]) -> DecryptionRequest:
        """Refreshed ``a`` -> encrypted backward pass: the last layer's update (applied to the
        local copy and added to the round's update) and ``e_T``, to be jointly decrypted."""
        batch, crypto = self._current(BootstrapRequest)
        assert isinstance(batch.request, BootstrapRequest)
        a = crypto.finish_bootstrap(batch.request, shares)
        layout, w = self._layout_and_weights()
        rep = enc.replicate(enc.output_gradient(a, batch.y, layout), layout)
        e_t = enc.boundary_error(rep, w, layout, batch.x.shape[0])
        delta = enc.weight_update(rep, batch.x, self._lr, layout)
        self._secret = w + delta
        self._update = delta if self._update is None else self._update + delta
        batch.request = crypto.request_decryption(e_t)
        return batch.request

    def finish_batch(self, shares: Sequence[DecryptionShare]) -> float:
        """Fuse ``e_T`` (only this party sees it), check it, backpropagate in the clear.
        Returns ``max |e_T|``; raises :class:`SigmoidRangeError` when it exploded."""
        batch, crypto = self._current(DecryptionRequest)
        assert isinstance(batch.request, DecryptionRequest) and self.layout is not None
        plain = crypto.fuse(batch.request, shares, self.layout.slots)
        e_t = self.layout.unpack_boundary(plain, batch.x.shape[0])
        self._batch = None
        largest = float(np.max(np.abs(e_t)))
        self.max_boundary_error = max(self.max_boundary_error, largest)
        if not largest <= E_T_LIMIT:
            raise SigmoidRangeError(
                f"{self.name}: boundary error {largest:.3g} exceeds {E_T_LIMIT}: a "
                f"pre-activation left the sigmoid range {self.schedule.sigmoid_range} "
                "(lower the learning rate or declare a wider range)"
            )
        plain_backward(self._weights, self._biases, batch.acts, e_t, self._lr)
        return largest

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

    def output_request(self, x: FloatArray) -> DecryptionRequest:
        """Encrypted pre-activations ``u`` of the last layer for up to ``K`` rows of ``x``
        (inputs of the network) and the request to decrypt them for this party."""
        layout, w = self._layout_and_weights()
        h = self.plain_outputs(x)
        request = self._crypto().request_decryption(enc.forward_u(w, h, layout))
        self._pending_output = (h.shape[0], request)
        return request

    def finish_output(self, shares: Sequence[DecryptionShare]) -> FloatArray:
        if self._pending_output is None or self.layout is None:
            raise ProtocolError(f"{self.name} has no pending output request")
        rows, request = self._pending_output
        self._pending_output = None
        plain = self._crypto().fuse(request, shares, self.layout.slots)
        return self.layout.unpack_outputs(plain, rows)

    def reveal_request(self) -> DecryptionRequest:
        """Ask the parties to decrypt the final last layer for this party (reveal)."""
        _, w = self._layout_and_weights()
        request = self._crypto().request_decryption(w)
        self._pending_output = (0, request)
        return request

    def finish_reveal(self, shares: Sequence[DecryptionShare]) -> tuple[FloatArray, FloatArray]:
        if self._pending_output is None or self.layout is None:
            raise ProtocolError(f"{self.name} has no pending reveal")
        _, request = self._pending_output
        self._pending_output = None
        plain = self._crypto().fuse(request, shares, self.layout.slots)
        return self.layout.unpack_weights(plain)

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

    def _layout_and_weights(self) -> tuple[LayerLayout, Ciphertext]:
        if self.layout is None or self._secret is None:
            raise ProtocolError(f"{self.name} has no encrypted layer (receive the model first)")
        return self.layout, self._secret

    def _current(self, kind: type) -> tuple[_Batch, ThresholdParty]:
        if self._batch is None or not isinstance(self._batch.request, kind):
            raise ProtocolError(f"{self.name}: no mini-batch waiting for this step")
        return self._batch, self._crypto()
