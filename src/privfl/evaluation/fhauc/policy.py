"""What the parties' provisioning fixes for every session, and the security modes.

The aggregator announces a session (parties, thresholds, score range, mode, splits), but the
values that set the malicious variant's acceptance tolerance and the run's cost limits are
*not* the aggregator's to choose: they come from the :class:`Policy` that the key holder
wraps into every party's key bundle (and gives the aggregator in its public setup). A party
refuses a session that does not fit its policy (a weaker mode than provisioned, more
decision points or splits than provisioned, fewer parties than the minimum), and the policy
is bound into the session's derived randomness, so two parties holding different policies
can never both accept.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import StrEnum

from privfl.errors import InputError, MalformedMessageError
from privfl.evaluation.statistics import MAX_POINTS
from privfl.messages import Reader, Writer

DEFAULT_MAX_SAMPLES_PER_PARTY = 10**7
MAX_SAMPLES_PER_PARTY = 1 << 40
MAX_PARTIES = 10_000
MAX_SPLITS = 16
# the most executions a malicious session may use; the sizing picks the fewest that meet the
# guarantee (3 for most sessions; more with few pairs for many decision points: with at most
# 16 the join refused 0.21 % of honest sessions drawn over issue 27's range, 32 0.11 %, 64
# 0.097 %, and with min_pairs from the data at a quarter power of two, sizing.quarter_floor,
# 0.040 %); threshold keys also cap it by the key set's budget and the upload bound
MAX_EXECUTIONS = 64
DEFAULT_HIDING_BITS = 0
DEFAULT_MULTIPLIER_BITS = 1.0  # the malicious aggregator's c in [2^20, 2^21)
REQUIRED_ACCURACY = 1e-6
DEFAULT_GUARANTEE_BITS = 8.0
DEFAULT_EXECUTIONS = 3
DEFAULT_SPLITS = 4  # S of a session when the caller or the ServerApp's run config sets none


class Security(StrEnum):
    """Who the protocol protects against."""

    SEMI_HONEST = "semi-honest"
    MALICIOUS = "malicious"

    @classmethod
    def parse(cls, value: str | Security) -> Security:
        try:
            return cls(value)
        except ValueError:
            raise InputError(
                f"security must be 'semi-honest' or 'malicious' (got {value!r})"
            ) from None

    @property
    def rank(self) -> int:
        return 1 if self is Security.MALICIOUS else 0


@dataclass(frozen=True)
class Policy:
    """Provisioned limits every party enforces (never taken from the aggregator).

    ``security``: the weakest mode a party accepts (a ``malicious`` policy refuses
    semi-honest sessions: no forced downgrade). ``max_samples_per_party``: the public size
    bound that sizes the CKKS headroom (semi-honest) or the masks (malicious) and hence the
    verification tolerance. ``hiding_bits``/``multiplier_bits``: mask hiding and the
    aggregator's multiplier range (malicious). ``executions``: independent executions of the
    malicious variant (the paper's double execution is 2; each extra one multiplies the
    probability that a deviation goes unnoticed by the same small factor, see
    :mod:`privfl.evaluation.fhauc.malicious`). ``max_points``/``max_splits``: largest N and S a
    party accepts. ``min_parties``: smallest session a party joins. ``required_accuracy``:
    a verified AUC whose guaranteed precision is worse is refused.
    """

    security: Security = Security.SEMI_HONEST
    max_samples_per_party: int = DEFAULT_MAX_SAMPLES_PER_PARTY
    hiding_bits: int = DEFAULT_HIDING_BITS
    multiplier_bits: float = DEFAULT_MULTIPLIER_BITS
    executions: int = DEFAULT_EXECUTIONS
    max_points: int = MAX_POINTS
    max_splits: int = MAX_SPLITS
    min_parties: int = 1
    required_accuracy: float = REQUIRED_ACCURACY
    min_pairs: int = 0
    min_guarantee_bits: float = DEFAULT_GUARANTEE_BITS

    def __post_init__(self) -> None:
        self.validate()

    def validate(self) -> None:
        """Raise :class:`InputError` naming the first field out of its range."""
        checks: list[tuple[bool, str]] = [
            (isinstance(self.security, Security), "security must be a Security value"),
            (
                1 <= self.max_samples_per_party <= MAX_SAMPLES_PER_PARTY,
                f"max_samples_per_party must be in 1..2^40 (got {self.max_samples_per_party})",
            ),
            (0 <= self.hiding_bits <= 40, f"hiding_bits must be in 0..40 ({self.hiding_bits})"),
            (
                0 <= self.multiplier_bits <= 16 and math.isfinite(self.multiplier_bits),
                f"multiplier_bits must be in [0, 16] (got {self.multiplier_bits})",
            ),
            (
                2 <= self.executions <= MAX_EXECUTIONS,
                f"executions must be in 2..{MAX_EXECUTIONS} (got {self.executions})",
            ),
            (3 <= self.max_points <= MAX_POINTS, f"max_points must be in 3..{MAX_POINTS}"),
            (1 <= self.max_splits <= MAX_SPLITS, f"max_splits must be in 1..{MAX_SPLITS}"),
            (1 <= self.min_parties <= MAX_PARTIES, f"min_parties must be in 1..{MAX_PARTIES}"),
            (
                0 < self.required_accuracy < 1 and math.isfinite(self.required_accuracy),
                f"required_accuracy must be in (0, 1) (got {self.required_accuracy})",
            ),
            (0 <= self.min_pairs < 1 << 100, f"min_pairs must be >= 0 (got {self.min_pairs})"),
            (
                0 <= self.min_guarantee_bits <= 128,
                f"min_guarantee_bits must be in [0, 128] (got {self.min_guarantee_bits})",
            ),
        ]
        for ok, message in checks:
            if not ok:
                raise InputError(message)

    def public(self) -> Policy:
        """The copy the aggregator holds: ``min_pairs`` (a bound on the global class counts)
        is for the parties only. It is also what the session transcript binds."""
        return replace(self, min_pairs=0)

    def to_bytes(self) -> bytes:
        w = Writer().str_(self.security.value).u64(self.max_samples_per_party)
        w.u32(self.hiding_bits).f64(self.multiplier_bits).u32(self.executions)
        w.u32(self.max_points).u32(self.max_splits).u32(self.min_parties)
        w.f64(self.required_accuracy).uint(self.min_pairs)
        return w.f64(self.min_guarantee_bits).getvalue()

    @classmethod
    def read(cls, r: Reader) -> Policy:
        security = r.str_(32)
        values = (r.u64(), r.u32(), r.f64(), r.u32(), r.u32(), r.u32(), r.u32(), r.f64())
        pairs, bits = r.uint(100, "min_pairs"), r.f64()
        try:
            return cls(Security.parse(security), *values, pairs, bits)
        except InputError as exc:
            raise MalformedMessageError(f"invalid provisioned policy: {exc}") from None

    @classmethod
    def from_bytes(cls, data: bytes) -> Policy:
        r = Reader(data, "FHAUC policy")
        out = cls.read(r)
        r.end()
        return out
