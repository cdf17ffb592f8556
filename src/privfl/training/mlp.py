"""A numpy MLP with explicit per-layer forward and backward passes (SmartCryptNN's targets).

Sigmoid on every layer including the output, MSE loss on one-hot labels
(``L = ½ ||a_L - y||²`` per example), plain mini-batch SGD, weights and biases initialised
uniformly in ``[-1, 1]``, optional L2. Deterministic given a seed. Per-layer outputs and
per-layer weight/bias gradients are exposed for one example or a batch, which is what the
gray-box audit attacks consume (layer ``i`` is 1-based; the last layer is the output layer).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from privfl._typing import FloatArray
from privfl.errors import InputError


def sigmoid(z: FloatArray) -> FloatArray:
    return 1.0 / (1.0 + np.exp(-np.clip(z, -60, 60)))


def one_hot(labels: npt.ArrayLike, classes: int) -> FloatArray:
    y = np.asarray(labels, dtype=np.int64)
    if y.min() < 0 or y.max() >= classes:
        raise InputError(f"labels must be in 0..{classes - 1}")
    out = np.zeros((y.size, classes))
    out[np.arange(y.size), y] = 1.0
    return out


@dataclass
class MLP:
    """Fully connected sigmoid network; ``sizes`` = [inputs, hidden..., outputs].

    Weights and biases start uniform in ``[-init_range, init_range]`` (SmartCryptNN: 1);
    ``init_range=None`` uses ``1/sqrt(fan_in)`` per layer, which wide inputs (64x64 faces)
    need to keep the sigmoids out of saturation."""

    sizes: Sequence[int]
    seed: int = 0
    l2: float = 0.0
    init_range: float | None = 1.0
    weights: list[FloatArray] = field(default_factory=list, repr=False)
    biases: list[FloatArray] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        if len(self.sizes) < 2 or any(int(s) < 1 for s in self.sizes):
            raise InputError("sizes must list at least an input and an output width")
        if not self.weights:
            rng = np.random.default_rng(self.seed)  # not secret: model initialisation
            for i in range(len(self.sizes) - 1):
                r = self.init_range or 1.0 / np.sqrt(self.sizes[i])
                self.weights.append(rng.uniform(-r, r, (self.sizes[i + 1], self.sizes[i])))
                self.biases.append(rng.uniform(-r, r, self.sizes[i + 1]))

    @property
    def layers(self) -> int:
        return len(self.weights)

    def copy(self) -> MLP:
        return copy.deepcopy(self)

    # ------------------------------------------------------------------------------ passes
    def forward(self, x: FloatArray) -> list[FloatArray]:
        """Activations ``[a_0 = x, a_1, ..., a_L]`` for a batch (rows are examples)."""
        acts = [np.asarray(x, dtype=np.float64)]
        for w, b in zip(self.weights, self.biases, strict=True):
            acts.append(sigmoid(acts[-1] @ w.T + b))
        return acts

    def predict_proba(self, x: FloatArray) -> FloatArray:
        return self.forward(x)[-1]

    def predict(self, x: FloatArray) -> npt.NDArray[np.int64]:
        return np.asarray(np.argmax(self.predict_proba(x), axis=1), dtype=np.int64)

    def losses(self, x: FloatArray, y_onehot: FloatArray) -> FloatArray:
        """Per-example loss ½ ||a_L - y||²."""
        return np.asarray(0.5 * np.sum((self.predict_proba(x) - y_onehot) ** 2, axis=1))

    def deltas(self, acts: list[FloatArray], y_onehot: FloatArray) -> list[FloatArray]:
        """Backward pass: δ_L = (a_L - y) ⊙ a_L(1 - a_L), δ_l = (δ_{l+1} W_{l+1}) ⊙ a_l(1 - a_l)."""
        out = acts[-1]
        delta = (out - y_onehot) * out * (1 - out)
        ds = [delta]
        for layer in range(self.layers - 1, 0, -1):
            a = acts[layer]
            delta = (delta @ self.weights[layer]) * a * (1 - a)
            ds.append(delta)
        return ds[::-1]

    def gradients(
        self, x: FloatArray, y_onehot: FloatArray
    ) -> tuple[list[FloatArray], list[FloatArray]]:
        """Mean weight and bias gradients of the batch, per layer (with L2 if set)."""
        acts = self.forward(x)
        ds = self.deltas(acts, y_onehot)
        n = x.shape[0]
        gw = [
            d.T @ a / n + self.l2 * w for d, a, w in zip(ds, acts[:-1], self.weights, strict=True)
        ]
        gb = [d.mean(axis=0) for d in ds]
        return gw, gb

    def example_gradients(self, x: FloatArray, y_onehot: FloatArray, layer: int) -> FloatArray:
        """Per-example gradient of layer ``layer``'s weight matrix (1-based): shape
        (examples, out, in)."""
        if not 1 <= layer <= self.layers:
            raise InputError(f"layer must be in 1..{self.layers}")
        acts = self.forward(x)
        d = self.deltas(acts, y_onehot)[layer - 1]
        return np.asarray(np.einsum("no,ni->noi", d, acts[layer - 1]))

    def input_gradient(self, x: FloatArray, upstream: FloatArray) -> FloatArray:
        """Gradient with respect to the inputs of ``sum(upstream * a_L)`` (per example): the
        backward pass carried one step past layer 1, what model inversion descends on."""
        acts = self.forward(x)
        out = acts[-1]
        delta = upstream * out * (1 - out)
        for layer in range(self.layers - 1, 0, -1):
            a = acts[layer]
            delta = (delta @ self.weights[layer]) * a * (1 - a)
        return np.asarray(delta @ self.weights[0])

    # ------------------------------------------------------------------------------ training
    def train(
        self,
        x: FloatArray,
        y: npt.ArrayLike,
        epochs: int,
        batch_size: int,
        lr: float,
        shuffle_seed: int = 0,
        on_epoch: Callable[[int, MLP], None] | None = None,
    ) -> MLP:
        """Plain mini-batch SGD on the MSE loss; ``on_epoch(epoch, model)`` after each epoch."""
        x = np.asarray(x, dtype=np.float64)
        yo = one_hot(y, self.sizes[-1])
        if x.ndim != 2 or x.shape[1] != self.sizes[0]:
            raise InputError(f"inputs must have {self.sizes[0]} columns")
        rng = np.random.default_rng(shuffle_seed)  # not secret: batch order
        for epoch in range(1, epochs + 1):
            order = rng.permutation(x.shape[0])
            for start in range(0, x.shape[0], batch_size):
                idx = order[start : start + batch_size]
                gw, gb = self.gradients(x[idx], yo[idx])
                for layer in range(self.layers):
                    self.weights[layer] -= lr * gw[layer]
                    self.biases[layer] -= lr * gb[layer]
            if on_epoch is not None:
                on_epoch(epoch, self)
        return self
