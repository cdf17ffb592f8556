"""SmartCryptNN's server: coordinates the rounds and averages the parties' models.

What the server holds: the global plaintext layers; the encrypted last layer (a ciphertext
under the joint key); the joint public and evaluation keys (its
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
from privfl.training.packing import LayerLayout
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
        self._secret: Ciphertext | None = None
        if crypto is not None and layout is not None:
            # the server initialises the model, so it encrypts the initial last layer
            packed = layout.pack_weights(model.weights[t], model.biases[t])
            self._secret = crypto.encrypt(packed)

    @property
    def shapes(self) -> list[tuple[int, int]]:
        return [(int(w.shape[0]), int(w.shape[1])) for w in self._weights]

    def global_model(self, rnd: int) -> tuple[GlobalPlainLayers, CiphertextMessage | None]:
        """The model every party starts round ``rnd`` from."""
        plain = GlobalPlainLayers(
            self.session, self.name, rnd, tuple(self._weights), tuple(self._biases)
        )
        secret = None if self._secret is None else self._secret.to_message(self.session, "server")
        return plain, secret

    def aggregate(
        self, plains: Sequence[PartyPlainLayers], updates: Sequence[CiphertextMessage | None]
    ) -> None:
        """Equal-weight average: the plaintext layers in the clear, the encrypted layer as
        ``W + (1/N) sum_k D_k`` with ``D_k`` party ``k``'s encrypted update of the round."""
        n = len(plains)
        if n == 0 or len(updates) != n or len({p.sender for p in plains}) != n:
            raise ProtocolError("aggregation needs one model from each party")
        for layer in range(len(self._weights)):
            self._weights[layer] = np.mean([p.weights[layer] for p in plains], axis=0)
            self._biases[layer] = np.mean([p.biases[layer] for p in plains], axis=0)
        if self.crypto is None or self._secret is None:
            return
        cts = []
        for u in updates:
            if u is None:
                raise ProtocolError("a party sent no encrypted update")
            cts.append(Ciphertext.from_message(self.crypto.context, u))
        total = cts[0]
        for ct in cts[1:]:
            total = total + ct
        self._secret = self._secret + total * (1.0 / n)
