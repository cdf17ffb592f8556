"""Slot layout of an encrypted last layer (SmartCryptNN's secret layer, batched mode): pure
functions, no cryptography.

A layer with ``n_in`` inputs and ``n_out`` outputs is packed with the bias as an extra input
fixed to 1 (``W[j, n_in] = b_j``), so weights and bias travel in **one** ciphertext.
``R = pow2(n_in + 1)``, ``C = pow2(n_out)``, a sample block holds ``R * C`` slots and a
mini-batch of ``B`` samples uses ``K = pow2(B)`` blocks; the ciphertext has ``K * R * C`` slots
(the parameter set's batch size, so rotations are cyclic over exactly those slots)::

    slot(n, j, i) = n * R * C + j * R + i      sample n, output j, input i

The weights are replicated in every block (the batch sum by ``log2 K`` block rotations keeps
them replicated). Forward: product with the tiled plaintext inputs, rotate-and-sum over ``i``
(steps ``1 .. R/2``), mask: ``u[n, j]`` sits at ``slot(n, j, 0)``. Backward: the output error
is replicated over ``i`` (steps ``-1 .. -R/2``), multiplied by the weights and summed over
``j`` (steps ``R .. R*C/2``): the boundary error ``e_T[n, i]`` sits at ``slot(n, 0, i)``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from privfl._typing import FloatArray
from privfl.errors import InputError


def pow2(n: int) -> int:
    """Smallest power of two >= ``n`` (>= 1)."""
    return 1 << max(0, int(n) - 1).bit_length()


@dataclass(frozen=True)
class LayerLayout:
    """Where the weights, inputs, outputs and boundary errors of one secret layer sit."""

    n_in: int
    n_out: int
    batch: int
    next_out: int = 0  # outputs of a second secret layer after this one (0: none)

    def __post_init__(self) -> None:
        if min(self.n_in, self.n_out, self.batch) < 1 or self.next_out < 0:
            raise InputError("layer sizes and the batch size must be positive")

    @property
    def rows(self) -> int:  # R: inputs + bias (and the next layer's outputs), rounded up
        return pow2(max(self.n_in + 1, self.next_out))

    @property
    def cols(self) -> int:  # C: outputs (+ the next layer's bias input), rounded up
        return pow2(self.n_out + (1 if self.next_out else 0))

    @property
    def block(self) -> int:
        return self.rows * self.cols

    @property
    def blocks(self) -> int:  # K
        return pow2(self.batch)

    @property
    def slots(self) -> int:
        return self.blocks * self.block

    # --------------------------------------------------------------------- rotation steps
    @property
    def input_sum_steps(self) -> tuple[int, ...]:
        return tuple(1 << k for k in range(self.rows.bit_length() - 1))

    @property
    def replicate_steps(self) -> tuple[int, ...]:
        return tuple(-s for s in self.input_sum_steps)

    @property
    def output_sum_steps(self) -> tuple[int, ...]:
        return tuple(self.rows << k for k in range(self.cols.bit_length() - 1))

    @property
    def batch_sum_steps(self) -> tuple[int, ...]:
        return tuple(self.block << k for k in range(self.blocks.bit_length() - 1))

    @property
    def output_replicate_steps(self) -> tuple[int, ...]:
        return tuple(-s for s in self.output_sum_steps)

    @property
    def rotation_steps(self) -> tuple[int, ...]:
        steps = (
            self.input_sum_steps
            + self.replicate_steps
            + self.output_sum_steps
            + self.batch_sum_steps
        )
        if self.next_out:
            steps += self.output_replicate_steps
        return tuple(sorted(set(steps)))

    # --------------------------------------------------------------------- packing
    def _grid(self) -> FloatArray:
        return np.zeros((self.blocks, self.cols, self.rows))

    def pack_weights(self, w: FloatArray, b: FloatArray) -> FloatArray:
        """``W`` (n_out x n_in) and ``b`` replicated in every block, ``b`` at input ``n_in``."""
        w, b = np.asarray(w, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if w.shape != (self.n_out, self.n_in) or b.shape != (self.n_out,):
            raise InputError(f"weights must be {self.n_out}x{self.n_in}, bias {self.n_out}")
        g = self._grid()
        g[:, : self.n_out, : self.n_in] = w
        g[:, : self.n_out, self.n_in] = b
        return g.ravel()

    def unpack_weights(self, vec: FloatArray) -> tuple[FloatArray, FloatArray]:
        """Inverse of :meth:`pack_weights` (block 0)."""
        g = np.asarray(vec, dtype=np.float64)[: self.slots].reshape(self._grid().shape)
        return g[0, : self.n_out, : self.n_in].copy(), g[0, : self.n_out, self.n_in].copy()

    def _check_batch(self, x: FloatArray, width: int) -> FloatArray:
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != width or not 1 <= x.shape[0] <= self.blocks:
            raise InputError(f"a packed batch has 1..{self.blocks} rows of {width} values")
        return x

    def tile_inputs(self, x: FloatArray, factor: float = 1.0) -> FloatArray:
        """``factor * [x_n, 1]`` at ``slot(n, j, i)`` for every output ``j < n_out``."""
        x = self._check_batch(x, self.n_in)
        g = self._grid()
        n = x.shape[0]
        g[:n, : self.n_out, : self.n_in] = factor * x[:, None, :]
        g[:n, : self.n_out, self.n_in] = factor
        return g.ravel()

    def output_mask(self, samples: int) -> FloatArray:
        """1 at ``slot(n, j, 0)`` for ``n < samples``, ``j < n_out``."""
        g = self._grid()
        g[:samples, : self.n_out, 0] = 1.0
        return g.ravel()

    def pack_outputs(self, y: FloatArray) -> FloatArray:
        """Per-sample output values (e.g. one-hot targets) at ``slot(n, j, 0)``."""
        y = self._check_batch(y, self.n_out)
        g = self._grid()
        g[: y.shape[0], : self.n_out, 0] = y
        return g.ravel()

    def unpack_outputs(self, vec: FloatArray, samples: int) -> FloatArray:
        g = np.asarray(vec, dtype=np.float64)[: self.slots].reshape(self._grid().shape)
        return g[:samples, : self.n_out, 0].copy()

    def boundary_mask(self, samples: int) -> FloatArray:
        """1 at ``slot(n, 0, i)`` for ``n < samples``, ``i < n_in``."""
        g = self._grid()
        g[:samples, 0, : self.n_in] = 1.0
        return g.ravel()

    def unpack_boundary(self, vec: FloatArray, samples: int) -> FloatArray:
        g = np.asarray(vec, dtype=np.float64)[: self.slots].reshape(self._grid().shape)
        return g[:samples, 0, : self.n_in].copy()


class TwoLayerPacking:
    """The second secret layer (``n_out`` -> ``next_out``) of a :class:`LayerLayout` with
    ``next_out``: row-packed, ``W2[k, j]`` at ``slot(n, j, k)`` and its bias at row ``j = n_out``
    (the first layer's activation gets a constant 1 there), so the first layer's output
    ``a[n, j]`` at ``slot(n, j, 0)`` is its input after a replication along ``k``. Its output
    ``u2[n, k]`` lands at ``slot(n, 0, k)``."""

    def __init__(self, layout: LayerLayout) -> None:
        if not layout.next_out:
            raise InputError("a two-layer packing needs next_out")
        self.layout = layout

    def _grid(self) -> FloatArray:
        lay = self.layout
        return np.zeros((lay.blocks, lay.cols, lay.rows))

    def pack_weights(self, w: FloatArray, b: FloatArray) -> FloatArray:
        lay = self.layout
        w, b = np.asarray(w, dtype=np.float64), np.asarray(b, dtype=np.float64)
        if w.shape != (lay.next_out, lay.n_out) or b.shape != (lay.next_out,):
            raise InputError(f"weights must be {lay.next_out}x{lay.n_out}, bias {lay.next_out}")
        g = self._grid()
        g[:, : lay.n_out, : lay.next_out] = w.T
        g[:, lay.n_out, : lay.next_out] = b
        return g.ravel()

    def unpack_weights(self, vec: FloatArray) -> tuple[FloatArray, FloatArray]:
        lay = self.layout
        g = np.asarray(vec, dtype=np.float64)[: lay.slots].reshape(self._grid().shape)
        return g[0, : lay.n_out, : lay.next_out].T.copy(), g[0, lay.n_out, : lay.next_out].copy()

    def bias_input(self, samples: int) -> FloatArray:
        """1 at ``slot(n, n_out, 0)``: the constant input of the second layer's bias."""
        g = self._grid()
        g[:samples, self.layout.n_out, 0] = 1.0
        return g.ravel()

    def output_mask(self, samples: int, factor: float = 1.0) -> FloatArray:
        """``factor`` at ``slot(n, 0, k)`` for ``k < next_out``."""
        g = self._grid()
        g[:samples, 0, : self.layout.next_out] = factor
        return g.ravel()

    def pack_outputs(self, y: FloatArray) -> FloatArray:
        lay = self.layout
        y = np.asarray(y, dtype=np.float64)
        g = self._grid()
        g[: y.shape[0], 0, : lay.next_out] = y
        return g.ravel()

    def unpack_outputs(self, vec: FloatArray, samples: int) -> FloatArray:
        lay = self.layout
        g = np.asarray(vec, dtype=np.float64)[: lay.slots].reshape(self._grid().shape)
        return g[:samples, 0, : lay.next_out].copy()


def chebyshev_sigmoid(
    z: FloatArray, low: float = -10.0, high: float = 10.0, degree: int = 13
) -> FloatArray:
    """The Chebyshev interpolant of the sigmoid on ``[low, high]`` that OpenFHE's
    ``EvalLogistic`` evaluates (interpolation at the Chebyshev points of the first kind),
    evaluated in the clear: the numpy twin's activation in the secret layers."""
    return np.asarray(_interpolant(low, high, degree)(np.asarray(z, dtype=np.float64)))


_CACHE: dict[tuple[float, float, int], np.polynomial.Chebyshev] = {}


def _interpolant(low: float, high: float, degree: int) -> np.polynomial.Chebyshev:
    key = (float(low), float(high), int(degree))
    if key not in _CACHE:
        _CACHE[key] = np.polynomial.Chebyshev.interpolate(
            lambda t: 1.0 / (1.0 + np.exp(-t)), degree, domain=[low, high]
        )
    return _CACHE[key]
