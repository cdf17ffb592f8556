"""Arithmetic of FHAUC against a malicious aggregator (ARCHITECTURE §4), as pure functions.

Per execution ``e`` (two per run) all parties derive from the shared seed, the session id and
``e`` (AES-CTR, :mod:`privfl.crypto.prng`):

* multipliers ``r3..r8``: reals uniform in ``[1, 2)`` (never zero);
* zero-sum masks: party ``m`` uses ``u_m - u_{m+1 mod M}`` where ``u_k`` is a vector of
  integers uniform in ``[-2^μ, 2^μ)``; the masks of all parties sum to exactly zero and every
  party's mask has the same size (no party carries "minus the sum of the others");
* split bits ``b[p]`` and a permutation ``π`` of the ``S·N`` slots.

Party ``m`` forms, for positions ``p = 0..N-1`` (``p < N-1``: the numerator terms
``n = p+1``; ``p = N-1``: the denominator term),
``T[p] = r3 (TP^n + TP^{n-1} + tr^p)``, ``F[p] = r4 (FP^n - FP^{n-1} + fr^p)``
(``r5``, ``r6`` and the totals at ``p = N-1``), ``DT = r7 (TP + tr')``, ``DF = r8 (FP + fr')``;
splits each position into ``S`` slots (``b[p] = 0``: T into ``S`` additive shares, F repeated;
``b[p] = 1``: the reverse), permutes the ``S·N`` slots by ``π`` and encrypts. The aggregator's
ordinary computation then yields ``X = c (r0 num + r1 TP·FP)`` and ``Y = c r2 TP·FP`` with
``r0 = r3 r4``, ``r1 = r5 r6``, ``r2 = r7 r8``, and each party recovers
``AUC = (X/Y - r1/r2) · (r2/r0) / 2``.

Sizes, precision and hiding
---------------------------
* Masks are ``μ = ceil(log2(2·C + 1)) + κ`` bits, ``C`` the public per-party sample bound and
  ``κ`` the *hiding bits*: a masked count is within statistical distance ``2^-κ`` of a masked
  zero. They matter only to someone who decrypts a single upload without the seed (in privfl
  the CKKS key and the seed travel together, so against the aggregator it is CKKS that
  hides the counts); their job here is detection: dropping, duplicating or replaying an
  upload leaves a random residue of about ``2^μ`` that differs between the executions.
* Multipliers in ``[1, 2)`` make the ratios ``r1/r0`` and ``r2/r0`` unpredictable with 53 bits
  of entropy each; their magnitude carries no information.
* Every fresh value is below ``2^V`` with ``V = μ + 3 + ceil(log2 S)`` (count + mask
  ``< 2^{μ+2}``, times ``r < 2``; the last share is at most ``S`` times the bound). Each
  execution encrypts at scale ``2^{58-V}``, for which the per-slot CKKS error was measured at
  ``2^{V-50.3}`` (std) on this backend; the model uses ``e = 2^{V-49.3}`` (one bit of margin).
* Error model: a slot product pairs a sum of ``M`` share vectors with the other vector's
  summed noise ``sqrt(M)·e``. Per party the ``S-1`` random shares are uniform in ``[-B, B)``
  (rms ``B/sqrt 3``, ``B = 2^{μ+3}``) and the last one is at most ``sqrt((S-1)/3)·B + B`` in
  rms, so the average share rms is at most ``1.2 B`` for every ``S`` in 2..16. Over ``S·N``
  slots, with a factor 2 for the correlation of CKKS slot noise (measured 1.7) and 1.1 for
  the data terms (counts are below ``B/8``): ``σ_X ≤ 2.64 sqrt(S N) M B e``; the one-slot
  denominator: ``σ_Y ≤ 2.64 M B e``. Propagated through the recovery with ``r0, r2 ≥ 1``
  and ``r1/r0 ≤ 4``: ``σ_AUC(d) ≤ (σ_X / 2 + 3 σ_Y) / d`` for ``d = TP·FP``.
* Guaranteed precision: a verified AUC is within ``6 σ_AUC(d_low)`` of the binned AUC; a
  party refuses to output (``InsufficientPrecisionError``) when that exceeds the required
  accuracy (default 1e-6), which happens when the declared per-party bound is far larger
  than the data (wide masks, small ``TP·FP``).
* Verification tolerance: ``|AUC_0 - AUC_1| ≤ 12·sqrt(2)·σ_AUC(d_low)``, where ``d_low`` is a
  lower bound on ``TP·FP`` the party can compute: the larger of its own ``TP_m·FP_m`` and
  ``Y / (r2·c_max)`` (``c_max`` is the public upper end of the aggregator's multiplier). The
  aggregator's ``c`` is therefore drawn from a narrow range (``[1, 2)`` by default): a wide
  range would hide ``TP·FP`` better from the parties but loosen the tolerance.
"""

from __future__ import annotations

import math
import secrets
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from privfl._typing import FloatArray
from privfl.crypto.prng import SharedRandomness
from privfl.errors import InputError

ENCODE_BITS = 58
NOISE_BITS_BELOW = 49.3
SIGMA_FACTOR = 12.0
DEFAULT_HIDING_BITS = 0
DEFAULT_MULTIPLIER_BITS = 1.0  # c in [1, 2^1)
REQUIRED_ACCURACY = 1e-6
MAX_SPLITS = 16


@dataclass(frozen=True)
class Sizes:
    """Public sizes of one malicious session, derived from the session configuration."""

    parties: int
    positions: int  # N
    splits: int  # S
    mask_bits: int  # μ
    value_bits: int  # V
    scale_bits: int  # log2 of the encryption scale of every fresh ciphertext

    @classmethod
    def for_session(
        cls, parties: int, positions: int, splits: int, max_samples: int, hiding_bits: int
    ) -> Sizes:
        if not 2 <= splits <= MAX_SPLITS:
            raise InputError(f"splits must be between 2 and {MAX_SPLITS}, got {splits}")
        if hiding_bits < 0:
            raise InputError("hiding_bits must be >= 0")
        mu = math.ceil(math.log2(2 * max_samples + 1)) + hiding_bits
        v = mu + 3 + math.ceil(math.log2(splits))
        scale = ENCODE_BITS - v
        if scale < 8:
            raise InputError(
                f"masks of {mu} bits do not fit the CKKS encoding; lower max_samples_per_party "
                "or hiding_bits"
            )
        return cls(parties, positions, splits, mu, v, scale)

    @property
    def slots_used(self) -> int:
        return self.splits * self.positions

    def sigma_auc(self, d: float) -> float:
        """Upper bound on the std of the recovered AUC when ``TP·FP = d`` (see module doc)."""
        b = 2.0 ** (self.mask_bits + 3)
        e = 2.0 ** (self.value_bits - NOISE_BITS_BELOW)
        m = self.parties
        sigma_x = 2.64 * math.sqrt(self.slots_used) * m * b * e
        sigma_y = 2.64 * m * b * e
        return float((sigma_x / 2 + 3 * sigma_y) / max(d, 1.0))

    def tolerance(self, d_low: float) -> float:
        """Largest |AUC_0 - AUC_1| an honest run can produce (12 σ of the difference)."""
        return SIGMA_FACTOR * math.sqrt(2.0) * self.sigma_auc(d_low)

    def precision(self, d_low: float) -> float:
        """Bound on |AUC - binned AUC| of a verified run: 6 σ of one execution's error."""
        return 6.0 * self.sigma_auc(d_low)

    def cheat_probability_log2(self) -> float:
        """log2 of ((S! (SN-S)!) / (SN)!)^2, the bound of the paper."""
        s, n = self.splits, self.slots_used
        ln = math.lgamma(s + 1) + math.lgamma(n - s + 1) - math.lgamma(n + 1)
        return 2 * ln / math.log(2)


@dataclass(frozen=True)
class Randomness:
    """Common randomness of one execution, as seen by one party."""

    r: FloatArray  # r3..r8 at indices 0..5
    bits: npt.NDArray[np.int8]
    perm: npt.NDArray[np.int64]
    t_mask: npt.NDArray[np.int64]  # positions + 1 (last = DT mask)
    f_mask: npt.NDArray[np.int64]

    @property
    def r0(self) -> float:
        return float(self.r[0] * self.r[1])

    @property
    def r1(self) -> float:
        return float(self.r[2] * self.r[3])

    @property
    def r2(self) -> float:
        return float(self.r[4] * self.r[5])


def derive(
    seed: bytes, session: bytes, execution: int, party_index: int, sizes: Sizes
) -> Randomness:
    """Derive execution ``execution``'s common randomness for party ``party_index``."""
    base = f"fhauc-malicious/v1/{session.hex()}/{execution}"
    r = 1.0 + SharedRandomness(seed, base + "/multipliers").uniform(6)
    bits = SharedRandomness(seed, base + "/split-bits").bits(sizes.positions)
    perm = SharedRandomness(seed, base + "/permutation").permutation(sizes.slots_used)
    width = 2 * (sizes.positions + 1)

    def u(k: int) -> npt.NDArray[np.int64]:
        return SharedRandomness(seed, f"{base}/mask/{k}").signed_bits(sizes.mask_bits, width)

    mask = u(party_index) - u((party_index + 1) % sizes.parties)
    half = sizes.positions + 1
    return Randomness(r, bits, perm, mask[:half], mask[half:])


def masked_positions(
    t: npt.NDArray[np.int64],
    f: npt.NDArray[np.int64],
    positives: int,
    negatives: int,
    rnd: Randomness,
) -> tuple[FloatArray, FloatArray, float, float]:
    """Masked, multiplied position values: (T[0..N-1], F[0..N-1], DT, DF)."""
    r3, r4, r5, r6, r7, r8 = (float(x) for x in rnd.r)
    tv = np.concatenate([t, [positives]]).astype(np.int64) + rnd.t_mask[:-1]
    fv = np.concatenate([f, [negatives]]).astype(np.int64) + rnd.f_mask[:-1]
    mult_t = np.full(tv.size, r3)
    mult_t[-1] = r5
    mult_f = np.full(fv.size, r4)
    mult_f[-1] = r6
    dt = r7 * float(positives + rnd.t_mask[-1])
    df = r8 * float(negatives + rnd.f_mask[-1])
    return mult_t * tv.astype(np.float64), mult_f * fv.astype(np.float64), dt, df


def split_and_permute(
    tv: FloatArray, fv: FloatArray, rnd: Randomness, sizes: Sizes
) -> tuple[FloatArray, FloatArray]:
    """Split every position into S slots by the secret bits and permute the S·N slots.

    Shares are fresh private randomness of this party (AES-CTR keyed by ``secrets``): the
    first ``S-1`` uniform in ``[-B, B)`` with ``B = 2^{μ+3}``, the last makes the sum exact."""
    s = sizes.splits
    bound = 2.0 ** (sizes.mask_bits + 3)
    fresh = SharedRandomness(secrets.token_bytes(32), "shares")
    n = tv.size

    def shares(values: FloatArray) -> FloatArray:
        out = np.empty((n, s))
        out[:, : s - 1] = (fresh.uniform(n * (s - 1)).reshape(n, s - 1) * 2 - 1) * bound
        out[:, s - 1] = values - out[:, : s - 1].sum(axis=1)
        return out

    t_split = np.repeat(tv[:, None], s, axis=1)
    f_split = np.repeat(fv[:, None], s, axis=1)
    t_shares, f_shares = shares(tv), shares(fv)
    split_t = rnd.bits == 0
    t_split[split_t] = t_shares[split_t]
    f_split[~split_t] = f_shares[~split_t]
    return t_split.ravel()[rnd.perm], f_split.ravel()[rnd.perm]


def recover_auc(x: float, y: float, rnd: Randomness) -> float:
    """AUC = (X/Y - r1/r2) · (r2/r0) / 2 from one execution's decrypted reply."""
    return ((x / y) - rnd.r1 / rnd.r2) * (rnd.r2 / rnd.r0) / 2.0
