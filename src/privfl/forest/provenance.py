"""Which node requests a participant answers: the provenance of a node's samples.

A node request tells a participant which samples reach a node (μ). Answering one for a node
the CS made up is an exfiltration channel: a 2-sample μ puts the two samples' raw values
into the candidate thresholds, and so into the encrypted split the participant uploads. A
participant therefore answers only node requests that follow from the tree:

* **the root** of tree ``t`` carries a 32-byte bootstrap seed; its μ must be exactly the
  samples drawn by :func:`bootstrap` from that seed (``n`` draws with replacement, AES-CTR
  from :mod:`privfl.crypto.prng`, so ≈ 63 % of the samples), and a participant accepts one
  seed per tree, ever;
* **any other node** carries its parent's :class:`SplitReceipt`: the parent's provider
  signed (Ed25519, its provisioned key, pinned by the KGC in every participant's roster) the
  tree, the parent, the two child ids and a digest of each child's μ, which it computed
  itself from the parent's μ and its own threshold when the CS announced the split
  (``split-request``, which names the child ids: the CS commits to every split decision);
  the request's node must be one of the two children and its μ must match that digest;
  the receipt also signs the parent's depth, and a node at depth ``max_depth`` (a leaf)
  is refused;
* every node holds at least the session's ``min_node_size`` samples (public, fixed at
  provisioning, default ``max(MIN_NODE_SIZE, min_samples)``); a node id keeps the sample
  set it was first asked about (a different μ under a seen id is refused); and a
  participant signs at most one split receipt per (tree, node), ever (``forget`` does not
  reopen a node), and answers no node request for a node it has split.

**What a deviating CS can still learn.** It picks the winning candidate at every node (a
participant cannot check a choice that depends on the labels), so it can steer a tree to
any shape reachable by the participants' own candidate splits, down to ``min_node_size``
samples and ``max_depth`` levels, and it may ask a participant for proposals at a node
it has not split as often as it likes (fresh probes, the same samples). From a node it
learns what RevFRF reveals by design: for each candidate, which of the node's samples go
right (the order of the participant's values, coarsened to ς thresholds). It gets at most
one encrypted threshold per (participant, tree, node) and, across reopens, per
(participant, column, μ): a participant keeps, never cleared, the threshold it released on
each (column, digest of μ) and offers only that one when asked there again (a reopen
forgets the splits below a revoked participant's nodes, so a replayed older receipt
rebuilds a node's μ; it now gets the same threshold back). **Residual leak:** a threshold is
``lo + (hi - lo)·k/(ς+1)``, exactly affine in the min and max of the probed samples, so
a CS that opens it (see :mod:`.secure_ops`: a signed query's budget, colluding with a
requester) learns one exact affine combination of two of the node's raw
values; with one threshold per node this no longer solves for both, but the CS can steer
one participant to split several nested nodes of ``min_node_size`` samples and combine
the equations, or have several other participants each split the same node once (a
revocation regrows a node split before, so a second split is not refused; a participant
refuses only the children of a node it split itself under another receipt) and ask the victim at
sibling children with the same extreme samples (below ``max_depth``). Not removed here
(a public grid or noisy quantiles would change the forest). A receipt binds one session
(the session id is signed).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from privfl._typing import BoolArray, IntArray
from privfl.crypto.prng import SharedRandomness
from privfl.errors import MalformedMessageError, ProtocolError, UnknownPartyError
from privfl.messages import Reader, Writer

SEED_BYTES, DIGEST_BYTES = 32, 32
ROOT, CHILD = 0, 1
MIN_NODE_SIZE = 10
"""The default floor of a session's ``min_node_size`` (``max(MIN_NODE_SIZE, min_samples)``):
a node's candidate thresholds are affine in the min and max of a probe of its samples, so
the fewer samples, the closer an opened threshold is to one participant's raw value."""


def bootstrap(seed: bytes, tree: int, n: int) -> IntArray:
    """How many times each of the ``n`` samples is drawn in tree ``tree``'s bootstrap sample
    (``n`` uniform draws with replacement from the seed's keystream): the CS's weights, and
    the root's μ (the samples drawn at least once) that every participant recomputes."""
    draws = SharedRandomness(seed, f"privfl revfrf bootstrap {tree}").integers(0, n, n)
    return np.bincount(np.asarray(draws, dtype=np.int64), minlength=n).astype(np.int64)


def children(node: int) -> tuple[int, int]:
    """The ids of node ``node``'s children: 2n+1 and 2n+2 (the root is 0), so a node's id is
    its path from the root and one id names one node of the tree, however it was grown."""
    return 2 * node + 1, 2 * node + 2


def below(node: int, top: int) -> bool:
    """Whether ``node`` is a strict descendant of ``top`` (heap ids, :func:`children`)."""
    while node > top:
        node = (node - 1) // 2
        if node == top:
            return True
    return False


def under(key: tuple[int, int], tops: list[tuple[int, int]]) -> bool:
    """Whether (tree, node) ``key`` is one of ``tops`` or below one of them."""
    return any(key[0] == t and (key[1] == top or below(key[1], top)) for t, top in tops)


def digest(mask: BoolArray) -> bytes:
    """SHA-256 of a sample-selection vector (its bits, packed, and its length)."""
    w = Writer().u32(int(mask.size)).bytes_(np.packbits(mask.astype(np.uint8)).tobytes())
    return hashlib.sha256(w.getvalue()).digest()


@dataclass(frozen=True)
class SplitReceipt:
    """A split's provider attests which samples go to each child of node ``node``."""

    signer: str
    tree: int
    node: int
    left: int
    right: int
    left_digest: bytes
    right_digest: bytes
    signature: bytes = b""
    depth: int = 0  # of the split node (root 0), as the signer's gate recorded it

    def signed_bytes(self, session: bytes) -> bytes:
        w = Writer().str_("privfl revfrf split-receipt").bytes_(session).str_(self.signer)
        w.u32(self.tree).u32(self.node).u32(self.left).u32(self.right).u32(self.depth)
        return w.bytes_(self.left_digest).bytes_(self.right_digest).getvalue()

    @classmethod
    def sign(
        cls, key: Ed25519PrivateKey, session: bytes, signer: str, ids: tuple[int, int, int, int],
        left: BoolArray, right: BoolArray, depth: int = 0,
    ) -> SplitReceipt:  # fmt: skip
        """``ids``: (tree, node, left child, right child); ``left``/``right``: the children's
        μ, which the signer computed itself; ``depth``: the split node's depth."""
        unsigned = cls(signer, *ids, digest(left), digest(right), depth=depth)
        return cls(signer, *ids, unsigned.left_digest, unsigned.right_digest,
                   key.sign(unsigned.signed_bytes(session)), depth)  # fmt: skip

    def verify(self, keys: Mapping[str, Ed25519PublicKey], session: bytes) -> None:
        key = keys.get(self.signer)
        if key is None:
            raise UnknownPartyError(f"a split receipt of {self.signer!r}, not a participant")
        try:
            key.verify(self.signature, self.signed_bytes(session))
        except InvalidSignature:
            raise UnknownPartyError(f"a split receipt not signed by {self.signer!r}") from None

    def write(self, w: Writer) -> Writer:
        w.str_(self.signer).u32(self.tree).u32(self.node).u32(self.left).u32(self.right)
        w.u32(self.depth)
        return w.bytes_(self.left_digest).bytes_(self.right_digest).bytes_(self.signature)

    @classmethod
    def read(cls, r: Reader) -> SplitReceipt:
        signer, ids, depth = r.str_(256), (r.u32(), r.u32(), r.u32(), r.u32()), r.u32()
        left, right, signature = r.bytes_(DIGEST_BYTES), r.bytes_(DIGEST_BYTES), r.bytes_(64)
        if len(left) != DIGEST_BYTES or len(right) != DIGEST_BYTES or len(signature) != 64:
            raise MalformedMessageError("a split receipt with a short digest or signature")
        return cls(signer, *ids, left, right, signature, depth)


@dataclass(frozen=True)
class Provenance:
    """Why a node exists: a root's bootstrap ``seed``, or its parent's ``receipt``."""

    seed: bytes = bytes(SEED_BYTES)
    receipt: SplitReceipt | None = None

    def write(self, w: Writer) -> Writer:
        if self.receipt is None:
            return w.u32(ROOT).bytes_(self.seed)
        return self.receipt.write(w.u32(CHILD))

    @classmethod
    def read(cls, r: Reader) -> Provenance:
        kind = r.u32()
        if kind == ROOT:
            seed = r.bytes_(SEED_BYTES)
            if len(seed) != SEED_BYTES:
                raise MalformedMessageError("a root's bootstrap seed must be 32 bytes")
            return cls(seed=seed)
        if kind != CHILD:
            raise MalformedMessageError(f"unknown node provenance {kind}")
        return cls(receipt=SplitReceipt.read(r))


@dataclass
class NodeGate:
    """A participant's record of the trees it has seen: one bootstrap seed per tree (kept
    across the session, saved with the participant's state)."""

    session: bytes
    n_samples: int
    min_node_size: int
    peers: Mapping[str, Ed25519PublicKey]
    roots: dict[int, bytes]
    seen: dict[tuple[int, int], bytes] = field(default_factory=dict)  # node -> digest(μ)
    max_depth: int = 1 << 31
    depths: dict[tuple[int, int], int] = field(default_factory=dict)  # node -> its depth
    parents: dict[tuple[int, int], bytes] = field(default_factory=dict)  # node -> its split
    revoked: set[str] = field(default_factory=set)  # whose revocation it was shown
    via: dict[tuple[int, int], str] = field(default_factory=dict)  # node -> its parent's splitter

    def check(self, tree: int, node: int, members: BoolArray, origin: Provenance) -> None:
        """Refuse (ProtocolError, before anything is computed) a node request whose μ does
        not follow from the tree: see the module docstring. Whether a request is refused
        depends only on what the CS sent and on public or signed values, never on data."""
        size = int(members.sum())
        if size < self.min_node_size:
            raise ProtocolError(
                f"a node of {size} samples; the session's minimum node size is {self.min_node_size}"
            )
        known = self.seen.get((tree, node))
        if known is not None and known != digest(members):
            raise ProtocolError(f"node {tree, node} was asked about with other samples before")
        depth = 0 if origin.receipt is None else origin.receipt.depth + 1
        if depth >= self.max_depth:  # a leaf's depth (the signer's receipt gives the parent's)
            raise ProtocolError(f"node {tree, node} at depth {depth}; max_depth {self.max_depth}")
        if origin.receipt is None:
            seen = self.roots.get(tree)
            if node != 0 or (seen is not None and seen != origin.seed):
                raise ProtocolError(f"tree {tree} already has another root (node {node})")
            if not np.array_equal(bootstrap(origin.seed, tree, self.n_samples) > 0, members):
                raise ProtocolError("a root whose samples are not its seed's bootstrap sample")
            self.roots[tree] = origin.seed
            self.seen[(tree, node)], self.depths[(tree, node)] = digest(members), 0
            return
        receipt = origin.receipt
        receipt.verify(self.peers, self.session)
        if receipt.tree != tree or node not in (receipt.left, receipt.right):
            raise ProtocolError(f"node {tree, node} is not a child the receipt names")
        if (receipt.left, receipt.right) != children(receipt.node):
            raise ProtocolError(f"node {receipt.node}'s children are {children(receipt.node)}")
        if receipt.signer in self.revoked:
            raise ProtocolError(f"a split receipt of {receipt.signer!r}, who was revoked")
        split = hashlib.sha256(receipt.signed_bytes(self.session)).digest()
        if self.parents.get((tree, receipt.node), split) != split:
            raise ProtocolError(f"node {tree, receipt.node} was split another way before")
        want = receipt.left_digest if node == receipt.left else receipt.right_digest
        if receipt.left == receipt.right or digest(members) != want:
            raise ProtocolError(f"node {tree, node}'s samples are not those its parent split off")
        self.seen[(tree, node)], self.depths[(tree, node)] = want, depth
        self.parents[(tree, receipt.node)] = split
        self.via[(tree, node)] = receipt.signer

    def reopen(self, revoked: str, tops: list[tuple[int, int]]) -> None:
        """After ``revoked``'s signed revocation and its own receipts of the ``tops`` it split
        (checked by the caller, :mod:`.reopen`): forget every split of those nodes and every
        node below them, which the CS regrows under the same ids; refuse ``revoked``'s
        receipts from now on. Once per revoked participant."""
        if revoked in self.revoked:
            raise ProtocolError(f"the revocation of {revoked!r} was shown before")
        self.revoked.add(revoked)
        strictly = [k for k in self.seen if under(k, tops) and k not in tops]
        for key in strictly:
            self.seen.pop(key, None)
            self.depths.pop(key, None)
            self.via.pop(key, None)
        for key in [k for k in self.parents if under(k, tops)]:
            del self.parents[key]

    def extra_bytes(self) -> bytes:
        """The split of each parent it saw and whose revocations it was shown (saved with
        the participant's state, read back by :meth:`load_extra`)."""
        w = Writer().u32(len(self.parents))
        for (tree, node), split in sorted(self.parents.items()):
            w.u32(tree).u32(node).bytes_(split)
        w.list_(sorted(s.encode() for s in self.revoked)).u32(len(self.via))
        for (tree, node), signer in sorted(self.via.items()):
            w.u32(tree).u32(node).str_(signer)
        return w.getvalue()

    def load_extra(self, data: bytes) -> None:
        if not data:
            return
        r = Reader(data, "a node gate")
        parents = {}
        for _ in range(r.count(1 << 32, "split nodes")):
            key, split = (r.u32(), r.u32()), r.bytes_(DIGEST_BYTES)
            if len(split) != DIGEST_BYTES:
                raise MalformedMessageError("a saved split digest must be 32 bytes")
            parents[key] = split
        revoked = {s.decode("utf-8", "replace") for s in r.list_(len(self.peers))}
        via = {(r.u32(), r.u32()): r.str_(256) for _ in range(r.count(1 << 32, "nodes"))}
        r.end()
        self.parents, self.revoked, self.via = parents, revoked, via
