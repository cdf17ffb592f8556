"""SmartCryptNN's server: coordinates the rounds and averages the parties' models.

What the server holds: the global plaintext layers; the encrypted layers (ciphertexts under
the joint key); the joint public and evaluation keys (its
:class:`~privfl.crypto.threshold.ThresholdServer`). It holds **no** key share, so it can
neither decrypt nor take part in a decryption.

What the server learns: the parties' plaintext layers after each round (as in the paper:
those layers are not protected) and ciphertexts. It initialises the model, so it knows the
initial encrypted layer; every later value of that layer depends on the parties' data and
stays encrypted.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from privfl.crypto.threshold import Ciphertext, CiphertextMessage, ThresholdServer
from privfl.errors import ProtocolError
from privfl.training.messages import GlobalPlainLayers, PartyPlainLayers
from privfl.training.packing import LayerLayout, TwoLayerPacking
from privfl.training.twin import Schedule, initial_model


class Server:
    """The coordinator and aggregator (see the module doc for what it holds and learns)."""

    name = "server"

    def __init__(
        self,
        schedule: Schedule,
        session: bytes,
        crypto: ThresholdServer | None,
        layout: LayerLayout | None,
    ) -> None:
        self.schedule = schedule
        self.session = session
        self.crypto = crypto
        self.layout = layout
        model = initial_model(schedule)
        t = schedule.plain_layers
        self._weights = model.weights[:t]
        self._biases = model.biases[:t]
        self._secret: list[Ciphertext] = []
        if crypto is not None and layout is not None:
            # the server initialises the model, so it encrypts the initial secret layers
            self._secret.append(
                crypto.encrypt(layout.pack_weights(model.weights[t], model.biases[t]))
            )
            if layout.next_out:
                two = TwoLayerPacking(layout)
                packed = two.pack_weights(model.weights[t + 1], model.biases[t + 1])
                self._secret.append(crypto.encrypt(packed))

    @property
    def shapes(self) -> list[tuple[int, int]]:
        return [(int(w.shape[0]), int(w.shape[1])) for w in self._weights]

    def global_model(self, rnd: int) -> tuple[GlobalPlainLayers, list[CiphertextMessage]]:
        """The model every party starts round ``rnd`` from."""
        plain = GlobalPlainLayers(
            self.session, self.name, rnd, tuple(self._weights), tuple(self._biases)
        )
        return plain, [ct.to_message(self.session, self.name) for ct in self._secret]

    def aggregate(
        self, plains: Sequence[PartyPlainLayers], updates: Sequence[Sequence[CiphertextMessage]]
    ) -> None:
        """Equal-weight average: the plaintext layers in the clear, each encrypted layer as
        ``W + (1/N) sum_k D_k`` with ``D_k`` party ``k``'s encrypted update of the round."""
        n = len(plains)
        if n == 0 or len(updates) != n or len({p.sender for p in plains}) != n:
            raise ProtocolError("aggregation needs one model from each party")
        for layer in range(len(self._weights)):
            self._weights[layer] = np.mean([p.weights[layer] for p in plains], axis=0)
            self._biases[layer] = np.mean([p.biases[layer] for p in plains], axis=0)
        if self.crypto is None:
            return
        if any(len(u) != len(self._secret) for u in updates):
            raise ProtocolError("a party sent the wrong number of encrypted updates")
        ctx = self.crypto.context
        for layer in range(len(self._secret)):
            total = Ciphertext.from_message(ctx, updates[0][layer])
            for u in updates[1:]:
                total = total + Ciphertext.from_message(ctx, u[layer])
            self._secret[layer] = self._secret[layer] + total * (1.0 / n)
