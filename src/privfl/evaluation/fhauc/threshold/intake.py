"""The threshold aggregator's intake of one session's ciphertext uploads: each signed upload
checked and loaded as it arrives, then added into running sums, so the aggregator never holds
``M`` uploads at once.

Run by the aggregator (:class:`~.aggregator.ThresholdAggregator`) only. What it learns: who
sent an upload and its public shape; nothing in plaintext (it never decrypts). Every upload
is hostile: it is refused, before anything of it is combined, unless it is signed by the party
it arrived as (a member of this session, once), belongs to this session's transcript, has the
session's executions and (T, F, D) shape, and holds only fresh ciphertexts at the upload
level that carry its sender's tag. The refusal's condition is on these public facts only.
Loading waits until :data:`BATCH_PER_WORKER` uploads per upload worker are pending, then runs
on the workers' threads (:func:`~.parallel.map_parties`; the coefficient checks and hashing
release the GIL). Batches of one upload per thread ran the checks barely faster than one
thread (100 parties, malicious AUC: 0.26 s wall for 0.30 s of CPU, against 0.08 s for 0.16 s
when every upload was loaded at once): a batch of 8 per worker keeps the threads busy and
memory at a fixed number of uploads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from privfl import threshold as tr
from privfl.crypto.threshold.messages import ciphertext_rows
from privfl.errors import MalformedMessageError, ProtocolError, UnknownPartyError
from privfl.evaluation.fhauc.threshold import messages as tmsg
from privfl.evaluation.fhauc.threshold import plan as tp
from privfl.evaluation.fhauc.threshold.ops import ThresholdCiphertext
from privfl.evaluation.fhauc.threshold.parallel import map_parties
from privfl.evaluation.fhauc.upload_checks import UploadSum
from privfl.evaluation.fhauc.uploads import Upload

__all__ = ["BATCH_PER_WORKER", "UploadIntake"]

BATCH_PER_WORKER = 8  # uploads loaded together per upload worker


@dataclass
class UploadIntake:
    """One session's uploads (see the module docstring). ``keep_all``: keep every party's
    loaded upload instead of summing (for a computation that overrides
    :meth:`~privfl.evaluation.fhauc.aggregator.Aggregator.aggregate`, such as the tamper
    suite's, which is given every upload in ``parties`` order)."""

    parties: tuple[str, ...]
    session: bytes
    roster: Mapping[str, bytes]
    transcript: bytes  # the threshold transcript every upload must carry
    plan: tp.Plan
    server: tr.ThresholdServer
    workers: int
    keep_all: bool
    _pending: list[tuple[str, bytes]] = field(default_factory=list)
    _taken: set[str] = field(default_factory=set)
    _sum: UploadSum = field(default_factory=UploadSum)
    _held: dict[str, list[Upload]] = field(default_factory=dict)

    def take(self, party: str, data: bytes) -> None:
        """``party``'s signed upload ``data``, as it arrives (refused if ``party`` is not in
        the session or sent one already); loaded and added once a batch is pending."""
        if party not in self.parties or party in self._taken:
            raise UnknownPartyError(f"an unexpected upload from {party!r}")
        self._taken.add(party)
        self._pending.append((party, data))
        if len(self._pending) >= BATCH_PER_WORKER * self.workers:
            self._load_pending()

    def per_execution(self) -> list[list[Upload]]:
        """Per ciphertext group (:attr:`~.plan.Plan.groups`: the executions, or
        ``layout.lanes`` of them side by side), what the computation combines: the sum over
        every party's upload (one :class:`Upload`), or with ``keep_all`` every party's upload
        in ``parties`` order. Every party's upload must have been taken in."""
        self._load_pending()  # a refused upload is named before a missing one
        missing = [p for p in self.parties if p not in self._taken]
        if missing:
            raise ProtocolError(f"no upload from {missing}")
        groups = range(self.plan.groups)
        if self.keep_all:
            return [[self._held[p][e] for p in self.parties] for e in groups]
        sums = self._sum.result("sum")
        return [[sums[e]] for e in groups]

    def _load_pending(self) -> None:
        pending, self._pending = self._pending, []
        if not pending:
            return
        self.server.context.ciphertext_layout(self.plan.upload_level, 1)  # before threads
        opened = map_parties(self._check, pending, self.workers)
        for (party, _), uploads in zip(pending, opened, strict=True):
            if self.keep_all:
                self._held[party] = uploads
                continue
            try:
                self._sum.add(uploads)
            except (ValueError, RuntimeError, TypeError) as exc:
                raise MalformedMessageError(f"the uploads cannot be combined ({exc})") from None

    def _check(self, item: tuple[str, bytes]) -> list[Upload]:
        """One upload checked (signer, transcript, executions, shape, fresh ciphertexts of
        its sender) and loaded: one :class:`Upload` per execution."""
        party, raw = item
        msg = tmsg.ThresholdUpload.views(raw, self.session, self.roster)  # no copy
        if msg.sender != party:
            raise UnknownPartyError(f"an upload signed by {msg.sender!r} arrived as {party!r}'s")
        if msg.transcript != self.transcript:
            raise ProtocolError(f"the upload of {party} belongs to another session")
        layout = self.plan.layout
        if len(msg.executions) != self.plan.groups:
            raise MalformedMessageError(
                f"upload from {msg.sender} has {len(msg.executions)} ciphertext groups, "
                f"expected {self.plan.groups}"
            )
        out = []
        for e, vectors in enumerate(msg.executions):
            shape = tuple(len(v) for v in vectors)
            if shape != (layout.chunks, layout.f_ciphertexts, layout.denominator_ciphertexts):
                raise MalformedMessageError(f"upload from {msg.sender}: {shape} ciphertexts")
            t, f, d = ([self._fresh(raw, msg.sender) for raw in vec] for vec in vectors)
            out.append(Upload(msg.sender, msg.session, list(t), list(f), list(d), e))
        return out

    def _fresh(self, raw: bytes | memoryview, sender: str) -> ThresholdCiphertext:
        server = self.server
        message = ciphertext_rows(raw, server.context, server.session)  # checked, no copy
        fresh = (self.plan.upload_level, 1)
        if message.sender != sender or (message.level, message.deg) != fresh:
            raise MalformedMessageError(
                f"upload from {sender}: not a fresh ciphertext of its own (level "
                f"{message.level}, degree {message.deg})"
            )
        return ThresholdCiphertext.from_rows(server.context, message, server.session)
