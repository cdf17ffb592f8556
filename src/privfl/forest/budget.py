"""A holder's decryption tickets and budget (RevFRF): what one comparison is for, and how
many partial decryptions (ParHDec1) a holder pays for, once per (query, tree, node).

Pure bookkeeping, run by the holder on its own state; the protocol steps that use it are in
:mod:`privfl.forest.secure_ops` (which states what a deviating CS can still get)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from privfl.errors import MalformedMessageError, ProtocolError
from privfl.messages import Reader, Writer


@dataclass(frozen=True)
class Ticket:
    """What one comparison is for: a query id (32 bytes: SHA-256 of the requester's query
    message, or of the test value the provider uploaded, see :func:`query_id`) and the
    (tree, node) whose split it compares with. The CC signs it into the result, and the
    holder spends it at most once (:class:`DecryptionBudget`)."""

    query: bytes
    tree: int
    node: int

    def write(self, w: Writer) -> Writer:
        return w.bytes_(self.query).u32(self.tree).u32(self.node)

    @classmethod
    def read(cls, r: Reader) -> Ticket:
        query = r.bytes_(32)
        if len(query) != 32:
            raise MalformedMessageError("a query id is 32 bytes")
        return cls(query, r.u32(), r.u32())


def query_id(data: bytes) -> bytes:
    """The id of a query: SHA-256 of the requester's ``query`` message (FRF-Predict) or of
    the provider's uploaded test-value ciphertext (FRF-Test, fresh per upload)."""
    return hashlib.sha256(b"privfl revfrf query id\x00" + data).digest()


class DecryptionBudget:
    """A holder's ParHDec1 budget (pure bookkeeping, run by the holder on its own state).

    A ticket is *payable* iff its (tree, node) is one where this holder provides the split
    and (query, tree, node) was never paid before, and either the holder issued its query id
    with a test value for that node (FRF-Test, :meth:`issue`) or the id is one of at most
    ``max_queries`` distinct requester query ids of the session (FRF-Predict; the holder
    cannot authenticate those). Every condition is public to the CS (it knows who provides
    which split, which tickets it used and which test values it received): a refusal
    reveals no secret."""

    def __init__(self, max_queries: int) -> None:
        self.max_queries = max_queries
        self.spent: set[tuple[bytes, int, int]] = set()
        self.issued: set[tuple[bytes, int, int]] = set()
        self.queries: set[bytes] = set()

    def issue(self, ticket: Ticket) -> None:
        """FRF-Test: the holder uploaded a fresh test value whose id is ``ticket.query``."""
        self.issued.add((ticket.query, ticket.tree, ticket.node))

    def spend(self, ticket: Ticket, provides: bool) -> None:
        """Pay one ParHDec1 for ``ticket``, or raise :class:`ProtocolError` (public reason)."""
        key, where = (ticket.query, ticket.tree, ticket.node), (ticket.tree, ticket.node)
        if not provides:
            raise ProtocolError(f"no split provided here at node {where}")
        if key in self.spent:
            raise ProtocolError(f"this query was already compared at node {where}")
        if key not in self.issued and ticket.query not in self.queries:
            if len(self.queries) >= self.max_queries:
                raise ProtocolError(f"the session's {self.max_queries} requester queries are used")
            self.queries.add(ticket.query)
        self.issued.discard(key)
        self.spent.add(key)

    def to_bytes(self) -> bytes:
        w = Writer().u32(self.max_queries)
        for entries in (self.spent, self.issued):
            w.u32(len(entries))
            for q, tree, node in sorted(entries):
                Ticket(q, tree, node).write(w)
        return w.list_(sorted(self.queries)).getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, limit: int) -> DecryptionBudget:
        r = Reader(data, "a decryption budget")
        budget = cls(r.u32())
        for entries in (budget.spent, budget.issued):
            for _ in range(r.count(limit, "tickets")):
                t = Ticket.read(r)
                entries.add((t.query, t.tree, t.node))
        budget.queries = set(r.list_(budget.max_queries))
        r.end()
        return budget


NO_TICKET = Ticket(bytes(32), 0, 0)  # a request that decrypts nothing for a holder (HoAdd)
