"""The ``curve``/``metrics`` reveals (:mod:`~privfl.evaluation.fhauc.reveal`): pure functions.

Vectors. Party ``m`` holds (possibly weighted) cumulative counts ``TP_{m,j}``, ``FP_{m,j}``
for ``j = 1..N-1``. It uploads a *T* vector (the TP positions) and an *F* vector (the FP
positions), each of ``L = S·(N-1)`` slots (``S = 1`` semi-honest), cut into
``ceil(L / slots)`` ciphertexts (threshold keys: both in one, :class:`CurveLayout`). The
aggregator adds the parties' ciphertexts and multiplies every resulting ciphertext by one
integer ``c`` (:func:`aggregate`): no product, no rotation (but the joint upload's one).

Semi-honest: the T slots are ``TP_{m,j}``, the F slots ``FP_{m,j}``, at scale ``2^40``.
A party decrypts ``c·TP_j``, ``c·FP_j`` and normalises by ``c·(P+Q)``. The CKKS error is
absolute: at most ``2^-29`` per fresh slot (``FRESH_NOISE_BOUND``) whatever the value, so
the sum over ``M`` parties is off by at most ``M·2^-29`` count units and a normalised value
by at most ``2.5·M·2^-29 / (P+Q)``; each party bounds ``P+Q`` from below by its own total,
reports that as ``precision`` and refuses (:class:`InsufficientPrecisionError`) above the
provisioned accuracy (only with sample weights whose totals are tiny).

Malicious (per execution ``e``, all randomness from the session key): position ``p`` of the vector
gets ``r_p·(V_{m,p} + z_{m,p})`` with ``r_p`` uniform in ``[1, 2)`` (one per position: the
double-execution check then sees a different secret factor on every position), zero-sum masks ``z``
(``Σ_m z_{m,p} = 0``; the same construction and sizes as
:mod:`~privfl.evaluation.fhauc.malicious`), split into ``S`` additive shares (fresh private
randomness of the party) and permuted by one secret ``π`` of all ``2L`` slots, TP and FP positions
together; the first ``L`` permuted slots form the T ciphertexts, the rest the F ones, so the
aggregator cannot tell TP from FP (with the two vectors permuted apart, T times ``c`` and F times
``2c`` passed the check). The aggregator's sum of slot ``k`` over parties is a share of ``r_p·V_p``
with ``p = π^{-1}(k)``; times ``c_e``. A party unpermutes, adds the shares, divides by ``r_p`` and
normalises: ``u_e = w_e / (w_e[P] + w_e[Q])``. It accepts only if, for every coordinate, the ``K``
executions agree within ``τ = 10 σ`` where ``σ = 2.5·k·sqrt(S·M)·2^{V-50.3} / T_low`` is the noise
bound of one normalised coordinate (``k = 2`` and the per-slot error as measured for
:mod:`.malicious`; ``T_low``: the party's own total, or ``2 sqrt(min_pairs)`` if larger), and
outputs their mean. Why a deviation is caught: adding to or rescaling a strict subset of a
position's ``S`` shares adds a random multiple of a share (about ``2^{μ+3}`` counts) that differs
per execution; dropping or repeating a party leaves a mask residue; a change that survives must
move every execution's coordinate by the same amount although it lands on a secret position (fresh
``π`` per execution) divided by ``c_e·r_p`` with ``r_p`` secret (``c_e`` is the aggregator's
own, and with threshold keys shared by the executions side by side in one ciphertext,
:class:`CurveLayout`; a factor common to a coordinate's shares cancels in the
normalisation). The same argument as for the AUC bounds the
chance of an accepted deviation larger than ``X`` by ``(13 τ / X)^{K-1}`` per coordinate
(``guarantee_log2``); the tamper tests exercise it and ``benchmarks/fhauc_curve_attacks.py``
measures it.
"""

from __future__ import annotations

import math
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from privfl._typing import FloatArray
from privfl.crypto.ckks import FRESH_NOISE_BOUND, CKKSParameters
from privfl.crypto.prng import SharedRandomness
from privfl.errors import (
    InputError,
    InsufficientPrecisionError,
    ProtocolError,
    VerificationError,
    WeakGuaranteeError,
)
from privfl.evaluation.fhauc import malicious
from privfl.evaluation.fhauc.ciphertext import HECiphertext
from privfl.evaluation.fhauc.layout import CurveLayout as CurveLayout
from privfl.evaluation.fhauc.layout import Layout
from privfl.evaluation.fhauc.messages import SessionConfig
from privfl.evaluation.fhauc.policy import MAX_EXECUTIONS, Policy, Security
from privfl.evaluation.fhauc.reveal import Reveal, RevealedCurve
from privfl.evaluation.fhauc.uploads import Upload, summed_vectors
from privfl.evaluation.fhauc.variant import SEMI_HONEST_SLACK, Outcome, Packed, PartyView

NORMALISED_NOISE = 2.5  # |δ(w/T)| <= (|δw| + u·|δT|) / T with |δT| <= sqrt(2)·σ_w
MAX_MULTIPLIER_BITS = 61.0  # Ciphertext * int accepts |c| < 2^62


def layout_for(
    config: SessionConfig, slots: int, joint: bool = False, rotations: Sequence[int] = ()
) -> Layout:
    """The AUC's or the curve's slot layout. ``joint`` (single keys, provisioned ``rotations``):
    an AUC session puts T and F in one ciphertext when they fit and the keys rotate by the
    window (older key sets do not: two ciphertexts), parties and aggregator alike; malicious
    sessions from :data:`malicious.JOINT_MIN_PARTIES` parties on (:attr:`~.Sizes.rotated`)."""
    if config.reveal is Reveal.AUC:
        m = len(config.parties)
        allowed = config.security is Security.SEMI_HONEST or malicious.joint_allowed(m)
        layout = Layout.for_terms(config.terms(), slots, joint and allowed)
        ok = not layout.joint or layout.window in rotations
        return layout if ok else replace(layout, joint=False)
    return CurveLayout.for_curve(config.terms(), slots)


def sizes(config: SessionConfig, policy: Policy) -> malicious.Sizes:
    """Mask and scale sizes of a malicious curve session (positions = N-1 per vector)."""
    return malicious.Sizes.for_session(
        len(config.parties),
        config.num_points - 1,
        config.splits,
        policy.max_samples_per_party,
        policy.hiding_bits,
    )


def upload_scale_bits(params: CKKSParameters, config: SessionConfig, policy: Policy) -> float:
    if config.security is Security.MALICIOUS:
        return float(sizes(config, policy).scale_bits)
    return float(params.scale_bits)


def multiplier_range(
    params: CKKSParameters, config: SessionConfig, policy: Policy
) -> tuple[float, float]:
    """log2 range of ``c``: malicious as for the AUC (``[2^20, 2^21)``); semi-honest
    log-uniform up to what a fresh sum of counts leaves of the modulus (capped at 2^61)."""
    if config.security is Security.MALICIOUS:
        return malicious.multiplier_bounds(policy.multiplier_bits)
    value_bits = math.log2(len(config.parties) * policy.max_samples_per_party)
    room = params.data_modulus_bits - params.scale_bits - 6 - value_bits
    if room < 0:
        raise InputError(
            f"{len(config.parties)} parties x {policy.max_samples_per_party} samples exceed "
            "what the CKKS parameters hold exactly; lower max_samples_per_party"
        )
    return 0.0, min(MAX_MULTIPLIER_BITS, room)


# ---------------------------------------------------------------------------- randomness
@dataclass(frozen=True)
class CurveRandomness:
    """One execution's common randomness, as party ``index`` sees it."""

    r: FloatArray  # per-position multipliers in [1, 2): TP positions, then FP positions
    masks: npt.NDArray[np.int64]  # this party's zero-sum masks, same order
    perm: npt.NDArray[np.int64]  # one permutation of all 2·S·(N-1) slots (T and F together)


def derive(key: bytes, execution: int, index: int, sz: malicious.Sizes) -> CurveRandomness:
    base = f"fhauc-curve/v1/{execution}"
    n = sz.positions

    def u(k: int) -> npt.NDArray[np.int64]:
        return SharedRandomness(key, f"{base}/mask/{k}").signed_bits(sz.mask_bits, 2 * n)

    mask = u(index) - u((index + 1) % sz.parties)
    r = 1.0 + SharedRandomness(key, base + "/multipliers").uniform(2 * n)
    perm = SharedRandomness(key, base + "/permutation").permutation(2 * sz.slots_used)
    return CurveRandomness(r, mask, perm)


def split_and_permute(
    values: FloatArray, splits: int, bound: float, perm: npt.NDArray[np.int64]
) -> FloatArray:
    """``S`` additive shares per position (the first ``S-1`` uniform in ``[-bound, bound)``
    from the party's private randomness), flattened and permuted: slot ``k`` holds flat
    entry ``perm[k]``."""
    n = values.size
    fresh = SharedRandomness(secrets.token_bytes(32), "curve-shares")
    out = np.empty((n, splits))
    out[:, : splits - 1] = (fresh.uniform(n * (splits - 1)).reshape(n, -1) * 2 - 1) * bound
    out[:, splits - 1] = values - out[:, : splits - 1].sum(axis=1)
    return out.ravel()[perm]


def unpermute_and_join(slots: FloatArray, splits: int, perm: npt.NDArray[np.int64]) -> FloatArray:
    flat = np.empty(perm.size)
    flat[perm] = slots[: perm.size]
    joined: FloatArray = flat.reshape(-1, splits).sum(axis=1)
    return joined


# ---------------------------------------------------------------------------- party side
def pack(tp: FloatArray, fp: FloatArray, layout: CurveLayout, view: PartyView) -> list[Packed]:
    """The party's slot vectors of every execution (``tp``/``fp``: its counts at the N
    decision points, index 0 = the +inf point, which is always 0 and not sent)."""
    t, f = np.asarray(tp[1:], dtype=np.float64), np.asarray(fp[1:], dtype=np.float64)
    cfg, policy = view.config, view.policy
    if cfg.security is Security.SEMI_HONEST:
        return [Packed(*layout.vectors(t, f), [], None)]
    sz = sizes(cfg, policy)
    bound = 2.0 ** (sz.mask_bits + 3)
    out = []
    tf, half = np.concatenate([t, f]), sz.slots_used
    for e in range(policy.executions):
        rnd = derive(view.key, e, view.index, sz)
        slots = split_and_permute(rnd.r * (tf + rnd.masks), sz.splits, bound, rnd.perm)
        # TP and FP shares are permuted together, then cut in two: the aggregator cannot
        # tell which ciphertext holds which count, so treating them differently is caught
        out.append(Packed(*layout.vectors(slots[:half], slots[half:]), [], sz.scale_bits))
    return out


def reply_vectors(
    decrypted: Sequence[FloatArray], layout: CurveLayout
) -> tuple[FloatArray, FloatArray]:
    """(T slots, F slots) from a reply's decrypted ciphertexts in the order of
    :class:`~privfl.evaluation.fhauc.uploads.Reply` (T0, F0, T1.., F1..)."""
    k = layout.chunks
    if len(decrypted) != 2 * k:
        raise ProtocolError(f"a curve reply must hold {2 * k} ciphertexts, got {len(decrypted)}")
    t_chunks = [decrypted[0], *decrypted[2 : k + 1]]
    f_chunks = [decrypted[1], *decrypted[k + 1 :]]
    t = np.concatenate([c[: layout.slots] for c in t_chunks])[: layout.terms]
    f = np.concatenate([c[: layout.slots] for c in f_chunks])[: layout.terms]
    return t, f


def _normalise(
    t: FloatArray, f: FloatArray, error: type[ProtocolError] = ProtocolError
) -> tuple[FloatArray, FloatArray, float]:
    total = float(t[-1] + f[-1])
    if not (np.all(np.isfinite(t)) and np.all(np.isfinite(f))) or not total > 0:
        raise error("the reply does not decrypt to a valid curve; no curve is output")
    z = np.zeros(1)
    return np.concatenate([z, t]) / total, np.concatenate([z, f]) / total, total


def _snap(values: FloatArray, precision: float) -> FloatArray:
    """Clip to [0, 1] and set to exactly 0 what is within the precision of 0: such a count
    cannot be told from none, and a ratio of two noise terms (precision at a point where no
    sample is predicted positive) would otherwise come out as an arbitrary value."""
    clipped = np.clip(values, 0.0, 1.0)
    return np.where(clipped <= precision, 0.0, clipped)


def recover(
    decoded: Sequence[tuple[FloatArray, FloatArray]],
    own_total: float,
    view: PartyView,
    slot_sigma: float | None = None,
) -> Outcome:
    """The revealed curve (and its checks) from each execution's decrypted (T, F) slots.
    ``slot_sigma``: the key backend's per-slot error term in count units (threshold keys,
    :mod:`.threshold.curve`); ``None``: single-key CKKS's."""
    cfg, policy = view.config, view.policy
    m = len(cfg.parties)
    if cfg.security is Security.SEMI_HONEST:
        u_tp, u_fp, _ = _normalise(*decoded[0])
        _sanity(u_tp, u_fp, SEMI_HONEST_SLACK)
        slot = m * FRESH_NOISE_BOUND if slot_sigma is None else slot_sigma
        precision = NORMALISED_NOISE * slot / max(own_total, 1e-300)
        _check_precision(precision, policy)
        curve = RevealedCurve(_snap(u_tp, precision), _snap(u_fp, precision))
        return Outcome(_auc(curve), verified=None, precision=precision, curve=curve)
    sz = sizes(cfg, policy)
    # public bound only (as at join): a refusal that depended on the party's own total let a
    # deviating aggregator bracket it through the deflation check (fresh-eyes review)
    t_low = _t_low(1.0, policy)
    c_min = 2.0 ** malicious.multiplier_bounds(policy.multiplier_bits)[0]
    runs = []
    n = cfg.num_points - 1
    for e, (t_slots, f_slots) in enumerate(decoded):
        rnd = derive(view.key, e, view.index, sz)
        joined = unpermute_and_join(np.concatenate([t_slots, f_slots]), sz.splits, rnd.perm)
        values = joined / rnd.r
        u_tp, u_fp, total = _normalise(values[:n], values[n:], VerificationError)
        if total < c_min * t_low * (1 - 1e-9):
            raise VerificationError(
                "the result implies fewer samples than this party holds (a deflated reply); "
                "no curve is output"
            )
        runs.append(np.concatenate([u_tp, u_fp]))
    stacked = np.vstack(runs)
    sigma = sigma_normalised(cfg, policy, 1.0, slot_sigma)
    tol = malicious.TOLERANCE_SIGMAS * sigma
    spread = float(np.max(stacked.max(axis=0) - stacked.min(axis=0)))
    inside = bool(np.all(stacked >= -tol) and np.all(stacked <= 1 + tol))
    if not spread <= tol or not inside:
        raise VerificationError(
            f"the {len(decoded)} executions disagree beyond the tolerance on the revealed "
            "curve: the aggregator deviated from the protocol; no curve is output"
        )
    precision = malicious.PRECISION_SIGMAS * sigma / math.sqrt(len(decoded))
    _check_precision(precision, policy)
    guarantee = malicious.guarantee_log2(tol, policy.required_accuracy, len(decoded))
    if guarantee > -policy.min_guarantee_bits:
        raise WeakGuaranteeError(
            f"with {len(decoded)} executions the verification cannot rule out a deviation "
            f"larger than {policy.required_accuracy:.0e} on the curve with probability "
            f"2^-{policy.min_guarantee_bits:g}: provision more executions; no curve is output"
        )
    mean = _snap(stacked.mean(axis=0), precision)
    curve = RevealedCurve(mean[: n + 1], mean[n + 1 :])
    return Outcome(
        _auc(curve),
        verified=True,
        precision=precision,
        tolerance=tol,
        spread=spread,
        guarantee_log2=guarantee,
        d_low=t_low,
        curve=curve,
    )


def _t_low(own_total: float, policy: Policy) -> float:
    return max(own_total, 2.0 * math.sqrt(policy.min_pairs))


def sigma_normalised(
    cfg: SessionConfig, policy: Policy, own_total: float, slot_sigma: float | None = None
) -> float:
    """Noise bound of one normalised coordinate of one execution (module docstring): it
    depends on public sizes, the policy and the party's own total only, never on the
    session's secret randomness (``slot_sigma``: as for :func:`recover`)."""
    sz = sizes(cfg, policy)
    e_slot = 2.0 ** (sz.value_bits - malicious.NOISE_BITS_BELOW)
    sigma_w = malicious.NOISE_CONSTANT * math.sqrt(sz.splits * len(cfg.parties)) * e_slot
    sigma_w = sigma_w if slot_sigma is None else slot_sigma
    return float(NORMALISED_NOISE * sigma_w / _t_low(own_total, policy))


def check_before_upload(
    cfg: SessionConfig,
    policy: Policy,
    slot_sigma: float | None = None,
    high: int = MAX_EXECUTIONS,
) -> None:
    """Run by each party at join, before any upload: refuse a malicious curve session whose
    verification would refuse an honest curve for lack of precision or of guarantee (the
    bound does not depend on the drawn randomness, so passing here means those two checks
    never refuse an honest result), naming the setting to change. It uses the provisioned
    ``min_pairs`` (``2 sqrt(min_pairs)`` bounds the global total), never the party's own
    total: a refusal that depended on it would let an aggregator bracket that total by
    announcing join-only sessions of other sizes. ``high``: the most executions the key
    backend allows (threshold keys: the key set's budget), which the suggested count respects."""
    sigma = sigma_normalised(cfg, policy, 1.0, slot_sigma)
    b = malicious.Bounds.from_sigma(sigma, policy.required_accuracy, policy.executions)
    if b.precision <= policy.required_accuracy and b.guarantee_log2 <= -policy.min_guarantee_bits:
        return
    need = malicious.executions_needed(
        sigma, policy.required_accuracy, policy.min_guarantee_bits, policy.executions, high
    )
    fix = (
        f"provision executions={need}"
        if need is not None
        else f"{malicious.beyond_executions(sigma, policy.required_accuracy, high)}: provision "
        "a max_samples_per_party closer to the real party sizes, or min_pairs"
    )
    error = (
        InsufficientPrecisionError if b.precision > policy.required_accuracy else WeakGuaranteeError
    )
    raise error(
        f"refused before upload: with {policy.executions} executions the curve's verification "
        f"would give precision {b.precision:.1e} and a guarantee of 2^{b.guarantee_log2:.1f} "
        f"(required {policy.required_accuracy:.0e} and 2^-{policy.min_guarantee_bits:g}); {fix}"
    )


def _sanity(u_tp: FloatArray, u_fp: FloatArray, slack: float) -> None:
    for u in (u_tp, u_fp):
        if np.any(u < -slack) or np.any(u > 1 + slack) or np.any(np.diff(u) < -slack):
            raise ProtocolError(
                "the reply does not decrypt to cumulative counts (negative, decreasing or "
                "above the total): the aggregator's reply is corrupted; no curve is output"
            )
    if u_tp[-1] <= slack or u_fp[-1] <= slack:
        raise ProtocolError("the aggregated curve has no positive or no negative labels")


def _check_precision(precision: float, policy: Policy) -> None:
    if precision > policy.required_accuracy:
        raise InsufficientPrecisionError(
            f"the revealed curve cannot be guaranteed to {policy.required_accuracy:.0e}: the "
            "class totals (or sample-weight sums) this party holds are too small for the "
            "CKKS error; provision min_pairs or use larger weights"
        )


def _auc(curve: RevealedCurve) -> float:
    if curve.tp[-1] <= 0 or curve.fp[-1] <= 0:
        return math.nan
    return min(1.0, max(0.0, curve.auc()))


# ---------------------------------------------------------------------------- aggregator
def aggregate(
    uploads: Sequence[Upload], layout: Layout, c: int
) -> tuple[HECiphertext, HECiphertext, tuple[HECiphertext, ...]]:
    """Slot-wise sums over parties, every ciphertext times the same ``c`` (the aggregator
    learns nothing: it never decrypts)."""
    ts, fs = summed_vectors(uploads, layout)
    t, f = [x * c for x in ts], [x * c for x in fs]
    return t[0], f[0], (*t[1:], *f[1:])
