"""Wire messages of FHAUC with threshold keys (``keys="threshold"``).

Steps after the usual ``config``/``join`` (see :mod:`.party` for who does what)::

    aggregator -> party   keygen     Start                 joins relayed (as today)
    party -> aggregator   keygen     KeyShareUpload        signed: round-1 key share (b halves)
    aggregator -> party   keycheck   JointPublicKeys       threshold-ckks message: the sums
    party -> aggregator   keycheck   KeyCheck              signed: sketch of its own b halves
    aggregator -> party   upload     KeyChecks             every party's signed KeyCheck
    party -> aggregator   upload     UploadStep            MultShareUpload (signed: the
                                                          relinearisation share) and
                                                          ThresholdUpload (signed: ciphertexts)
    aggregator -> party   decrypt    DecryptRequests       c1 of each reply (non-lead parties)
    party -> aggregator   decrypt    DecryptShares         signed: s_i c1 + e_i per reply
    aggregator -> lead    fuse       LeadRequests          c1 and c0 + the SUM of M-1 shares
    lead -> aggregator    fuse       Reveal                signed, AES-GCM under the parties'
    aggregator -> party   result     Reveal                session key: the decrypted pairs
    party -> aggregator   result     Done                  (as today)

Every party message is signed with the party's pinned Ed25519 key (``seal``/``open_signed``
of :mod:`.messages`), every nested threshold-CKKS message is parsed by its own bounded
``from_bytes`` against the session's context, and every count is bounded before anything is
allocated. ``from_bytes`` raises :class:`~privfl.errors.ProtocolError` subclasses only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, Self

from privfl.crypto.identity import IdentityKey
from privfl.crypto.threshold.params import PARAMETER_SETS
from privfl.errors import MalformedMessageError
from privfl.evaluation.fhauc.messages import (
    AGGREGATOR,
    CODEC,
    DIGEST_BYTES,
    MAX_NAME_BYTES,
    open_signed,
    seal,
    upload_body,
)
from privfl.evaluation.fhauc.policy import MAX_EXECUTIONS, MAX_PARTIES
from privfl.messages import Reader, Writer

MAX_SKETCH_ROWS = 64
MAX_KEY_MESSAGE_BYTES = 64 << 20  # a round-1 key share of the "fhauc" set is ~4 MB
MAX_CIPHERTEXT_MESSAGE_BYTES = 4 << 20
# Ciphertexts per vector and execution. The plan leaves a malicious session at most 47 chunks
# (AUC: 2 executions of 2 x 47 + 1 ciphertexts of 1 MiB fill MAX_UPLOAD_BYTES; curve: 8, by
# the budget); a semi-honest one would reach 126 (one execution, N up to 1,032,193): the plan
# refuses more than this bound at join (Plan.check_upload; from N = 524,290, 65 chunks), where
# the aggregator refused the honest upload as malformed before
MAX_CIPHERTEXTS = 64
# A party's signed ciphertext upload. 64 MiB, the key messages' bound it used, refused honest
# uploads of about 80 MB (2 x 1,119 rows at N = 3,202 drew 9 or more executions of 4 chunks of
# 4,096 slots; benchmarks/fhauc_acceptance.py --random). 192 MiB carries 27 executions of
# 4,096 thresholds at 4 splits (3 T, 3 F and 1 D ciphertexts x 1 MiB at level 0 of the
# "fhauc" set); the plan (Plan.max_executions) keeps every honest upload within it, and a
# party refuses at join a session whose upload would not fit
# (tests/test_fhauc_threshold_upload_size.py).
MAX_UPLOAD_BYTES = 192 << 20
# what an upload holds besides its ciphertexts (signature, names, transcript, per-ciphertext
# headers): far below 1 MiB; the plan keeps executions x ciphertext bytes within the rest
UPLOAD_FRAMING_BYTES = 1 << 20
GCM_NONCE_BYTES = 12
# Joint decryptions in one session: one per execution for the AUC, 2 x chunks per execution
# for a curve, never more than the "fhauc" key set's budget (32; Plan.max_executions); the
# decryption requests, the shares and the reveal are bounded by it (a bound of 16, then
# MAX_EXECUTIONS, refused an honest curve of 3 executions x 8 reply ciphertexts after upload,
# benchmarks/fhauc_acceptance.py)
MAX_REPLY_CIPHERTEXTS = PARAMETER_SETS["fhauc"].max_decryptions
# AUC: one (X, Y) pair per execution; curve/metrics: the used slots of at most
# MAX_REPLY_CIPHERTEXTS reply ciphertexts of the set's slots (8,192), as float64
MAX_REVEAL_BYTES = (
    64 + 16 * MAX_EXECUTIONS + MAX_REPLY_CIPHERTEXTS * (4 + 8 * PARAMETER_SETS["fhauc"].batch_size)
)


@dataclass(frozen=True)
class KeyShareUpload:
    """Party -> aggregator, key generation round 1: the party's ``KeyGenShare`` (threshold
    codec, bound to the threshold session), signed."""

    session: bytes
    sender: str
    share: bytes

    STEP = "th-keygen"

    def seal(self, identity: IdentityKey) -> bytes:
        body = Writer().bytes_(self.share).getvalue()
        return seal(identity, self.STEP, self.session, self.sender, body)

    @classmethod
    def from_bytes(cls, data: bytes, session: bytes, roster: Mapping[str, bytes]) -> Self:
        sender, sess, r = open_signed(data, cls.STEP, session, roster)
        share = r.bytes_(MAX_KEY_MESSAGE_BYTES)
        r.end()
        return cls(sess, sender, share)


@dataclass(frozen=True)
class KeyCheck:
    """Party -> aggregator (relayed to all parties): a random linear sketch, per RNS row, of
    the ``b`` halves this party contributed to the joint public and switching keys. Sketches
    are linear, so the parties' sketches must add up to the sketch of the joint key the
    aggregator returned; the sketch's coefficients are derived from that joint key, after
    it was fixed (:mod:`.party`). It also reveals the party's lead secret ``r_i``,
    committed to in its join (:func:`~.transcript.lead_commitment`)."""

    session: bytes
    sender: str
    sketch: tuple[int, ...]
    lead_secret: bytes = b""

    STEP = "th-keycheck"

    def seal(self, identity: IdentityKey) -> bytes:
        w = Writer().u32(len(self.sketch))
        for v in self.sketch:
            w.u64(v)
        w.bytes_(self.lead_secret)
        return seal(identity, self.STEP, self.session, self.sender, w.getvalue())

    @classmethod
    def from_bytes(cls, data: bytes, session: bytes, roster: Mapping[str, bytes]) -> KeyCheck:
        sender, sess, r = open_signed(data, cls.STEP, session, roster)
        rows = r.count(MAX_SKETCH_ROWS, "sketch rows")
        sketch = tuple(r.u64() for _ in range(rows))
        secret = r.bytes_(64)
        r.end()
        return cls(sess, sender, sketch, secret)


@dataclass(frozen=True)
class Relay:
    """Aggregator -> every party: a list of byte strings (signed party messages relayed,
    or threshold-CKKS requests), one message kind per step."""

    session: bytes
    items: tuple[bytes, ...]
    step: str
    sender: str = AGGREGATOR

    STEPS: ClassVar[tuple[str, ...]] = ("th-keychecks", "th-decrypt", "th-lead")
    LIMITS: ClassVar[dict[str, int]] = {
        "th-keychecks": MAX_PARTIES,
        "th-decrypt": MAX_REPLY_CIPHERTEXTS,
        "th-lead": MAX_REPLY_CIPHERTEXTS,
    }

    def to_bytes(self) -> bytes:
        body = Writer().list_(list(self.items)).getvalue()
        return CODEC.encode(self.step, self.session, self.sender, body)

    @classmethod
    def from_bytes(cls, data: bytes, step: str, session: bytes) -> Relay:
        if step not in cls.STEPS:
            raise MalformedMessageError(f"unknown relay step {step!r}")
        header, r = CODEC.decode(data, step, session)
        count = r.count(cls.LIMITS[step], f"{step} items")
        items = tuple(r.bytes_(MAX_KEY_MESSAGE_BYTES) for _ in range(count))
        r.end()
        return cls(header.session, items, step, header.sender)


@dataclass(frozen=True)
class MultShareUpload(KeyShareUpload):
    """Party -> aggregator, key generation round 2: the party's ``MultKeyShare`` (threshold
    codec), signed. It travels with the upload (:class:`UploadStep`) but is signed apart, so
    the aggregator checks the session's ciphertexts without hashing key material."""

    STEP = "th-mult"


@dataclass(frozen=True)
class ThresholdUpload:
    """Party -> aggregator: the transcript hash and, per execution, its T, F and D
    ciphertexts under the joint key (threshold-CKKS ``CiphertextMessage`` bytes), signed."""

    session: bytes
    sender: str
    transcript: bytes
    executions: tuple[tuple[tuple[bytes, ...], tuple[bytes, ...], tuple[bytes, ...]], ...]

    STEP = "th-upload"

    def body(self) -> bytes:
        return upload_body(self.transcript, self.executions)

    def seal(self, identity: IdentityKey) -> bytes:
        return seal(identity, self.STEP, self.session, self.sender, self.body())

    @classmethod
    def from_bytes(
        cls, data: bytes, session: bytes, roster: Mapping[str, bytes]
    ) -> ThresholdUpload:
        v = cls.views(data, session, roster)
        execs = tuple(
            (tuple(map(bytes, t)), tuple(map(bytes, f)), tuple(map(bytes, d)))
            for t, f, d in v.executions
        )
        return cls(v.session, v.sender, v.transcript, execs)

    @classmethod
    def views(cls, data: bytes, session: bytes, roster: Mapping[str, bytes]) -> UploadViews:
        """:meth:`from_bytes` (every check) with each ciphertext message a view into
        ``data``, not a copy (the aggregator's path: ``data`` is immutable ``bytes``)."""
        sender, sess, r = open_signed(bytes(data), cls.STEP, session, roster)
        transcript = r.bytes_(DIGEST_BYTES)
        if len(transcript) != DIGEST_BYTES:
            raise MalformedMessageError(f"upload from {sender}: bad transcript hash")
        execs = []
        for _ in range(r.count(MAX_EXECUTIONS, "executions")):
            vectors = []
            for _v in range(3):
                n = r.count(MAX_CIPHERTEXTS, "ciphertexts")
                vectors.append(tuple(r.view(MAX_CIPHERTEXT_MESSAGE_BYTES) for _ in range(n)))
            execs.append((vectors[0], vectors[1], vectors[2]))
        r.end()
        return UploadViews(sess, sender, transcript, tuple(execs))


Views = tuple[memoryview, ...]


@dataclass(frozen=True, eq=False)
class UploadViews:
    """A checked :class:`ThresholdUpload` whose ciphertext messages are read-only views into
    the signed message's immutable bytes (:meth:`ThresholdUpload.views`)."""

    session: bytes
    sender: str
    transcript: bytes
    executions: tuple[tuple[Views, Views, Views], ...]


@dataclass(frozen=True)
class UploadStep:
    """A party's answer to the upload step: two messages, each signed on its own (the
    envelope itself carries no claim): the relinearisation share (:class:`MultShareUpload`,
    key generation) and the ciphertexts (:class:`ThresholdUpload`, the session)."""

    mult: bytes
    upload: bytes

    LIMIT: ClassVar[int] = MAX_KEY_MESSAGE_BYTES
    UPLOAD_LIMIT: ClassVar[int] = MAX_UPLOAD_BYTES

    def to_bytes(self) -> bytes:
        return Writer().bytes_(self.mult).bytes_(self.upload).getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> UploadStep:
        r = Reader(data, "threshold upload step")
        mult, upload = r.bytes_(cls.LIMIT), r.bytes_(cls.UPLOAD_LIMIT)
        r.end()
        return cls(mult, upload)


@dataclass(frozen=True)
class DecryptShares:
    """Non-lead party -> aggregator: its decryption share of every reply (threshold-CKKS
    ``DecryptionShare`` bytes), signed."""

    session: bytes
    sender: str
    shares: tuple[bytes, ...]

    STEP = "th-share"

    def seal(self, identity: IdentityKey) -> bytes:
        body = Writer().list_(list(self.shares)).getvalue()
        return seal(identity, self.STEP, self.session, self.sender, body)

    @classmethod
    def from_bytes(cls, data: bytes, session: bytes, roster: Mapping[str, bytes]) -> DecryptShares:
        sender, sess, r = open_signed(data, cls.STEP, session, roster)
        n = r.count(MAX_REPLY_CIPHERTEXTS, "decryption shares")
        shares = tuple(r.bytes_(MAX_CIPHERTEXT_MESSAGE_BYTES) for _ in range(n))
        r.end()
        return cls(sess, sender, shares)


@dataclass(frozen=True)
class Reveal:
    """Lead -> aggregator -> every party: the decrypted reply values, AES-256-GCM encrypted
    under a key derived from the parties' session key (the aggregator does not have it), the
    lead's name and the transcript as associated data; signed by the lead."""

    session: bytes
    sender: str
    nonce: bytes
    sealed: bytes

    STEP = "th-reveal"

    def seal(self, identity: IdentityKey) -> bytes:
        body = Writer().bytes_(self.nonce).bytes_(self.sealed).getvalue()
        return seal(identity, self.STEP, self.session, self.sender, body)

    @classmethod
    def from_bytes(cls, data: bytes, session: bytes, roster: Mapping[str, bytes]) -> Reveal:
        sender, sess, r = open_signed(data, cls.STEP, session, roster)
        nonce, sealed = r.bytes_(GCM_NONCE_BYTES), r.bytes_(MAX_REVEAL_BYTES)
        r.end()
        if len(nonce) != GCM_NONCE_BYTES or len(sender.encode()) > MAX_NAME_BYTES:
            raise MalformedMessageError(f"reveal from {sender}: bad nonce")
        return cls(sess, sender, nonce, sealed)


def read_pairs(data: bytes, expected: int) -> list[tuple[float, float]]:
    """The decrypted ``(X, Y)`` pairs of a reveal's plaintext: exactly ``expected`` pairs of
    finite floats."""
    r = Reader(data, "revealed values")
    n = r.count(MAX_EXECUTIONS, "revealed pairs")
    if n != expected:
        raise MalformedMessageError(f"the lead revealed {n} replies, expected {expected}")
    pairs = [(r.f64_finite("X"), r.f64_finite("Y")) for _ in range(n)]
    r.end()
    return pairs


def write_pairs(pairs: list[tuple[float, float]]) -> bytes:
    w = Writer().u32(len(pairs))
    for x, y in pairs:
        w.f64(x).f64(y)
    return w.getvalue()
