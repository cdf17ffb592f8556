"""RevFRF's trees as the center server stores them (typed ``Leaf | Split`` nodes), label
encoding, split scoring, leaf values and votes. Pure data and arithmetic: no messages, no
keys."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from privfl._typing import BoolArray, FloatArray, IntArray
from privfl.crypto import dtpkc
from privfl.errors import InputError
from privfl.forest.provenance import Provenance


@dataclass(frozen=True, eq=False)
class Region:
    """What FLE-Expan needs to (re)build a node: its sample-selection vector μ stored
    sparsely (the samples in the node and their bootstrap multiplicities), the features
    still allowed on its path (F'), its depth, and why it exists (its bootstrap seed or its
    parent's split receipt, which every node request carries: :mod:`.provenance`)."""

    members: IntArray
    counts: IntArray
    allowed: tuple[int, ...]
    depth: int
    origin: Provenance


@dataclass(frozen=True, eq=False)
class Leaf:
    """A leaf: the majority class (index) or the weighted mean target."""

    node_id: int
    region: Region
    value: float


@dataclass(frozen=True, eq=False)
class Split:
    """An internal node: its provider, the global feature id and the provider's encrypted
    split ``HoEnc(pk_provider, fixed_point(s))`` (the CS never sees s); left is x < s."""

    node_id: int
    region: Region
    provider: str
    feature: int
    encrypted_split: dtpkc.Ciphertext
    left: int
    right: int


Node = Leaf | Split


@dataclass
class Tree:
    """A tree as a dict of nodes; node 0 is the root, node n's children are 2n+1 and 2n+2
    (:func:`.provenance.children`: a node's id is its path, so every participant can tell
    two splits of one node apart). A node regrown after a revocation keeps its id."""

    tree_id: int
    nodes: dict[int, Node] = field(default_factory=dict)

    @property
    def root(self) -> Node:
        return self.nodes[0]

    def subtree(self, node_id: int) -> list[int]:
        """The node and all its descendants."""
        out, stack = [], [node_id]
        while stack:
            nid = stack.pop()
            out.append(nid)
            node = self.nodes[nid]
            if isinstance(node, Split):
                stack += [node.left, node.right]
        return out

    def splits(self) -> list[Split]:
        return [n for n in self.nodes.values() if isinstance(n, Split)]

    def destroyed_by(self, provider: str) -> int:
        """Splits revoking ``provider`` destroys here: its topmost nodes and all below."""
        return sum(
            sum(1 for i in self.subtree(top.node_id) if isinstance(self.nodes[i], Split))
            for top in self.topmost(provider)
        )

    def topmost(self, provider: str) -> list[Split]:
        """The nodes of ``provider`` that no other node of ``provider`` is above."""
        out, stack = [], [self.root]
        while stack:
            node = stack.pop()
            if isinstance(node, Split):
                if node.provider == provider:
                    out.append(node)
                else:
                    stack += [self.nodes[node.left], self.nodes[node.right]]
        return out


def weighted_impurity(
    labels: FloatArray, weights: FloatArray, go_right: BoolArray, task: str, classes: int
) -> float:
    """Weighted Gini (classification) or weighted MSE (regression) of a split; lower wins."""
    total = weights.sum()
    score = 0.0
    for side in (~go_right, go_right):
        w = weights[side]
        ws = w.sum()
        if ws <= 0:
            continue
        y = labels[side]
        if task == "classification":
            p = np.bincount(y.astype(np.int64), weights=w, minlength=classes) / ws
            score += ws / total * (1.0 - float(np.dot(p, p)))
        else:
            mean = float(np.dot(w, y) / ws)
            score += float(np.dot(w, (y - mean) ** 2)) / total
    return float(score)


def leaf_value(labels: FloatArray, weights: FloatArray, task: str, classes: int) -> float:
    """Majority class (classification) or weighted mean (regression)."""
    if task == "classification":
        counts = np.bincount(labels.astype(np.int64), weights=weights, minlength=classes)
        return float(np.argmax(counts))
    return float(np.dot(weights, labels) / weights.sum())


def is_pure(labels: FloatArray, task: str) -> bool:
    if labels.size == 0:
        return True
    if task == "classification":
        return bool(np.all(labels == labels[0]))
    return bool(np.ptp(labels) == 0)


def vote(leaves: FloatArray, task: str, classes: int) -> FloatArray:
    """Per column (a row to predict), the majority of the trees' leaf classes (ties: the
    lowest class index) or the mean of their values."""
    if task == "classification":
        counts = np.stack([(leaves == c).sum(axis=0) for c in range(classes)])
        return np.asarray(np.argmax(counts, axis=0), dtype=np.float64)
    return np.asarray(leaves.mean(axis=0), dtype=np.float64)


def encode_labels(labels: object, task: str, n: int) -> tuple[FloatArray, np.ndarray]:
    """Labels as floats (class indices, or targets) and the classes; InputError otherwise."""
    if labels is None:
        raise InputError("labels are missing (None)")
    try:
        y = np.asarray(labels)
        if y.ndim != 1:
            raise InputError(f"labels must be one value per row (1-D), got shape {y.shape}")
        if y.size != n:
            raise InputError(
                f"labels and partitions have different numbers of rows ({y.size}, {n})"
            )
        if task == "regression":
            values = y.astype(np.float64)
            if not np.all(np.isfinite(values)):
                raise InputError("regression targets must be finite numbers")
            return values, np.empty(0)
        if y.dtype.kind == "f" and not np.all(np.isfinite(y)):
            raise InputError("class labels contain NaN or infinite values")
        classes, index = np.unique(y, return_inverse=True)
    except (TypeError, ValueError) as exc:
        if isinstance(exc, InputError):
            raise
        raise InputError(f"labels cannot be read as {task} targets: {exc}") from None
    return index.astype(np.float64), classes
