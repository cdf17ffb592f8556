"""The plaintext-comparison walk of a forest (the evaluation shortcut of FRF-Test), as a CS
job: level by level, one ``plain-compare`` message per provider with the rows at each of its
nodes; the providers answer which of those rows go left (x < s). The CS learns the path of
every row (as with HoLT); the providers learn which test rows reach their nodes."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from privfl._typing import BoolArray, FloatArray
from privfl.forest.jobs import Par
from privfl.forest.messages import CS, NodeBatch, Outgoing, SessionConfig
from privfl.forest.tree import Leaf, Split, Tree


def mask(n: int, rows: np.ndarray) -> BoolArray:
    """``n`` bits, set at ``rows``."""
    out = np.zeros(n, dtype=bool)
    out[rows] = True
    return out


def leaves(trees: Sequence[Tree], n_rows: int, config: SessionConfig) -> Par[FloatArray]:
    """The leaf value each row reaches in each tree (trees x rows)."""
    values = np.empty((len(trees), n_rows))
    frontier = {(t.tree_id, 0): np.arange(n_rows) for t in trees}
    while frontier:
        asks: dict[str, list[tuple[int, Split, np.ndarray]]] = defaultdict(list)
        for (t, nid), rows in frontier.items():
            node = trees[t].nodes[nid]
            if isinstance(node, Leaf):
                values[t, rows] = node.value
            else:
                asks[node.provider].append((t, node, rows))
        frontier = {}
        if not asks:
            break
        requests = {
            provider: NodeBatch(
                "plain-compare", tuple((t, node.node_id) for t, node, _ in items),
                tuple(mask(n_rows, rows) for _, _, rows in items),
            )
            for provider, items in asks.items()
        }  # fmt: skip
        replies = yield tuple(Outgoing(p, r.to_bytes(config, CS)) for p, r in requests.items())
        for (provider, items), reply in zip(asks.items(), replies, strict=True):
            answer = NodeBatch.from_bytes(
                reply, "plain-compared", config, provider, len(items), n_rows, requests[provider]
            )
            for (t, node, rows), left in zip(items, answer.masks, strict=True):
                for child, part in ((node.left, rows[left]), (node.right, rows[~left])):
                    if part.size:
                        frontier[(t, child)] = part
    return values
