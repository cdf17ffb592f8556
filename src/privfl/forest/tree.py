"""Pure pieces of RevFRF's trees: node records, split scoring, leaf values."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from privfl._typing import FloatArray, IntArray


@dataclass
class Node:
    """One tree node as CS stores it.

    ``members``/``counts``: the node's sample-selection vector μ, stored sparsely (the
    indices of the samples in the node and their bootstrap multiplicities), and ``allowed``:
    the features still allowed on this path; together they are what FLE-Expan needs to
    rebuild the node. Internal nodes also hold the provider, the
    global feature id and the provider's encrypted split (CS never sees the split value)."""

    node_id: int
    depth: int
    members: IntArray
    counts: IntArray
    allowed: tuple[int, ...]
    provider: str | None = None
    feature: int | None = None
    encrypted_split: Any = None
    left: int | None = None
    right: int | None = None
    value: float | None = None  # leaf: majority class or mean target
    destroyed: bool = False

    @property
    def is_leaf(self) -> bool:
        return self.value is not None


@dataclass
class Tree:
    """A tree as a dict of nodes; node 0 is the root."""

    tree_id: int
    nodes: dict[int, Node] = field(default_factory=dict)
    next_id: int = 0

    def new_id(self) -> int:
        self.next_id += 1
        return self.next_id - 1

    def subtree(self, node_id: int) -> list[int]:
        """The node and all its descendants."""
        out, stack = [], [node_id]
        while stack:
            nid = stack.pop()
            out.append(nid)
            node = self.nodes[nid]
            if node.left is not None:
                stack.append(node.left)
            if node.right is not None:
                stack.append(node.right)
        return out

    def internal_nodes(self) -> list[Node]:
        return [n for n in self.nodes.values() if not n.is_leaf]


def weighted_impurity(
    labels: FloatArray,
    weights: FloatArray,
    go_right: npt.NDArray[np.bool_],
    task: str,
    classes: int,
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
            counts = np.bincount(y.astype(np.int64), weights=w, minlength=classes)
            p = counts / ws
            score += ws / total * (1.0 - float(np.dot(p, p)))
        else:
            mean = float(np.dot(w, y) / ws)
            score += float(np.dot(w, (y - mean) ** 2)) / total
    return score


def leaf_value(labels: FloatArray, weights: FloatArray, task: str, classes: int) -> float:
    """Majority class (classification) or weighted mean (regression)."""
    if task == "classification":
        return float(
            np.argmax(np.bincount(labels.astype(np.int64), weights=weights, minlength=classes))
        )
    return float(np.dot(weights, labels) / weights.sum())


def is_pure(labels: FloatArray, task: str) -> bool:
    if labels.size == 0:
        return True
    if task == "classification":
        return bool(np.all(labels == labels[0]))
    return bool(np.ptp(labels) == 0)
