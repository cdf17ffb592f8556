"""FHAUC: federated ROC-AUC under CKKS (ARCHITECTURE §4), semi-honest aggregator.

Roles
-----
* :class:`KeyHolder` (one of the parties) generates the CKKS secret key and a 256-bit shared
  seed, wraps both for every party (X25519+HKDF+AES-GCM, pinned roster) and exports the
  *public* context (relinearisation + only the needed Galois keys) for the aggregator.
* :class:`Aggregator` holds only the public context. It announces the session
  (:class:`SessionConfig`), receives one :class:`Upload` per party, and returns a
  :class:`Reply`. It learns the sizes of ciphertexts and nothing in plaintext.
* :class:`Party` turns its scores and labels into counts, encrypts
  ``T^n = TP^n + TP^{n-1}`` and ``F^n = FP^n - FP^{n-1}`` (n = 1..N-1) and its totals,
  and finally decrypts ``X = c·num`` and ``Y = c·TP·FP`` and outputs ``X / (2Y)``.

Slot layout (:class:`Layout`)
-----------------------------
With ``L = N-1`` numerator terms and ``S`` slots:

* *folded* when ``W = next_pow2(2(L+1)) <= S``: in each period of ``W`` slots, T holds
  ``T^1..T^L`` then ``TP`` at slot ``L``; F holds ``F^1..F^L`` then ``FP`` at slot
  ``L + W/2``; the period is replicated over all slots. ``T ⊙ F`` contains exactly the
  numerator terms, so a rotate-and-sum over ``W`` puts ``num`` in *every* slot (no partial
  sum is ever exposed). ``T ⊙ rot(F, W/2)`` is zero except ``TP·FP`` at slot ``L``.
  Two ciphertexts per party, ``log2 W`` Galois keys (8 at N = 100).
* *chunked* otherwise: T and F are cut into ``ceil(L/S)`` ciphertexts each, and a third
  ciphertext ``D`` holds ``TP`` at slot 0 and ``FP`` at slot ``S/2``; the aggregator sums
  the chunk products, rotate-and-sums over ``S`` and computes ``D ⊙ rot(D, S/2)``.

Accuracy: every decrypted slot carries an absolute CKKS error of about ``2^-31·sqrt(M)``
(M parties), independent of the counts, so the AUC error is about
``sqrt(L)·2^-31·sqrt(M)/FP + 2^-31·sqrt(M)/TP``: below 1e-6 for every N <= 4096 and every
data size. The aggregator's multiplier ``c`` is drawn log-uniformly from
``[1, 2^c_bits]`` where ``c_bits`` is what the CKKS capacity leaves after the largest
possible numerator ``(M · max_samples_per_party)^2 / 2``.
"""

from __future__ import annotations

import logging
import math
import secrets
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from privfl.crypto import keywrap, prng
from privfl.crypto.ckks import (
    DEFAULT_PARAMETERS,
    Ciphertext,
    CKKSContext,
    CKKSParameters,
    add_all,
    window_steps,
)
from privfl.errors import (
    InputError,
    InsufficientPrecisionError,
    MalformedMessageError,
    ProtocolError,
    UnknownPartyError,
    VerificationError,
)
from privfl.evaluation import malicious
from privfl.evaluation.statistics import (
    PartyCounts,
    ScoreRange,
    interior_thresholds,
    numerator_vectors,
    party_counts,
    validate_party,
)
from privfl.messages import (
    SESSION_ID_BYTES,
    Header,
    Reader,
    Writer,
    decode_message,
    encode_message,
)

log = logging.getLogger(__name__)

PROTOCOL = "fhauc"
VERSION = 1
DEFAULT_MAX_SAMPLES_PER_PARTY = 10**7
BUNDLE_PURPOSE = "fhauc-key-bundle"
PROVISIONING_SESSION = b"\x00" * SESSION_ID_BYTES


def _next_pow2(x: int) -> int:
    return 1 << max(0, (x - 1).bit_length())


# =============================================================================== layout
@dataclass(frozen=True)
class Layout:
    """Where each value sits in the slots (see module docstring)."""

    terms: int  # L = N - 1
    slots: int
    folded: bool
    window: int
    chunks: int

    @classmethod
    def for_terms(cls, terms: int, slots: int) -> Layout:
        window = _next_pow2(2 * (terms + 1))
        if window <= slots:
            return cls(terms, slots, True, window, 1)
        return cls(terms, slots, False, slots, math.ceil(terms / slots))

    @property
    def rotation_steps(self) -> list[int]:
        """Galois keys needed: rotations by 1, 2, ..., window/2."""
        return window_steps(self.window)

    @property
    def denominator_slot(self) -> int:
        """Slot of the reply's denominator ciphertext that holds c·TP·FP."""
        return self.terms if self.folded else 0

    def pack(
        self, t: npt.NDArray[np.float64], f: npt.NDArray[np.float64], tp: float, fp: float
    ) -> tuple[
        list[npt.NDArray[np.float64]], list[npt.NDArray[np.float64]], list[npt.NDArray[np.float64]]
    ]:
        """Slot vectors (T chunks, F chunks, D list) for one party."""
        if self.folded:
            half = self.window // 2
            tv = np.zeros(self.window)
            fv = np.zeros(self.window)
            tv[: self.terms] = t
            fv[: self.terms] = f
            tv[self.terms] = tp
            fv[self.terms + half] = fp
            reps = self.slots // self.window
            return [np.tile(tv, reps)], [np.tile(fv, reps)], []
        tchunks, fchunks = [], []
        for c in range(self.chunks):
            lo, hi = c * self.slots, min((c + 1) * self.slots, self.terms)
            tv = np.zeros(self.slots)
            fv = np.zeros(self.slots)
            tv[: hi - lo] = t[lo:hi]
            fv[: hi - lo] = f[lo:hi]
            tchunks.append(tv)
            fchunks.append(fv)
        d = np.zeros(self.slots)
        d[0] = tp
        d[self.slots // 2] = fp
        return tchunks, fchunks, [d]


# =============================================================================== messages
@dataclass(frozen=True)
class SessionConfig:
    """Public parameters of one evaluation, announced by the aggregator to the parties."""

    session: bytes
    parties: tuple[str, ...]
    thresholds: npt.NDArray[np.float64]  # interior thresholds, strictly decreasing
    score_range: ScoreRange = (0.0, 1.0)
    max_samples_per_party: int = DEFAULT_MAX_SAMPLES_PER_PARTY
    security: str = "semi-honest"
    splits: int = 1
    sender: str = "aggregator"
    hiding_bits: int = malicious.DEFAULT_HIDING_BITS
    multiplier_bits: float = malicious.DEFAULT_MULTIPLIER_BITS

    STEP = "config"

    @property
    def num_points(self) -> int:
        """N, the number of decision points including the ±inf ends."""
        return int(self.thresholds.size) + 2

    @property
    def executions(self) -> int:
        """How many independent executions the run has (2 against a malicious aggregator)."""
        return 2 if self.security == "malicious" else 1

    def terms(self) -> int:
        """Slots each party fills: N-1 (semi-honest) or S·N (malicious)."""
        return (
            self.splits * self.num_points if self.security == "malicious" else self.num_points - 1
        )

    def sizes(self) -> malicious.Sizes:
        """Public mask/scale sizes of the malicious variant."""
        return malicious.Sizes.for_session(
            len(self.parties),
            self.num_points,
            self.splits,
            self.max_samples_per_party,
            self.hiding_bits,
        )

    def to_bytes(self) -> bytes:
        w = Writer().u32(len(self.parties))
        for p in self.parties:
            w.str_(p)
        w.bytes_(np.asarray(self.thresholds, dtype="<f8").tobytes())
        w.f64(self.score_range[0]).f64(self.score_range[1])
        w.u64(self.max_samples_per_party).str_(self.security).u32(self.splits)
        w.u32(self.hiding_bits).f64(self.multiplier_bits)
        header = Header(PROTOCOL, VERSION, self.STEP, self.session, self.sender)
        return encode_message(header, w.getvalue())

    @classmethod
    def from_bytes(cls, data: bytes, session: bytes | None = None) -> SessionConfig:
        header, payload = decode_message(
            data, protocol=PROTOCOL, version=VERSION, step=cls.STEP, session=session
        )
        r = Reader(payload, "session config")
        count = r.u32()
        if count > 100_000:
            raise MalformedMessageError("session config lists too many parties")
        parties = tuple(r.str_() for _ in range(count))
        raw = r.bytes_()
        if len(raw) % 8:
            raise MalformedMessageError("session config: bad threshold array")
        thresholds = np.frombuffer(raw, dtype="<f8").astype(np.float64)
        lo, hi = r.f64(), r.f64()
        max_samples, security, splits = r.u64(), r.str_(), r.u32()
        hiding_bits, multiplier_bits = r.u32(), r.f64()
        r.end()
        cfg = cls(
            header.session,
            parties,
            thresholds,
            (lo, hi),
            max_samples,
            security,
            splits,
            header.sender,
            hiding_bits,
            multiplier_bits,
        )
        cfg.validate()
        return cfg

    def validate(self) -> None:
        """Sanity checks every party runs on the announced configuration."""
        if len(self.parties) < 1 or len(set(self.parties)) != len(self.parties):
            raise InputError("the session must name distinct parties")
        interior_thresholds(self.thresholds, self.score_range)  # raises on bad thresholds
        if self.max_samples_per_party < 1:
            raise InputError("max_samples_per_party must be positive")
        if self.security not in ("semi-honest", "malicious"):
            raise InputError(f"unknown security model {self.security!r}")
        if self.security == "malicious":
            self.sizes()  # raises on impossible sizes
            if not 0 <= self.multiplier_bits <= 16:
                raise InputError("multiplier_bits must be in [0, 16]")


def _read_cts(r: Reader, ctx: CKKSContext, max_items: int = 4096) -> list[Ciphertext]:
    return [ctx.ciphertext_from_bytes(b) for b in r.list_(max_items)]


@dataclass(frozen=True)
class Upload:
    """A party's encrypted statistics for one execution.

    Fields: ``t`` (list of ciphertexts: the T vector chunks), ``f`` (the F vector chunks),
    ``d`` (denominator ciphertexts; empty in the folded layout, where TP and FP ride in ``t``
    and ``f``). Ciphertext fields are :class:`privfl.crypto.ckks.Ciphertext`.
    """

    sender: str
    session: bytes
    t: list[Ciphertext]
    f: list[Ciphertext]
    d: list[Ciphertext] = field(default_factory=list)
    execution: int = 0

    STEP = "upload"

    def to_bytes(self) -> bytes:
        w = Writer().u32(self.execution)
        w.list_([c.to_bytes() for c in self.t]).list_([c.to_bytes() for c in self.f])
        w.list_([c.to_bytes() for c in self.d])
        return encode_message(
            Header(PROTOCOL, VERSION, self.STEP, self.session, self.sender), w.getvalue()
        )

    @classmethod
    def from_bytes(cls, data: bytes, context: CKKSContext, session: bytes) -> Upload:
        header, payload = decode_message(
            data, protocol=PROTOCOL, version=VERSION, step=cls.STEP, session=session
        )
        r = Reader(payload, f"upload from {header.sender}")
        execution = r.u32()
        t, f, d = _read_cts(r, context), _read_cts(r, context), _read_cts(r, context)
        r.end()
        return cls(header.sender, header.session, t, f, d, execution)


@dataclass(frozen=True)
class Reply:
    """The aggregator's answer: ``numerator`` encrypts c·num in every slot, ``denominator``
    encrypts c·TP·FP at :attr:`Layout.denominator_slot` (zero elsewhere)."""

    session: bytes
    numerator: Ciphertext
    denominator: Ciphertext
    execution: int = 0
    sender: str = "aggregator"

    STEP = "reply"

    def to_bytes(self) -> bytes:
        w = Writer().u32(self.execution).bytes_(self.numerator.to_bytes())
        w.bytes_(self.denominator.to_bytes())
        return encode_message(
            Header(PROTOCOL, VERSION, self.STEP, self.session, self.sender), w.getvalue()
        )

    @classmethod
    def from_bytes(cls, data: bytes, context: CKKSContext, session: bytes) -> Reply:
        header, payload = decode_message(
            data, protocol=PROTOCOL, version=VERSION, step=cls.STEP, session=session
        )
        r = Reader(payload, "reply")
        execution = r.u32()
        num = context.ciphertext_from_bytes(r.bytes_())
        den = context.ciphertext_from_bytes(r.bytes_())
        r.end()
        return cls(header.session, num, den, execution, header.sender)


@dataclass(frozen=True)
class PublicSetup:
    """Key holder -> aggregator: the roster and the public CKKS context."""

    sender: str
    roster: dict[str, bytes]
    public_context: bytes

    STEP = "setup-public"

    def to_bytes(self) -> bytes:
        w = Writer().u32(len(self.roster))
        for name, key in sorted(self.roster.items()):
            w.str_(name).bytes_(key)
        w.bytes_(self.public_context)
        return encode_message(
            Header(PROTOCOL, VERSION, self.STEP, PROVISIONING_SESSION, self.sender), w.getvalue()
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> PublicSetup:
        header, payload = decode_message(data, protocol=PROTOCOL, version=VERSION, step=cls.STEP)
        r = Reader(payload, "public setup")
        roster = {}
        for _ in range(min(r.u32(), 100_000)):
            name = r.str_()
            roster[name] = r.bytes_()
        ctx = r.bytes_()
        r.end()
        return cls(header.sender, roster, ctx)


@dataclass(frozen=True)
class KeyBundle:
    """Key holder -> one party (relayed by the aggregator): the wrapped secret context and
    shared seed. Only the named recipient can open it."""

    sender: str
    wrapped: keywrap.WrappedSecret

    STEP = "setup-bundle"

    def to_bytes(self) -> bytes:
        return encode_message(
            Header(PROTOCOL, VERSION, self.STEP, PROVISIONING_SESSION, self.sender),
            self.wrapped.to_bytes(),
        )

    @classmethod
    def from_bytes(cls, data: bytes) -> KeyBundle:
        header, payload = decode_message(data, protocol=PROTOCOL, version=VERSION, step=cls.STEP)
        return cls(header.sender, keywrap.WrappedSecret.from_bytes(payload))


# =============================================================================== roles
class KeyHolder:
    """The party that creates the CKKS keys and the shared seed (runs once, at setup).

    It may learn nothing beyond what any party learns; it hands the secret key to every
    party in the roster and only evaluation keys to the aggregator."""

    def __init__(self, name: str, identity: keywrap.IdentityKey, roster: dict[str, bytes]) -> None:
        if name not in roster or roster[name] != identity.public_bytes:
            raise UnknownPartyError(f"key holder {name!r} must be in the roster with its own key")
        self.name = name
        self.identity = identity
        self.roster = dict(roster)

    def provision(
        self,
        max_points: int | None = None,
        params: CKKSParameters = DEFAULT_PARAMETERS,
        max_splits: int = 1,
    ) -> tuple[bytes, dict[str, bytes]]:
        """Generate keys; return (public setup for the aggregator, bundle per party).

        ``max_points`` (and ``max_splits`` for the malicious variant) limit the Galois keys
        to what N <= max_points needs (a smaller public context); ``None`` supports every N."""
        if max_points:
            terms = max_points * max_splits if max_splits > 1 else max_points - 1
        else:
            terms = params.slots
        layout = Layout.for_terms(max(terms, 2), params.slots)
        ctx = CKKSContext.generate(params, layout.rotation_steps)
        seed = prng.new_seed()
        secret = Writer().bytes_(ctx.serialize_secret()).bytes_(seed).getvalue()
        bundles = {}
        for party, pub in self.roster.items():
            wrapped = keywrap.wrap(
                secret,
                sender=self.name,
                sender_key=self.identity,
                recipient=party,
                recipient_public=pub,
                purpose=BUNDLE_PURPOSE,
            )
            bundles[party] = KeyBundle(self.name, wrapped).to_bytes()
        public = PublicSetup(self.name, self.roster, ctx.serialize_public()).to_bytes()
        return public, bundles


class Aggregator:
    """The untrusted aggregator (semi-honest here). Holds only the public CKKS context.

    Subclass and override :meth:`aggregate` to test robustness: it receives the uploads in
    party order and must return a :class:`Reply`. ``self.context`` is the public
    :class:`CKKSContext` (it can encrypt with the public key, add, multiply, rotate, but
    not decrypt)."""

    name = "aggregator"

    def __init__(self) -> None:
        self.context: CKKSContext | None = None
        self.roster: dict[str, bytes] = {}
        self.config: SessionConfig | None = None
        self.layout: Layout | None = None
        self.multiplier_range = (0.0, 0.0)
        self.execution = 0

    # -- setup ------------------------------------------------------------------------
    def receive_setup(self, data: bytes) -> None:
        """Load the public context the key holder provisioned."""
        setup = PublicSetup.from_bytes(data)
        self.context = CKKSContext.deserialize(setup.public_context)
        if self.context.is_private:
            raise ProtocolError("the aggregator must never receive a secret key")
        self.roster = dict(setup.roster)

    def start_session(
        self,
        parties: Sequence[str],
        thresholds: int | npt.ArrayLike = 100,
        score_range: ScoreRange = (0.0, 1.0),
        max_samples_per_party: int = DEFAULT_MAX_SAMPLES_PER_PARTY,
        security: str = "semi-honest",
        splits: int = 1,
        hiding_bits: int = malicious.DEFAULT_HIDING_BITS,
        multiplier_bits: float = malicious.DEFAULT_MULTIPLIER_BITS,
    ) -> bytes:
        """Announce a new session (fresh random id) to the parties; returns the config."""
        ctx = self._ctx()
        unknown = [p for p in parties if p not in self.roster]
        if unknown:
            raise UnknownPartyError(f"parties not in the provisioned roster: {unknown}")
        interior = interior_thresholds(thresholds, score_range)
        cfg = SessionConfig(
            secrets.token_bytes(SESSION_ID_BYTES),
            tuple(parties),
            interior,
            (float(score_range[0]), float(score_range[1])),
            int(max_samples_per_party),
            security,
            int(splits),
            self.name,
            int(hiding_bits),
            float(multiplier_bits),
        )
        cfg.validate()
        self._bind(cfg, ctx)
        return cfg.to_bytes()

    def _bind(self, cfg: SessionConfig, ctx: CKKSContext) -> None:
        layout = Layout.for_terms(cfg.terms(), ctx.params.slots)
        missing = set(layout.rotation_steps) - set(ctx.rotation_steps)
        if missing:
            raise InputError(
                f"the provisioned keys do not support N={cfg.num_points} decision points "
                f"{'with ' + str(cfg.splits) + ' splits ' if cfg.security == 'malicious' else ''}"
                f"(missing rotations {sorted(missing)}); re-provision with a larger "
                "--max-thresholds (and --max-splits for the malicious variant), or without them"
            )
        if cfg.security == "malicious":
            self.multiplier_range = (
                MALICIOUS_MULTIPLIER_FLOOR_BITS,
                MALICIOUS_MULTIPLIER_FLOOR_BITS + cfg.multiplier_bits,
            )
        else:
            bits = multiplier_bits(ctx.params, len(cfg.parties), cfg.max_samples_per_party)
            self.multiplier_range = (0.0, bits)
        self.config, self.layout = cfg, layout
        self.execution = 0

    def _ctx(self) -> CKKSContext:
        if self.context is None:
            raise ProtocolError("aggregator has not received the public setup")
        return self.context

    # -- evaluation ---------------------------------------------------------------------
    def handle_uploads(self, uploads: Sequence[bytes], execution: int = 0) -> bytes:
        """Parse and check every party's upload for ``execution`` (one each, in roster
        order), call :meth:`aggregate`, and return the serialised reply."""
        ctx, cfg = self._ctx(), self.config
        if cfg is None:
            raise ProtocolError("no session started")
        if not 0 <= execution < cfg.executions:
            raise ProtocolError(
                f"this session has {cfg.executions} execution(s), not {execution + 1}"
            )
        self.execution = execution
        parsed = [Upload.from_bytes(b, ctx, cfg.session) for b in uploads]
        wrong = [u.sender for u in parsed if u.execution != execution]
        if wrong:
            raise ProtocolError(f"uploads from {wrong} are not for execution {execution}")
        senders = [u.sender for u in parsed]
        if sorted(senders) != sorted(cfg.parties) or len(senders) != len(cfg.parties):
            raise ProtocolError(
                f"expected one upload from each of {list(cfg.parties)}, got {senders}"
            )
        order = {p: i for i, p in enumerate(cfg.parties)}
        parsed.sort(key=lambda u: order[u.sender])
        for u in parsed:
            self._check_shape(u)
        return self.aggregate(parsed).to_bytes()

    def _check_shape(self, u: Upload) -> None:
        assert self.layout is not None
        want_d = 0 if self.layout.folded else 1
        if len(u.t) != self.layout.chunks or len(u.f) != self.layout.chunks or len(u.d) != want_d:
            raise MalformedMessageError(
                f"upload from {u.sender} has {len(u.t)}/{len(u.f)}/{len(u.d)} ciphertexts, "
                f"expected {self.layout.chunks}/{self.layout.chunks}/{want_d}"
            )

    def aggregate(self, uploads: list[Upload]) -> Reply:
        """Sum the parties' vectors, compute E(c·num) and E(c·TP·FP). Learns nothing."""
        cfg, layout = self.config, self.layout
        assert cfg is not None and layout is not None
        t = [add_all([u.t[k] for u in uploads]) for k in range(layout.chunks)]
        f = [add_all([u.f[k] for u in uploads]) for k in range(layout.chunks)]
        products = [t[k] * f[k] for k in range(layout.chunks)]
        num = (add_all(products) if len(products) > 1 else products[0]).window_sum(layout.window)
        if layout.folded:
            den = t[0] * f[0].rotate(layout.window // 2)
        else:
            d = add_all([u.d[0] for u in uploads])
            den = d * d.rotate(layout.slots // 2)
        c = random_multiplier(*self.multiplier_range)
        return Reply(cfg.session, num * c, den * c, self.execution, self.name)


def multiplier_bits(params: CKKSParameters, parties: int, max_samples: int) -> float:
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


MALICIOUS_MULTIPLIER_FLOOR_BITS = 20.0


def random_multiplier(low_bits: float, high_bits: float) -> int:
    """Integer c, log-uniform in [2^low_bits, 2^high_bits), from the OS CSPRNG.

    Applied at scale 1, so it costs no modulus level; against a malicious aggregator it is
    drawn from ``[2^20, 2^(20+w))`` so that a fractional spread of ``2^w`` is possible."""
    u = secrets.randbits(53) / float(1 << 53)
    return max(1, int(2 ** (low_bits + u * (high_bits - low_bits))))


class Party:
    """A data owner. Holds its scores and labels, the CKKS secret key and the shared seed.

    It learns the global AUC and nothing else that the protocol does not imply."""

    def __init__(
        self,
        name: str,
        identity: keywrap.IdentityKey,
        roster: dict[str, bytes],
        key_holder: str,
        scores: npt.ArrayLike | None = None,
        labels: npt.ArrayLike | None = None,
    ) -> None:
        if roster.get(name) != identity.public_bytes:
            raise UnknownPartyError(f"party {name!r} is not in the roster with this identity key")
        self.name, self.identity, self.roster, self.key_holder = (
            name,
            identity,
            dict(roster),
            key_holder,
        )
        self.context: CKKSContext | None = None
        self.seed: bytes | None = None
        self.config: SessionConfig | None = None
        self.layout: Layout | None = None
        self._scores, self._labels = scores, labels
        self.counts: PartyCounts | None = None
        self._randomness: list[malicious.Randomness] = []
        self.required_accuracy = malicious.REQUIRED_ACCURACY
        self.last_precision: float | None = None
        self.last_tolerance: float | None = None

    def receive_bundle(self, data: bytes) -> None:
        """Unwrap the secret context and seed (must come from the pinned key holder)."""
        bundle = KeyBundle.from_bytes(data)
        secret = keywrap.unwrap(
            bundle.wrapped,
            recipient=self.name,
            recipient_key=self.identity,
            roster=self.roster,
            expected_sender=self.key_holder,
            purpose=BUNDLE_PURPOSE,
        )
        r = Reader(secret, "key bundle")
        self.context = CKKSContext.deserialize(r.bytes_())
        self.seed = r.bytes_()
        r.end()
        if not self.context.is_private or len(self.seed) != prng.SEED_BYTES:
            raise MalformedMessageError("key bundle lacks the secret key or the seed")

    def receive_config(self, data: bytes) -> None:
        """Accept the aggregator's session announcement after checking it."""
        cfg = SessionConfig.from_bytes(data)
        if self.name not in cfg.parties:
            raise UnknownPartyError(f"party {self.name!r} is not part of this session")
        unknown = [p for p in cfg.parties if p not in self.roster]
        if unknown:
            raise UnknownPartyError(f"session names parties outside the roster: {unknown}")
        ctx = self._ctx()
        if cfg.security == "semi-honest":
            multiplier_bits(ctx.params, len(cfg.parties), cfg.max_samples_per_party)
        self.config = cfg
        self.layout = Layout.for_terms(cfg.terms(), ctx.params.slots)

    def set_data(self, scores: npt.ArrayLike, labels: npt.ArrayLike) -> None:
        self._scores, self._labels = scores, labels

    def _ctx(self) -> CKKSContext:
        if self.context is None:
            raise ProtocolError(f"party {self.name} has no key bundle yet")
        return self.context

    def compute_counts(self) -> PartyCounts:
        """Validate the local data and count TP/FP at the session's decision points."""
        cfg = self.config
        if cfg is None:
            raise ProtocolError(f"party {self.name} has no session config")
        if self._scores is None or self._labels is None:
            raise InputError(f"party {self.name} has no data")
        s, y = validate_party(self._scores, self._labels, cfg.score_range, self.name)
        if s.size > cfg.max_samples_per_party:
            raise InputError(
                f"party {self.name} has {s.size} samples, more than the session's "
                f"max_samples_per_party={cfg.max_samples_per_party}"
            )
        self.counts = party_counts(s, y, cfg.thresholds)
        return self.counts

    def uploads(self) -> list[bytes]:
        """One upload per execution (two against a malicious aggregator)."""
        cfg = self.config
        if cfg is None:
            raise ProtocolError(f"party {self.name} has no session config")
        if cfg.security == "semi-honest":
            return [self.upload()]
        return [self._malicious_upload(e) for e in range(cfg.executions)]

    def upload(self) -> bytes:
        """Encrypt T, F (and D) for the aggregator. Reveals only ciphertext sizes."""
        cfg, layout = self.config, self.layout
        assert cfg is not None and layout is not None
        if cfg.security != "semi-honest":
            raise ProtocolError("use uploads() in the malicious variant")
        counts = self.compute_counts()
        t, f = numerator_vectors(counts)
        tv, fv, dv = layout.pack(
            t.astype(np.float64),
            f.astype(np.float64),
            float(counts.positives),
            float(counts.negatives),
        )
        return self._encrypt_upload(tv, fv, dv, 0, None)

    def _encrypt_upload(
        self,
        tv: list[npt.NDArray[np.float64]],
        fv: list[npt.NDArray[np.float64]],
        dv: list[npt.NDArray[np.float64]],
        execution: int,
        scale_bits: float | None,
    ) -> bytes:
        ctx, cfg = self._ctx(), self.config
        assert cfg is not None
        up = Upload(
            self.name,
            cfg.session,
            [ctx.encrypt(v, scale_bits) for v in tv],
            [ctx.encrypt(v, scale_bits) for v in fv],
            [ctx.encrypt(v, scale_bits) for v in dv],
            execution,
        )
        return up.to_bytes()

    def _malicious_upload(self, execution: int) -> bytes:
        """Masked, multiplied, split and permuted statistics for one execution."""
        cfg, layout = self.config, self.layout
        assert cfg is not None and layout is not None and self.seed is not None
        counts = self.counts if self.counts is not None and execution > 0 else self.compute_counts()
        sizes = cfg.sizes()
        rnd = malicious.derive(
            self.seed, cfg.session, execution, cfg.parties.index(self.name), sizes
        )
        if execution == 0:
            self._randomness = []
        self._randomness.append(rnd)
        t, f = numerator_vectors(counts)
        tv, fv, dt, df = malicious.masked_positions(t, f, counts.positives, counts.negatives, rnd)
        tperm, fperm = malicious.split_and_permute(tv, fv, rnd, sizes)
        tchunks, fchunks, dchunks = layout.pack(tperm, fperm, dt, df)
        return self._encrypt_upload(tchunks, fchunks, dchunks, execution, sizes.scale_bits)

    def restore_session(self) -> None:
        """Recompute what :meth:`finish_all` needs (counts and, against a malicious
        aggregator, each execution's common randomness) without encrypting again: for a
        party that is a fresh process at the reply step (e.g. a Flower ClientApp)."""
        cfg = self.config
        if cfg is None or self.seed is None:
            raise ProtocolError(f"party {self.name} has no session config or seed")
        self.compute_counts()
        if cfg.security == "malicious":
            sizes = cfg.sizes()
            index = cfg.parties.index(self.name)
            self._randomness = [
                malicious.derive(self.seed, cfg.session, e, index, sizes)
                for e in range(cfg.executions)
            ]

    def finish(self, data: bytes) -> float:
        """Decrypt a semi-honest reply and output the global AUC = X / (2 Y)."""
        return self.finish_all([data])

    def finish_all(self, replies: Sequence[bytes]) -> float:
        """Decrypt the reply of every execution and output the global AUC.

        Semi-honest: ``X / (2Y)``. Malicious: recover the AUC from each execution and accept
        only if they agree within the tolerance of :mod:`privfl.evaluation.malicious`;
        otherwise raise :class:`VerificationError` and output nothing."""
        ctx, cfg, layout = self._ctx(), self.config, self.layout
        assert cfg is not None and layout is not None
        if len(replies) != cfg.executions:
            raise ProtocolError(f"expected {cfg.executions} replies, got {len(replies)}")
        decoded = []
        for e, data in enumerate(replies):
            reply = Reply.from_bytes(data, ctx, cfg.session)
            if reply.execution != e:
                message = f"reply {e} claims to be for execution {reply.execution}"
                if cfg.security == "malicious":  # a deviating aggregator: refuse, output nothing
                    raise VerificationError(message)
                raise ProtocolError(message)
            x = float(ctx.decrypt(reply.numerator)[0])
            y = float(ctx.decrypt(reply.denominator)[layout.denominator_slot])
            decoded.append((x, y))
        if cfg.security == "semi-honest":
            x, y = decoded[0]
            if not (math.isfinite(x) and math.isfinite(y)) or y < 0.5:
                raise ProtocolError(
                    "the aggregated denominator is zero: no positive or no negative labels "
                    "across all parties (or the reply is corrupted)"
                )
            return x / (2.0 * y)
        return self._verify(decoded)

    def _verify(self, decoded: list[tuple[float, float]]) -> float:
        cfg = self.config
        assert cfg is not None and self.counts is not None
        if len(self._randomness) != len(decoded):
            raise ProtocolError("uploads() must run before finish_all()")
        sizes = cfg.sizes()
        own = max(1, self.counts.positives) * max(1, self.counts.negatives)
        c_max = 2.0 ** (MALICIOUS_MULTIPLIER_FLOOR_BITS + cfg.multiplier_bits)
        aucs, d_low = [], float(own)
        for (x, y), rnd in zip(decoded, self._randomness, strict=True):
            if not (math.isfinite(x) and math.isfinite(y)) or y <= 0:
                raise VerificationError("the aggregator's reply does not decrypt to a valid result")
            d_low = max(d_low, y / (rnd.r2 * c_max))
            aucs.append(malicious.recover_auc(x, y, rnd))
        tol = sizes.tolerance(d_low)
        self.last_tolerance = tol
        spread = max(aucs) - min(aucs)
        if not spread <= tol or not all(-tol <= a <= 1 + tol for a in aucs):
            log.info("verification failed: executions differ by %.3g (tolerance %.3g)", spread, tol)
            raise VerificationError(
                "the two executions disagree: the aggregator deviated from the protocol "
                "(or a party's data changed); no AUC is output"
            )
        self.last_precision = sizes.precision(d_low)
        if self.last_precision > self.required_accuracy:
            raise InsufficientPrecisionError(
                f"the verified AUC is only guaranteed to ±{self.last_precision:.1e} "
                f"(required {self.required_accuracy:.0e}): the masks for "
                f"max_samples_per_party={cfg.max_samples_per_party} are too wide for this "
                "little data; declare a bound closer to the real party sizes"
            )
        return float(np.mean(aucs))
