"""The two FHAUC variants as policies the roles call, instead of branching on the mode.

* :class:`SemiHonest`: one execution; a party packs ``T^n = TP^n + TP^{n-1}`` and
  ``F^n = FP^n - FP^{n-1}`` plus its totals and outputs ``X / (2Y)``; the aggregator's
  multiplier ``c`` is log-uniform over what the CKKS capacity leaves.
* :class:`Malicious`: ``K`` executions with masks, multipliers, splits and a permutation
  derived from the session key (:mod:`~privfl.evaluation.fhauc.malicious`), verification of
  the executions against each other, and the precision and guarantee bounds.

Both produce a :class:`Outcome` the party turns into its result.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from privfl._typing import FloatArray
from privfl.crypto.ckks import CKKSParameters
from privfl.errors import (
    InputError,
    InsufficientPrecisionError,
    ProtocolError,
    VerificationError,
    WeakGuaranteeError,
)
from privfl.evaluation.fhauc import malicious
from privfl.evaluation.fhauc.layout import Layout
from privfl.evaluation.fhauc.messages import SessionConfig
from privfl.evaluation.fhauc.policy import MAX_EXECUTIONS, Policy, Security
from privfl.evaluation.fhauc.reveal import RevealedCurve
from privfl.evaluation.statistics import PartyCounts, numerator_vectors

# a semi-honest AUC outside [0, 1] by more than this means a corrupted reply, not noise
SEMI_HONEST_SLACK = 1e-6


@dataclass(frozen=True)
class Packed:
    """One execution's slot vectors and the scale to encrypt them at (None = default)."""

    t: list[FloatArray]
    f: list[FloatArray]
    d: list[FloatArray]
    scale_bits: float | None


def in_groups(packed: Sequence[Packed], layout: Layout) -> list[Packed]:
    """The executions' vectors, ``layout.lanes`` to a ciphertext
    (:meth:`~privfl.evaluation.fhauc.layout.Layout.interleave`): one :class:`Packed` per
    ciphertext group, in execution order (unchanged with one lane)."""
    if layout.lanes == 1:
        return list(packed)

    def merged(vectors: Sequence[list[FloatArray]]) -> list[FloatArray]:
        return [layout.interleave(list(lanes)) for lanes in zip(*vectors, strict=True)]

    out = []
    for g in range(layout.groups(len(packed))):
        group = packed[g * layout.lanes : (g + 1) * layout.lanes]
        out.append(
            Packed(
                merged([p.t for p in group]),
                merged([p.f for p in group]),
                merged([p.d for p in group]),
                group[0].scale_bits,
            )
        )
    return out


@dataclass(frozen=True)
class PartyView:
    """What one party brings to its variant's arithmetic for one session: the config, its
    policy, the session key and its index in the config's party list."""

    config: SessionConfig
    policy: Policy
    key: bytes
    index: int


@dataclass(frozen=True)
class Outcome:
    """What a party concludes from the decrypted replies."""

    auc: float
    verified: bool | None  # None: semi-honest, nothing was verified
    precision: float | None = None
    tolerance: float | None = None
    spread: float | None = None
    guarantee_log2: float | None = None
    d_low: float | None = None
    curve: RevealedCurve | None = None  # reveal="curve"/"metrics" only (fhauc.curve)


class Variant(ABC):
    """What differs between the modes, for the party and the aggregator."""

    security: Security

    @abstractmethod
    def executions(self, policy: Policy) -> int: ...

    @abstractmethod
    def upload_scale_bits(
        self, params: CKKSParameters, config: SessionConfig, policy: Policy
    ) -> float:
        """log2 of the scale every fresh upload ciphertext must have."""

    @abstractmethod
    def multiplier_range(
        self, params: CKKSParameters, config: SessionConfig, policy: Policy
    ) -> tuple[float, float]:
        """log2 range of the aggregator's secret multiplier ``c``."""

    @abstractmethod
    def pack(self, counts: PartyCounts, layout: Layout, view: PartyView) -> list[Packed]:
        """The slot vectors of every execution for one party."""

    @abstractmethod
    def recover(
        self, decoded: Sequence[tuple[float, float]], counts: PartyCounts, view: PartyView
    ) -> Outcome:
        """The AUC (and its checks) from each execution's decrypted ``(X, Y)``."""


def semi_honest_multiplier_bits(params: CKKSParameters, parties: int, max_samples: int) -> float:
    """log2 of the largest multiplier c the CKKS capacity allows for this session."""
    max_total = parties * max_samples
    max_num_bits = 2 * math.log2(max_total) - 1  # num <= 2PQ <= (P+Q)^2 / 2
    bits = params.product_capacity_bits - max_num_bits
    if bits < 0:
        raise InputError(
            f"{parties} parties x {max_samples} samples exceed what the CKKS parameters can "
            f"hold exactly (capacity 2^{params.product_capacity_bits}); lower "
            "max_samples_per_party"
        )
    return bits


class SemiHonest(Variant):
    security = Security.SEMI_HONEST

    def executions(self, policy: Policy) -> int:
        return 1

    def upload_scale_bits(
        self, params: CKKSParameters, config: SessionConfig, policy: Policy
    ) -> float:
        return float(params.scale_bits)

    def multiplier_range(
        self, params: CKKSParameters, config: SessionConfig, policy: Policy
    ) -> tuple[float, float]:
        return 0.0, semi_honest_multiplier_bits(
            params, len(config.parties), policy.max_samples_per_party
        )

    def pack(self, counts: PartyCounts, layout: Layout, view: PartyView) -> list[Packed]:
        t, f = numerator_vectors(counts)
        tv, fv, dv = layout.pack(
            t.astype(np.float64),
            f.astype(np.float64),
            float(counts.positives),
            float(counts.negatives),
        )
        return in_groups([Packed(tv, fv, dv, None)], layout)

    def recover(
        self, decoded: Sequence[tuple[float, float]], counts: PartyCounts, view: PartyView
    ) -> Outcome:
        x, y = decoded[0]
        if not (math.isfinite(x) and math.isfinite(y)) or y < 0.5:
            raise ProtocolError(
                "the aggregated denominator is zero: no positive or no negative labels "
                "across all parties (or the reply is corrupted)"
            )
        auc = x / (2.0 * y)
        if not -SEMI_HONEST_SLACK <= auc <= 1 + SEMI_HONEST_SLACK:
            raise ProtocolError(
                "the reply decrypts to an AUC outside [0, 1]: the aggregator's reply is "
                "corrupted; no AUC is output"
            )
        return Outcome(min(1.0, max(0.0, auc)), verified=None)


class Malicious(Variant):
    security = Security.MALICIOUS

    def executions(self, policy: Policy) -> int:
        return policy.executions

    @staticmethod
    def sizes(config: SessionConfig, policy: Policy) -> malicious.Sizes:
        return malicious.Sizes.for_session(
            len(config.parties),
            config.num_points,
            config.splits,
            policy.max_samples_per_party,
            policy.hiding_bits,
            rotated=malicious.joint_allowed(len(config.parties)),
        )

    def upload_scale_bits(
        self, params: CKKSParameters, config: SessionConfig, policy: Policy
    ) -> float:
        return float(self.sizes(config, policy).scale_bits)

    def sigma_products(self, sizes: malicious.Sizes) -> tuple[float, float]:
        """Std bounds of the errors of ``X/c`` and ``Y/c`` (the key backend's noise model;
        single-key CKKS here)."""
        return sizes.sigma_products()

    def sigma_execution(self, sizes: malicious.Sizes, rnd: malicious.Randomness, d: float) -> float:
        """Std bound of one execution's recovered AUC (the backend's noise model)."""
        return malicious.sigma_from_products(self.sigma_products(sizes), rnd.r0, rnd.r1, rnd.r2, d)

    def bounds(self, config: SessionConfig, policy: Policy, d: float) -> malicious.Bounds:
        """Tolerance, precision and guarantee of this session for ``TP·FP >= d``, from the
        worst case over the multipliers (:func:`malicious.worst_case_sigma`)."""
        sigma = malicious.worst_case_sigma(self.sigma_products(self.sizes(config, policy)), d)
        return malicious.Bounds.from_sigma(sigma, policy.required_accuracy, policy.executions)

    def check_before_upload(
        self, config: SessionConfig, policy: Policy, high: int = MAX_EXECUTIONS
    ) -> malicious.Bounds:
        """Run by each party at join, before it uploads: refuse a session whose verification
        could refuse an honest result for lack of precision or of guarantee, naming the
        setting to change. The check uses the provisioned lower bound ``min_pairs`` on the
        global ``TP·FP`` (:meth:`d_public`) and public sizes only, never the party's own
        counts: with its own ``TP·FP`` the refusal was a threshold test on that product that
        an aggregator could move by announcing join-only sessions of other sizes, and so
        bracket it (a review did within 2 % in 168 probes). The verification after decryption
        uses the same public bound, so an honest session that passes here is never refused by
        those two checks after decryption (the worst case over the multipliers bounds the
        drawn ones), and no refusal depends on the party's own counts. ``high``: the most
        executions the key backend allows (threshold keys: the key set's budget and the upload
        bound), which the refusal's suggested count respects."""
        d = self.d_public(policy)
        b = self.bounds(config, policy, d)
        if (
            b.precision <= policy.required_accuracy
            and b.guarantee_log2 <= -policy.min_guarantee_bits
        ):
            return b
        sigma = malicious.worst_case_sigma(self.sigma_products(self.sizes(config, policy)), d)
        need = malicious.executions_needed(
            sigma, policy.required_accuracy, policy.min_guarantee_bits, policy.executions, high
        )
        fix = (
            f"provision executions={need}"
            if need is not None
            else f"{malicious.beyond_executions(sigma, policy.required_accuracy, high)}: "
            "provision min_pairs (a lower bound on the global positives x negatives) or a "
            "max_samples_per_party closer to the real party sizes, or use fewer decision points "
            "(thresholds), splits=2, a smaller min_guarantee_bits, or, if the parties consent "
            "to reveal it, reveal='curve' (whose verification is tighter)"
        )
        what = (
            f"precision {b.precision:.1e} above the required {policy.required_accuracy:.0e}"
            if b.precision > policy.required_accuracy
            else f"a guarantee of only 2^{b.guarantee_log2:.1f} (required "
            f"2^-{policy.min_guarantee_bits:g})"
        )
        error = (
            InsufficientPrecisionError
            if b.precision > policy.required_accuracy
            else WeakGuaranteeError
        )
        raise error(
            f"refused before upload: with {policy.executions} executions this session's "
            f"verification would give {what} for a deviation larger than "
            f"{policy.required_accuracy:.0e}; {fix}"
        )

    @staticmethod
    def d_public(policy: Policy) -> float:
        """The lower bound on ``TP·FP`` every refusal at join uses: the provisioned
        ``min_pairs`` (at least 1); nothing the party holds and the aggregator does not."""
        return float(max(1, policy.min_pairs))

    def multiplier_range(
        self, params: CKKSParameters, config: SessionConfig, policy: Policy
    ) -> tuple[float, float]:
        return malicious.multiplier_bounds(policy.multiplier_bits)

    def pack(self, counts: PartyCounts, layout: Layout, view: PartyView) -> list[Packed]:
        sizes = self.sizes(view.config, view.policy)
        t, f = numerator_vectors(counts)
        out = []
        for e in range(self.executions(view.policy)):
            rnd = malicious.derive(view.key, e, view.index, sizes)
            tv, fv, dt, df = malicious.masked_positions(
                t, f, counts.positives, counts.negatives, rnd
            )
            tperm, fperm = malicious.split_and_permute(tv, fv, rnd, sizes)
            tc, fc, dc = layout.pack(tperm, fperm, dt, df)
            out.append(Packed(tc, fc, dc, float(sizes.scale_bits)))
        return in_groups(out, layout)

    def recover(
        self, decoded: Sequence[tuple[float, float]], counts: PartyCounts, view: PartyView
    ) -> Outcome:
        """Accept only if every execution recovers the same AUC within the tolerance;
        otherwise raise :class:`VerificationError` and output nothing."""
        sizes, policy = self.sizes(view.config, view.policy), view.policy
        executions = self.executions(policy)
        # The public bound, not the party's own TP·FP: a refusal after decryption that
        # depended on its own counts let an aggregator with a small multiplier bracket them
        # (fresh-eyes review). The join check validated this bound, so honest replies pass.
        d_low = self.d_public(policy)
        c_min = 2.0 ** malicious.multiplier_bounds(policy.multiplier_bits)[0]
        rnds = [malicious.derive(view.key, e, view.index, sizes) for e in range(len(decoded))]
        for (x, y), rnd in zip(decoded, rnds, strict=True):
            if not (math.isfinite(x) and math.isfinite(y)) or y <= 0:
                raise VerificationError("the aggregator's reply does not decrypt to a valid result")
            if y < rnd.r2 * c_min * d_low * (1 - 1e-9):
                raise VerificationError(
                    "the result implies fewer positive x negative pairs than this party holds "
                    "or was provisioned to expect (min_pairs): a deflated reply, or a wrong "
                    "provisioning; no AUC is output"
                )
        aucs = [malicious.recover_auc(x, y, r) for (x, y), r in zip(decoded, rnds, strict=True)]
        sigma = max(self.sigma_execution(sizes, r, d_low) for r in rnds)
        tol = malicious.TOLERANCE_SIGMAS * sigma
        spread = max(aucs) - min(aucs)
        if not spread <= tol or not all(-tol <= a <= 1 + tol for a in aucs):
            raise VerificationError(
                f"the {executions} executions disagree beyond the tolerance: the aggregator "
                "deviated from the protocol; no AUC is output"
            )
        precision = malicious.PRECISION_SIGMAS * sigma / math.sqrt(executions)
        if precision > policy.required_accuracy:
            raise InsufficientPrecisionError(
                f"the verified AUC cannot be guaranteed to {policy.required_accuracy:.0e}: the "
                f"masks for max_samples_per_party={policy.max_samples_per_party} are too wide "
                "for this little data; provision a bound closer to the real party sizes, or "
                "min_pairs"
            )
        guarantee = malicious.guarantee_log2(tol, policy.required_accuracy, executions)
        if guarantee > -policy.min_guarantee_bits:
            raise WeakGuaranteeError(
                f"with {executions} executions the verification cannot rule out a deviation "
                f"larger than {policy.required_accuracy:.0e} with probability "
                f"2^-{policy.min_guarantee_bits:g}: provision more executions, or min_pairs "
                "(a lower bound on the global positives x negatives); no AUC is output"
            )
        auc = min(1.0, max(0.0, float(np.mean(aucs))))
        return Outcome(
            auc,
            verified=True,
            precision=precision,
            tolerance=tol,
            spread=spread,
            guarantee_log2=guarantee,
            d_low=d_low,
        )


VARIANTS: dict[Security, Variant] = {
    Security.SEMI_HONEST: SemiHonest(),
    Security.MALICIOUS: Malicious(),
}


def variant_for(security: Security) -> Variant:
    return VARIANTS[security]
