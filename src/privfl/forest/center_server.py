"""RevFRF's center server (CS): the labels, the trees, and every conversation of the protocol.

The CS holds only its own secrets (θ_CS, λ1), its labels and its trees. Each protocol it runs
is a generator (:data:`~privfl.forest.messages.Job`) that yields messages to the CC or to a
participant and receives their replies, so the runner times each role's own steps and only
bytes cross between roles:

* :meth:`CenterServer.fit` grows every tree (FLE-Expan / FOS-Find): per node a random subset
  of ceil(sqrt(|F|)) allowed features, the owners' candidate split vectors scored with the
  labels (weighted Gini or MSE), the winner's split uploaded encrypted under its key;
* :meth:`CenterServer.predict_query` (FRF-Predict) compares a requester's encrypted sample
  with HoLT at every node; :meth:`CenterServer.predict_plain` (FRF-Test) asks each provider
  to compare its own test values with its own threshold in the clear (it holds both, so
  HoLT would hide nothing from it, and the CS learns the same branch bits either way;
  without a holder decryption per test value the CS gets no comparison of its choice);
* :meth:`CenterServer.revoke` checks a signed, fresh, unreplayed revocation request, destroys
  and regrows every subtree under a node of the participant, and at level 2 refreshes the
  destroyed splits at CC and again itself (HEncRef).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import replace

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from privfl._typing import BoolArray, FloatArray
from privfl.crypto import dtpkc
from privfl.errors import InputError, ProtocolError, UnknownPartyError
from privfl.forest import (
    batch_predict,
    budget,
    plain,
    provenance,
    query_auth,
    secure_ops,
)
from privfl.forest.freshness import ReplayGuard, RevocationReport
from privfl.forest.jobs import Par, gather, lift
from privfl.forest.kgc import KeyGrant, RequesterRegistration, RosterEntry
from privfl.forest.messages import (
    CC,
    CS,
    CiphertextReply,
    Job,
    NodeBatch,
    NodeQuery,
    NodeRequest,
    Outgoing,
    Proposals,
    RevocationRequest,
    SessionConfig,
)
from privfl.forest.query_auth import Query
from privfl.forest.reopen import ReopenNotice, check_reopened
from privfl.forest.tree import (
    Leaf,
    Node,
    Region,
    Split,
    Tree,
    encode_labels,
    is_pure,
    leaf_value,
    vote,
)
from privfl.forest.tree import weighted_impurity as impurity


class CenterServer:
    """CS: labels, trees, θ_CS and λ1; participants' public keys and revocation keys."""

    role = "cs"
    name = CS

    def __init__(
        self, config: SessionConfig, labels: object, task: str = "classification", *,
        min_samples: int = 2, reuse_features: bool = False, seed: int | None = None,
    ) -> None:  # fmt: skip
        self.config, self.task = config, task
        self._y, self.classes = encode_labels(labels, task, config.n_samples)
        self._n_classes = max(len(self.classes), 1)
        self._min_samples, self._reuse = min_samples, reuse_features
        self._rng = np.random.default_rng(seed)  # not secret: bootstrap and feature subsets
        self._test_round = 0  # FRF-Test rounds run (:mod:`.branch`)
        self._cs: secure_ops.CSMaterial | None = None
        self._roster: dict[str, RosterEntry] = {}
        self._features: list[tuple[str, int]] = []  # global feature id -> (owner, column)
        self._requesters: dict[str, tuple[dtpkc.PublicKey, Ed25519PublicKey]] = {}
        self._op = 0
        self._replays = ReplayGuard()
        self.trees: list[Tree] = []
        self.revoked: list[str] = []
        self.published_removals: list[str] = []
        self.archive: list[dtpkc.Ciphertext] = []  # level-2 refreshed splits of destroyed nodes

    # -------------------------------------------------------------------- provisioning
    def install_keys(self, data: bytes) -> None:
        """The KGC's ``cs-keys``: θ_CS, λ1 and the roster (accepted once)."""
        if self._cs is not None:
            raise ProtocolError("CS already holds its keys")
        grant = KeyGrant.from_bytes(data, "cs-keys", self.config)
        self._roster = {e.name: e for e in grant.roster}
        self._features = [(e.name, c) for e in grant.roster for c in range(e.n_columns)]
        self._cs = secure_ops.CSMaterial(self.config, grant.weak_key(), grant.strong_share())

    def register_requester(self, data: bytes) -> None:
        """The KGC's ``requester-registered``: a requester's public key and the Ed25519 key
        its queries are signed with."""
        reg = RequesterRegistration.from_bytes(data, self.config, self._material().sk.public.params)
        self._requesters[reg.name] = (reg.public, reg.signing_key)

    def _material(self) -> secure_ops.CSMaterial:
        if self._cs is None:
            raise ProtocolError("CS has no keys yet")
        return self._cs

    def layout(self) -> list[tuple[str, int]]:
        """(participant, columns) of the active participants, in the roster's order: the
        layout of a requester's query."""
        return [(e.name, e.n_columns) for e in self._roster.values() if e.name not in self.revoked]

    # -------------------------------------------------------------------- growth
    def fit(self) -> Par[None]:
        """Grow every tree, each from a bootstrap sample chosen by CS; the trees, and the two
        children of every node, grow side by side (one batch of messages per round)."""
        self._material()
        self.trees = [Tree(t) for t in range(self.config.n_trees)]
        yield from gather(self._plant(tree) for tree in self.trees)

    def _plant(self, tree: Tree) -> Par[None]:
        n, everything = self.config.n_samples, tuple(range(len(self._features)))
        seed = self._rng.bytes(provenance.SEED_BYTES)  # participants recompute the sample
        weights = provenance.bootstrap(seed, tree.tree_id, n)
        members = np.flatnonzero(weights)
        origin = provenance.Provenance(seed=seed)
        root = Region(members, weights[members].astype(np.int64), everything, 0, origin)
        yield from self._grow(tree, 0, root)

    def _grow(self, tree: Tree, node_id: int, region: Region) -> Par[None]:
        """FLE-Expan at ``node_id``, then both subtrees side by side."""
        node, children = yield from self._expand(tree, node_id, region)
        tree.nodes[node_id] = node
        yield from gather(self._grow(tree, cid, child) for cid, child in children)

    def _expand(
        self, tree: Tree, node_id: int, region: Region
    ) -> Par[tuple[Node, list[tuple[int, Region]]]]:
        y, w = self._y[region.members], region.counts.astype(np.float64)
        usable = [f for f in region.allowed if self._features[f][0] not in self.revoked]
        leaf = Leaf(node_id, region, leaf_value(y, w, self.task, self._n_classes))
        if (
            region.depth >= self.config.max_depth
            or not usable
            or is_pure(y, self.task)
            or w.sum() < self._min_samples
            or len(region.members) < self.config.min_node_size  # participants would refuse
        ):
            return leaf, []
        size = min(len(usable), max(1, math.ceil(math.sqrt(len(self._features)))))
        chosen = sorted(self._rng.choice(usable, size=size, replace=False).tolist())
        best = yield from self._best_split(tree.tree_id, node_id, region, chosen, y, w)
        if best is None:
            return leaf, []
        owner, index, feature, right = best
        left_id, right_id = provenance.children(node_id)
        ids = (tree.tree_id, node_id, left_id, right_id)
        request = NodeQuery("split-request", tree.tree_id, node_id, index, (left_id, right_id))
        (reply,) = yield (Outgoing(owner, request.to_bytes(self.config)),)
        upload = CiphertextReply.from_bytes(
            reply, "split-upload", self.config, self._roster[owner].public, owner,
            (tree.tree_id, node_id, 0),
        )  # fmt: skip
        members, counts, depth = region.members, region.counts, region.depth + 1
        in_child = [plain.mask(self.config.n_samples, members[side]) for side in (~right, right)]
        receipt = upload.receipt
        keys = {name: e.revocation_key for name, e in self._roster.items()}
        if receipt is None or (receipt.signer, receipt.tree, receipt.node, receipt.left,
                               receipt.right) != (owner, *ids):  # fmt: skip
            raise ProtocolError(f"{owner}'s split receipt names another split")
        receipt.verify(keys, self.config.session)
        if (receipt.left_digest, receipt.right_digest) != tuple(map(provenance.digest, in_child)):
            raise ProtocolError(f"{owner}'s receipt disagrees with the split it proposed")
        allowed = tuple(f for f in region.allowed if self._reuse or f != feature)
        node = Split(node_id, region, owner, feature, upload.value, left_id, right_id)
        origin = provenance.Provenance(receipt=receipt)
        return node, [
            (left_id, Region(members[~right], counts[~right], allowed, depth, origin)),
            (right_id, Region(members[right], counts[right], allowed, depth, origin)),
        ]

    def _best_split(
        self, tree_id: int, node_id: int, region: Region, chosen: list[int], y: FloatArray,
        w: FloatArray,
    ) -> Par[tuple[str, int, int, BoolArray] | None]:  # fmt: skip
        """FOS-Find: ask each owner of a chosen feature (in one batch) for candidate split
        vectors and keep the lowest weighted impurity (owner, candidate index, feature,
        samples going right)."""
        by_owner: dict[str, dict[int, int]] = defaultdict(dict)
        for f in chosen:
            owner, column = self._features[f]
            by_owner[owner][column] = f
        in_node = plain.mask(self.config.n_samples, region.members)
        requests = {
            owner: NodeRequest(tree_id, node_id, in_node, tuple(local), self.config.probe_size,
                               self.config.candidates, region.origin)
            for owner, local in by_owner.items()
        }  # fmt: skip
        replies = yield tuple(Outgoing(o, r.to_bytes(self.config)) for o, r in requests.items())
        best: tuple[float, str, int, int, BoolArray] | None = None
        for (owner, request), reply in zip(requests.items(), replies, strict=True):
            proposals = Proposals.from_bytes(reply, self.config, request, owner)
            for index, (column, right) in enumerate(
                zip(proposals.columns, proposals.go_right, strict=True)
            ):
                if right.all() or not right.any():
                    continue
                score = impurity(y, w, right, self.task, self._n_classes)
                if best is None or score < best[0]:
                    best = (score, owner, index, by_owner[owner][column], right)
        return None if best is None else best[1:]

    # -------------------------------------------------------------------- prediction
    def secure_add(
        self, a: dtpkc.Ciphertext, b: dtpkc.Ciphertext, holder: str
    ) -> Job[dtpkc.Ciphertext]:
        """HoAdd with CC: Enc(x + y) under h_CS · h_holder (see :func:`.secure_ops.secure_add`)."""
        self._op += 1
        key = self._holder_key(holder)
        return (yield from secure_ops.secure_add(self._material(), self._op, a, b, holder, key))

    def secure_less_than(
        self, x: dtpkc.Ciphertext, y: dtpkc.Ciphertext, holder: str, ticket: secure_ops.Ticket
    ) -> Job[bool]:
        """HoLT with CC, ParHDec1 by ``holder`` (which pays ``ticket`` from its budget),
        ParHDec2 here: is x < y?"""
        self._op += 1
        key = self._holder_key(holder)
        material = self._material()
        return (
            yield from secure_ops.secure_less_than(material, self._op, x, y, holder, key, ticket)
        )

    def _holder_key(self, holder: str) -> dtpkc.PublicKey:
        if holder not in self._roster:
            raise UnknownPartyError(f"{holder!r} is not a participant")
        return self._roster[holder].public

    def _compare(self, x: dtpkc.Ciphertext, query: bytes, tree: int, node: Split) -> Job[bool]:
        """HoLT(x, split) with CC, ParHDec1 by the provider, ParHDec2 here: x < s?"""
        ticket = secure_ops.Ticket(query, tree, node.node_id, budget.REQUESTER_QUERY)
        return (yield from self.secure_less_than(x, node.encrypted_split, node.provider, ticket))

    def _decoded(self, values: FloatArray) -> np.ndarray:
        if self.task == "classification":
            return np.asarray(self.classes[values.astype(np.int64)])
        return values

    def _walk(self, tree: Tree, value_of: dict[int, dtpkc.Ciphertext], query: bytes) -> Par[float]:
        """Root to leaf: at every node HoLT(the query's value of the split's feature, split)
        decides the branch, each comparison charged to the signed ``query``."""
        node = tree.root
        while isinstance(node, Split):
            x = value_of[node.feature]
            go_left = yield from lift(self._compare(x, query, tree.tree_id, node))
            node = tree.nodes[node.left if go_left else node.right]
        return float(node.value)

    def predict_query(self, requester: str, data: bytes) -> Par[np.ndarray]:
        """FRF-Predict: check the requester's signature, open its signed query at the CC
        (``query-open``, :mod:`.query_auth`) and compare its encrypted features at every
        node, each comparison under that query's id."""
        keys = self._requesters.get(requester)
        if keys is None:
            raise UnknownPartyError(f"{requester!r} is not a registered requester")
        active = [f for f, (owner, _) in enumerate(self._features) if owner not in self.revoked]
        query = Query.from_bytes(data, self.config, requester, keys[0], len(active))
        value_of = dict(zip(active, query.values, strict=True))
        signed = query.statement(requester)
        signed.verify(keys[1], self.config)
        qid = yield from lift(query_auth.open_query(self.config, signed))
        walks = (self._walk(tree, value_of, qid) for tree in self.trees)
        values = yield from gather(walks)
        leaves = np.asarray(values, dtype=np.float64).reshape(len(self.trees), 1)
        return self._decoded(vote(leaves, self.task, self._n_classes))

    def predict_queries(self, requester: str, data: bytes) -> Par[np.ndarray]:
        """Batched FRF-Predict: a ``query-batch`` of rows, each its own signed query, walked
        level by level, each level's comparisons packed into one CC message and one message
        per holder (:mod:`.batch_predict`, :mod:`.packed_holt`)."""
        keys = self._requesters.get(requester)
        if keys is None:
            raise UnknownPartyError(f"{requester!r} is not a registered requester")
        active = [f for f, (owner, _) in enumerate(self._features) if owner not in self.revoked]
        rows, qids = yield from batch_predict.open_rows(self.config, data, requester, keys, active)
        m = self._material()
        leaves = yield from batch_predict.walk_rows(
            self.config, m.sk, m.lam1, self.trees, rows, qids, self._next_op
        )
        return self._decoded(vote(np.asarray(leaves), self.task, self._n_classes))

    def _next_op(self) -> int:
        self._op += 1
        return self._op

    def predict_plain(self, n_rows: int) -> Par[np.ndarray]:
        """FRF-Test on ``n_rows`` rows the providers hold: each provider compares its own
        test values with its own threshold in the clear (:func:`.plain.leaves`: level by
        level, one ``plain-compare`` message per provider). The CS learns the branch bits
        of the rows' paths (what HoLT gave it), the provider which of its test rows reach its
        nodes (what it learnt from HoLT's value requests); no value is decrypted for anyone."""
        self._test_round += 1  # a fresh round: the providers' once-per-row count restarts
        values = yield from plain.leaves(self.trees, n_rows, self.config, self._test_round)
        return self._decoded(vote(values, self.task, self._n_classes))

    # -------------------------------------------------------------------- revocation
    def revoke(
        self, data: bytes, level: int = 1, expected: str | None = None
    ) -> Par[RevocationReport]:
        """FRF-Revoc: verify, destroy and regrow, tell providers to forget destroyed nodes,
        and at level 2 refresh the destroyed splits at CC, then here."""
        request = RevocationRequest.from_bytes(data, self.config)
        entry = self._roster.get(request.participant)
        if entry is None:
            raise UnknownPartyError(f"revocation request from unknown {request.participant!r}")
        request.verify(entry.revocation_key, self.config)
        self._replays.check(request)
        name = request.participant
        if expected is not None and name != expected:
            raise InputError(f"the request is signed by {name!r}, not {expected!r}")
        if name in self.revoked:
            raise ProtocolError(f"{name!r} is already revoked")
        self.revoked.append(name)
        destroyed: list[Split] = []
        forget: dict[str, list[tuple[int, int]]] = defaultdict(list)
        regrow: list[Par[None]] = []
        receipts: list[provenance.SplitReceipt] = []  # the revoked one's, of its top nodes
        before = sum(len(tree.nodes) for tree in self.trees)
        for tree in self.trees:
            for top in tree.topmost(name):
                receipt = tree.nodes[top.left].region.origin.receipt
                if receipt is None:
                    raise ProtocolError(f"node {tree.tree_id, top.node_id} lost its receipt")
                receipts.append(receipt)
                for nid in tree.subtree(top.node_id):
                    node = tree.nodes.pop(nid)
                    if isinstance(node, Split):
                        destroyed.append(node)
                        forget[node.provider].append((tree.tree_id, nid))
                allowed = tuple(f for f in top.region.allowed if self._features[f][0] != name)
                regrow.append(self._grow(tree, top.node_id, replace(top.region, allowed=allowed)))
        removed = before - sum(len(tree.nodes) for tree in self.trees)
        asks = {
            provider: NodeBatch("forget", tuple(nodes),
                                tuple(np.zeros(0, dtype=bool) for _ in nodes))
            for provider, nodes in forget.items()
            if provider != name
        }  # fmt: skip
        if asks:  # before the regrowth, which reuses the destroyed nodes' ids
            replies = yield tuple(Outgoing(p, a.to_bytes(self.config, CS)) for p, a in asks.items())
            for (provider, ask), reply in zip(asks.items(), replies, strict=True):
                NodeBatch.from_bytes(
                    reply, "forgotten", self.config, provider, len(ask.nodes), 0, ask
                )
        notice = ReopenNotice(data, tuple(receipts)).to_bytes(self.config)
        active = [p for p in self._roster if p not in self.revoked]
        replies = yield tuple(Outgoing(p, notice) for p in active)
        for p, reply in zip(active, replies, strict=True):
            check_reopened(reply, self.config, p, len(receipts))
        yield from gather(regrow)
        rebuilt = sum(len(tree.nodes) for tree in self.trees) - before + removed
        refreshed = 0
        if level == 2 and destroyed:
            self._op += 1
            batch = secure_ops.RefreshBatch(self._op, tuple(n.encrypted_split for n in destroyed))
            (reply,) = yield (Outgoing(CC, batch.to_bytes("refresh-request", self.config, CS)),)
            params = self._material().sk.public.params
            back = secure_ops.RefreshBatch.from_bytes(
                reply, "refreshed", self.config, CC, params, self._op, len(destroyed)
            )
            self.archive += [dtpkc.refresh(c, dtpkc.new_refresh_key(params)) for c in back.values]
            refreshed = len(back.values)
        self.published_removals.append(name)
        return RevocationReport(name, level, len(destroyed), rebuilt, 0.0, refreshed)

    # -------------------------------------------------------------------- reporting
    def nodes_per_participant(self) -> dict[str, int]:
        per = dict.fromkeys(self._roster, 0)
        for tree in self.trees:
            for node in tree.splits():
                per[node.provider] += 1
        return per

    def nodes_destroyed_by(self, participant: str) -> int:
        """Internal nodes revoking ``participant`` would destroy now: what the rebuild regrows."""
        return sum(tree.destroyed_by(participant) for tree in self.trees)
