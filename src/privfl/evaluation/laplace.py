"""The Laplace sampler of DPAUC_Lap: a difference of two exponentials (privfl's own; it
replaces diffprivlib's private ``Laplace._laplace_sampler``).

If ``E1, E2`` are independent ``Exp(1)``, then ``E1 - E2`` is exactly standard Laplace
(density ``exp(-|x|)/2``), and ``b (E1 - E2)`` is ``Lap(b)``. Each exponential is
``-log(U)`` of a uniform double ``U`` in ``(0, 1]`` built from 53 random bits
(``U = (k + 1) / 2^53``, ``k`` uniform in ``[0, 2^53)``): ``U`` is never 0 (no infinite noise),
the two exponentials have the same distribution so the noise is symmetric (mean exactly 0,
no bias), and the only departure from the real-valued distribution is the 53-bit grid of
``U`` (the tail is cut at ``53 ln 2 ≈ 36.7`` scales, a probability below ``10^-15``).

Randomness: :func:`secure_uniform` draws the bits with :mod:`secrets` (the OS CSPRNG);
:class:`NoiseSource` (DPAUC's) feeds the same formula from an AES-256-CTR stream
keyed by :mod:`secrets` (or by a hash of a seed for a reproducible experiment). numpy's
generator is never used.

Limits (as for every floating-point Laplace mechanism, diffprivlib's included): the noisy
value is a double, whose low-order bits are not smoothed (Mironov, CCS 2012); DPAUC adds the
noise to counts that it releases as doubles, the baseline's published behaviour.
"""

from __future__ import annotations

import hashlib
import math
import secrets
from collections.abc import Callable

import numpy as np

from privfl._typing import FloatArray
from privfl.crypto.prng import SharedRandomness
from privfl.datasets import check_seed
from privfl.errors import InputError

BITS = 53
UniformSource = Callable[[int], FloatArray]


def secure_uniform(size: int) -> FloatArray:
    """``size`` uniform doubles in ``(0, 1]`` with 53 random bits each, from :mod:`secrets`."""
    raw = np.frombuffer(secrets.token_bytes(8 * size), dtype="<u8")
    k = (raw >> np.uint64(64 - BITS)).astype(np.float64)
    return (k + 1.0) / float(1 << BITS)


def standard_laplace(u1: FloatArray, u2: FloatArray) -> FloatArray:
    """``log(u2) - log(u1) = E1 - E2`` with ``E_i = -log(u_i)``: standard Laplace noise from
    two arrays of uniforms in ``(0, 1]`` (pure arithmetic)."""
    return np.asarray(np.log(u2) - np.log(u1), dtype=np.float64)


def laplace(scale: float, size: int, uniform: UniformSource = secure_uniform) -> FloatArray:
    """``size`` samples of ``Lap(scale)`` (mean 0, variance ``2 scale^2``), from ``uniform``
    (a function returning uniforms in ``(0, 1]``; default: :func:`secure_uniform`)."""
    if not (math.isfinite(scale) and scale > 0):
        raise InputError(f"the Laplace scale must be a positive finite number, got {scale!r}")
    if size < 0:
        raise InputError(f"the sample size must be >= 0, got {size}")
    u = uniform(2 * size)
    return scale * standard_laplace(u[:size], u[size:])


class NoiseSource:
    """Uniform floats for DPAUC's mechanisms from an AES-256-CTR keystream (a CSPRNG) keyed
    by :mod:`secrets`, or by a hash of ``seed`` for a reproducible experiment."""

    def __init__(self, seed: int | None = None) -> None:
        if seed is None:
            key = secrets.token_bytes(32)
        else:
            key = hashlib.sha256(f"privfl-dpauc-seed:{check_seed(seed)}".encode()).digest()
        self._stream = SharedRandomness(key, "dpauc-noise")

    def uniform(self, size: int) -> FloatArray:
        return self._stream.uniform(size)

    def uniform_open(self, size: int) -> FloatArray:
        """``size`` uniforms in ``(0, 1]`` (``1 - U`` of the stream's ``[0, 1)`` doubles, exact)."""
        return 1.0 - self._stream.uniform(size)

    def laplace(self, scale: float, size: int) -> FloatArray:
        """Lap(scale) noise: :func:`laplace` (a difference of two
        exponentials) fed by this source's stream."""
        return laplace(scale, size, self.uniform_open)
