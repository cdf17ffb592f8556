"""The ``curve``/``metrics`` reveals with threshold keys: sizes, noise model and the lead's
reveal (pure functions; the packing, aggregation and recovery are :mod:`.curve`'s, unchanged).

What differs from single keys is only how the reply is decrypted and how noisy that is:

* a party uploads T and F in one ciphertext per execution when they fit
  (:class:`~privfl.evaluation.fhauc.layout.CurveLayout`, ``joint``: half the bytes, half
  the aggregator's checking and summing); the aggregator rotates the sum once to bring F
  under T, so its reply, what is decrypted and what is revealed are as with two uploads;
* the aggregator's reply per ciphertext group (one execution, or in the malicious
  variant the executions side by side: ``lanes`` of :class:`~.layout.CurveLayout`) is the
  :mod:`.curve` reply (``2·chunks`` ciphertexts, every one the parties' slot-wise sum times
  one integer ``c``, applied by doubling at no level); each ciphertext is one joint
  decryption, so a session needs ``groups·2·chunks`` of the key set's budget
  (:func:`check_budget`, refused before any work when it exceeds it);
* joint decryption adds flooding noise ``f = 2^(decryption_error_bits(M))`` per slot
  (value units, after ``c``), and decoded values must stay below ``2^50``
  (:data:`CURVE_CAPACITY_BITS`): parties scale their slot values by ``2^-k``
  (:func:`curve_shift`, public) and multiply what is revealed by ``2^k``;
* ``c`` is drawn in ``[2^20, 2^21)`` (the policy's multiplier bits above the floor) in
  both variants, as for the threshold AUC: the revealed values tell a party ``P+Q`` within
  a factor 2 (single keys, semi-honest: over the CKKS headroom). The normalised curve is
  free of ``c`` either way.

Noise per summed slot in count units (:func:`slot_sigma`): the fresh encryption error
``e = 2^(fresh_error_bits + k)`` of each of the ``S·M`` summed shares, the rotation that
brings F under T in the joint layout (:class:`~.layout.CurveLayout`: std at most
``ROTATION_NOISE e`` once per summed slot, counted for T too) and the flooding noise
``f·2^k / c_min`` of each of the ``S`` decrypted shares. Semi-honest: the bound
``(M + 6 ROTATION_NOISE) e + 6 f 2^k / c_min`` (six standard deviations of the rotation and
of the flooding noise); malicious: the std ``hypot(NOISE_CONSTANT sqrt(S (M + ROTATION_NOISE^2))
e, FLOODING_MARGIN sqrt(S) f 2^k / c_min, sqrt(S) d)``
with ``d = 2^(log2 M + V - 50)`` the decoding's rounding (:data:`DECODE_RELATIVE_BITS`). The
verification's tolerance, precision and guarantee are :mod:`.curve`'s with this per-slot
term, and each party checks at join (before any upload) that they can be met.

What the lead reveals (:func:`write_vectors`): for every execution, the ``used`` slots of
each of its reply ciphertexts (the slots the layout fills in its lane; never the padding),
sealed for the parties under the session key. That is what a single-key party decrypts for
itself, minus the padding. In the malicious variant with T and F in one ciphertext the lead
decodes every slot and refuses a reply whose other slots are not the honest ones
(:func:`~privfl.evaluation.fhauc.shape.curve_reply_shape_ok`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from privfl._typing import FloatArray
from privfl.crypto.threshold import ThresholdParameters
from privfl.errors import InputError, MalformedMessageError
from privfl.evaluation.fhauc import curve, malicious
from privfl.evaluation.fhauc.messages import SessionConfig
from privfl.evaluation.fhauc.policy import Policy, Security
from privfl.evaluation.fhauc.threshold.noise import (
    FLOODING_MARGIN,
    ROTATION_NOISE,
    fresh_error_bits,
)
from privfl.messages import Reader, Writer

__all__ = [
    "check_budget",
    "curve_shift",
    "read_vectors",
    "slot_sigma",
    "used_slots",
    "write_vectors",
]

MAX_REVEALED_VALUES = 1 << 22


def value_bits(config: SessionConfig, policy: Policy) -> float:
    """log2 of the largest summed slot value before ``c``: ``M`` parties' counts (semi-honest)
    or ``M`` masked shares below ``2^V`` (malicious, :class:`malicious.Sizes`)."""
    parties = len(config.parties)
    if config.security is Security.MALICIOUS:
        return math.log2(parties) + curve.sizes(config, policy).value_bits
    return math.log2(parties * policy.max_samples_per_party)


def curve_shift(config: SessionConfig, policy: Policy, c_high_bits: float) -> int:
    """``k``: parties scale their slot values by ``2^-k`` so that ``c`` times the sum stays
    below :data:`CURVE_CAPACITY_BITS` after decryption."""
    return max(0, math.ceil(c_high_bits + value_bits(config, policy) - CURVE_CAPACITY_BITS))


# A curve reply is a sum of fresh ciphertexts times an integer (no product; at most the
# joint layout's rotation, whose noise is tiny: noise.ROTATION_NOISE):
# fresh vectors decoded up to 2^50 on ring 2^12 (uniform slots, largest error 2^1.6, relative
# 2^-48.4); the AUC reply's bound is lower (:func:`~.ops.capacity_bits`).
CURVE_CAPACITY_BITS = 50.0


# Decoding runs in doubles (OpenFHE keeps 52 bits of the largest coefficient; a fresh
# uniform vector of 2^40 decodes with a largest error of 2^-8.5, relative 2^-48.5) and joining
# S shares of up to 2^V cancels in doubles: per-slot std bound 2^-50 of M 2^V, count units,
# twice the std measured on ring 2^14.
# Without it the malicious curve's tolerance ignored an error that grows with C (measured
# spread between executions: 2^-52 of M 2^V, rms) and honest sessions of 2 x 20,000 rows
# were refused (issue 27). It also covers OpenFHE's encoding error (up to 9 times sqrt(S M)
# 2^-51 B per position, where the AUC's model needed a term): measured per-position errors
# 0.02-0.40 of slot_sigma (rms; largest 1.96 where flooding dominates), 2 to 64 parties,
# N = 3 to 4,096, both rings; no coherent part, as the reply has no product
# (benchmarks/threshold_curve_noise.py, benchmarks/results/noise_models_issue27.txt).
DECODE_RELATIVE_BITS = 50.0


def slot_sigma(
    config: SessionConfig,
    policy: Policy,
    params: ThresholdParameters,
    ring: int,
    shift_k: int,
    c_low_bits: float,
) -> float:
    """The per-slot error term of :mod:`.curve`'s recovery in count units (module
    docstring): a bound (semi-honest) or a std (malicious). Public: every party computes it
    from the config and the policy."""
    m = len(config.parties)
    splits = config.splits if config.security is Security.MALICIOUS else 1
    e = 2.0 ** (fresh_error_bits(ring, m) + shift_k)
    flood = 2.0 ** (params.decryption_error_bits(m) + shift_k - c_low_bits)
    m_rot = m + ROTATION_NOISE**2  # F: the joint layout's rotation of the sum (a bound)
    if config.security is Security.MALICIOUS:
        fresh = malicious.NOISE_CONSTANT * math.sqrt(splits * m_rot) * e
        decode = math.sqrt(splits) * 2.0 ** (value_bits(config, policy) - DECODE_RELATIVE_BITS)
        flooding = FLOODING_MARGIN * math.sqrt(splits) * flood
        return float(math.hypot(fresh, flooding, decode))
    return float((m + 6.0 * ROTATION_NOISE) * e + 6.0 * FLOODING_MARGIN * flood)


def check_budget(params: ThresholdParameters, groups: int, ciphertexts: int) -> None:
    """:class:`InputError` before any work (each party, at join: before any upload) when a
    session needs more joint decryptions (``groups`` x ``ciphertexts`` per reply: a group is
    one execution, or the executions side by side in the lanes layout) than the key set's
    flooding budget. In process the sizing lowers the executions to what the budget
    pays for when they meet the guarantee (:func:`~privfl.evaluation.fhauc.sizing.sized_policy`),
    so this refusal means they do not: the fix is fewer decision points or splits (the
    malicious curve holds N x splits terms: fewer ciphertexts per reply) or a smaller
    guarantee (fewer executions)."""
    need = groups * ciphertexts
    if need > params.max_decryptions:
        raise InputError(
            f"refused before upload: {groups} ciphertext group(s) x {ciphertexts} reply "
            f"ciphertexts need {need} joint decryptions, and the flooding noise of parameter "
            f"set {params.name!r} allows {params.max_decryptions} per key set: use fewer "
            "decision points, fewer splits, or a smaller min_guarantee_bits (fewer executions)"
        )


def used_slots(layout: curve.CurveLayout) -> list[int]:
    """How many slots of each reply ciphertext carry values, in reply order (T0, F0, T1..,
    F1..): the padding of the last chunk of each vector is never revealed."""
    per_chunk = [min(layout.slots, layout.terms - k * layout.slots) for k in range(layout.chunks)]
    return [per_chunk[0], per_chunk[0], *per_chunk[1:], *per_chunk[1:]]


def write_vectors(vectors: Sequence[FloatArray]) -> bytes:
    """The lead's plaintext: every decrypted ciphertext's used slots (float64); a value that
    did not decrypt is sent as NaN (the parties' checks refuse it)."""
    w = Writer().u32(len(vectors))
    for v in vectors:
        w.bytes_(np.asarray(v, dtype="<f8").tobytes())
    return w.getvalue()


def read_vectors(data: bytes, lengths: Sequence[int]) -> list[FloatArray]:
    """The vectors of :func:`write_vectors`, exactly ``len(lengths)`` of the given lengths
    (:class:`~privfl.errors.MalformedMessageError` otherwise)."""
    r = Reader(data, "revealed curve")
    n = r.count(MAX_REVEALED_VALUES, "revealed ciphertexts")
    if n != len(lengths):
        raise MalformedMessageError(f"the lead revealed {n} ciphertexts, expected {len(lengths)}")
    out = []
    for length in lengths:
        raw = r.bytes_(8 * MAX_REVEALED_VALUES)
        if len(raw) != 8 * length:
            raise MalformedMessageError("a revealed vector has the wrong length")
        out.append(np.frombuffer(raw, dtype="<f8").astype(np.float64))
    r.end()
    return out
