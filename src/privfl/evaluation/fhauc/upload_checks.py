"""What the FHAUC aggregator checks in each party upload, and the per-party sums it forms.

Written once and run either in the aggregator's process or in its upload workers
(:mod:`~privfl.evaluation.fhauc.upload_pool`): :meth:`UploadCheck.open` verifies one signed
upload (roster signature, sender, session, transcript, execution count, shape, fresh
ciphertexts at the session's scale) and loads its ciphertexts; :func:`sum_uploads` adds the
loaded uploads of several parties slot-wise, one party at a time (:class:`UploadSum`). The
aggregator (or a worker on its behalf) learns the ciphertext sizes and who sent them,
nothing in plaintext: it never decrypts.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from privfl.crypto.ckks import CKKSContext
from privfl.errors import MalformedMessageError, ProtocolError, UnknownPartyError
from privfl.evaluation.fhauc.ciphertext import HECiphertext
from privfl.evaluation.fhauc.uploads import PartyUpload, Upload
from privfl.messages import Reader, Writer

__all__ = ["UploadCheck", "UploadSum", "sum_uploads"]


@dataclass(frozen=True)
class UploadCheck:
    """The session facts every upload is checked against (aggregator; public values only:
    no key, no secret, so it may be handed to an upload worker).

    ``roster``: party name -> pinned Ed25519 public key; ``parties``: the session's
    members; ``shape``: (T, F, D) ciphertexts per execution; ``scale_bits``: the scale every
    fresh ciphertext must carry."""

    session: bytes
    roster: Mapping[str, bytes]
    transcript: bytes
    parties: frozenset[str]
    executions: int
    shape: tuple[int, int, int]
    scale_bits: float

    def to_bytes(self) -> bytes:
        w = Writer().bytes_(self.session).bytes_(self.transcript).u32(self.executions)
        w.u32(self.shape[0]).u32(self.shape[1]).u32(self.shape[2]).f64(self.scale_bits)
        w.u32(len(self.roster))
        for name, key in self.roster.items():
            w.str_(name).bytes_(key)
        w.u32(len(self.parties))
        for name in sorted(self.parties):
            w.str_(name)
        return w.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> UploadCheck:
        r = Reader(data, "upload check")
        session, transcript, executions = r.bytes_(), r.bytes_(), r.u32()
        shape = (r.u32(), r.u32(), r.u32())
        scale = r.f64_finite("scale")
        roster = {r.str_(1 << 16): r.bytes_() for _ in range(r.count(1 << 20, "roster"))}
        parties = frozenset(r.str_(1 << 16) for _ in range(r.count(1 << 20, "parties")))
        r.end()
        return cls(session, roster, transcript, parties, executions, shape, scale)

    def open(self, context: CKKSContext, claimed: str, data: bytes) -> list[Upload]:
        """Verify the upload ``data`` that arrived as ``claimed``'s and load it: one
        :class:`Upload` per execution. A non-member, a message signed by another party than
        the one it arrived as, another session's transcript, a wrong execution count or
        shape, or a ciphertext that is not fresh at the session's scale is refused with a
        typed error before anything is combined."""
        message = PartyUpload.from_bytes(data, self.session, self.roster)
        if message.sender != claimed or message.sender not in self.parties:
            raise UnknownPartyError(
                f"an upload signed by {message.sender!r} arrived as {_shown(claimed)}'s"
            )
        if message.transcript != self.transcript:
            raise ProtocolError(f"the upload of {message.sender} belongs to another session")
        if len(message.executions) != self.executions:
            raise MalformedMessageError(
                f"upload from {message.sender} has {len(message.executions)} executions, "
                f"expected {self.executions}"
            )
        t, f, d = self.shape
        return message.open(context, t, d, self.scale_bits, f)


SHOWN_NAME_CHARS = 128


def _shown(name: str) -> str:
    """``name`` as a refusal quotes it: the transport's claim, any length, so at most
    :data:`SHOWN_NAME_CHARS` characters of it (and its length)."""
    if len(name) <= SHOWN_NAME_CHARS:
        return repr(name)
    return f"{name[:SHOWN_NAME_CHARS]!r}... ({len(name)} characters)"


class UploadSum:
    """The running slot-wise sums of several parties' uploads (aggregator, or an upload
    worker on its behalf; it learns nothing: it never decrypts). :meth:`add` takes one
    party's uploads (one :class:`Upload` per execution, all of one session's shape) and
    keeps only the sums, so memory stays at one party's upload however many parties add.
    Additions are exact modulo each prime, so the sum does not depend on the order the
    parties arrive in, and a sum of partial sums equals the sum over all parties bit for
    bit."""

    def __init__(self) -> None:
        self._sums: list[list[list[HECiphertext]]] | None = None
        self._sessions: list[bytes] = []
        self.count = 0  # parties added

    def add(self, uploads: Sequence[Upload]) -> None:
        """Add one party's uploads (ValueError if their executions or shape differ from the
        first party's)."""
        vectors = [[list(u.t), list(u.f), list(u.d)] for u in uploads]
        if self._sums is None:
            self._sums, self._sessions = vectors, [u.session for u in uploads]
        else:
            for acc, vec in zip(self._sums, vectors, strict=True):
                for k in range(3):
                    acc[k] = [a + b for a, b in zip(acc[k], vec[k], strict=True)]
        self.count += 1

    def result(self, label: str) -> list[Upload]:
        """Per execution, the sums as one :class:`Upload` named ``label`` (ValueError when
        no party was added)."""
        if self._sums is None:
            raise ValueError("nothing to add")
        return [
            Upload(label, session, t, f, d, e)
            for e, (session, (t, f, d)) in enumerate(zip(self._sessions, self._sums, strict=True))
        ]


def sum_uploads(per_party: Iterable[Sequence[Upload]], label: str) -> list[Upload]:
    """Per execution, the slot-wise sum over parties of each T, F and D ciphertext, as one
    :class:`Upload` named ``label`` (:class:`UploadSum`; ``per_party`` yields each party's
    uploads). Consumed one party at a time, so a generator keeps only the running sums in
    memory."""
    total = UploadSum()
    for uploads in per_party:
        total.add(uploads)
    return total.result(label)
