"""What every role of a threshold FHAUC session derives from the config, the policy and the
transcript (pure functions, public unless stated).

* :func:`plan`: parameter set, slot layout, executions, the value shift ``k``
  (:mod:`.ops`), the aggregator's multiplier range, the variant (the malicious
  one with the threshold noise model, the same acceptance rule and guarantee) and the level
  parties encrypt at (semi-honest 1: three towers, 768 KB per ciphertext; malicious 0).
* what a session derives from its transcript (the threshold session id, the lead, the
  reveal key, and the protocol version they bind): :mod:`.transcript`.
* the joint-key check's arithmetic is :mod:`privfl.crypto.threshold.keycheck` (shared with
  encrypted training).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from privfl.crypto.threshold import ThresholdParameters, ring_dimension
from privfl.errors import InputError, InsufficientPrecisionError
from privfl.evaluation.fhauc import curve, malicious
from privfl.evaluation.fhauc.layout import Layout
from privfl.evaluation.fhauc.messages import SessionConfig
from privfl.evaluation.fhauc.policy import MAX_EXECUTIONS, Policy, Security
from privfl.evaluation.fhauc.reveal import Reveal
from privfl.evaluation.fhauc.shape import tolerances
from privfl.evaluation.fhauc.threshold import curve as threshold_curve
from privfl.evaluation.fhauc.threshold.messages import (
    MAX_CIPHERTEXTS,
    MAX_UPLOAD_BYTES,
    UPLOAD_FRAMING_BYTES,
)
from privfl.evaluation.fhauc.threshold.noise import semi_honest_precision, sigma_products
from privfl.evaluation.fhauc.threshold.ops import (
    check_decryptions,
    fhauc_parameters,
    session_layout,
    value_shift,
)
from privfl.evaluation.fhauc.variant import (
    Malicious,
    Outcome,
    PartyView,
    SemiHonest,
    Variant,
    variant_for,
)
from privfl.evaluation.statistics import PartyCounts


class ThresholdMalicious(Malicious):
    """The malicious variant with threshold mode's noise model (OpenFHE's fresh error under
    the joint key and the decryption's flooding noise): masks, multipliers, splits,
    permutation, executions, the acceptance rule, the precision and guarantee checks are
    the single-key variant's, unchanged."""

    def __init__(
        self,
        params: ThresholdParameters,
        ring: int,
        shift_k: int,
        c_min: float,
        multiplier_scale_bits: int = 0,
        joint: bool = True,
    ) -> None:
        self.params, self.ring, self.shift_k, self.c_min = params, ring, shift_k, c_min
        self.multiplier_scale_bits, self.joint = multiplier_scale_bits, joint

    def sigma_products(self, sizes: malicious.Sizes) -> tuple[float, float]:
        return sigma_products(
            sizes, self.params, self.ring, self.shift_k, self.c_min, self.multiplier_scale_bits,
            self.joint,
        )  # fmt: skip


class ThresholdSemiHonest(SemiHonest):
    """The semi-honest variant with threshold mode's noise model: the AUC is output with its
    precision (:func:`~.noise.semi_honest_precision`), and only when that is within
    the policy's required accuracy; otherwise :class:`InsufficientPrecisionError` (the
    flooding noise of joint decryption is far larger than single-key CKKS noise, and a size
    bound far above the real data amplifies it), never a silently coarser AUC. As in the
    malicious variant, the refusal comes after decryption: an aggregator that sees the parties
    refuse learns about one bit of ``P N`` (how far below the bound the data is)."""

    def __init__(self, params: ThresholdParameters, ring: int, shift_k: int, c_high: float) -> None:
        self.params, self.ring, self.shift_k, self.c_high = params, ring, shift_k, c_high

    def recover(
        self, decoded: Sequence[tuple[float, float]], counts: PartyCounts, view: PartyView
    ) -> Outcome:
        out = super().recover(decoded, counts, view)
        policy, config = view.policy, view.config
        precision = semi_honest_precision(
            self.params, self.ring, len(config.parties), config.terms(), self.shift_k,
            out.auc, decoded[0][1], (counts.positives, counts.negatives), self.c_high,
            policy.max_samples_per_party,
        )  # fmt: skip
        if precision > policy.required_accuracy:
            raise InsufficientPrecisionError(
                f"the threshold AUC is only accurate to {precision:.1e} (required: "
                f"{policy.required_accuracy:.0e}): the flooding noise of joint decryption, "
                f"scaled for max_samples_per_party={policy.max_samples_per_party}, is too "
                "large for this little data; provision a bound closer to the real party sizes"
            )
        return replace(out, precision=precision)


@dataclass(frozen=True)
class Plan:
    """One session's public sizes in threshold mode."""

    params: ThresholdParameters
    layout: Layout
    executions: int
    shift_k: int
    multiplier_bits: tuple[float, float]
    variant: Variant
    upload_level: int
    upload_bytes: int  # ciphertext bytes of one group's upload (upload_bytes())
    multiplier_scale_bits: int = 0  # j: the aggregator applies c as c / 2^j (one level)
    requests_per_execution: int = 1  # joint decryptions per group (curve: 2 x chunks)
    slot_sigma: float = 0.0  # curve/metrics reveals: per-slot error term (.curve)
    reply_tolerance: float = 0.0  # malicious: the lead's shape check (shape.*_shape_ok)

    @property
    def groups(self) -> int:
        """Ciphertext groups: uploads, replies and decryptions are per group, each holding
        ``layout.lanes`` executions (the executions themselves with one lane)."""
        return self.layout.groups(self.executions)

    @property
    def requests(self) -> int:
        """Joint decryptions of this session (the key set's budget spends them)."""
        return self.groups * self.requests_per_execution

    @property
    def max_executions(self) -> int:
        """The most executions this session may use: :data:`MAX_EXECUTIONS`, what the key
        set's decryption budget pays for (``requests_per_execution`` joint decryptions per
        ciphertext group), and what fits the aggregator's bound on one party's upload
        (``upload_bytes`` per group); a group holds ``layout.lanes`` executions."""
        budget = self.params.max_decryptions // self.requests_per_execution
        uploads = (MAX_UPLOAD_BYTES - UPLOAD_FRAMING_BYTES) // self.upload_bytes
        return min(MAX_EXECUTIONS, budget * self.layout.lanes, uploads * self.layout.lanes)

    def check_upload(self) -> None:
        """:class:`InputError` before any work (each party, at join: before any upload) when
        this session's upload would exceed the aggregator's bound on one party's upload, or
        a vector would take more ciphertexts than the upload message holds."""
        splits = " or splits" if isinstance(self.variant, Malicious) else ""
        if self.layout.chunks > MAX_CIPHERTEXTS:
            raise InputError(
                f"refused before upload: {self.layout.terms} values per vector take "
                f"{self.layout.chunks} ciphertexts of {self.layout.slots} slots, more than the "
                f"{MAX_CIPHERTEXTS} an upload may hold per vector: use fewer decision points"
                f"{splits}"
            )
        need = self.groups * self.upload_bytes + UPLOAD_FRAMING_BYTES
        if need > MAX_UPLOAD_BYTES:
            fewer = (
                f"use at most {self.max_executions} executions (a smaller min_guarantee_bits), or "
                if self.max_executions >= 2 or not isinstance(self.variant, Malicious)
                else "no two executions fit (the malicious variant needs two): use "
            )
            raise InputError(
                f"refused before upload: {self.executions} executions, {self.groups} upload "
                f"group(s) x {self.upload_bytes / 2**20:.1f} MiB of ciphertexts, exceed the "
                f"{MAX_UPLOAD_BYTES >> 20} MiB an upload may hold: {fewer}fewer decision "
                f"points{splits}"
            )


def upload_bytes(params: ThresholdParameters, ring: int, level: int, layout: Layout) -> int:
    """Ciphertext bytes of one ciphertext group's upload (one execution's, or ``lanes``
    executions' side by side): ``layout.ciphertexts_per_upload``
    ciphertexts at ``level``, each two polynomials of ``depth + 1 - level`` towers of ``ring``
    64-bit coefficients (OpenFHE's layout, which ``tests/test_fhauc_threshold_upload_size.py``
    compares): an upper bound on the wire, which packs each tower to its modulus' bits."""
    towers = params.multiplicative_depth + 1 - level
    return layout.ciphertexts_per_upload * 2 * towers * ring * 8


def curve_plan(config: SessionConfig, policy: Policy, params: ThresholdParameters) -> Plan:
    """The plan of a ``curve``/``metrics`` session (:mod:`.curve`): the curve
    layout, no product (so uploads sit one level above the lowest decryptable one when
    malicious, to spare a level, and at it when semi-honest), ``c`` an integer at scale 1."""
    mode = config.security
    executions = policy.executions if mode is Security.MALICIOUS else 1
    parties = len(config.parties)
    params.check(parties)
    # T and F in one upload ciphertext when they fit (CurveLayout: the reply, what is decrypted
    # and revealed are unchanged; the aggregator rotates the sum once per group), and the
    # malicious executions side by side in it where two or more fit (lanes: one upload
    # ciphertext and two joint decryptions per group of executions instead of per execution)
    layout = curve.CurveLayout.for_curve(
        config.terms(), params.batch_size, params.sum_keys, mode is Security.MALICIOUS
    )
    per_execution = 2 * layout.chunks  # reply ciphertexts (joint decryptions) per group
    threshold_curve.check_budget(params, layout.groups(executions), per_execution)
    lo, hi = malicious.multiplier_bounds(policy.multiplier_bits)
    ring = ring_dimension(params, parties)
    shift = threshold_curve.curve_shift(config, policy, hi)
    sigma = threshold_curve.slot_sigma(config, policy, params, ring, shift, lo)
    level = params.decrypt_max_level - (1 if mode is Security.MALICIOUS else 0)
    variant = variant_for(mode)
    size = upload_bytes(params, ring, level, layout)
    out = Plan(
        params, layout, executions, shift, (lo, hi), variant, level, size, 0, per_execution, sigma
    )
    if mode is Security.MALICIOUS and layout.joint and layout.chunks == 1:
        # the lead's check of every slot (shape.curve_reply_shape_ok): a slot's error in
        # decoded units is at most the per-slot term times c < 2^hi, over 2^k
        out = replace(out, reply_tolerance=tolerances((sigma, sigma), hi, shift)[0])
    out.check_upload()
    return out


def plan(config: SessionConfig, policy: Policy) -> Plan:
    """The session's plan (:class:`~privfl.errors.InputError` when it cannot run)."""
    params = fhauc_parameters()
    if config.reveal is not Reveal.AUC:
        return curve_plan(config, policy, params)
    mode = config.security
    executions = policy.executions if mode is Security.MALICIOUS else 1
    parties = len(config.parties)
    lo, hi = malicious.multiplier_bounds(policy.multiplier_bits)
    ring = ring_dimension(params, parties)
    bad = mode is Security.MALICIOUS
    c_samples = policy.max_samples_per_party
    variant: Variant
    # T and F in one ciphertext when they fit (half the upload and half the aggregator's
    # parsing, hashing and summing, for one rotation by W per execution): semi-honest always;
    # malicious as malicious_layout chooses (the executions side by side; joint where its
    # noise bound, which holds the coherent product error, is within sqrt 2 of two
    # ciphertexts', joint_pays)
    if bad:
        layout = malicious_layout(config, policy, params, (lo, hi))
    else:
        layout = session_layout(params, parties, config.terms(), joint=True)
    check_decryptions(params, layout, executions)
    if bad:
        # the decoder sees every slot's product: the last of a position's S shares reaches
        # 2^V (V = mu + 3 + ceil(log2 S), not the 2^(mu+3) of the first S-1), and S*N slots
        # are summed (not N): with mu + 3 and N the reply's error was underestimated by
        # 3 bits (S = 4, N = 100). Together with the reply's magnitude (capacity_bits) this
        # made OpenFHE refuse honest replies from a size bound of 2^20 up (issue 27).
        sizes = Malicious.sizes(config, policy)
        check_hiding(policy)
        shift, j = multiplier_scaling(
            sizes, params, ring, sizes.slots_used, float(sizes.value_bits), (lo, hi), layout.joint
        )
        variant = ThresholdMalicious(params, ring, shift, 2.0**lo, j, layout.joint)
        # one decoded slot's error: X/c's model std, times c <= 2^hi, in decoded units
        tolerance = tolerances(variant.sigma_products(sizes), hi, 2 * shift + j)[0]
    else:
        j = 0
        share_bits = math.log2(2 * c_samples)
        shift = value_shift(parties, c_samples, share_bits, config.terms(), hi, ring, bad)
        variant = ThresholdSemiHonest(params, ring, shift, hi)
    # semi-honest replies use one level (the product); malicious uploads keep one more, for
    # the multiplier c / 2^j (decryption needs two towers left, so a deviating aggregator's
    # further product leaves a reply no party decrypts: refused, MalformedMessageError)
    level = 0 if mode is Security.MALICIOUS else 1
    size = upload_bytes(params, ring, level, layout)
    out = Plan(params, layout, executions, shift, (lo, hi), variant, level, size, j)
    if bad:
        out = replace(out, reply_tolerance=tolerance)
    out.check_upload()
    return out


def malicious_layout(
    config: SessionConfig,
    policy: Policy,
    params: ThresholdParameters,
    multiplier_bits: tuple[float, float],
) -> Layout:
    """A malicious AUC session's layout: the executions side by side (:meth:`Layout.in_lanes`)
    with T and F joint in one ciphertext where at least :data:`MIN_JOINT_LANES` such lanes
    fit and :func:`joint_pays`, else in two ciphertexts (T, F; ``slots / W`` lanes). Joint
    lanes never upload more ciphertexts for the same executions (``ceil(K / a)`` against
    ``2 ceil(K / 2a)``); with four or more, the default 3 executions take one group (one
    joint decryption) either way and 64 executions at most 16 of the key set's 32. At 100
    parties, N = 100 and 4 splits on the ``"fhauc"`` set: one joint ciphertext of 4 lanes
    for the 3 executions, against two of 8 lanes. Public: sizes and the policy's bounds
    only, and not the number of executions, so a session's noise bound is the same for
    every count (:func:`~privfl.evaluation.fhauc.sizing.sized_policy` sizes the executions
    on it)."""
    parties, terms = len(config.parties), config.terms()
    apart = session_layout(params, parties, terms, lanes=True)
    joint = session_layout(params, parties, terms, joint=True, lanes=True)
    if not joint.joint or joint.lanes < MIN_JOINT_LANES:
        return apart
    ring = ring_dimension(params, parties)
    return joint if joint_pays(config, policy, params, ring, multiplier_bits) else apart


# the fewest joint lanes for which a malicious AUC takes them over two ciphertexts: with one
# or two, its executions would take twice the joint decryptions of two ciphertexts (3 for 2
# at one lane) and one lane would halve the executions a key set's budget pays for (a
# review found policies refused that two ciphertexts serve)
MIN_JOINT_LANES = 4


# the joint layout's noise bound may exceed the two-ciphertext layout's by this factor (the
# single keys' rule, malicious.JOINT_MIN_PARTIES: the rotation widens the bound by at most
# sqrt 2); beyond it the verification would need more executions for the same guarantee
JOINT_MAX_WIDENING = math.sqrt(2.0)


def joint_pays(
    config: SessionConfig,
    policy: Policy,
    params: ThresholdParameters,
    ring: int,
    multiplier_bits: tuple[float, float],
) -> bool:
    """Whether a malicious AUC session puts T and F in one upload ciphertext (the joint
    layout): when its worst-case noise bound per execution is at most
    :data:`JOINT_MAX_WIDENING` times the two-ciphertext layout's. The joint layout adds the
    coherent product error (:func:`~.noise.coherent_error`: with 2 to 8 parties about 5
    times the other's bound), which only the flooding noise of the joint decryption hides
    (default ring: from about 64 parties of about 100 rows, 1.36 times at 64 x 100 rows and
    1.11 at 100 x 100; any size at 1,000 parties). Public: every role computes it from the
    session's sizes (never from ``min_pairs``, which the aggregator does not hold, nor from
    any data)."""
    sizes = Malicious.sizes(config, policy)
    sigma: dict[bool, float] = {}
    for joint in (True, False):
        k, j = multiplier_scaling(
            sizes, params, ring, sizes.slots_used, float(sizes.value_bits), multiplier_bits, joint
        )
        products = sigma_products(sizes, params, ring, k, 2.0 ** multiplier_bits[0], j, joint)
        sigma[joint] = malicious.worst_case_sigma(products, 1.0)
    return sigma[True] <= JOINT_MAX_WIDENING * sigma[False]


MAX_MULTIPLIER_SCALE_BITS = 48


def check_hiding(policy: Policy) -> None:
    """:class:`InputError` before any work for a malicious threshold AUC session with
    ``hiding_bits > 0``: the masks' extra bits grow the slot products, whose encoding error
    (:data:`~.ops.DECODE_CAPACITY_BITS`: relative ``2^-49.7`` per slot) the verification's
    threshold noise model (:func:`~.noise.sigma_products`) does not hold, so honest sessions
    with ``hiding_bits = 4`` were refused as deviations (2 parties x 2,000 rows)."""
    if policy.hiding_bits > 0:
        raise InputError(
            f"hiding_bits={policy.hiding_bits} is not supported with threshold keys in the "
            "malicious variant (the verification would refuse honest sessions): use "
            "hiding_bits=0, or single keys"
        )


def multiplier_scaling(
    sizes: malicious.Sizes,
    params: ThresholdParameters,
    ring: int,
    terms: int,
    share_bits: float,
    multiplier_bits: tuple[float, float],
    joint: bool = True,
) -> tuple[int, int]:
    """``(k, j)`` of a malicious session: parties scale their values by ``2^-k``, and the
    aggregator applies its multiplier as the real ``c / 2^j`` (one level) instead of an
    integer product at scale 1. An integer ``c`` multiplies the product's error in the
    decoder's units, which forced ``k`` up by ``log2 c`` and made the tolerance grow as ``c``
    times the squared product error (``2^-5`` of ``X/c`` at 3 parties: every honest session
    was refused for lack of guarantee). For each ``j`` the smallest ``k`` that capacity and
    OpenFHE's decoder allow is :func:`value_shift` with ``c / 2^j``; the pair with the
    smallest noise bound (:func:`sigma_products`: product error ``~2^k``, flooding noise
    ``~2^{2k + j} / c``) wins. Public: every role computes it from the config and policy."""
    lo, hi = multiplier_bits
    best: tuple[float, int, int] | None = None
    hiding = sizes.mask_bits - math.ceil(math.log2(2 * sizes.max_samples + 1))
    for j in range(0, math.ceil(hi) + MAX_MULTIPLIER_SCALE_BITS + 1):
        k = value_shift(
            sizes.parties, sizes.max_samples, share_bits, terms, hi - j, ring, True, hiding
        )
        sigma_x, sigma_y = sigma_products(sizes, params, ring, k, 2.0**lo, j, joint)
        score = sigma_x + sigma_y
        if best is None or score < best[0]:
            best = (score, k, j)
    if best is None:
        raise InsufficientPrecisionError("no multiplier scaling fits this session")
    return best[1], best[2]
