"""Threshold FHAUC's noise model (pure functions): the error of a fresh encryption under the
joint key, of one rotation, the malicious verification's bounds on ``X/c`` and ``Y/c``, and the
semi-honest AUC's precision. Public: every role computes them from the config and policy.
How values are scaled and why a reply decodes: :mod:`.ops`."""

from __future__ import annotations

import math

from privfl.crypto.threshold import ThresholdParameters
from privfl.crypto.threshold.params import SCALING_MOD_BITS
from privfl.evaluation.fhauc import malicious

# std of the key-switching noise one rotation under the joint key adds, in units of a fresh
# encryption's error e (:func:`fresh_error_bits`): OpenFHE's hybrid key switching divides it
# by the special primes; from its own error estimates of fresh and rotated-by-1024
# ciphertexts, 0.24 e on ring 2^14 and 0.37 e on ring 2^12 (20 runs each, load 2.4;
# benchmarks/threshold_rotation_noise.py). The joint key scales both by about sqrt(M). 1 is a
# bound with margin: in the malicious noise model F's summed error becomes e sqrt(M + 1).
ROTATION_NOISE = 1.0


def fresh_error_bits(ring: int, parties: int) -> float:
    """log2 of (an upper bound on) the per-slot error of a fresh public-key encryption under
    the joint key, in value units at the 59-bit scale: coefficient error ``3.2 sqrt(4/3 N M)``
    (``v e + e0 + s e1`` with ``M`` summed Gaussian and ternary terms), spread over the
    slots by ``sqrt(N)``, with 2 bits of margin."""
    coefficient = math.log2(3.2) + 0.5 * math.log2(4.0 / 3.0 * ring * parties)
    return coefficient + 0.5 * math.log2(ring) + 2.0 - SCALING_MOD_BITS


def sigma_products(
    sizes: malicious.Sizes,
    params: ThresholdParameters,
    ring: int,
    shift_k: int,
    c_min: float,
    multiplier_scale_bits: int = 0,
) -> tuple[float, float]:
    """Std bounds of the errors of ``X/c`` and ``Y/c`` in threshold mode (malicious
    variant): the single-key model of :meth:`malicious.Sizes.sigma_products` with the fresh
    error of :func:`fresh_error_bits` times ``2^k`` (values are scaled by ``2^-k``), F's
    rotation in the joint layout (:data:`ROTATION_NOISE`, once in the numerator, twice in
    the denominator; an upper bound also when the slots do not fit that layout), plus the
    flooding noise of the joint decryption (``params.decryption_error_bits``, times ``2^2k /
    c``, times ``2^j`` when the aggregator applied ``c / 2^j``; ``Y`` is a difference of two
    slots)."""
    m = sizes.parties
    e = 2.0 ** (fresh_error_bits(ring, m) + shift_k)
    b = 2.0 ** (sizes.mask_bits + 3)
    k = malicious.NOISE_CONSTANT
    rot = ROTATION_NOISE**2  # F = rot(sum, W) in the joint layout: once, after the sum
    sigma_x = k * math.sqrt(sizes.slots_used) * math.sqrt(m * (m + rot)) * b * e
    sigma_y = k * 4.0 * m * sizes.max_samples * math.sqrt(m + 2 * rot) * e
    flood = 2.0 ** (params.decryption_error_bits(m) + 2 * shift_k + multiplier_scale_bits) / c_min
    return math.hypot(sigma_x, flood), math.hypot(sigma_y, math.sqrt(2.0) * flood)


# The flooding model's standard deviation was measured 20-30 % below the AUC's observed error
# (759 sessions on the "fhauc-test" set, C = 10^7, 2-3 parties: RMS of error / sigma 1.2-1.3,
# largest 4.4): the precision uses sigma x 1.3.
FLOODING_MARGIN = 1.3


def semi_honest_precision(
    params: ThresholdParameters,
    ring: int,
    parties: int,
    terms: int,
    shift_k: int,
    auc: float,
    y: float,
    own: tuple[int, int],
    c_high_bits: float,
    max_samples: int,
) -> float:
    """``PRECISION_SIGMAS`` standard errors of a semi-honest threshold AUC ``x / 2y``, from
    what a party knows after decryption: ``y = c·Y`` decoded (``c < 2^c_high_bits``, so
    ``P N = Y > y / 2^c_high_bits``), its own positives and negatives ``own`` and the policy
    bound ``C = max_samples`` (so ``P, N <= M C``).

    * Flooding noise of the joint decryption: ``f = 2^(decryption_error_bits + 2k)`` per
      slot in decoded units, on ``x`` and on ``y`` (a difference of two slots: ``sqrt 2 f``);
      in AUC units ``hypot(f, 2 AUC sqrt(2) f) / 2y``. This is the term that grows as
      ``(M C)^2 / (P N)`` through ``k``: a policy bound ``C`` far above the real party sizes
      costs precision.
    * Fresh encryption error of the product ``T·F`` summed over ``L`` slots: ``T e_F + F e_T``
      with ``e = 2^(fresh_error_bits + k)`` per summed count (``sqrt M`` parties), at most
      ``NOISE_CONSTANT sqrt(L M) e (P + N)`` on ``X = 2 P N AUC``; in AUC units
      ``NOISE_CONSTANT sqrt(L M) e (1/P + 1/N) / 2`` (``c`` cancels), with ``P`` and ``N``
      bounded below by the party's own counts and by ``(y / 2^c_high_bits) / (M C)``."""
    flood = FLOODING_MARGIN * 2.0 ** (params.decryption_error_bits(parties) + 2 * shift_k)
    flooding = math.hypot(flood, 2.0 * auc * math.sqrt(2.0) * flood) / (2.0 * y)
    e = 2.0 ** (fresh_error_bits(ring, parties) + shift_k)
    floor = y / 2.0**c_high_bits / (parties * max_samples)
    pos, neg = (max(1.0, float(n), floor) for n in own)
    product = malicious.NOISE_CONSTANT * math.sqrt(terms * parties) * e * (1 / pos + 1 / neg) / 2
    return malicious.PRECISION_SIGMAS * math.hypot(flooding, product)
