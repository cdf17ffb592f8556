"""RevFRF: revocable federated random forest on vertically partitioned data (DT-PKC).

The center server CS holds the labels and grows every tree (FLE-Expan / FOS-Find): per node it
draws ``ceil(sqrt(|F|))`` features among those still allowed on the path, asks their owners for
candidate splits (split vectors), scores them with its labels (weighted Gini or MSE) and asks
the winner to upload its split encrypted under the participant's DT-PKC key. CS stores, per
node, the provider, the feature, the encrypted split, the depth and what rebuilding needs
(the sample-selection vector μ and the allowed features). CS never sees a split value or a
participant's feature value; participants never see labels or each other's columns.

Prediction: :meth:`RevFRF.predict` runs FRF-Test (each provider encrypts its own test value;
CS and CC run HoLT against the encrypted split; the provider strips its key, CS finishes);
:meth:`RevFRF.predict_for` runs FRF-Predict for a requester holding a whole feature vector;
:meth:`RevFRF.predict_plain` evaluates the same forest with the providers' plaintext
comparisons, for fast evaluation. Revocation (:meth:`RevFRF.revoke`) verifies the signed
request, destroys every subtree rooted at a node of the revoked participant and rebuilds it
from the stored μ and allowed features without that participant; level 2 also refreshes the
destroyed nodes' split ciphertexts at CC and then at CS (HEncRef), and the KGC revokes the keys.
"""

from __future__ import annotations

import secrets
import time
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from privfl.crypto import dtpkc
from privfl.errors import InputError, ProtocolError
from privfl.forest import roles
from privfl.forest.tree import Node, Tree, is_pure, leaf_value, weighted_impurity
from privfl.messages import Writer, decode_message
from privfl.runner import InProcessRunner

Partitions = Mapping[str, Any]


@dataclass
class RevocationReport:
    participant: str
    level: int
    destroyed_nodes: int
    rebuilt_nodes: int
    seconds: float
    refreshed_ciphertexts: int = 0


@dataclass
class _Feature:
    owner: str
    column: int


@dataclass
class RevFRF:
    """The forest (library interface of issue #7).

    ``reuse_features=False`` (the default, as in the paper) removes a node's feature from the
    features its subtree may use; ``True`` keeps it, as scikit-learn does. That matters when a
    few features carry most of the signal (Bike Sharing's hour), see the effectiveness study.
    """

    task: str = "classification"
    n_trees: int = 100
    max_depth: int = 10
    min_samples: int = 2
    key_bits: int = 2048
    rho: int = 32
    candidates: int = 8
    reuse_features: bool = False
    seed: int | None = None
    trees: list[Tree] = field(default_factory=list, init=False, repr=False)
    runner: InProcessRunner = field(default_factory=InProcessRunner, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.task not in ("classification", "regression"):
            raise InputError("task must be 'classification' or 'regression'")
        if self.n_trees < 1 or self.max_depth < 1 or self.min_samples < 1:
            raise InputError("n_trees, max_depth and min_samples must be positive")
        if self.rho < 2 or self.candidates < 1:
            raise InputError("rho (probed samples) must be >= 2 and candidates >= 1")
        self.revoked: list[str] = []
        self.published_removals: list[str] = []
        self.archive: list[dtpkc.Ciphertext] = []  # refreshed splits of destroyed nodes
        self.session = roles.new_session()

    # ------------------------------------------------------------------------------ setup
    def _validate(self, partitions: Partitions, labels: Any | None) -> dict[str, np.ndarray]:
        if not isinstance(partitions, Mapping) or not partitions:
            raise InputError("partitions must map participant name -> feature matrix")
        mats = {}
        for name, m in partitions.items():
            arr = np.asarray(m, dtype=np.float64)
            if arr.ndim == 1:
                arr = arr[:, None]
            if arr.ndim != 2 or arr.shape[1] == 0:
                raise InputError(f"participant {name!r}: feature matrix must be 2-D and non-empty")
            if not np.all(np.isfinite(arr)):
                raise InputError(f"participant {name!r}: features contain NaN or infinite values")
            mats[str(name)] = arr
        rows = {m.shape[0] for m in mats.values()}
        if len(rows) != 1:
            raise InputError(f"partitions are misaligned: row counts {sorted(rows)} differ")
        if labels is not None and len(labels) != rows.pop():
            raise InputError("labels and partitions have different numbers of rows")
        return mats

    def fit(self, partitions: Partitions, labels: Any) -> RevFRF:
        """Set up the system (KGC, CS, CC, participants) and grow the forest."""
        mats = self._validate(partitions, labels)
        y = np.asarray(labels)
        if self.task == "classification":
            self.classes_, y_idx = np.unique(y, return_inverse=True)
            self._y = y_idx.astype(np.float64)
        else:
            self._y = y.astype(np.float64)
            if not np.all(np.isfinite(self._y)):
                raise InputError("regression targets must be finite")
        self._n = self._y.size
        self._setup(mats)
        self._forest_rng = rng = self._rng()
        for t in range(self.n_trees):
            weights = np.bincount(rng.integers(0, self._n, self._n), minlength=self._n)
            members = np.flatnonzero(weights)
            tree = Tree(t)
            allowed = tuple(range(len(self._features)))
            root = tree.new_id()
            self._grow(tree, root, members, weights[members].astype(np.int64), allowed, 0)
            self.trees.append(tree)
        return self

    def _rng(self) -> np.random.Generator:  # not secret: forest randomness
        """Forest randomness (bootstrap, feature subsets): not secret."""
        seed = self.seed if self.seed is not None else secrets.randbits(64)
        return np.random.default_rng(seed)  # not secret: forest randomness

    def _setup(self, mats: dict[str, np.ndarray]) -> None:
        start = time.perf_counter()
        self.kgc = dtpkc.KeyGenerationCenter(bits=self.key_bits)
        sk_cs, pk_cs = self.kgc.new_key_pair()
        lam1, lam2 = self.kgc.strong_key_shares()
        self.cs = dtpkc.CenterServer(sk_cs, pk_cs, lam1)
        self.cc = dtpkc.ComputationProvider(lam2)
        self.participants: dict[str, roles.Participant] = {}
        self._sign_keys: dict[str, Ed25519PublicKey] = {}
        self._features: list[_Feature] = []
        for name, m in mats.items():
            sk, _ = self.kgc.new_key_pair()
            signing = Ed25519PrivateKey.generate()
            self.participants[name] = roles.Participant(
                name, m, sk, signing, self.rho, self.candidates
            )
            self._sign_keys[name] = signing.public_key()
            self._features += [_Feature(name, c) for c in range(m.shape[1])]
        self.active_keys = set(self.participants)
        self.runner.seconds["kgc_setup"].append(time.perf_counter() - start)

    # ------------------------------------------------------------------------------ growth
    def _grow(
        self,
        tree: Tree,
        node_id: int,
        members: np.ndarray,
        counts: np.ndarray,
        allowed: tuple[int, ...],
        depth: int,
    ) -> None:
        """FLE-Expan: build node ``node_id`` (and its subtree) from μ and the allowed features."""
        y, w = self._y[members], counts.astype(np.float64)
        classes = len(getattr(self, "classes_", [])) or 1
        node = Node(node_id, depth, members, counts, allowed)
        tree.nodes[node_id] = node
        usable = [f for f in allowed if self._features[f].owner not in self.revoked]
        if (
            depth >= self.max_depth
            or not usable
            or is_pure(y, self.task)
            or w.sum() < self.min_samples
        ):
            node.value = leaf_value(y, w, self.task, classes)
            return
        rng = self._forest_rng
        size = min(len(usable), roles.ceil_sqrt(len(self._features)))
        chosen = sorted(rng.choice(usable, size=size, replace=False).tolist())
        best = self._best_split(tree.tree_id, node_id, members, chosen, y, w, classes)
        if best is None:
            node.value = leaf_value(y, w, self.task, classes)
            return
        owner, index, feature, go_right = best
        node.provider, node.feature = owner, feature
        node.encrypted_split = self._fetch_split(owner, tree.tree_id, node_id, index)
        child_allowed = (
            allowed if self.reuse_features else tuple(f for f in allowed if f != feature)
        )
        node.left, node.right = tree.new_id(), tree.new_id()
        self._grow(tree, node.left, members[~go_right], counts[~go_right], child_allowed, depth + 1)
        self._grow(tree, node.right, members[go_right], counts[go_right], child_allowed, depth + 1)

    def _best_split(
        self,
        tree_id: int,
        node_id: int,
        members: np.ndarray,
        chosen: list[int],
        y: np.ndarray,
        w: np.ndarray,
        classes: int,
    ) -> tuple[str, int, int, np.ndarray] | None:
        by_owner: dict[str, list[int]] = defaultdict(list)
        for f in chosen:
            by_owner[self._features[f].owner].append(f)
        in_node = np.zeros(self._n, dtype=bool)
        in_node[members] = True
        mask = roles.pack_mask(in_node)
        best: tuple[float, str, int, int, np.ndarray] | None = None
        for owner, feats in by_owner.items():
            local = {self._features[f].column: f for f in feats}
            wr = Writer().u32(tree_id).u32(node_id).bytes_(mask).u32(len(local))
            for c in local:
                wr.u32(c)
            request = roles.encode(
                "node-request", "CS", wr.u32(self.rho).u32(self.candidates).getvalue(), self.session
            )
            participant = self.participants[owner]
            reply = self.runner.run(
                "participant",
                participant.handle_node_request,
                self.runner.send("cs->participant", request),
                self.session,
            )
            _, r = roles.decode(
                self.runner.send("participant->cs", reply), "proposals", self.session
            )
            r.u32(), r.u32()
            scored = self.runner.run("cs", self._score, r, members.size, local, y, w, classes)
            if scored is not None and (best is None or scored[0] < best[0]):
                best = (scored[0], owner, scored[1], scored[2], scored[3])
        if best is None:
            return None
        return best[1], best[2], best[3], best[4]

    def _score(
        self, r: Any, n_node: int, local: dict[int, int], y: np.ndarray, w: np.ndarray, classes: int
    ) -> tuple[float, int, int, np.ndarray] | None:
        best = None
        for _ in range(r.u32()):
            index, col = r.u32(), r.u32()
            go_right = roles.unpack_mask(r.bytes_(), n_node)
            if col not in local:
                raise ProtocolError("a participant proposed a split on a feature not requested")
            if go_right.all() or not go_right.any():
                continue
            score = weighted_impurity(y, w, go_right, self.task, classes)
            if best is None or score < best[0]:
                best = (score, index, local[col], go_right)
        r.end()
        return best

    def _fetch_split(self, owner: str, tree_id: int, node_id: int, index: int) -> dtpkc.Ciphertext:
        request = roles.encode(
            "split-request",
            "CS",
            Writer().u32(tree_id).u32(node_id).u32(index).getvalue(),
            self.session,
        )
        participant = self.participants[owner]
        reply = self.runner.run(
            "participant",
            participant.handle_split_request,
            self.runner.send("cs->participant", request),
            self.session,
        )
        _, payload = decode_message(
            self.runner.send("participant->cs", reply),
            protocol=roles.PROTOCOL,
            version=roles.VERSION,
            step="split-upload",
            session=self.session,
        )
        return dtpkc.Ciphertext.from_bytes(self.kgc.params, payload)

    # ------------------------------------------------------------------------------ predict
    def _rows(self, rows: Partitions) -> tuple[dict[str, np.ndarray], int]:
        mats = self._validate(rows, None)
        for name in self.participants:
            if name not in mats and name not in self.revoked:
                raise InputError(f"rows lack the columns of participant {name!r}")
        unknown = [n for n in mats if n not in self.participants]
        if unknown:
            raise InputError(f"unknown participants in rows: {unknown}")
        for name, m in mats.items():
            if m.shape[1] != self.participants[name].columns.shape[1]:
                want = self.participants[name].columns.shape[1]
                raise InputError(f"participant {name!r}: expected {want} columns")
        return mats, next(iter(mats.values())).shape[0]

    def _aggregate(self, leaves: np.ndarray) -> np.ndarray:
        if self.task == "classification":
            votes = np.apply_along_axis(
                lambda v: np.bincount(v.astype(np.int64), minlength=len(self.classes_)), 0, leaves
            )
            return self.classes_[np.argmax(votes, axis=0)]
        return leaves.mean(axis=0)

    def predict_plain(self, rows: Partitions) -> np.ndarray:
        """The same forest with the providers' plaintext comparisons (evaluation speed)."""
        mats, m = self._rows(rows)
        leaves = np.empty((len(self.trees), m))
        for t, tree in enumerate(self.trees):
            current = np.zeros(m, dtype=np.int64)
            done = np.zeros(m, dtype=bool)
            while not done.all():
                for nid in np.unique(current[~done]):
                    node = tree.nodes[int(nid)]
                    at = (current == nid) & ~done
                    if node.is_leaf:
                        leaves[t, at] = node.value
                        done |= at
                        continue
                    go_left = self.participants[node.provider].compare_plain(
                        tree.tree_id, node.node_id, mats[node.provider][at]
                    )
                    idx = np.flatnonzero(at)
                    current[idx[go_left]] = node.left
                    current[idx[~go_left]] = node.right
        return self._aggregate(leaves)

    def _secure_compare(self, cx: dtpkc.Ciphertext, node: Node, requester: str) -> bool:
        """HoLT(x, split) between CS and CC, ParHDec1 by the provider, ParHDec2 by CS."""
        provider = self.participants[node.provider]
        session = roles.new_session()
        result_key = dtpkc.joint_public_key(self.cs.public_key, provider.sk.public)

        nested = [0.0]

        def hoadd(
            a: dtpkc.Ciphertext, b: dtpkc.Ciphertext, target: dtpkc.PublicKey
        ) -> dtpkc.Ciphertext:
            t0 = time.perf_counter()
            req, state = self.runner.run("cs", self.cs.hoadd_request, a, b, target, session)
            resp = self.runner.run(
                "cc", self.cc.hoadd_respond, self.runner.send("cs->cc", req), session
            )
            out = self.runner.run(
                "cs", self.cs.hoadd_finish, state, self.runner.send("cc->cs", resp), session
            )
            nested[0] += time.perf_counter() - t0
            return out

        # HoLT step 1 runs one HoAdd inside: record only CS's own share (no double counting)
        t0 = time.perf_counter()
        req, coin = self.cs.holt_request(cx, node.encrypted_split, result_key, session, hoadd)
        self.runner.seconds["cs"].append(time.perf_counter() - t0 - nested[0])
        resp = self.runner.run("cc", self.cc.holt_respond, self.runner.send("cs->cc", req), session)
        bit_ct = self.runner.run(
            "cs", self.cs.holt_finish, coin, self.runner.send("cc->cs", resp), result_key, session
        )
        ask = roles.encode(
            "partial-decrypt", "CS", Writer().bytes_(bit_ct.to_bytes()).getvalue(), session
        )
        part = self.runner.run(
            "participant",
            provider.partial_decrypt,
            self.runner.send("cs->participant", ask),
            session,
            requester,
        )
        _, r = roles.decode(self.runner.send("participant->cs", part), "partial-decrypted", session)
        partial = dtpkc.Ciphertext.from_bytes(self.kgc.params, r.bytes_())
        r.end()
        return bool(self.runner.run("cs", self.cs.finish_decrypt, partial) == 1)

    def predict(self, rows: Partitions) -> np.ndarray:
        """FRF-Test: secure prediction of vertically partitioned rows (one HoLT per node)."""
        mats, m = self._rows(rows)
        leaves = np.empty((len(self.trees), m))
        for i in range(m):
            for t, tree in enumerate(self.trees):
                node = tree.nodes[0]
                while not node.is_leaf:
                    provider = self.participants[node.provider]
                    col = self._features[node.feature].column
                    cx = self.runner.run(
                        "participant", provider.encrypt_value, float(mats[node.provider][i, col])
                    )
                    self.runner.send("participant->cs", cx.to_bytes())
                    node = tree.nodes[
                        node.left if self._secure_compare(cx, node, "CS") else node.right
                    ]
                leaves[t, i] = node.value
        return self._aggregate(leaves)

    def predict_for(self, requester: str, x: Mapping[str, Any]) -> Any:
        """FRF-Predict: a requester with a KGC key encrypts its whole feature vector under its
        own key; CS evaluates every node with HoLT and returns the vote / mean."""
        if not hasattr(self, "_requesters"):
            self._requesters: dict[str, dtpkc.SecretKey] = {}
        if requester not in self._requesters:
            self._requesters[requester], _ = self.kgc.new_key_pair()
        sk = self._requesters[requester]
        mats, m = self._rows({k: np.atleast_2d(v) for k, v in x.items()})
        if m != 1:
            raise InputError("predict_for takes one feature vector")
        enc = {
            (name, c): dtpkc.encrypt(
                sk.public,
                dtpkc.to_fixed_point(float(mats[name][0, c]), roles.FRACTION_BITS, sk.params),
            )
            for name in mats
            for c in range(mats[name].shape[1])
        }
        for ct in enc.values():
            self.runner.send("requester->cs", ct.to_bytes())
        leaves = np.empty((len(self.trees), 1))
        for t, tree in enumerate(self.trees):
            node = tree.nodes[0]
            while not node.is_leaf:
                f = self._features[node.feature]
                node = tree.nodes[
                    node.left
                    if self._secure_compare(enc[(f.owner, f.column)], node, requester)
                    else node.right
                ]
            leaves[t, 0] = node.value
        return self._aggregate(leaves)[0]

    # ------------------------------------------------------------------------------ revocation
    def revoke(
        self, participant: str, level: int = 1, request: bytes | None = None
    ) -> RevocationReport:
        """FRF-Revoc: verify the signed request, destroy and rebuild every subtree rooted at a
        node of ``participant`` (level 1); level 2 also refreshes the destroyed splits."""
        if level not in (1, 2):
            raise InputError("revocation level must be 1 or 2")
        if participant not in self.participants:
            raise InputError(f"unknown participant {participant!r}")
        if participant in self.revoked:
            raise InputError(f"{participant!r} is already revoked")
        start = time.perf_counter()
        if request is None:
            request = self.participants[participant].revocation_request(self.session)
        name = roles.verify_revocation(
            self.runner.send("participant->cs", request), self.session, self._sign_keys
        )
        if name != participant:
            raise InputError(f"the request is signed by {name!r}, not {participant!r}")
        self.revoked.append(participant)
        destroyed: list[Node] = []
        rebuilt = 0
        for tree in self.trees:
            for root_id in self._revoked_roots(tree, participant):
                old = tree.nodes[root_id]
                ids = tree.subtree(root_id)
                destroyed += [tree.nodes[i] for i in ids if not tree.nodes[i].is_leaf]
                for nid in ids:
                    node = tree.nodes.pop(nid)
                    if node.provider:
                        self.participants[node.provider].forget(tree.tree_id, [nid])
                before = len(tree.nodes)
                allowed = tuple(f for f in old.allowed if self._features[f].owner != participant)
                self.runner.run(
                    "rebuild",
                    self._grow,
                    tree,
                    root_id,
                    old.members,
                    old.counts,
                    allowed,
                    old.depth,
                )
                rebuilt += len(tree.nodes) - before
        refreshed = 0
        if level == 2:
            for node in destroyed:
                if node.encrypted_split is None:
                    continue
                ct = dtpkc.Ciphertext.from_bytes(
                    self.kgc.params, self.runner.send("cs->cc", node.encrypted_split.to_bytes())
                )
                ct = self.runner.run(
                    "cc", dtpkc.refresh, ct, dtpkc.new_refresh_key(self.kgc.params)
                )
                ct = dtpkc.Ciphertext.from_bytes(
                    self.kgc.params, self.runner.send("cc->cs", ct.to_bytes())
                )
                ct = self.runner.run(
                    "cs", dtpkc.refresh, ct, dtpkc.new_refresh_key(self.kgc.params)
                )
                self.archive.append(ct)
                refreshed += 1
        self.active_keys.discard(participant)  # KGC revokes the participant's keys
        self.published_removals.append(participant)  # CS publishes the removal
        return RevocationReport(
            participant, level, len(destroyed), rebuilt, time.perf_counter() - start, refreshed
        )

    def nodes_destroyed_by(self, participant: str) -> int:
        """Internal nodes that revoking ``participant`` would destroy now (its nodes and every
        node below them): what the rebuild has to regrow."""
        return sum(
            sum(1 for i in tree.subtree(root) if not tree.nodes[i].is_leaf)
            for tree in self.trees
            for root in self._revoked_roots(tree, participant)
        )

    @staticmethod
    def _revoked_roots(tree: Tree, participant: str) -> list[int]:
        roots, stack = [], [0]
        while stack:
            node = tree.nodes[stack.pop()]
            if node.provider == participant:
                roots.append(node.node_id)
                continue
            if node.left is not None:
                stack += [node.left, node.right]  # type: ignore[list-item]
        return roots

    # ------------------------------------------------------------------------------ report
    def report(self) -> dict[str, Any]:
        per = {name: 0 for name in self.participants}
        for tree in self.trees:
            for node in tree.internal_nodes():
                per[node.provider] += 1  # type: ignore[index]
        return {
            "nodes_per_participant": per,
            "trees": len(self.trees),
            "internal_nodes": sum(per.values()),
            "revoked": list(self.revoked),
            "bytes": {k: sum(v) for k, v in self.runner.sizes.items()},
            "seconds": {k: sum(v) for k, v in self.runner.seconds.items()},
            "key_bits": self.key_bits,
        }
