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
    MalformedMessageError,
    ProtocolError,
    UnknownPartyError,
)
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

    STEP = "config"

    @property
    def num_points(self) -> int:
        """N, the number of decision points including the ±inf ends."""
        return int(self.thresholds.size) + 2

    def to_bytes(self) -> bytes:
        w = Writer().u32(len(self.parties))
        for p in self.parties:
            w.str_(p)
        w.bytes_(np.asarray(self.thresholds, dtype="<f8").tobytes())
        w.f64(self.score_range[0]).f64(self.score_range[1])
        w.u64(self.max_samples_per_party).str_(self.security).u32(self.splits)
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
    ) -> tuple[bytes, dict[str, bytes]]:
        """Generate keys; return (public setup for the aggregator, bundle per party).

        ``max_points`` limits the Galois keys to what N <= max_points needs (smaller
        public context); ``None`` supports every N."""
        terms = (max_points - 1) if max_points else params.slots
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
        )
        cfg.validate()
        self._bind(cfg, ctx)
        return cfg.to_bytes()

    def _bind(self, cfg: SessionConfig, ctx: CKKSContext) -> None:
        layout = Layout.for_terms(cfg.num_points - 1, ctx.params.slots)
        missing = set(layout.rotation_steps) - set(ctx.rotation_steps)
        if missing:
            raise InputError(
                f"the provisioned keys do not support N={cfg.num_points} decision points "
                f"(missing rotations {sorted(missing)}); re-provision with a larger maximum"
            )
        self.multiplier_bits = multiplier_bits(
            ctx.params, len(cfg.parties), cfg.max_samples_per_party
        )
        self.config, self.layout = cfg, layout

    def _ctx(self) -> CKKSContext:
        if self.context is None:
            raise ProtocolError("aggregator has not received the public setup")
        return self.context

    # -- evaluation ---------------------------------------------------------------------
    def handle_uploads(self, uploads: Sequence[bytes]) -> bytes:
        """Parse and check every party's upload (one each, in roster order), aggregate,
        and return the serialised reply."""
        ctx, cfg = self._ctx(), self.config
        if cfg is None:
            raise ProtocolError("no session started")
        parsed = [Upload.from_bytes(b, ctx, cfg.session) for b in uploads]
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
        c = random_multiplier(self.multiplier_bits)
        return Reply(cfg.session, num * c, den * c, uploads[0].execution, self.name)


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


def random_multiplier(bits: float) -> int:
    """c >= 1, log-uniform up to 2^bits, from the OS CSPRNG."""
    u = secrets.randbits(53) / float(1 << 53)
    return max(1, int(2 ** (u * bits)))


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
        multiplier_bits(ctx.params, len(cfg.parties), cfg.max_samples_per_party)
        self.config = cfg
        self.layout = Layout.for_terms(cfg.num_points - 1, ctx.params.slots)

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

    def upload(self) -> bytes:
        """Encrypt T, F (and D) for the aggregator. Reveals only ciphertext sizes."""
        ctx, cfg, layout = self._ctx(), self.config, self.layout
        assert cfg is not None and layout is not None
        counts = self.compute_counts()
        t, f = numerator_vectors(counts)
        tv, fv, dv = layout.pack(
            t.astype(np.float64),
            f.astype(np.float64),
            float(counts.positives),
            float(counts.negatives),
        )
        up = Upload(
            self.name,
            cfg.session,
            [ctx.encrypt(v) for v in tv],
            [ctx.encrypt(v) for v in fv],
            [ctx.encrypt(v) for v in dv],
        )
        return up.to_bytes()

    def finish(self, data: bytes) -> float:
        """Decrypt the reply and output the global AUC = X / (2 Y)."""
        ctx, cfg, layout = self._ctx(), self.config, self.layout
        assert cfg is not None and layout is not None
        reply = Reply.from_bytes(data, ctx, cfg.session)
        x = float(ctx.decrypt(reply.numerator)[0])
        y = float(ctx.decrypt(reply.denominator)[layout.denominator_slot])
        if not (math.isfinite(x) and math.isfinite(y)) or y < 0.5:
            raise ProtocolError(
                "the aggregated denominator is zero: no positive or no negative labels across "
                "all parties (or the reply is corrupted)"
            )
        return x / (2.0 * y)
