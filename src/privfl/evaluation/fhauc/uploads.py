"""FHAUC's ciphertext-carrying messages: a party's signed upload and the aggregator's result.

:class:`Upload` and :class:`Reply` are the per-execution views the aggregator's
:meth:`~privfl.evaluation.fhauc.aggregator.Aggregator.aggregate` takes and returns;
:class:`PartyUpload` and :class:`Result` are what travels. Every ciphertext is loaded by SEAL
under the session's parameters and checked (two parts, top level, the session's scale)
before it is used; counts are bounded before anything is allocated.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from privfl._typing import FloatArray
from privfl.crypto.ckks import CKKSContext
from privfl.crypto.identity import IdentityKey
from privfl.errors import MalformedMessageError, ProtocolError
from privfl.evaluation.fhauc.ciphertext import HECiphertext, add_all, as_seal
from privfl.evaluation.fhauc.layout import Layout
from privfl.evaluation.fhauc.messages import (
    AGGREGATOR,
    CODEC,
    DIGEST_BYTES,
    open_signed,
    seal,
    upload_body,
)
from privfl.evaluation.fhauc.policy import MAX_EXECUTIONS
from privfl.messages import Writer

MAX_CIPHERTEXTS = 4096  # per vector and execution: 4096 chunks = 16.7 M slots
MAX_CIPHERTEXT_BYTES = 4 << 20


@dataclass(frozen=True)
class Upload:
    """One party's ciphertexts for one execution (what :meth:`Aggregator.aggregate` gets).

    ``t``/``f``: the T and F vector chunks; ``d``: denominator ciphertexts (empty in the folded
    layout, where TP and FP ride in ``t`` and ``f``). In the joint layout ``t`` holds the one
    ciphertext carrying both vectors and ``f`` is empty (:func:`summed_vectors`)."""

    sender: str
    session: bytes
    t: list[HECiphertext]
    f: list[HECiphertext]
    d: list[HECiphertext] = field(default_factory=list)
    execution: int = 0


@dataclass(frozen=True)
class PartyUpload:
    """A party's signed upload: the session transcript hash and, per execution, the raw
    ciphertext bytes (loaded and checked by :meth:`open`)."""

    session: bytes
    sender: str
    transcript: bytes
    executions: tuple[tuple[tuple[bytes, ...], tuple[bytes, ...], tuple[bytes, ...]], ...]

    STEP = "upload"

    @classmethod
    def build(
        cls, session: bytes, sender: str, transcript: bytes, uploads: Sequence[Upload]
    ) -> PartyUpload:
        return cls(
            session,
            sender,
            transcript,
            tuple(
                (
                    tuple(as_seal(c).to_bytes() for c in u.t),
                    tuple(as_seal(c).to_bytes() for c in u.f),
                    tuple(as_seal(c).to_bytes() for c in u.d),
                )
                for u in uploads
            ),
        )

    def body(self) -> bytes:
        return upload_body(self.transcript, self.executions)

    def seal(self, identity: IdentityKey) -> bytes:
        return seal(identity, self.STEP, self.session, self.sender, self.body())

    @classmethod
    def from_bytes(cls, data: bytes, session: bytes, roster: Mapping[str, bytes]) -> PartyUpload:
        """Check the signature before anything else; then the structure (bounded)."""
        sender, sess, r = open_signed(data, cls.STEP, session, roster)
        transcript = r.bytes_(DIGEST_BYTES)
        execs = []
        for _ in range(r.count(MAX_EXECUTIONS, "executions")):
            vectors = tuple(tuple(r.list_(MAX_CIPHERTEXTS)) for _ in range(3))
            execs.append((vectors[0], vectors[1], vectors[2]))
        r.end()
        return cls(sess, sender, transcript, tuple(execs))

    def open(
        self,
        context: CKKSContext,
        chunks: int,
        d_count: int,
        scale_bits: float,
        f_count: int | None = None,
    ) -> list[Upload]:
        """Load every ciphertext, checking the shape (``chunks`` T, ``f_count`` F, default
        ``chunks``, and ``d_count`` D ciphertexts per execution) and that each is a fresh
        ciphertext at the session's scale: a mismatch is a MalformedMessageError naming the
        sender. The shape is checked for every execution before any ciphertext is loaded."""
        want = (chunks, chunks if f_count is None else f_count, d_count)
        for e, (t, f, d) in enumerate(self.executions):
            if (len(t), len(f), len(d)) != want:
                raise MalformedMessageError(
                    f"upload from {self.sender} has {len(t)}/{len(f)}/{len(d)} ciphertexts in "
                    f"execution {e}, expected {want[0]}/{want[1]}/{want[2]}"
                )
        out = []
        for e, (t, f, d) in enumerate(self.executions):
            try:
                loaded: list[list[HECiphertext]] = [
                    [context.fresh_ciphertext_from_bytes(b, scale_bits) for b in vec]
                    for vec in (t, f, d)
                ]
            except MalformedMessageError as exc:
                raise MalformedMessageError(f"upload from {self.sender}: {exc}") from None
            out.append(Upload(self.sender, self.session, loaded[0], loaded[1], loaded[2], e))
        return out


def summed_vectors(
    uploads: Sequence[Upload], layout: Layout
) -> tuple[list[HECiphertext], list[HECiphertext]]:
    """The slot-wise sums over parties of the T chunks and of the F chunks (aggregator; it
    learns nothing: it never decrypts). In the joint layout F is the summed ciphertext
    rotated by :attr:`~.Layout.f_rotation` (the AUC's window; the curve's F offset), which
    brings F's slots under T's (:mod:`~privfl.evaluation.fhauc.layout`)."""
    t = [add_all([u.t[k] for u in uploads]) for k in range(layout.chunks)]
    if layout.joint:
        return t, [t[0].rotate(layout.f_rotation)]
    return t, [add_all([u.f[k] for u in uploads]) for k in range(layout.chunks)]


# ============================================================================ replies
@dataclass(frozen=True)
class Reply:
    """The aggregator's answer for one execution: ``numerator`` encrypts c·num in every slot,
    ``denominator`` encrypts c·TP·FP at :attr:`Layout.denominator_slot`.

    With a ``curve``/``metrics`` reveal (:mod:`~privfl.evaluation.fhauc.curve`) the reply is
    the summed T-vector chunks and F-vector chunks (TP and FP counts; in the malicious variant
    secretly permuted shares of both), all times one ``c``: ``numerator`` and ``denominator``
    are the first chunk of each, ``extra`` the remaining T chunks then the remaining F ones."""

    session: bytes
    numerator: HECiphertext
    denominator: HECiphertext
    execution: int = 0
    sender: str = AGGREGATOR
    extra: tuple[HECiphertext, ...] = ()

    def decrypt(self, context: CKKSContext) -> list[FloatArray]:
        """``numerator``, ``denominator`` then ``extra``, decrypted (single keys: a party
        holding the secret context; any other ciphertext is a ProtocolError)."""
        return [
            context.decrypt(as_seal(c)) for c in (self.numerator, self.denominator, *self.extra)
        ]


@dataclass(frozen=True)
class Result:
    """Aggregator -> every party: the replies of all executions."""

    session: bytes
    replies: tuple[Reply, ...]
    sender: str = AGGREGATOR

    STEP = "result"

    def to_bytes(self) -> bytes:
        w = Writer().u32(len(self.replies))
        for rep in self.replies:
            w.u32(rep.execution).bytes_(as_seal(rep.numerator).to_bytes())
            w.bytes_(as_seal(rep.denominator).to_bytes())
            w.list_([as_seal(c).to_bytes() for c in rep.extra])
        return CODEC.encode(self.STEP, self.session, self.sender, w.getvalue())

    @classmethod
    def from_bytes(
        cls,
        data: bytes,
        context: CKKSContext,
        session: bytes,
        extra: int | None = None,
        executions: int | None = None,
    ) -> Result:
        """``extra``/``executions``: the counts the reader's session expects (a party passes
        both); any other count is refused before a ciphertext is loaded. A serialised
        ciphertext can be a hundred bytes (zstd of a transparent one) and load as hundreds
        of KB, so the bytes on the wire do not bound the memory: the counts must."""
        header, r = CODEC.decode(data, cls.STEP, session)
        replies = []
        count = r.count(MAX_EXECUTIONS, "executions")
        if executions is not None and count != executions:
            raise ProtocolError(f"the result must hold {executions} executions, got {count}")
        for _ in range(count):
            execution = r.u32()
            num = context.ciphertext_from_bytes(r.bytes_(MAX_CIPHERTEXT_BYTES))
            den = context.ciphertext_from_bytes(r.bytes_(MAX_CIPHERTEXT_BYTES))
            n_extra = r.count(2 * MAX_CIPHERTEXTS, "extra ciphertexts")
            if extra is not None and n_extra != extra:
                raise ProtocolError(
                    f"a reply of this session carries {extra} extra ciphertext(s), got {n_extra}"
                )
            extra_cts = tuple(
                context.ciphertext_from_bytes(r.bytes_(MAX_CIPHERTEXT_BYTES))
                for _ in range(n_extra)
            )
            replies.append(Reply(header.session, num, den, execution, header.sender, extra_cts))
        r.end()
        return cls(header.session, tuple(replies), header.sender)
