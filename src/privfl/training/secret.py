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
from privfl.crypto.threshold import Ciphertext
from privfl.training.packing import LayerLayout


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
