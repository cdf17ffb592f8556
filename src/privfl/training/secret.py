"""Arithmetic of the encrypted last layer on ciphertexts (pure functions; the party that owns
the mini-batch runs them, the joint steps between them are driven by the protocol).

Levels with the ``"training"`` depth 11 (weights at level <= 4, see :mod:`.params`)::

    u      = mask * rotsum_i(W * tile(l))        W + 2      -> bootstrap
    a      = chebyshev_sigmoid(u)                 0 + 5      -> bootstrap
    g      = ((a - y) * mask) * (a - a^2)         2          (grad of u, sign e = a - y)
    rep    = replicate_i(g)                       2
    e_T    = mask * rotsum_j(rep * W)             W + 2      -> joint decryption
    dW     = batchsum(rep * tile(-lr/B [l, 1]))   3          (weights and bias at once)

``e_T`` is the only value that leaves the ciphertexts during training.
"""

from __future__ import annotations

from collections.abc import Sequence

from privfl._typing import FloatArray
from privfl.crypto.threshold import Ciphertext, CiphertextHolder
from privfl.training.packing import LayerLayout, TwoLayerPacking
from privfl.training.twin import Schedule, initial_model


def initial_layers(
    holder: CiphertextHolder, schedule: Schedule, layout: LayerLayout
) -> list[Ciphertext]:
    """The initial encrypted layers as *trivial* ciphertexts ``(encode(W_0), 0)`` of the public
    initial model (:func:`~.twin.initial_model`): ``Enc(0) - Enc(0)`` is exactly zero, plus the
    packed weights. Deterministic: every role computes the same bytes from the public schedule,
    so no role chooses them and nobody has to check them. ``W_0`` is public (its ``c1`` is 0);
    every later layer adds the parties' fresh encrypted updates."""
    model = initial_model(schedule)
    t = schedule.plain_layers
    values = [layout.pack_weights(model.weights[t], model.biases[t])]
    if layout.next_out:
        values.append(
            TwoLayerPacking(layout).pack_weights(model.weights[t + 1], model.biases[t + 1])
        )
    zero = holder.encrypt([0.0])
    return [(zero - zero) + list(v) for v in values]


def _rotsum(ct: Ciphertext, steps: Sequence[int]) -> Ciphertext:
    for s in steps:
        ct = ct + ct.rotate(s)
    return ct


def forward_u(w: Ciphertext, x: FloatArray, layout: LayerLayout) -> Ciphertext:
    """``u = W [x, 1]`` per sample at ``slot(n, j, 0)``, zero in every other slot."""
    t = w * list(layout.tile_inputs(x))
    t = _rotsum(t, layout.input_sum_steps)
    return t * list(layout.output_mask(x.shape[0]))


def sigmoid(u: Ciphertext, low: float, high: float, degree: int) -> Ciphertext:
    """Chebyshev sigmoid on ``[low, high]`` (slots outside the interval are meaningless)."""
    return u.logistic(low, high, degree)


def output_gradient(a: Ciphertext, y: FloatArray, layout: LayerLayout) -> Ciphertext:
    """``g = (a - y) * a (1 - a)`` at ``slot(n, j, 0)`` for the batch's samples, zero elsewhere
    (the mask also clears ``sigma(0) = 0.5`` from the unused slots)."""
    n = y.shape[0]
    e = (a - list(layout.pack_outputs(y))) * list(layout.output_mask(n))
    return e * (a - a * a)


def replicate(g: Ciphertext, layout: LayerLayout) -> Ciphertext:
    """``g[n, j]`` copied to every ``slot(n, j, i)``."""
    return _rotsum(g, layout.replicate_steps)


def boundary_error(rep: Ciphertext, w: Ciphertext, layout: LayerLayout, n: int) -> Ciphertext:
    """``e_T[n, i] = sum_j g[n, j] W[j, i]`` at ``slot(n, 0, i)``, zero elsewhere (the mask
    removes the partial sums and the bias column, which would reveal more than ``e_T``)."""
    t = _rotsum(rep * w, layout.output_sum_steps)
    return t * list(layout.boundary_mask(n))


def weight_update(rep: Ciphertext, x: FloatArray, lr: float, layout: LayerLayout) -> Ciphertext:
    """``-lr/B * sum_n g[n]^T [x_n, 1]``, replicated in every block (weights and bias)."""
    factor = -lr / x.shape[0]
    return _rotsum(rep * list(layout.tile_inputs(x, factor)), layout.batch_sum_steps)


# ---------------------------------------------------------------------- two secret layers
# (first layer column-packed as above, second row-packed: TwoLayerPacking). Levels with the
# weights at 4: hidden = a1 * mask + 1 (1); u2 = mask * rotsum_j(rep(hidden) * W2) (6) ->
# bootstrap; a2 -> bootstrap; g2s = -lr/B (a2 - y) a2 (1 - a2) (2); e1 = rotsum_k(rep(g2s) W2)
# (5); g1 = e1 * (a1 - a1^2) * (-B/lr) mask (7) -> bootstrap; then the one-layer backward.


def hidden_input(a1: Ciphertext, layout: LayerLayout, two: TwoLayerPacking, n: int) -> Ciphertext:
    """The first secret layer's activation as the second's input: masked, plus the constant 1
    of the second layer's bias, replicated along the second layer's outputs."""
    h = a1 * list(layout.output_mask(n)) + list(two.bias_input(n))
    return _rotsum(h, layout.replicate_steps)


def forward_u2(
    rep_h: Ciphertext, w2: Ciphertext, layout: LayerLayout, two: TwoLayerPacking, n: int
) -> Ciphertext:
    """``u2[n, k] = sum_j W2[k, j] h[n, j] + b2[k]`` at ``slot(n, 0, k)``, zero elsewhere."""
    t = _rotsum(rep_h * w2, layout.output_sum_steps)
    return t * list(two.output_mask(n))


def output_gradient2(
    a2: Ciphertext, y: FloatArray, two: TwoLayerPacking, factor: float
) -> Ciphertext:
    """``factor * (a2 - y) * a2 (1 - a2)`` at ``slot(n, 0, k)``, replicated along ``j``."""
    e = (a2 - list(two.pack_outputs(y))) * list(two.output_mask(y.shape[0], factor))
    g = e * (a2 - a2 * a2)
    return _rotsum(g, two.layout.output_replicate_steps)


def hidden_gradient(
    rep_g2: Ciphertext, w2: Ciphertext, a1: Ciphertext, layout: LayerLayout, n: int, unscale: float
) -> Ciphertext:
    """``g1[n, j] = (sum_k g2[n, k] W2[k, j]) * a1 (1 - a1)`` at ``slot(n, j, 0)`` (``rep_g2``
    carries ``factor * g2``: ``unscale`` = 1/factor, folded into the mask)."""
    e1 = _rotsum(rep_g2 * w2, layout.input_sum_steps)
    return (e1 * (a1 - a1 * a1)) * list(layout.output_mask(n) * unscale)


def weight_update2(rep_g2: Ciphertext, rep_h: Ciphertext, layout: LayerLayout) -> Ciphertext:
    """``factor * sum_n g2[n] [h_n, 1]^T`` in the second layer's packing (``rep_g2`` carries the
    factor ``-lr/B``)."""
    return _rotsum(rep_g2 * rep_h, layout.batch_sum_steps)
