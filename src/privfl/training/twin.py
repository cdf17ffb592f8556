"""The numpy twin of partially encrypted federated training, and the plaintext-layer passes
the parties run (pure functions).

The twin runs the *same* schedule as the protocol (initialisation, per-party batch order,
rounds, local epochs, equal-weight averaging) in the clear, with the Chebyshev sigmoid that
OpenFHE evaluates (:func:`~privfl.training.packing.chebyshev_sigmoid`) and ``sigma' = a - a^2``
in the secret layers and the exact sigmoid in the plaintext layers. With
``secret_layers = 0`` it *is* the baseline (plain FedAvg of the numpy MLP). Tests compare the
jointly decrypted weights of the protocol with the twin's.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from privfl._typing import FloatArray, IntArray
from privfl.training.config import Schedule
from privfl.training.mlp import MLP, one_hot, sigmoid
from privfl.training.packing import chebyshev_sigmoid

__all__ = [
    "Schedule", "batch_order", "initial_model", "plain_backward", "plain_forward", "secret_step",
    "train_twin",
]  # fmt: skip


def initial_model(schedule: Schedule) -> MLP:
    """SmartCryptNN's initialisation (uniform in [-1, 1]) from the run's seed."""
    return MLP(list(schedule.sizes), seed=schedule.seed)


def batch_order(seed: int, party: int, epoch: int, samples: int, batch: int) -> list[IntArray]:
    """The mini-batches of ``party`` in ``epoch`` (a seeded shuffle)."""
    rng = np.random.default_rng([seed, party, epoch])  # not secret: batch order
    order = rng.permutation(samples)
    return [order[s : s + batch] for s in range(0, samples, batch)]


def plain_forward(
    weights: Sequence[FloatArray], biases: Sequence[FloatArray], x: FloatArray
) -> list[FloatArray]:
    """Activations ``[x, a_1, ..., a_T]`` of the plaintext layers (exact sigmoid)."""
    acts = [np.asarray(x, dtype=np.float64)]
    for w, b in zip(weights, biases, strict=True):
        acts.append(sigmoid(acts[-1] @ w.T + b))
    return acts


def plain_backward(
    weights: list[FloatArray],
    biases: list[FloatArray],
    acts: Sequence[FloatArray],
    error: FloatArray,
    lr: float,
) -> None:
    """SGD step of the plaintext layers given ``error = dL/da_T`` (the boundary error ``e_T``,
    or ``a_L - y`` when no layer is secret), in place: ``w <- w - lr/B * sum grad``."""
    n = error.shape[0]
    for layer in range(len(weights) - 1, -1, -1):
        a = acts[layer + 1]
        delta = error * a * (1 - a)
        if layer:
            error = delta @ weights[layer]
        weights[layer] -= lr / n * (delta.T @ acts[layer])
        biases[layer] -= lr / n * delta.sum(axis=0)


def secret_step(
    w: FloatArray,
    b: FloatArray,
    x: FloatArray,
    y_onehot: FloatArray,
    lr: float,
    act: Callable[[FloatArray], FloatArray],
) -> tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
    """One step of the secret last layer in the clear: (new w, new b, e_T, u)."""
    u = x @ w.T + b
    a = act(u)
    g = (a - y_onehot) * (a - a * a)
    e_t = g @ w
    n = x.shape[0]
    return w - lr / n * (g.T @ x), b - lr / n * g.sum(axis=0), e_t, u


def train_twin(
    schedule: Schedule,
    parties: Sequence[tuple[FloatArray, IntArray]],
    on_round: Callable[[int, MLP], None] | None = None,
    max_steps: int | None = None,
) -> MLP:
    """The twin of :func:`privfl.train_federated`. ``max_steps`` stops after that many
    batches per party (for one-step comparisons)."""
    model = initial_model(schedule)
    classes = schedule.sizes[-1]
    low, high = schedule.sigmoid_range

    def cheb(z: FloatArray) -> FloatArray:
        return chebyshev_sigmoid(z, low, high, schedule.sigmoid_degree)

    for rnd in range(schedule.rounds):
        locals_: list[MLP] = []
        for p, (x, y) in enumerate(parties):
            m = model.copy()
            yo = one_hot(y, classes)
            steps = 0
            for e in range(schedule.local_epochs):
                epoch = rnd * schedule.local_epochs + e
                for idx in batch_order(schedule.seed, p, epoch, len(y), schedule.batch_size):
                    if max_steps is not None and steps >= max_steps:
                        break
                    steps += 1
                    _twin_batch(m, schedule, x[idx], yo[idx], cheb)
            locals_.append(m)
        for layer in range(model.layers):
            model.weights[layer] = np.mean([m.weights[layer] for m in locals_], axis=0)
            model.biases[layer] = np.mean([m.biases[layer] for m in locals_], axis=0)
        if on_round is not None:
            on_round(rnd, model)
    return model


def _twin_batch(
    m: MLP,
    schedule: Schedule,
    x: FloatArray,
    yo: FloatArray,
    cheb: Callable[[FloatArray], FloatArray],
) -> None:
    t = schedule.plain_layers
    lr = schedule.learning_rate
    if schedule.secret_layers == 0:
        acts = plain_forward(m.weights, m.biases, x)
        plain_backward(m.weights, m.biases, acts, acts[-1] - yo, lr)
        return
    acts = plain_forward(m.weights[:t], m.biases[:t], x)
    # secret layers: Chebyshev sigmoid, sigma' = a - a^2, e = a - y
    hs = [acts[-1]]
    for layer in range(t, m.layers):
        hs.append(cheb(hs[-1] @ m.weights[layer].T + m.biases[layer]))
    error = hs[-1] - yo
    n = x.shape[0]
    for layer in range(m.layers - 1, t - 1, -1):
        a, h_in = hs[layer - t + 1], hs[layer - t]
        g = error * (a - a * a)
        error = g @ m.weights[layer]
        m.weights[layer] = m.weights[layer] - lr / n * (g.T @ h_in)
        m.biases[layer] = m.biases[layer] - lr / n * g.sum(axis=0)
    plain_w, plain_b = m.weights[:t], m.biases[:t]
    plain_backward(plain_w, plain_b, acts, error, lr)
    m.weights[:t], m.biases[:t] = plain_w, plain_b
