"""Arithmetic of FHAUC against a malicious aggregator (docs/architecture.md §4), as pure functions.

Per execution ``e`` (``K`` executions per run: at least 3, sized from the data by default;
the paper uses 2) all parties
derive from the *session key* (:mod:`privfl.evaluation.fhauc.session`: fresh per session,
bound to the whole config and policy) and ``e`` (AES-CTR, :mod:`privfl.crypto.prng`):

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

Sizes and hiding
----------------
* Masks are ``μ = ceil(log2(2·C + 1)) + κ`` bits, ``C`` the per-party sample bound and ``κ``
  the *hiding bits*, both from the parties' provisioned policy (never the aggregator's
  announcement): a masked count is within statistical distance ``2^-κ`` of a masked zero.
  They matter only to someone who decrypts a single upload without the session key (in
  privfl the CKKS key and the seed travel together, so against the aggregator it is CKKS
  that hides the counts); their job here is detection: dropping, duplicating or replaying an
  upload leaves a random residue of about ``2^μ`` that differs between the executions.
* Multipliers in ``[1, 2)`` make the ratios ``r1/r0`` and ``r2/r0`` unpredictable with 53 bits
  of entropy each; their magnitude carries no information.
* Every fresh value is below ``2^V`` with ``V = μ + 3 + ceil(log2 S)`` (count + mask
  ``< 2^{μ+2}``, times ``r < 2``; the last share is at most ``S`` times the bound). Each
  execution encrypts at scale ``2^{58-V}``, for which the per-slot CKKS error was measured at
  ``2^{V-50.3}`` (std) on this backend.

Noise, tolerance and the guarantee
----------------------------------
* Noise model (an upper bound on the std of one execution's recovered AUC). In a slot
  product one factor is a sum of ``M`` random shares (rms at most ``1.2 B``, ``B =
  2^{μ+3}``) and the other carries the summed fresh noise ``sqrt(M)·e`` (``e =
  2^{V-50.3}``); over ``S·N`` slots ``σ_X = k sqrt(S N) M B e``. The denominator multiplies
  two true totals (the masks cancel), each below ``2 M C``: ``σ_Y = k 4 M C sqrt(M) e``.
  Single keys, from :data:`JOINT_MIN_PARTIES` parties on (:func:`joint_allowed`), T and F
  share one ciphertext and the aggregator takes ``F = rot(sum, W)``: the rotation adds
  key-switching noise of std ``ρ_rot e`` once, after the sum (``ρ_rot =``
  :data:`ROTATION_NOISE` ``= 8``, measured 6.5-6.6 at scales ``2^15..2^40``: scale-free),
  so F's summed noise is ``e sqrt(M + ρ_rot²)`` and
  ``σ_X = k sqrt(S N) sqrt(M (M + ρ_rot²)) B e``; the denominator's F is rotated twice,
  ``σ_Y = k 4 M C sqrt(M + 2 ρ_rot²) e`` (:attr:`Sizes.rotated`; an upper bound also when
  the slots do not fit the joint layout). With ``ρ_rot² <= M`` this widens the bound by at
  most ``sqrt 2``; with fewer parties the rotation would dominate (4.7-fold at ``M = 3``, a
  fourth execution at the acceptance benchmark's setting), so those sessions keep two
  ciphertexts per execution.
  Through the recovery, ``δAUC = (δX - (X/Y) δY) / (2 c r0 TP·FP)``, so one execution has
  ``σ = sqrt(σ_X² + ρ² σ_Y²) / (2 r0 d)``, computed by each party with that execution's own
  ``r0`` and the honest bound ``ρ = (2 r0 + r1)/r2`` on ``X/Y`` (never the value the
  aggregator returned), at ``d`` = a lower bound on ``TP·FP``. ``k = 2``
  (:data:`NOISE_CONSTANT`): ``benchmarks/fhauc_malicious.py noise`` measures the rms
  disagreement of the executions over 2..50 parties, N 10..100, S 2..9, 50..10^4 samples per
  party, balanced and 5 % positives, tight and 10^6 size bounds; with ``k = 1`` the
  measured std was at most 0.93 of the model (typically 0.3-0.6).
* ``d`` is a lower bound on ``TP·FP`` that the aggregator cannot influence: the larger of
  the party's own ``TP_m·FP_m`` and the provisioned ``min_pairs`` (parties only). It is never
  taken from the reply: ``Y = c r2 TP·FP`` contains the aggregator's own multiplier, and an
  earlier version that used ``Y / (r2 c_max)`` let an aggregator with ``c = 1`` loosen every
  party's tolerance by ``2^20`` and get rescaled numerators accepted (found by review). The
  reply is still checked against the bound: ``Y < r2 c_min d`` means fewer pairs than
  provisioned (a deflated reply, or a wrong ``min_pairs``) and is refused.
* Acceptance: the ``K`` recovered values must lie within ``τ = 10 σ`` of each other (``σ``
  the largest of the executions' bounds). The model exceeds the true std at least twice, so
  an honest spread reaches ``τ`` only beyond 14 standard deviations of a difference: never
  in practice (threshold keys where the flooding noise dominates, on the default ring at 64
  to 200 parties: about 11, docs/security/fhauc.md). The output is their mean; its honest
  error is below ``7.5 σ / sqrt K`` (the reported *precision*; a party refuses,
  ``InsufficientPrecisionError``, when it exceeds the provisioned required accuracy).
* Checked before upload: the tolerance, precision and guarantee above depend on
  the drawn multipliers only through ``r0, r1, r2`` in ``[1, 4)``, and their worst case
  (:func:`worst_case_sigma`) is known to every party before it uploads, with the provisioned
  ``min_pairs``. Each party refuses at join a session whose worst case misses the
  required precision or guarantee (naming the setting to change), and the in-process entry
  points choose the number of executions from the data (:mod:`.sizing`), so an honest
  session is no longer refused after decryption (about 2 % were, from unlucky multipliers).
  The refusal condition is public sizes and the policy (``min_pairs``), never the party's
  own counts (an aggregator probing with join-only sessions would bracket them) nor a
  secret of the session; the multipliers keep their distribution (no redraw), so the
  guarantee argument below is unchanged and each reported guarantee is at least as strong.
* Guarantee against a deviating aggregator: a deviation that does not know the session key
  moves execution ``k``'s recovered AUC by ``α·u_k + β`` where ``u_k`` depends on that
  execution's secret multipliers (``u = r1/r0`` when it rescales the numerator, the
  tolerance-abuse attack; ``u = 1/(c r0)`` with ``c`` chosen by the aggregator when it adds to
  it). Acceptance needs all ``u_k`` within ``τ/|α|`` of each other; the densities of these
  ratios are at most 1.08 and 3.0 (measured over 2·10^7 draws), and an output error above
  ``X`` needs ``|α| ≥ X/6``. Hence
  ``P(accepted and |AUC - binned| > X) ≤ (13 τ / X)^{K-1}``, reported per run as
  ``guarantee_log2`` for ``X`` = the required accuracy (1e-6 by default), and a party refuses
  to output (``WeakGuaranteeError``) when it is above ``-min_guarantee_bits`` (8 by default).
  Measured with ``min_pairs`` at the true product rounded down to a power of two, for 2 to
  100 parties, N 50 and 100, S 4: ``2^-5``..``2^-12`` for the paper's ``K = 2``,
  ``2^-9.5``..``2^-23`` for ``K = 3`` (the default), ``2^-14``..``2^-34`` for ``K = 4``. With
  each party's own counts only (``min_pairs = 0``) the tolerance grows by up to the square of
  the number of parties, and more executions are needed for the same guarantee; since the
  join check uses ``min_pairs`` only, a malicious deployment must provision it.
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
NOISE_BITS_BELOW = 50.3
NOISE_CONSTANT = 2.0
TOLERANCE_SIGMAS = 10.0
PRECISION_SIGMAS = 7.5
GUARANTEE_CONSTANT = 13.0
MULTIPLIER_FLOOR_BITS = 20.0
# std of the key-switching noise one rotation adds, in units of a fresh encryption's std e:
# measured 6.5-6.6 at scales 2^15, 2^22, 2^28 and 2^40 (scale-free; benchmarks/fhauc_scale.py
# --rotation-noise --scale-bits 40,28,22,15), with margin
ROTATION_NOISE = 8.0
# the joint layout (T and F in one ciphertext, F = rot(sum, W)) is used from this many parties
# on, where the rotation's noise is at most the summed fresh noise (ROTATION_NOISE^2 <= M): the
# bound grows by at most sqrt(2) (numerator) there, while with few parties it would dominate
# (at M = 3 the bound grew 4.7-fold and the sizing needed a 4th execution)
JOINT_MIN_PARTIES = int(ROTATION_NOISE**2)
# floor on one execution's std (AUC units): decoding runs in doubles on values up to 2^52
# (relative error about 2^-40 over the slots), amplified by at most 16 through the recovery
# (X/Y <= 6, r2/r0 <= 4). Measured on threshold replies whose modelled noise is tiny (k = 0):
# spreads up to 1.5e-12 between executions, where the model without the floor said 8e-14.
DECODE_FLOOR = 16 * 2.0**-40


@dataclass(frozen=True)
class Sizes:
    """Public sizes of one malicious session, derived from the session configuration."""

    parties: int
    positions: int  # N
    splits: int  # S
    mask_bits: int  # μ
    value_bits: int  # V
    scale_bits: int  # log2 of the encryption scale of every fresh ciphertext
    max_samples: int  # C
    rotated: bool = False  # F may be rotated once after the sum (joint layout, single keys)

    @classmethod
    def for_session(
        cls,
        parties: int,
        positions: int,
        splits: int,
        max_samples: int,
        hiding_bits: int,
        rotated: bool = False,
    ) -> Sizes:
        if splits < 2:
            raise InputError(f"the malicious variant needs splits >= 2, got {splits}")
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
        return cls(parties, positions, splits, mu, v, scale, max_samples, rotated)

    @property
    def slots_used(self) -> int:
        return self.splits * self.positions

    def sigma_products(self) -> tuple[float, float]:
        """Std bounds of the CKKS error of the aggregated numerator ``X/c`` and denominator
        ``Y/c`` (module docstring): a share sum times the other factor's noise, over ``S·N``
        slots; the denominator multiplies two true totals (masks cancel), each below
        ``2 M C``. With :attr:`rotated`, F's noise includes the joint layout's rotation
        (:data:`ROTATION_NOISE`)."""
        b = 2.0 ** (self.mask_bits + 3)
        e = 2.0 ** (self.value_bits - NOISE_BITS_BELOW)
        m = self.parties
        # summed fresh noise of each factor, in units of e (module docstring): F gains one
        # rotation's key-switching noise in the numerator, two in the denominator
        rot = ROTATION_NOISE**2 if self.rotated else 0.0
        sigma_x = NOISE_CONSTANT * math.sqrt(self.slots_used) * math.sqrt(m * (m + rot)) * b * e
        sigma_y = NOISE_CONSTANT * 4.0 * m * self.max_samples * math.sqrt(m + 2 * rot) * e
        return sigma_x, sigma_y

    def sigma_execution(self, rnd: Randomness, d: float) -> float:
        """Std bound of one execution's recovered AUC, with that execution's multipliers and
        ``TP·FP >= d``: ``sqrt(σ_X² + (X/Y)² σ_Y²) / (2 r0 d)`` where the honest ``X/Y`` is
        at most ``(2 r0 + r1) / r2`` (never the value the aggregator returned)."""
        return sigma_from_products(self.sigma_products(), rnd.r0, rnd.r1, rnd.r2, d)

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


def joint_allowed(parties: int) -> bool:
    """Whether a single-key malicious AUC session of ``parties`` parties may use the joint
    layout (:mod:`~privfl.evaluation.fhauc.layout`); its noise bound then covers the
    rotation whether or not the slots fit it (:attr:`Sizes.rotated`)."""
    return parties >= JOINT_MIN_PARTIES


def derive(key: bytes, execution: int, party_index: int, sizes: Sizes) -> Randomness:
    """Execution ``execution``'s common randomness as party ``party_index`` sees it, from the
    session key (all parties with the same key and sizes derive the same values)."""
    base = f"fhauc-malicious/v2/{execution}"
    r = 1.0 + SharedRandomness(key, base + "/multipliers").uniform(6)
    bits = SharedRandomness(key, base + "/split-bits").bits(sizes.positions)
    perm = SharedRandomness(key, base + "/permutation").permutation(sizes.slots_used)
    width = 2 * (sizes.positions + 1)

    def u(k: int) -> npt.NDArray[np.int64]:
        return SharedRandomness(key, f"{base}/mask/{k}").signed_bits(sizes.mask_bits, width)

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


def sigma_from_products(
    products: tuple[float, float], r0: float, r1: float, r2: float, d: float
) -> float:
    """``sqrt(σ_X² + ρ² σ_Y²) / (2 r0 d)`` with ``ρ = (2 r0 + r1) / r2`` (module docstring)."""
    sigma_x, sigma_y = products
    ratio = (2 * r0 + r1) / r2
    return math.hypot(math.hypot(sigma_x, ratio * sigma_y) / (2 * r0 * max(d, 1.0)), DECODE_FLOOR)


def worst_case_sigma(products: tuple[float, float], d: float) -> float:
    """The largest :func:`sigma_from_products` over every possible draw of the multipliers
    (``r3..r8`` in ``[1, 2)``, so ``r0, r1, r2`` in ``[1, 4)``): ``ρ / r0 = (2 + r1/r0) / r2
    <= 6`` and ``1/r0 <= 1``. A party knows this bound and its provisioned ``min_pairs``
    before it uploads anything, so a session the verification could refuse is
    refused there, before any upload and independently of the secret multipliers."""
    sigma_x, sigma_y = products
    return math.hypot(math.hypot(sigma_x, 6.0 * sigma_y) / (2.0 * max(d, 1.0)), DECODE_FLOOR)


@dataclass(frozen=True)
class Bounds:
    """What a party can promise about a verified output before it uploads: the acceptance
    tolerance, the reported precision and ``log2`` of the guarantee, for ``K`` executions
    (all from the worst-case noise bound, so the values an honest session reports after
    decryption are never worse)."""

    tolerance: float
    precision: float
    guarantee_log2: float
    executions: int

    @classmethod
    def from_sigma(cls, sigma: float, accuracy: float, executions: int) -> Bounds:
        tolerance = TOLERANCE_SIGMAS * sigma
        return cls(
            tolerance,
            PRECISION_SIGMAS * sigma / math.sqrt(executions),
            guarantee_log2(tolerance, accuracy, executions),
            executions,
        )


def executions_needed(
    sigma: float, accuracy: float, guarantee_bits: float, low: int, high: int
) -> int | None:
    """The fewest executions in ``low..high`` for which a per-execution noise bound
    ``sigma`` meets both the precision ``accuracy`` and the guarantee ``2^-guarantee_bits``;
    ``None`` when no count in the range does."""
    for k in range(low, high + 1):
        b = Bounds.from_sigma(sigma, accuracy, k)
        if b.precision <= accuracy and b.guarantee_log2 <= -guarantee_bits:
            return k
    return None


def beyond_executions(sigma: float, accuracy: float, high: int) -> str:
    """The part of a join refusal that says no execution count helps: what the most
    executions the session may use (``high``) would give for the noise bound ``sigma``."""
    most = Bounds.from_sigma(sigma, accuracy, high)
    return (
        f"the most executions this session may use ({high}) would not reach it either "
        f"(precision {most.precision:.1e}, guarantee 2^{most.guarantee_log2:.1f})"
    )


def guarantee_log2(tolerance: float, accuracy: float, executions: int) -> float:
    """log2 of the bound ``(13 τ / X)^{K-1}`` on the probability that a deviating aggregator
    gets an AUC more than ``X`` from the binned AUC accepted (module docstring)."""
    ratio = GUARANTEE_CONSTANT * max(tolerance, 1e-300) / accuracy
    return min(0.0, (executions - 1) * math.log2(ratio))


def multiplier_bounds(multiplier_bits: float) -> tuple[float, float]:
    """log2 range of the malicious aggregator's integer multiplier ``c``."""
    return MULTIPLIER_FLOOR_BITS, MULTIPLIER_FLOOR_BITS + multiplier_bits
