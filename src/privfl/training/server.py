"""SmartCryptNN's server: coordinates the rounds and averages the parties' models.

What the server holds: the global plaintext layers; the encrypted layers (ciphertexts under
the joint key); the joint public and evaluation keys (its
:class:`~privfl.threshold.ThresholdServer`). It holds **no** key share, so it can
neither decrypt nor take part in a decryption.

Poisoning bound (optional, ``max_update_norm``): each party's plaintext-layer update is
clipped to that L2 norm before averaging (it is in the clear here); the encrypted update is
averaged as sent.

What the server learns: the parties' plaintext layers after each round (as in the paper:
those layers are not protected) and ciphertexts. The initial encrypted layer is public (every
role computes it from the schedule); every later value of that layer depends on the parties'
data and stays encrypted. The server does not choose it: it sends the parties the sum of
their signed encrypted updates, which they check before each computes the new layer
(:mod:`~.sumcheck`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from privfl._typing import FloatArray
from privfl.crypto.threshold import Ciphertext, CiphertextMessage
from privfl.errors import InputError, ProtocolError
from privfl.threshold import ThresholdServer
from privfl.training.messages import GlobalPlainLayers, PartyPlainLayers
from privfl.training.packing import LayerLayout
from privfl.training.secret import initial_layers
from privfl.training.sumcheck import sum_updates
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
        max_update_norm: float | None = None,
    ) -> None:
        if max_update_norm is not None and not max_update_norm > 0:
            raise InputError("max_update_norm must be positive (or None: no bound)")
        self.max_update_norm = max_update_norm
        self.clipped: list[tuple[int, str, float]] = []
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
            # the public initial layers, as every party computes them (no role chooses them)
            self._secret = initial_layers(crypto, schedule, layout)

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
    ) -> list[CiphertextMessage]:
        """Equal-weight average of the plaintext layers in the clear; for each encrypted layer
        the sum ``T = sum_k D_k`` of the parties' encrypted updates (coefficient-wise, all at
        one level and degree: refused otherwise), returned for the parties, who check it
        (:mod:`~.sumcheck`) and compute ``W + (1/N) T`` themselves. The server keeps its own
        copy of that layer only for :meth:`global_model`; the parties never take it after
        round 0."""
        n = len(plains)
        if n == 0 or len(updates) != n or len({p.sender for p in plains}) != n:
            raise ProtocolError("aggregation needs one model from each party")
        deltas = [self._bounded_update(p) for p in plains]
        for layer in range(len(self._weights)):
            self._weights[layer] = self._weights[layer] + np.mean([d[0][layer] for d in deltas], 0)
            self._biases[layer] = self._biases[layer] + np.mean([d[1][layer] for d in deltas], 0)
        if self.crypto is None:
            return []
        if any(len(u) != len(self._secret) for u in updates):
            raise ProtocolError("a party sent the wrong number of encrypted updates")
        ctx = self.crypto.context
        totals = []
        for layer in range(len(self._secret)):
            total = sum_updates(ctx, self.session, self.name, [u[layer] for u in updates])
            self._secret[layer] = self._secret[layer] + Ciphertext.from_message(ctx, total) * (
                1.0 / n
            )
            totals.append(total)
        return totals

    def _bounded_update(self, plain: PartyPlainLayers) -> tuple[list[FloatArray], list[FloatArray]]:
        """The party's plaintext-layer update (its layers minus the global ones), scaled down
        to L2 norm ``max_update_norm`` if it is longer (recorded in :attr:`clipped`). A
        deviating party can still move the plaintext layers by that much per round, and its
        encrypted update is not bounded (see ``docs/security/training.md``)."""
        dw = [w - g for w, g in zip(plain.weights, self._weights, strict=True)]
        db = [b - g for b, g in zip(plain.biases, self._biases, strict=True)]
        bound = self.max_update_norm
        if bound is None:
            return dw, db
        norm = float(np.sqrt(sum(float(np.sum(a * a)) for a in (*dw, *db))))
        if norm <= bound:
            return dw, db
        self.clipped.append((plain.round, plain.sender, norm))
        scale = bound / norm
        return [a * scale for a in dw], [a * scale for a in db]
