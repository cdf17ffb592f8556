"""A requester's signed query and the CC's ledger of the queries it serves (RevFRF,
FRF-Predict): the CS cannot mint a query id.

**Threat.** A holder strips its key (ParHDec1) from one comparison per (query, tree, node)
at a node whose split it provides, and a comparison is of the CS's choice (nobody can see
inside the blinded HoLT). With query ids the CS could make up, a deviating CS bought one
chosen comparison bit per minted id and node, up to the holder's ``max_queries`` ids: ~40
of them open a 40-bit value (a split, a participant's value, a requester's query).

**What is checked, by whom.**

* The requester (its Ed25519 key pinned by the KGC at provisioning, sent to the CS and the
  CC as ``requester-registered``) signs, with its query, the statement *(session, its
  name, SHA-256 of the query's ciphertexts)* (:class:`SignedQuery`). The query id is the
  hash of that statement.
* Before any comparison of a query, the CS hands the signed statement to the CC
  (``query-open``). The CC (:class:`QueryLedger`) verifies the signature under the pinned
  key of the named requester, refuses a statement it opened before (a replay), and opens
  at most ``max_queries`` statements per requester per session.
* The CC signs a comparison result with a requester-query ticket only if the ticket's id
  is an opened query, the (query, tree, node) was never compared before, and the query has
  had fewer than ``max_depth`` comparisons in that tree (an honest walk compares once per
  level: at most ``max_depth`` splits on a root-to-leaf path). The holder accepts such a
  ticket only under the CC's signature, still once per (query, tree, node).

Every refusal depends only on what the CS sent (public to it), never on a secret.

**What a deviating CS can still get.** Per signed query, at most ``n_trees * max_depth``
comparison bits: exactly as many as honest prediction of that query uses, but (since the
ticket does not bind *what* is compared) of the CS's choice, e.g. against a split value
at nodes off the query's path. Without a requester's signature: nothing. With a requester
that colludes (signs whatever the CS asks), at most ``max_queries * n_trees * max_depth``
chosen bits per requester per session; a colluding requester already learns, by honest
queries, one chosen comparison with every split on its queries' paths. CS and CC are
assumed not to collude (together they hold the strong key).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from privfl.crypto import dtpkc
from privfl.errors import MalformedMessageError, ProtocolError, UnknownPartyError
from privfl.forest.budget import REQUESTER_QUERY, Ticket
from privfl.forest.messages import (
    CC,
    CS,
    Job,
    Outgoing,
    SessionConfig,
    StaleMessageError,
    seal,
    unseal,
)
from privfl.messages import Reader, Writer

DIGEST_BYTES = 32
SIGNATURE_BYTES = 64


def digest_of(values: Sequence[dtpkc.Ciphertext]) -> bytes:
    """SHA-256 of a query's ciphertexts, in order (what the requester signs)."""
    h = hashlib.sha256(b"privfl revfrf query values\x00")
    for v in values:
        h.update(v.to_bytes())
    return h.digest()


@dataclass(frozen=True)
class SignedQuery:
    """A requester's Ed25519 signature over (session, its name, the digest of its query's
    ciphertexts): the only way a requester-query ticket comes into being."""

    requester: str
    digest: bytes
    signature: bytes

    @staticmethod
    def signed_bytes(session: bytes, requester: str, digest: bytes) -> bytes:
        w = Writer().str_("privfl revfrf signed query").bytes_(session).str_(requester)
        return w.bytes_(digest).getvalue()

    @classmethod
    def sign(
        cls, key: Ed25519PrivateKey, config: SessionConfig, requester: str, digest: bytes
    ) -> SignedQuery:
        """Run by the requester over its own query."""
        return cls(requester, digest, key.sign(cls.signed_bytes(config.session, requester, digest)))

    def verify(self, key: Ed25519PublicKey, config: SessionConfig) -> None:
        try:
            key.verify(self.signature, self.signed_bytes(config.session, self.requester,
                                                         self.digest))  # fmt: skip
        except InvalidSignature:
            raise UnknownPartyError(f"a query not signed by requester {self.requester!r}") from None

    def query_id(self, config: SessionConfig) -> bytes:
        """The id every ticket of this query carries (bound to the session)."""
        signed = self.signed_bytes(config.session, self.requester, self.digest)
        return hashlib.sha256(b"privfl revfrf query id\x00" + signed).digest()

    def write(self, w: Writer) -> Writer:
        return w.str_(self.requester).bytes_(self.digest).bytes_(self.signature)

    @classmethod
    def read(cls, r: Reader) -> SignedQuery:
        requester, digest, signature = r.str_(256), r.bytes_(DIGEST_BYTES), r.bytes_(64)
        if len(digest) != DIGEST_BYTES or len(signature) != SIGNATURE_BYTES:
            raise MalformedMessageError("a signed query with a short digest or signature")
        return cls(requester, digest, signature)


@dataclass(frozen=True)
class Query:
    """Requester -> CS (FRF-Predict): every feature of one sample, in the roster's feature
    order, encrypted under the requester's own key, and the requester's Ed25519 signature
    over the session, its name and the ciphertexts' digest (:mod:`.query_auth`)."""

    STEP: ClassVar[str] = "query"
    values: tuple[dtpkc.Ciphertext, ...]
    signature: bytes = b""

    def to_bytes(self, config: SessionConfig, sender: str) -> bytes:
        w = Writer().u32(len(self.values))
        for v in self.values:
            v.write(w)
        return seal(self.STEP, config, sender, w.bytes_(self.signature))

    @classmethod
    def from_bytes(
        cls, data: bytes, config: SessionConfig, sender: str, key: dtpkc.PublicKey, n_features: int
    ) -> Query:
        r = unseal(data, cls.STEP, config, sender)
        if r.count(n_features, "features") != n_features:
            raise MalformedMessageError(f"a query must carry all {n_features} features")
        values = tuple(dtpkc.Ciphertext.read(r, key.params, key) for _ in range(n_features))
        signature = r.bytes_(64)
        r.end()
        if len(signature) != 64:
            raise MalformedMessageError("a query's signature is 64 bytes")
        return cls(values, signature)

    def statement(self, requester: str) -> SignedQuery:
        """What ``requester`` signed: the digest of these ciphertexts, and its signature."""
        return SignedQuery(requester, digest_of(self.values), self.signature)


@dataclass(frozen=True)
class QueryBatch:
    """Requester -> CS (batched FRF-Predict, ``query-batch``): many rows in one message, each
    row its own :class:`Query` (its own signature, hence its own query id and allowance)."""

    STEP: ClassVar[str] = "query-batch"
    rows: tuple[Query, ...]

    def to_bytes(self, config: SessionConfig, sender: str) -> bytes:
        w = Writer().u32(len(self.rows))
        for q in self.rows:
            w.u32(len(q.values))
            for v in q.values:
                v.write(w)
            w.bytes_(q.signature)
        return seal(self.STEP, config, sender, w)

    @classmethod
    def from_bytes(
        cls, data: bytes, config: SessionConfig, sender: str, key: dtpkc.PublicKey,
        n_features: int, max_rows: int,
    ) -> QueryBatch:  # fmt: skip
        r = unseal(data, cls.STEP, config, sender)
        rows = []
        for _ in range(r.count(max_rows, "rows")):
            if r.count(n_features, "features") != n_features:
                raise MalformedMessageError(f"a query must carry all {n_features} features")
            values = tuple(dtpkc.Ciphertext.read(r, key.params, key) for _ in range(n_features))
            signature = r.bytes_(SIGNATURE_BYTES)
            if len(signature) != SIGNATURE_BYTES:
                raise MalformedMessageError("a query's signature is 64 bytes")
            rows.append(Query(values, signature))
        r.end()
        if not rows:
            raise MalformedMessageError("a query batch without a row")
        return cls(tuple(rows))


def open_query(config: SessionConfig, query: SignedQuery) -> Job[bytes]:
    """The CS's ``query-open`` (before any comparison of a requester's query): hand the
    requester's signed statement to the CC; returns the query id the CC opened."""
    reply = yield Outgoing(CC, seal("query-open", config, CS, query.write(Writer())))
    r = unseal(reply, "query-opened", config, CC)
    qid = r.bytes_(DIGEST_BYTES)
    r.end()
    if qid != query.query_id(config):
        raise ProtocolError("the CC opened another query")
    return qid


class QueryLedger:
    """The CC's record of the requester queries it serves (pure bookkeeping on the CC's own
    state; see the module doc for the rules and what they leave to a deviating CS)."""

    def __init__(
        self, config: SessionConfig, max_queries: int,
        keys: Mapping[str, Ed25519PublicKey] | None = None,
    ) -> None:  # fmt: skip
        self._config, self.max_queries = config, max_queries
        self.keys: dict[str, Ed25519PublicKey] = dict(keys or {})
        self.opened: dict[bytes, str] = {}  # query id -> requester
        self.per_tree: Counter[tuple[bytes, int]] = Counter()  # (query, tree) -> comparisons
        self.spent: set[tuple[bytes, int, int]] = set()

    def open(self, query: SignedQuery) -> bytes:
        """``query-open``: verify the requester's signature, refuse a replay and a requester
        over its ``max_queries``; returns the query id."""
        key = self.keys.get(query.requester)
        if key is None:
            raise UnknownPartyError(f"{query.requester!r} is not a registered requester")
        query.verify(key, self._config)
        qid = query.query_id(self._config)
        if qid in self.opened:
            raise StaleMessageError("this signed query was already opened (replayed)")
        if sum(1 for r in self.opened.values() if r == query.requester) >= self.max_queries:
            raise ProtocolError(
                f"requester {query.requester!r} used the session's {self.max_queries} queries"
            )
        self.opened[qid] = query.requester
        return qid

    def charge(self, ticket: Ticket) -> None:
        """Before the CC signs a comparison with ``ticket``: a requester-query ticket needs an
        opened query, a (query, tree, node) never compared, and fewer than ``max_depth``
        comparisons of that query in that tree. Other tickets pass here (no holder pays
        them: the result stays under a joint key nobody strips). Raises
        :class:`ProtocolError` (public reason)."""
        if ticket.kind != REQUESTER_QUERY:
            return
        where = (ticket.tree, ticket.node)
        if ticket.query not in self.opened:
            raise ProtocolError("a comparison for a query no requester signed")
        key = (ticket.query, ticket.tree, ticket.node)
        if key in self.spent:
            raise ProtocolError(f"this query was already compared at node {where}")
        if self.per_tree[(ticket.query, ticket.tree)] >= self._config.max_depth:
            raise ProtocolError(
                f"this query had its {self._config.max_depth} comparisons in tree {ticket.tree}"
            )
        self.spent.add(key)
        self.per_tree[(ticket.query, ticket.tree)] += 1

    def charge_all(self, tickets: Sequence[Ticket]) -> None:
        """A packed batch (:mod:`.packed_holt`): every slot's ticket charged as one
        comparison by the rules of :meth:`charge`, all or nothing, before any work; only
        requester-query tickets (a pack is always for a signed query)."""
        seen: set[tuple[bytes, int, int]] = set()
        extra: Counter[tuple[bytes, int]] = Counter()
        for t in tickets:
            key, tree = (t.query, t.tree, t.node), (t.query, t.tree)
            if t.kind != REQUESTER_QUERY or t.query not in self.opened:
                raise ProtocolError("a packed comparison for a query no requester signed")
            if key in self.spent or key in seen:
                raise ProtocolError(f"this query was already compared at node {key[1:]}")
            if self.per_tree[tree] + extra[tree] >= self._config.max_depth:
                raise ProtocolError(
                    f"this query had its {self._config.max_depth} comparisons in tree {t.tree}"
                )
            seen.add(key)
            extra[tree] += 1
        self.spent |= seen
        self.per_tree.update(extra)

    def to_bytes(self) -> bytes:
        """The opened queries and the comparisons spent (for a node that rebuilds its CC)."""
        w = Writer().u32(len(self.opened))
        for qid, requester in sorted(self.opened.items()):
            w.bytes_(qid).str_(requester)
        w.u32(len(self.spent))
        for q, tree, node in sorted(self.spent):
            w.bytes_(q).u32(tree).u32(node)
        return w.getvalue()

    def restore(self, data: bytes) -> None:
        """Read back :meth:`to_bytes` (the node's own saved state)."""
        r = Reader(data, "CC query ledger")
        limit = self.max_queries * max(len(self.keys), 1)
        opened = {r.bytes_(32): r.str_(256) for _ in range(r.count(limit, "queries"))}
        bound = limit * self._config.n_trees * self._config.max_depth
        spent = {(r.bytes_(32), r.u32(), r.u32()) for _ in range(r.count(bound, "comparisons"))}
        r.end()
        self.opened, self.spent = opened, spent
        self.per_tree = Counter((q, tree) for q, tree, _ in spent)
