"""RevFRF's participants (feature owners) and requesters (who query the forest).

A participant holds some feature columns of the aligned samples, its DT-PKC weak key θ_u,
its Ed25519 revocation key and its split thresholds. It answers the CS's messages through
:meth:`Participant.handle` and learns only what they carry: which samples reach a node,
never a label or another participant's value. Its keys arrive from the KGC through
:meth:`Participant.install_keys` (the provisioning channel, never ``handle``). It runs
ParHDec1 only on comparison results the CC signed for it for a requester's signed query
(see :mod:`.secure_ops`). FRF-Test needs no decryption at all: the provider of a split holds
both its own test value and its own threshold, so it compares them in the clear
(``plain-compare``) and sends the CS only the branch bits, the same bits HoLT would give
the CS; it never uploads an encrypted test value, so a test row is no decryption ticket.
"""

from __future__ import annotations

import hashlib
import secrets
import time
from collections.abc import Sequence

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from privfl._typing import BoolArray, FloatArray
from privfl.crypto import dtpkc
from privfl.errors import InputError, MalformedMessageError, ProtocolError
from privfl.forest import branch, packed_holt, secure_ops
from privfl.forest.budget import MAX_QUERIES as MAX_QUERIES
from privfl.forest.inputs import check_matrix as check_matrix
from privfl.forest.inputs import check_name as check_name
from privfl.forest.kgc import Hello, KeyGrant
from privfl.forest.messages import (
    CS,
    CiphertextReply,
    NodeBatch,
    NodeQuery,
    NodeRequest,
    Proposals,
    RevocationRequest,
    SessionConfig,
    StaleMessageError,
    dispatch,
    pack_mask,
    read_mask,
)
from privfl.forest.packing import PACK_VALUE_BITS
from privfl.forest.provenance import NodeGate, SplitReceipt, digest, under
from privfl.forest.reopen import ReopenNotice, reopened
from privfl.forest.requester import Requester as Requester
from privfl.messages import Reader, Writer


class Participant:
    """A feature owner: columns, θ_u, its revocation signing key and its thresholds."""

    role = "participant"

    def __init__(
        self, name: str, columns: object, config: SessionConfig, *,
        signing_key: Ed25519PrivateKey | None = None, max_queries: int = MAX_QUERIES,
    ) -> None:  # fmt: skip
        """``signing_key``: a provisioned revocation key (default: a fresh one);
        ``max_queries``: how many distinct requester queries it helps compare (public)."""
        self.name = check_name(name, "participant")
        self._columns = check_matrix(columns, f"participant {name!r}", config.n_samples)
        self._config = config
        self._signing_key = signing_key or Ed25519PrivateKey.generate()
        self._sk: dtpkc.SecretKey | None = None
        self._cc_key: Ed25519PublicKey | None = None
        # (tree, node) -> (μ, candidates proposed there), until the CS picks one
        self._pending: dict[tuple[int, int], tuple[BoolArray, list[tuple[int, float]]]] = {}
        self._gate: NodeGate | None = None  # which node requests follow from the tree
        self._splits: dict[tuple[int, int], tuple[int, float]] = {}  # (tree, node) -> (col, s)
        self._split_ids: dict[tuple[int, int], bytes] = {}  # -> SHA-256 of its receipt there
        self._receipted: set[tuple[int, int]] = set()  # every node it ever signed a split of
        self._rows: FloatArray | None = None  # local test rows (FRF-Test)
        self._tests = branch.TestGate()  # which rows it compared where (FRF-Test, :mod:`.branch`)
        # (column, digest of μ) -> the one threshold it released there, across reopens
        self._released: dict[tuple[int, bytes], float] = {}
        # ParHDec1 tickets paid, and the requester query ids seen
        self._budget = secure_ops.DecryptionBudget(max_queries)
        self._rng = np.random.default_rng(secrets.randbits(64))  # not secret: probed samples
        self._fresh: list[dtpkc.Randomizer] = []  # drawn ahead for this batch's uploads only

    @property
    def n_columns(self) -> int:
        return int(self._columns.shape[1])

    def hello(self) -> bytes:
        """To the KGC: the revocation key the CS will pin, and the column count."""
        key = self._signing_key.public_key().public_bytes_raw()
        return Hello(self.name, key, self.n_columns).to_bytes(self._config)

    def install_keys(self, data: bytes) -> None:
        """The KGC's ``participant-keys`` (θ_u, h_CS, the CC's key), accepted once."""
        if self._sk is not None:
            raise ProtocolError(f"{self.name} already holds its keys")
        grant = KeyGrant.from_bytes(data, "participant-keys", self._config)
        sk = grant.weak_key(self.name)
        largest = dtpkc.to_fixed_point(  # every value (and so every split) representable,
            float(np.abs(self._columns).max()), self._config.fraction_bits, sk.public.params
        )
        if abs(largest) >= 1 << PACK_VALUE_BITS:  # and comparable in a packed HoLT
            raise InputError(
                f"{self.name}: a value exceeds 2^{PACK_VALUE_BITS - self._config.fraction_bits} "
                "(the packed comparisons' range): rescale that column"
            )
        self._cc_key = Ed25519PublicKey.from_public_bytes(grant.cc_key)
        peers = {e.name: e.revocation_key for e in grant.roster}
        cfg = self._config
        self._gate = NodeGate(
            cfg.session, cfg.n_samples, cfg.min_node_size, peers, {}, max_depth=cfg.max_depth
        )
        self._sk = sk

    def load_rows(self, rows: object, batch: bytes | None = None) -> None:
        """This participant's columns of the rows to predict (its own local data). ``batch``:
        the rows' identity, 32 bytes every participant derives alike from the same aligned
        rows (a deployment: SHA-256 of the aligned test ids in their agreed order); default
        a fresh random one. FRF-Test statements route only rows of the same identity."""
        loaded = check_matrix(rows, f"rows of participant {self.name!r}")
        if loaded.shape[1] != self.n_columns:
            raise InputError(f"participant {self.name!r}: expected {self.n_columns} columns")
        self._tests.load(secrets.token_bytes(branch.ID_BYTES) if batch is None else batch)
        self._rows = loaded

    def revocation_request(self) -> bytes:
        """A fresh signed request to leave (a random nonce and the current time). It drops
        its thresholds and pending candidates: the CS regrows its subtrees without it, and
        it compares no test row at its old nodes any more (:mod:`.branch`)."""
        self._splits, self._pending, self._split_ids = {}, {}, {}
        ms = int(time.time() * 1000)
        request = RevocationRequest.sign(
            self._signing_key, self._config, self.name, secrets.token_bytes(16), ms
        )
        return request.to_bytes(self._config)

    def prepare_uploads(self, count: int) -> None:
        """Draw the encryption randomness of the next ``count`` split uploads ahead, on the
        thread pool (:func:`~privfl.crypto.dtpkc.randomizers`); each is used once and none
        is exported (a node rebuilt per batch draws afresh)."""
        # at most one upload per pending proposal: a batch of junk split-requests (any
        # session, never parsed here) costs no randomness beyond what could be answered
        bound = min(count, len(self._pending), self._config.max_internal_nodes)
        self._fresh = dtpkc.randomizers(self._keys().public, bound) if bound > 0 else []

    def export_state(self) -> bytes:
        """Its progress through a session (pending candidates, its thresholds, the roots it
        accepted), for a node that rebuilds the participant per message; read back by
        :meth:`restore_state`."""
        w = Writer().u32(len(self._pending))
        for (tree, node), (members, items) in self._pending.items():
            w.u32(tree).u32(node).bytes_(pack_mask(members)).u32(len(items))
            for col, s in items:
                w.u32(col).f64(s)
        w.u32(len(self._splits))
        for (tree, node), (col, s) in self._splits.items():
            w.u32(tree).u32(node).u32(col).f64(s)
        roots = self._gate.roots if self._gate is not None else {}
        w.u32(len(roots))
        for tree, seed in roots.items():
            w.u32(tree).bytes_(seed)
        seen = self._gate.seen if self._gate is not None else {}
        w.u32(len(seen))
        depths = self._gate.depths if self._gate is not None else {}
        for (tree, node), d in sorted(seen.items()):
            w.u32(tree).u32(node).bytes_(d).u32(depths.get((tree, node), 0))
        w.u32(len(self._receipted))
        for tree, node in sorted(self._receipted):
            w.u32(tree).u32(node)
        gate = self._gate.extra_bytes() if self._gate is not None else b""
        w.bytes_(self._budget.to_bytes()).bytes_(gate).bytes_(self._tests.to_bytes())
        w.u32(len(self._released))
        for (col, mu), s in sorted(self._released.items()):
            w.u32(col).bytes_(mu).f64(s)
        w.u32(len(self._split_ids))
        for (tree, node), split in sorted(self._split_ids.items()):
            w.u32(tree).u32(node).bytes_(split)
        return w.getvalue()

    def restore_state(self, data: bytes) -> None:
        cfg, limit = self._config, self._config.max_internal_nodes
        r = Reader(data, f"{self.name}'s saved state")
        pending: dict[tuple[int, int], tuple[BoolArray, list[tuple[int, float]]]] = {}
        for _ in range(r.count(limit, "pending nodes")):
            key, members = (r.u32(), r.u32()), read_mask(r, cfg.n_samples, "saved μ")
            count = r.count(self.n_columns * cfg.candidates, "candidates")
            pending[key] = (members, [(r.u32(), r.f64_finite("threshold")) for _ in range(count)])
        splits = {}
        for _ in range(r.count(limit, "splits")):
            key, col = (r.u32(), r.u32()), r.u32()
            splits[key] = (col, r.f64_finite("threshold"))
        roots = {r.u32(): r.bytes_(32) for _ in range(r.count(cfg.n_trees, "roots"))}
        seen, depths = {}, {}
        for _ in range(r.count(1 << 32, "nodes")):
            key = (r.u32(), r.u32())
            seen[key], depths[key] = r.bytes_(32), r.u32()
        receipted = {(r.u32(), r.u32()) for _ in range(r.count(1 << 32, "split nodes"))}
        budget = secure_ops.DecryptionBudget.from_bytes(r.bytes_(), 1 << 32)
        gate, tests = r.bytes_(), branch.TestGate.from_bytes(r.bytes_())
        released = {}
        for _ in range(r.count(1 << 32, "released thresholds")):
            col, mu = r.u32(), r.bytes_(32)
            released[(col, mu)] = r.f64_finite("threshold")
        split_ids = {(r.u32(), r.u32()): r.bytes_(32) for _ in range(r.count(limit, "splits"))}
        r.end()
        if any(len(d) != 32 for d in (*roots.values(), *seen.values(), *split_ids.values())):
            raise MalformedMessageError(f"{self.name}'s saved state has a short root seed")
        if any(c >= self.n_columns for c, _ in splits.values()):
            raise MalformedMessageError(f"{self.name}'s saved state names a missing column")
        self._pending, self._splits = pending, splits
        self._budget, self._receipted = budget, receipted
        if self._rows is not None:  # the rows loaded now keep their identity
            tests.load(self._tests.batch)
        self._tests, self._released, self._split_ids = tests, released, split_ids
        if self._gate is not None:
            self._gate.roots, self._gate.seen, self._gate.depths = roots, seen, depths
            self._gate.load_extra(gate)

    def handle(self, data: bytes) -> bytes:
        """Answer one message of the CS."""
        handlers = {
            NodeRequest.STEP: self._proposals,
            "split-request": self._upload_split,
            "plain-compare": self._compare_plain,
            "forget": self._forget,
            "reopen": self._reopen,
            "partial-decrypt": self._partial_decrypt,
            "partial-decrypt-batch": self._partial_decrypt_batch,
        }
        return dispatch(data, self._config, handlers, self.name)

    def _keys(self) -> dtpkc.SecretKey:
        if self._sk is None:
            raise ProtocolError(f"{self.name} has no keys yet")
        return self._sk

    def _proposals(self, data: bytes) -> bytes:
        """FOS-Find: per selected column, probe ϱ of the node's samples, place ς candidates
        evenly inside (min, max) and send which samples go right (x >= s)."""
        cfg = self._config
        req = NodeRequest.from_bytes(data, cfg, self.n_columns)
        if self._gate is None:
            raise ProtocolError(f"{self.name} has no keys yet")
        if (req.tree, req.node) in self._receipted:
            raise ProtocolError(f"{self.name} already split node {req.tree, req.node}")
        parent = req.origin.receipt  # a node it split itself has only its own children
        if parent and parent.signer != self.name and (parent.tree, parent.node) in self._receipted:
            raise ProtocolError(f"{self.name} already split node {parent.tree, parent.node}")
        self._gate.check(req.tree, req.node, req.members, req.origin)
        members, mu = np.flatnonzero(req.members), digest(req.members)
        columns, masks, pending = [], [], []
        for c in req.columns:
            values = self._columns[members, c]
            if values.size == 0:
                continue
            for s in self._candidates(values, self._released.get((c, mu))):
                columns.append(c)
                masks.append(values >= s)
                pending.append((c, s))
        if len(self._pending) >= self._config.max_internal_nodes:
            self._pending.pop(next(iter(self._pending)))  # losing proposals, oldest first
        self._pending[(req.tree, req.node)] = (req.members, pending)
        return Proposals(req.tree, req.node, tuple(columns), tuple(masks)).to_bytes(cfg, self.name)

    def _candidates(self, values: FloatArray, released: float | None) -> list[float]:
        """ς thresholds evenly inside (min, max) of ϱ values drawn from the node's; only the
        threshold released before when this column of these samples was split already (a
        reopen regrows nodes under the same ids: a second threshold on the same (column, μ)
        would be a second equation in the same two raw values)."""
        if released is not None:
            return [released]
        cfg = self._config
        drawn = self._rng.choice(values.size, min(cfg.probe_size, values.size), replace=False)
        lo, hi = float(values[drawn].min()), float(values[drawn].max())
        if hi <= lo:
            return []
        return [lo + (hi - lo) * k / (cfg.candidates + 1) for k in range(1, cfg.candidates + 1)]

    def _upload_split(self, data: bytes) -> bytes:
        """Record the winning split and send it encrypted under θ_u's public key."""
        req, sk = NodeQuery.from_bytes(data, "split-request", self._config), self._keys()
        entry = self._pending.get((req.tree, req.node))
        if entry is None:
            raise StaleMessageError(f"{self.name} proposed nothing for node {req.tree, req.node}")
        members, pending = entry
        if req.index >= len(pending):
            raise ProtocolError(f"{self.name} has no candidate split {req.index}")
        if (req.tree, req.node) in self._receipted:
            raise ProtocolError(f"{self.name} already split node {req.tree, req.node}")
        col, s = pending[req.index]
        s = self._released.setdefault((col, digest(members)), s)  # never a second one there
        self._receipted.add((req.tree, req.node))
        del self._pending[(req.tree, req.node)]
        self._splits[(req.tree, req.node)] = (col, s)
        right = members & (self._columns[:, col] >= s)
        depth = self._gate.depths[(req.tree, req.node)] if self._gate is not None else 0
        receipt = SplitReceipt.sign(
            self._signing_key, self._config.session, self.name,
            (req.tree, req.node, *req.children), members & ~right, right, depth,
        )  # fmt: skip
        split_id = hashlib.sha256(receipt.signed_bytes(self._config.session)).digest()
        self._split_ids[(req.tree, req.node)] = split_id  # what its FRF-Test statements name
        value = self._encrypt(sk, s)
        reply = CiphertextReply(req.tree, req.node, 0, value, "split-upload", receipt)
        return reply.to_bytes(self._config, self.name)

    def _split(self, tree: int, node: int) -> tuple[int, float]:
        if (tree, node) not in self._splits:
            raise ProtocolError(f"{self.name} provides no split at node {tree, node}")
        return self._splits[(tree, node)]

    def _test_rows(self) -> FloatArray:
        if self._rows is None:
            raise ProtocolError(f"{self.name} has no rows to predict")
        return self._rows

    def _encrypt(self, sk: dtpkc.SecretKey, x: float) -> dtpkc.Ciphertext:
        prm = sk.public.params
        v = dtpkc.to_fixed_point(x, self._config.fraction_bits, prm)
        return dtpkc.encrypt(sk.public, v, self._fresh.pop() if self._fresh else None)

    def _compare_plain(self, data: bytes) -> bytes:
        """FRF-Test: per (tree, node) of this participant's splits in the tree as grown, which
        of the given test rows go left (x < s), in plaintext, with a signed statement per
        child of the rows sent there; only rows the parent's provider signed it sent here,
        once per round (:mod:`.branch`)."""
        rows, cfg = self._test_rows(), self._config
        req = branch.TestRequest.from_bytes(data, cfg, len(self._splits), rows.shape[0])
        if self._gate is None:
            raise ProtocolError(f"{self.name} has no keys yet")
        self._tests.admit(req, self._splits, self._gate, self._gate.peers, cfg.session)
        lefts, ids = [], []
        for item in req.items:
            col, s = self._splits[(item.tree, item.node)]
            lefts.append(rows[item.rows, col] < s)
            ids.append(self._split_ids.get((item.tree, item.node), bytes(branch.ID_BYTES)))
        batch = self._tests.batch
        return branch.answer(req, cfg, self.name, self._signing_key, lefts, ids, batch)

    def _forget(self, data: bytes) -> bytes:
        """Drop the thresholds of destroyed nodes (revocation)."""
        batch = NodeBatch.from_bytes(data, "forget", self._config, CS, len(self._splits), 0)
        for key in batch.nodes:
            self._splits.pop(key, None)
            self._split_ids.pop(key, None)
        return NodeBatch("forgotten", batch.nodes, batch.masks).to_bytes(self._config, self.name)

    def _reopen(self, data: bytes) -> bytes:
        """FRF-Revoc: forget the nodes below a revoked participant's splits, which the CS
        regrows under the same ids, after checking that participant's signed revocation
        and its own receipts of those splits (:mod:`.reopen`); once per participant."""
        if self._gate is None:
            raise ProtocolError(f"{self.name} has no keys yet")
        revoked, tops = ReopenNotice.from_bytes(data, self._config).check(
            self._config, self._gate.peers
        )
        self._gate.reopen(revoked, tops)
        gone = {k for k in (*self._receipted, *self._pending, *self._splits) if under(k, tops)}
        # a top node itself stays split for this participant: honestly only the revoked one
        # split it, and a CS that had this one split it too must not get a second threshold
        self._receipted -= gone - set(tops)
        self._pending = {k: v for k, v in self._pending.items() if k not in gone}
        self._splits = {k: v for k, v in self._splits.items() if k not in gone}
        self._split_ids = {k: v for k, v in self._split_ids.items() if k not in gone}
        self._tests.reload()  # no statement of a round before the reopen routes a row
        return reopened(self._config, self.name, len(tops))

    def _partial_decrypt(self, data: bytes) -> bytes:
        """ParHDec1 of a CC-signed comparison result addressed to this participant, paid
        from its :class:`~.secure_ops.DecryptionBudget`: only at a node where it provides
        the split, once per (query, tree, node), and only for a requester-query ticket (one
        the CC signed after checking the requester's signature, :mod:`.query_auth`); FRF-Test
        compares in the clear here and never pays a ticket."""
        if self._cc_key is None:
            raise ProtocolError(f"{self.name} has no keys yet")

        def pay(ticket: secure_ops.Ticket) -> None:
            self._budget.spend(ticket, (ticket.tree, ticket.node) in self._splits)

        return secure_ops.holder_partial_decrypt(
            self._keys(), self.name, self._cc_key, self._config, data, pay
        )

    def _partial_decrypt_batch(self, data: bytes) -> bytes:
        """ParHDec1 of a level's CC-signed packs (:mod:`.packed_holt`): every slot's ticket
        paid by the rules of :meth:`_partial_decrypt`, all or nothing, before any strip."""
        if self._cc_key is None:
            raise ProtocolError(f"{self.name} has no keys yet")

        def pay_all(tickets: Sequence[secure_ops.Ticket]) -> None:
            self._budget.spend_all(tickets, lambda t: (t.tree, t.node) in self._splits)

        return packed_holt.holder_strip_packs(
            self._keys(), self.name, self._cc_key, self._config, data, pay_all
        )
