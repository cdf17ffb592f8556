"""RevFRF's wire messages between the center server (CS) and the participants.

Every message is a frozen dataclass framed by :data:`CODEC` (protocol ``revfrf``, its step,
the session id and the sender). Decoding is strict and bounded by what the session agreed
(:class:`SessionConfig`) or by the request a reply answers, *before* anything is allocated: a
node request must carry the session's ϱ and ς and a bitmask of exactly the agreed sample
count; a reply must name the tree, node and row its request named, or it is stale
(:class:`StaleMessageError`). Messages between CS and the computation provider live in
:mod:`privfl.forest.secure_ops`, the key generation center's in :mod:`privfl.forest.kgc`.

Roles that drive a conversation (the CS) are written as generators of :class:`Outgoing`
messages that receive each reply (:data:`Job`); :mod:`privfl.forest.schedule` moves the bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping
from dataclasses import dataclass, field, replace
from typing import ClassVar, TypeVar

import numpy as np
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from privfl._typing import BoolArray
from privfl.crypto import dtpkc
from privfl.errors import (
    InputError,
    MalformedMessageError,
    ProtocolError,
    UnexpectedStepError,
    UnknownPartyError,
)
from privfl.forest.provenance import Provenance, SplitReceipt
from privfl.messages import Codec, Reader, Writer

CODEC = Codec("revfrf", 2)
CS, CC, KGC = "CS", "CC", "KGC"
RESERVED_NAMES = frozenset({CS, CC, KGC})
MAX_ITEMS = 1 << 20
MAX_DEPTH = 30  # node ids are heap positions (children 2n+1, 2n+2) in a u32
T = TypeVar("T")


class StaleMessageError(ProtocolError):
    """A reply names another tree, node, row or operation than its request, or a request is
    replayed or outside its freshness window."""


@dataclass(frozen=True)
class Outgoing:
    """A message a driving role sends, and to whom ("CC" or a participant's name)."""

    to: str
    data: bytes


Job = Generator[Outgoing, bytes, T]


@dataclass(frozen=True)
class SessionConfig:
    """What every role agreed before the run; every size read from the wire is checked
    against it. ``probe_size`` is ϱ (samples a participant probes for a feature's range),
    ``candidates`` is ς (candidate splits per feature), ``min_node_size`` the fewest samples
    a node request may name (:mod:`.provenance`); ``provisioning`` the id the KGC's
    messages were sealed under when it differs from the run's ``session``."""

    session: bytes
    n_samples: int
    n_trees: int
    max_depth: int
    probe_size: int
    candidates: int
    fraction_bits: int = dtpkc.DEFAULT_FRACTION_BITS
    allow_insecure_key_bits: bool = False
    min_node_size: int = 10  # provenance.MIN_NODE_SIZE
    provisioning: bytes = b""  # a deployment's provisioning id ("": the session's own)

    def __post_init__(self) -> None:
        if not 0 < self.max_depth <= MAX_DEPTH:
            raise InputError(
                f"max_depth must be in 1..{MAX_DEPTH} (a node's id is its path: 2n+1, 2n+2)"
            )

    def setup(self) -> SessionConfig:
        """The config the KGC's messages are sealed under: a deployment provisions once
        (its grants name the provisioning id) and draws a fresh ``session`` per run."""
        return replace(self, session=self.provisioning) if self.provisioning else self

    @property
    def max_internal_nodes(self) -> int:
        return min(MAX_ITEMS, self.n_trees * ((1 << min(self.max_depth, 20)) - 1))


def seal(step: str, config: SessionConfig, sender: str, w: Writer) -> bytes:
    return CODEC.encode(step, config.session, sender, w.getvalue())


def unseal(data: bytes, step: str, config: SessionConfig, sender: str | None) -> Reader:
    """Check the header (protocol, step, session and, if given, the sender)."""
    header, r = CODEC.decode(data, step, config.session)
    if sender is not None and header.sender != sender:
        raise UnknownPartyError(f"a '{step}' message from {header.sender!r}, expected {sender!r}")
    return r


def step_of(data: bytes, config: SessionConfig) -> str:
    """The step a message claims (header checked, payload untouched), for dispatching."""
    return CODEC.decode(data, None, config.session)[0].step


def dispatch(
    data: bytes, config: SessionConfig, handlers: Mapping[str, Callable[[bytes], bytes]], who: str
) -> bytes:
    """Hand a message to the handler of its step; any other step is refused."""
    step = step_of(data, config)
    if step not in handlers:
        raise UnexpectedStepError(f"{who} does not answer '{step}' messages")
    return handlers[step](data)


def pack_mask(mask: BoolArray) -> bytes:
    return np.packbits(mask.astype(np.uint8)).tobytes()


def read_mask(r: Reader, n: int, what: str) -> BoolArray:
    """Exactly ``n`` bits: ceil(n/8) bytes with zero padding (anything else is malformed)."""
    raw = r.bytes_((n + 7) // 8)
    if len(raw) != (n + 7) // 8:
        raise MalformedMessageError(f"{what} must hold exactly {n} bits")
    bits = np.unpackbits(np.frombuffer(raw, dtype=np.uint8))
    if bits[n:].any():
        raise MalformedMessageError(f"{what} has bits set beyond its {n} samples")
    return bits[:n].astype(bool)


def _ids(r: Reader, config: SessionConfig) -> tuple[int, int]:
    tree, node = r.u32(), r.u32()
    if tree >= config.n_trees:
        raise MalformedMessageError(
            f"tree {tree} does not exist (the session has {config.n_trees})"
        )
    if node >= (1 << (min(config.max_depth, MAX_DEPTH) + 1)) - 1:
        raise MalformedMessageError(f"node {node} is deeper than max_depth {config.max_depth}")
    return tree, node


def expect_ids(got: tuple[int, ...], want: tuple[int, ...], what: str) -> None:
    if got != want:
        raise StaleMessageError(f"{what} answers {got}, the request was for {want}")


# ------------------------------------------------------------------------ tree growth
@dataclass(frozen=True, eq=False)
class NodeRequest:
    """CS -> participant: a node's samples μ (one bit per aligned sample), the participant's
    selected local columns, ϱ, ς and why the node exists (:mod:`.provenance`; FOS-Find)."""

    STEP: ClassVar[str] = "node-request"
    tree: int
    node: int
    members: BoolArray
    columns: tuple[int, ...]
    probe_size: int
    candidates: int
    origin: Provenance = field(default_factory=Provenance)

    def to_bytes(self, config: SessionConfig) -> bytes:
        w = Writer().u32(self.tree).u32(self.node).bytes_(pack_mask(self.members))
        w.u32(len(self.columns))
        for c in self.columns:
            w.u32(c)
        w.u32(self.probe_size).u32(self.candidates)
        return seal(self.STEP, config, CS, self.origin.write(w))

    @classmethod
    def from_bytes(cls, data: bytes, config: SessionConfig, n_columns: int) -> NodeRequest:
        r = unseal(data, cls.STEP, config, CS)
        tree, node = _ids(r, config)
        members = read_mask(r, config.n_samples, "the node's sample vector")
        columns = tuple(r.u32() for _ in range(r.count(n_columns, "columns")))
        if len(set(columns)) != len(columns) or any(c >= n_columns for c in columns):
            raise MalformedMessageError(f"node request names columns {columns} of {n_columns}")
        probe, candidates, origin = r.u32(), r.u32(), Provenance.read(r)
        r.end()
        if (probe, candidates) != (config.probe_size, config.candidates):
            raise MalformedMessageError(
                f"node request asks ϱ={probe}, ς={candidates}; the session agreed "
                f"ϱ={config.probe_size}, ς={config.candidates}"
            )
        return cls(tree, node, members, columns, probe, candidates, origin)


@dataclass(frozen=True, eq=False)
class Proposals:
    """Participant -> CS: per candidate split, its column and one bit per sample *of the
    node* (1 = right, x >= s). The thresholds stay with the participant."""

    STEP: ClassVar[str] = "proposals"
    tree: int
    node: int
    columns: tuple[int, ...]
    go_right: tuple[BoolArray, ...]

    def to_bytes(self, config: SessionConfig, sender: str) -> bytes:
        w = Writer().u32(self.tree).u32(self.node).u32(len(self.columns))
        for c, mask in zip(self.columns, self.go_right, strict=True):
            w.u32(c).bytes_(pack_mask(mask))
        return seal(self.STEP, config, sender, w)

    @classmethod
    def from_bytes(
        cls, data: bytes, config: SessionConfig, request: NodeRequest, sender: str
    ) -> Proposals:
        r = unseal(data, cls.STEP, config, sender)
        expect_ids((r.u32(), r.u32()), (request.tree, request.node), "proposals")
        n_node = int(request.members.sum())
        count = r.count(len(request.columns) * config.candidates, "candidate splits")
        columns, masks = [], []
        for _ in range(count):
            column = r.u32()
            if column not in request.columns:
                raise MalformedMessageError(f"a proposal on column {column}, not requested")
            columns.append(column)
            masks.append(read_mask(r, n_node, "a split vector"))
        r.end()
        return cls(request.tree, request.node, tuple(columns), tuple(masks))


@dataclass(frozen=True)
class NodeQuery:
    """CS -> a participant, about one of its nodes: ``split-request`` (upload candidate
    ``index``, the winner, whose children get the ids ``children``: the CS's commitment to
    the split)."""

    STEPS: ClassVar[tuple[str]] = ("split-request",)
    step: str
    tree: int
    node: int
    index: int
    children: tuple[int, int] = (0, 0)

    def to_bytes(self, config: SessionConfig) -> bytes:
        w = Writer().u32(self.tree).u32(self.node).u32(self.index)
        if self.step == "split-request":
            w.u32(self.children[0]).u32(self.children[1])
        return seal(self.step, config, CS, w)

    @classmethod
    def from_bytes(cls, data: bytes, step: str, config: SessionConfig) -> NodeQuery:
        r = unseal(data, step, config, CS)
        tree, node = _ids(r, config)
        index = r.u32()
        children = (r.u32(), r.u32()) if step == "split-request" else (0, 0)
        r.end()
        if step == "split-request" and children != (2 * node + 1, 2 * node + 2):
            raise MalformedMessageError(f"a split of node {node} into children {children}")
        return cls(step, tree, node, index, children)


@dataclass(frozen=True)
class CiphertextReply:
    """Participant -> CS: a ciphertext under the participant's key for (tree, node, row):
    a split upload ``HoEnc(pk_u, fixed_point(s))`` (row 0) with the participant's signed
    receipt of the split's children (:mod:`.provenance`)."""

    tree: int
    node: int
    row: int
    value: dtpkc.Ciphertext
    step: str
    receipt: SplitReceipt | None = None

    def to_bytes(self, config: SessionConfig, sender: str) -> bytes:
        w = self.value.write(Writer().u32(self.tree).u32(self.node).u32(self.row))
        if self.step == "split-upload":
            if self.receipt is None:
                raise ProtocolError("a split upload needs its receipt")
            self.receipt.write(w)
        return seal(self.step, config, sender, w)

    @classmethod
    def from_bytes(
        cls, data: bytes, step: str, config: SessionConfig, key: dtpkc.PublicKey, sender: str,
        expect: tuple[int, int, int],
    ) -> CiphertextReply:  # fmt: skip
        r = unseal(data, step, config, sender)
        expect_ids((r.u32(), r.u32(), r.u32()), expect, step)
        value = dtpkc.Ciphertext.read(r, key.params, key)
        receipt = SplitReceipt.read(r) if step == "split-upload" else None
        r.end()
        return cls(*expect, value, step, receipt)


@dataclass(frozen=True, eq=False)
class NodeBatch:
    """A list of (tree, node) and, per item, a bitmask: ``plain-compare`` (CS -> provider:
    the test rows at each node), ``plain-compared`` (provider -> CS: per item, which of those
    rows go left, x < s) and ``forget`` (CS -> provider: nodes destroyed, empty masks)."""

    step: str
    nodes: tuple[tuple[int, int], ...]
    masks: tuple[BoolArray, ...]

    def to_bytes(self, config: SessionConfig, sender: str) -> bytes:
        w = Writer().u32(len(self.nodes))
        for (tree, node), mask in zip(self.nodes, self.masks, strict=True):
            w.u32(tree).u32(node).u32(mask.size).bytes_(pack_mask(mask))
        return seal(self.step, config, sender, w)

    @classmethod
    def from_bytes(
        cls, data: bytes, step: str, config: SessionConfig, sender: str, max_items: int,
        mask_bits: int, answers: NodeBatch | None = None,
    ) -> NodeBatch:  # fmt: skip
        """A request's masks have exactly ``mask_bits`` bits; a reply must match its request
        item by item (the same nodes, one bit per row asked)."""
        r = unseal(data, step, config, sender)
        count = r.count(max_items, "nodes")
        if answers is not None and count != len(answers.nodes):
            raise StaleMessageError(f"{step} answers {count} nodes, {len(answers.nodes)} asked")
        nodes, masks = [], []
        for i in range(count):
            ids, size = _ids(r, config), r.u32()
            if answers is not None:
                expect_ids(ids, answers.nodes[i], step)
                if size != int(answers.masks[i].sum()):
                    raise StaleMessageError(f"{step}: {size} bits for the rows asked")
            elif size != mask_bits:
                raise MalformedMessageError(f"{step}: a mask of {size} bits, not {mask_bits}")
            nodes.append(ids)
            masks.append(read_mask(r, size, f"{step} mask"))
        r.end()
        return cls(step, tuple(nodes), tuple(masks))


# ------------------------------------------------------------------------ revocation
REVOCATION_WINDOW_S = 300.0
CLOCK_SKEW_S = 30.0
NONCE_BYTES = 16


@dataclass(frozen=True)
class RevocationRequest:
    """A participant's request to leave, Ed25519-signed over the session, its name, a
    fresh nonce and the time (ms since 1970)."""

    STEP: ClassVar[str] = "revocation"
    participant: str
    nonce: bytes
    timestamp_ms: int
    signature: bytes

    @staticmethod
    def signed_bytes(session: bytes, participant: str, nonce: bytes, timestamp_ms: int) -> bytes:
        w = Writer().str_("privfl revfrf revocation").bytes_(session).str_(participant)
        return w.bytes_(nonce).u64(timestamp_ms).getvalue()

    @classmethod
    def sign(
        cls, key: Ed25519PrivateKey, config: SessionConfig, participant: str, nonce: bytes,
        timestamp_ms: int,
    ) -> RevocationRequest:  # fmt: skip
        message = cls.signed_bytes(config.session, participant, nonce, timestamp_ms)
        return cls(participant, nonce, timestamp_ms, key.sign(message))

    def verify(self, key: Ed25519PublicKey, config: SessionConfig) -> None:
        message = self.signed_bytes(config.session, self.participant, self.nonce, self.timestamp_ms)
        try:
            key.verify(self.signature, message)
        except InvalidSignature:
            raise UnknownPartyError(
                f"revocation request for {self.participant!r} has an invalid signature"
            ) from None

    def to_bytes(self, config: SessionConfig) -> bytes:
        w = Writer().str_(self.participant).bytes_(self.nonce).u64(self.timestamp_ms)
        return seal(self.STEP, config, self.participant, w.bytes_(self.signature))

    @classmethod
    def from_bytes(cls, data: bytes, config: SessionConfig) -> RevocationRequest:
        header, r = CODEC.decode(data, cls.STEP, config.session)
        participant, nonce, ts, sig = r.str_(256), r.bytes_(NONCE_BYTES), r.u64(), r.bytes_(64)
        r.end()
        if len(nonce) != NONCE_BYTES or len(sig) != 64:
            raise MalformedMessageError("revocation request with a short nonce or signature")
        if header.sender != participant:
            raise UnknownPartyError(f"{header.sender!r} sent a revocation for {participant!r}")
        return cls(participant, nonce, ts, sig)
