"""A holder's decryption tickets and budget (RevFRF): what one comparison is for, and how
many partial decryptions (ParHDec1) a holder pays for, once per (query, tree, node).

Pure bookkeeping, run by the holder on its own state; the protocol steps that use it are in
:mod:`privfl.forest.secure_ops` (which states what a deviating CS can still get)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from privfl.errors import MalformedMessageError, ProtocolError
from privfl.messages import Reader, Writer

NO_QUERY, REQUESTER_QUERY = 0, 1
"""A ticket's kind: none (a HoAdd, which decrypts nothing for a holder; a holder never pays
it), or a requester's signed query (FRF-Predict, the CC checks the requester's signature and
its per-query counts before it signs the ticket, :mod:`.query_auth`). FRF-Test has no kind:
each provider compares its own test value with its own threshold in the clear."""


@dataclass(frozen=True)
class Ticket:
    """What one comparison is for: a query id (32 bytes: the id of a requester's signed
    query, :meth:`.query_auth.SignedQuery.query_id`), the (tree, node) whose split it
    compares with, and its ``kind``. The CC signs it into the result, and the holder
    spends it at most once (:class:`DecryptionBudget`)."""

    query: bytes
    tree: int
    node: int
    kind: int = NO_QUERY

    def write(self, w: Writer) -> Writer:
        return w.bytes_(self.query).u32(self.tree).u32(self.node).u32(self.kind)

    @classmethod
    def read(cls, r: Reader) -> Ticket:
        query = r.bytes_(32)
        if len(query) != 32:
            raise MalformedMessageError("a query id is 32 bytes")
        tree, node, kind = r.u32(), r.u32(), r.u32()
        if kind not in (NO_QUERY, REQUESTER_QUERY):
            raise MalformedMessageError(f"a ticket of unknown kind {kind}")
        return cls(query, tree, node, kind)


class DecryptionBudget:
    """A holder's ParHDec1 budget (pure bookkeeping, run by the holder on its own state).

    A ticket is *payable* iff it is a requester query ticket (FRF-Predict: the CC signed it
    only after checking the requester's own signature, :mod:`.query_auth`), its (tree, node)
    is one where this holder provides the split, (query, tree, node) was never paid before,
    and its query is one of at most ``max_queries`` distinct requester query ids of the
    session (defence in depth). No other kind is ever paid: FRF-Test compares at the holder
    in the clear, so no test value gives the CS a ticket (a ticket binds no operand: each
    one would be a comparison bit of the CS's choice). Every condition is public to the CS
    (it knows who provides which split and which tickets it used): a refusal reveals no
    secret."""

    def __init__(self, max_queries: int) -> None:
        self.max_queries = max_queries
        self.spent: set[tuple[bytes, int, int]] = set()
        self.queries: set[bytes] = set()

    def spend(self, ticket: Ticket, provides: bool) -> None:
        """Pay one ParHDec1 for ``ticket``, or raise :class:`ProtocolError` (public reason)."""
        key, where = (ticket.query, ticket.tree, ticket.node), (ticket.tree, ticket.node)
        if ticket.kind != REQUESTER_QUERY:
            raise ProtocolError(f"a holder decrypts only for a requester's signed query ({where})")
        if not provides:
            raise ProtocolError(f"no split provided here at node {where}")
        if key in self.spent:
            raise ProtocolError(f"this query was already compared at node {where}")
        if ticket.query not in self.queries:
            if len(self.queries) >= self.max_queries:
                raise ProtocolError(f"the session's {self.max_queries} requester queries are used")
            self.queries.add(ticket.query)
        self.spent.add(key)

    def spend_all(self, tickets: Sequence[Ticket], provides: Callable[[Ticket], bool]) -> None:
        """Pay every ticket of a packed batch by the rules of :meth:`spend`, all or nothing
        (checked on a copy first, so a refusal spends nothing)."""
        trial = DecryptionBudget(self.max_queries)
        trial.spent, trial.queries = set(self.spent), set(self.queries)
        for t in tickets:
            trial.spend(t, provides(t))
        self.spent, self.queries = trial.spent, trial.queries

    def to_bytes(self) -> bytes:
        w = Writer().u32(self.max_queries).u32(len(self.spent))
        for q, tree, node in sorted(self.spent):
            w.bytes_(q).u32(tree).u32(node)
        return w.list_(sorted(self.queries)).getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, limit: int) -> DecryptionBudget:
        r = Reader(data, "a decryption budget")
        budget = cls(r.u32())
        for _ in range(r.count(limit, "tickets")):
            q, tree, node = r.bytes_(32), r.u32(), r.u32()
            budget.spent.add((q, tree, node))
        budget.queries = set(r.list_(budget.max_queries))
        r.end()
        return budget


MAX_QUERIES = 1024
"""Default number of distinct requester queries served per session (public): per requester
at the CC (:mod:`.query_auth`), and in all at each holder."""

NO_TICKET = Ticket(bytes(32), 0, 0)  # a request that decrypts nothing for a holder (HoAdd)
