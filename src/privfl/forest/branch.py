"""FRF-Test's gate: which test rows a split's provider compares, and at which node.

In FRF-Test (``plain-compare``) the provider of a split compares its own test values with its
own threshold in the clear and sends the CS the branch bits. A provider that answered *any*
row at *any* node it split would give a deviating CS, per test row, one bit against every
threshold it ever released, including splits the CS had it make but never used in the tree.
A provider therefore answers test row r at node n of tree t only:

(a) at a node where it provides the split in the tree as grown: a split the CS chose
    (``split-request``) and that no ``forget`` or ``reopen`` has dropped since;
(b) for a node other than the root, when shown the parent's provider's :class:`RoutedRows`
    for n containing r: signed (Ed25519, the provisioned key pinned in every participant's
    roster) over the session, the test round, the tree, n, the rows the parent's split
    sent to n, **the parent's split** (SHA-256 of the signer's split receipt there) and
    **the test rows' identity** (:meth:`TestGate.load`), by the participant whose split
    receipt created n (as this provider saw it when it split n; not a revoked one); the
    root needs no parent. The two digests are not sent: this provider verifies with its own
    record of the parent's receipt and its own rows' identity, so a statement about a split
    a reopen dropped (the CS replaying it after an honest regrowth), about a split made
    after a reopen this provider was never shown, or about other rows (a restarted test
    PSI: row i is then another person) routes nothing. One statement per child, so a
    provider sees only the rows that reach its own node (what being asked tells it);
(c) once per (round, row, tree, node). The CS numbers its test rounds; a provider accepts a
    round only at or above the last one it answered, and after it loads rows of another
    identity or is shown a reopen only above it.

Whether a request is refused depends only on what the CS sent, on signed statements and on
the provider's splits (which the CS chose), never on a test value.

**What the CS learns from one answer**: for each row asked at node n, on which side of the
provider's threshold at n the provider's own value of that row falls, at a node that row
reaches in a tree as grown: the branch bits honest FRF-Test gives it (the rows' paths). The
test rows are the providers' own, loaded locally: the CS chooses neither the values nor the
thresholds. **What a deviating CS can still do**: ask fewer rows (it learns fewer paths) or
stop; and have several participants each split one node during growth (each sees a valid
node request, signs one receipt and releases one threshold, :mod:`.provenance`): each of them
then answers the rows routed to that node, so the CS gets at most one bit per (row, tree,
node, participant that split the node), and below such a node only along chains of splits
each of which some participant made under the previous one's receipt.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from dataclasses import dataclass, field

import numpy as np
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from privfl._typing import BoolArray
from privfl.errors import MalformedMessageError, ProtocolError, UnknownPartyError
from privfl.forest.messages import (
    CS,
    SessionConfig,
    StaleMessageError,
    _ids,
    expect_ids,
    pack_mask,
    read_mask,
    seal,
    unseal,
)
from privfl.forest.provenance import NodeGate, children
from privfl.messages import Reader, Writer

SIGNATURE_BYTES = 64
ID_BYTES = 32
MAX_ROUND = 0xFFFFFFFF  # rounds are u32 and the gate keeps round + 1
Bound = tuple[bytes, bytes]  # (parent's split digest, test rows' identity), both 32 bytes


@dataclass(frozen=True, eq=False)
class RoutedRows:
    """A provider's signed statement that, in test round ``round``, its split at the parent
    of node ``node`` sent the test rows ``rows`` (one bit per test row) to ``node``. One
    per child, so a child's provider sees only the rows that reach its own node."""

    signer: str
    round: int
    tree: int
    node: int
    rows: BoolArray
    signature: bytes = b""

    def signed_bytes(self, session: bytes, bound: Bound) -> bytes:
        """What is signed: the session, the signer, the round, the tree, the child node, the
        rows, and ``bound``: the parent's split (SHA-256 of the signer's split receipt at the
        parent, :mod:`.provenance`) and the test rows' identity (:meth:`TestGate.load`). The
        two are not sent: the child's provider verifies with its own record of each."""
        w = Writer().str_("privfl revfrf routed-rows/2").bytes_(session).str_(self.signer)
        w.u32(self.round).u32(self.tree).u32(self.node).u32(self.rows.size)
        return w.bytes_(pack_mask(self.rows)).bytes_(bound[0]).bytes_(bound[1]).getvalue()

    @classmethod
    def sign(
        cls, key: Ed25519PrivateKey, session: bytes, signer: str,
        ids: tuple[int, int, int], rows: BoolArray, bound: Bound,
    ) -> RoutedRows:  # fmt: skip
        """``ids``: (round, tree, child node); ``bound``: (parent split, test rows' id)."""
        unsigned = cls(signer, *ids, rows)
        return cls(signer, *ids, rows, key.sign(unsigned.signed_bytes(session, bound)))

    def verify(self, keys: Mapping[str, Ed25519PublicKey], session: bytes, bound: Bound) -> None:
        key = keys.get(self.signer)
        if key is None:
            raise UnknownPartyError(f"routed rows of {self.signer!r}, not a participant")
        try:
            key.verify(self.signature, self.signed_bytes(session, bound))
        except InvalidSignature:
            raise UnknownPartyError(
                f"routed rows not signed by {self.signer!r} for the parent's split and the "
                "test rows this provider holds"
            ) from None

    def write(self, w: Writer) -> Writer:
        w.str_(self.signer).u32(self.round).u32(self.tree).u32(self.node)
        return w.bytes_(pack_mask(self.rows)).bytes_(self.signature)

    @classmethod
    def read(cls, r: Reader, config: SessionConfig, n_rows: int) -> RoutedRows:
        signer, rnd, (tree, node) = r.str_(256), r.u32(), _ids(r, config)
        rows = read_mask(r, n_rows, "the routed rows")
        return cls(signer, rnd, tree, node, rows, _signature(r))


def _signature(r: Reader) -> bytes:
    signature = r.bytes_(SIGNATURE_BYTES)
    if len(signature) != SIGNATURE_BYTES:
        raise MalformedMessageError("routed rows with a short signature")
    return signature


@dataclass(frozen=True, eq=False)
class TestItem:
    """One node of a ``plain-compare``: the test rows asked there and, below the root, the
    parent provider's signed statement that routes them here."""

    tree: int
    node: int
    rows: BoolArray
    parent: RoutedRows | None = None


@dataclass(frozen=True, eq=False)
class TestRequest:
    """CS -> provider (``plain-compare``): round ``round`` of FRF-Test, its nodes' rows."""

    STEP = "plain-compare"
    round: int
    items: tuple[TestItem, ...]

    def to_bytes(self, config: SessionConfig) -> bytes:
        w = Writer().u32(self.round).u32(len(self.items))
        for item in self.items:
            w.u32(item.tree).u32(item.node).u32(item.rows.size).bytes_(pack_mask(item.rows))
            w.u32(0) if item.parent is None else item.parent.write(w.u32(1))
        return seal(self.STEP, config, CS, w)

    @classmethod
    def from_bytes(
        cls, data: bytes, config: SessionConfig, max_items: int, n_rows: int
    ) -> TestRequest:
        r = unseal(data, cls.STEP, config, CS)
        rnd, items = r.u32(), []
        if rnd >= MAX_ROUND:  # the gate's floor is round + 1 and must stay a u32 to be saved
            raise MalformedMessageError(f"test round {rnd} is past the last one ({MAX_ROUND - 1})")
        for _ in range(r.count(max_items, "nodes")):
            ids, size = _ids(r, config), r.u32()
            if size != n_rows:
                raise MalformedMessageError(f"a plain-compare mask of {size} bits, not {n_rows}")
            rows = read_mask(r, n_rows, "a plain-compare mask")
            kind = r.u32()
            if kind > 1:
                raise MalformedMessageError(f"unknown parent kind {kind}")
            parent = RoutedRows.read(r, config, n_rows) if kind else None
            items.append(TestItem(*ids, rows, parent))
        r.end()
        return cls(rnd, tuple(items))


@dataclass(frozen=True, eq=False)
class Compared:
    """A provider's answer at one node: which of the rows asked go left (x < s), and its
    signed statements of the rows sent to each child (for the children's providers)."""

    left: BoolArray
    to_left: RoutedRows
    to_right: RoutedRows


def _split_rows(rows: BoolArray, left: BoolArray) -> tuple[BoolArray, BoolArray]:
    asked = np.flatnonzero(rows)
    to_left, to_right = np.zeros(rows.size, dtype=bool), np.zeros(rows.size, dtype=bool)
    to_left[asked[left]], to_right[asked[~left]] = True, True
    return to_left, to_right


def answer(
    request: TestRequest, config: SessionConfig, sender: str, key: Ed25519PrivateKey,
    lefts: list[BoolArray], splits: list[bytes], batch: bytes,
) -> bytes:  # fmt: skip
    """The provider's ``plain-compared``: per item, the bits and a signed statement per
    child of the rows sent there, bound to its split there (``splits``, per item: SHA-256 of
    its receipt) and to the test rows' identity ``batch``."""
    w = Writer().u32(request.round).u32(len(request.items))
    for item, left, split in zip(request.items, lefts, splits, strict=True):
        w.u32(item.tree).u32(item.node).bytes_(pack_mask(left))
        for child, rows in zip(children(item.node), _split_rows(item.rows, left), strict=True):
            ids, bound = (request.round, item.tree, child), (split, batch)
            w.bytes_(RoutedRows.sign(key, config.session, sender, ids, rows, bound).signature)
    return seal("plain-compared", config, sender, w)


def read_answer(
    data: bytes, config: SessionConfig, sender: str, request: TestRequest
) -> list[Compared]:
    """The CS's check of a ``plain-compared``: item by item the nodes and rows it asked."""
    r = unseal(data, "plain-compared", config, sender)
    expect_ids((r.u32(), r.count(len(request.items), "nodes")),
               (request.round, len(request.items)), "plain-compared")  # fmt: skip
    out = []
    for item in request.items:
        expect_ids((r.u32(), r.u32()), (item.tree, item.node), "plain-compared")
        left = read_mask(r, int(item.rows.sum()), "branch bits")
        (lc, rc), (lrows, rrows) = children(item.node), _split_rows(item.rows, left)
        to_left = RoutedRows(sender, request.round, item.tree, lc, lrows, _signature(r))
        to_right = RoutedRows(sender, request.round, item.tree, rc, rrows, _signature(r))
        out.append(Compared(left, to_left, to_right))
    r.end()
    return out


@dataclass
class TestGate:
    """A provider's record of FRF-Test: the current round, the lowest round it accepts, the
    identity of its test rows (``batch``) and, per (tree, node), the rows it answered in
    the current round."""

    round: int = 0
    floor: int = 1
    answered: dict[tuple[int, int], BoolArray] = field(default_factory=dict)
    batch: bytes = bytes(ID_BYTES)

    def reload(self) -> None:
        """After new rows or a reopen: only a round above every round seen is accepted."""
        self.floor, self.answered = self.round + 1, {}

    def load(self, batch: bytes) -> None:
        """Test rows whose identity is ``batch`` (32 bytes every participant derives alike,
        e.g. SHA-256 of the aligned test ids in their agreed order); a new identity also
        raises the floor (:meth:`reload`). Statements name the identity they route."""
        if len(batch) != ID_BYTES:
            raise MalformedMessageError(f"a test rows' identity of {len(batch)} bytes, not 32")
        if batch != self.batch:
            self.batch = batch
            self.reload()

    def admit(
        self, request: TestRequest, splits: Collection[tuple[int, int]],
        tree: NodeGate, keys: Mapping[str, Ed25519PublicKey], session: bytes,
    ) -> None:  # fmt: skip
        """Check every item of ``request`` against (a), (b), (c) of the module docstring
        (typed errors, nothing recorded on a refusal), then record the rows as answered.
        ``splits``: where this provider splits; ``tree``: its node gate's record of who split
        each such node's parent (``via``), how (``parents``) and who was revoked."""
        if request.round < max(self.floor, self.round):
            raise StaleMessageError(f"test round {request.round}; this provider is past it")
        answered = {} if request.round > self.round else dict(self.answered)
        for item in request.items:
            key = (item.tree, item.node)
            if key not in splits:
                raise ProtocolError(f"no split of this provider at node {key} in the tree")
            if item.node == 0:
                if item.parent is not None:
                    raise ProtocolError("the root has no parent")
            else:
                self._check_parent(item, request.round, tree, keys, (session, self.batch))
            before = answered.get(key, np.zeros(item.rows.size, dtype=bool))
            if (before & item.rows).any():
                raise ProtocolError(f"a test row was already compared at node {key}")
            answered[key] = before | item.rows
        self.round, self.answered = request.round, answered

    @staticmethod
    def _check_parent(
        item: TestItem, rnd: int, tree: NodeGate,
        keys: Mapping[str, Ed25519PublicKey], ids: tuple[bytes, bytes],
    ) -> None:  # fmt: skip
        parent, key = item.parent, (item.tree, item.node)
        if parent is None:
            raise ProtocolError(f"node {key} needs its parent's signed rows")
        if (parent.round, parent.tree, parent.node) != (rnd, item.tree, item.node):
            raise ProtocolError(f"rows routed in another round or to another node than {item.node}")
        if parent.signer != tree.via.get(key) or parent.signer in tree.revoked:
            raise ProtocolError(f"rows routed by {parent.signer!r}, who did not split the parent")
        split = tree.parents.get((item.tree, (item.node - 1) // 2))
        if split is None:
            raise ProtocolError(f"no record of the split at node {key}'s parent")
        parent.verify(keys, ids[0], (split, ids[1]))
        if (item.rows & ~parent.rows).any():
            raise ProtocolError(f"test rows the parent did not route to node {item.node}")

    def to_bytes(self) -> bytes:
        w = Writer().u32(self.round).u32(self.floor).bytes_(self.batch).u32(len(self.answered))
        for (tree, node), rows in sorted(self.answered.items()):
            w.u32(tree).u32(node).u32(rows.size).bytes_(pack_mask(rows))
        return w.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes) -> TestGate:
        r = Reader(data, "a test gate")
        gate = cls(r.u32(), r.u32())
        gate.batch = r.bytes_(ID_BYTES)
        if len(gate.batch) != ID_BYTES:
            raise MalformedMessageError("a saved test rows' identity must be 32 bytes")
        for _ in range(r.count(1 << 32, "answered nodes")):
            key, size = (r.u32(), r.u32()), r.u32()
            gate.answered[key] = read_mask(r, size, "answered rows")
        r.end()
        return gate
