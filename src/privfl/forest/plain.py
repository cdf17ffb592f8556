"""The plaintext-comparison walk of a forest (the evaluation shortcut of FRF-Test), as a CS
job: level by level, one ``plain-compare`` message per provider with the rows at each of its
nodes; the providers answer which of those rows go left (x < s) and sign, per child, the
rows sent there, which the CS shows that child's provider. The CS learns the path of every
row (as with HoLT); the providers learn which test rows reach their nodes."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

from privfl._typing import BoolArray, FloatArray
from privfl.forest.branch import RoutedRows, TestItem, TestRequest, read_answer
from privfl.forest.jobs import Par
from privfl.forest.messages import Outgoing, SessionConfig
from privfl.forest.tree import Leaf, Split, Tree


def mask(n: int, rows: np.ndarray) -> BoolArray:
    """``n`` bits, set at ``rows``."""
    out = np.zeros(n, dtype=bool)
    out[rows] = True
    return out


def leaves(trees: Sequence[Tree], n_rows: int, config: SessionConfig, rnd: int) -> Par[FloatArray]:
    """The leaf value each row reaches in each tree (trees x rows), in test round ``rnd``:
    below the root each provider is shown the parent's provider's signed statement of the
    rows sent to its node (:mod:`.branch`)."""
    values = np.empty((len(trees), n_rows))
    Ask = tuple[int, Split, np.ndarray, RoutedRows | None]
    frontier: dict[tuple[int, int], tuple[np.ndarray, RoutedRows | None]] = {
        (t.tree_id, 0): (np.arange(n_rows), None) for t in trees
    }
    while frontier:
        asks: dict[str, list[Ask]] = defaultdict(list)
        for (t, nid), (rows, parent) in frontier.items():
            node = trees[t].nodes[nid]
            if isinstance(node, Leaf):
                values[t, rows] = node.value
            else:
                asks[node.provider].append((t, node, rows, parent))
        frontier = {}
        if not asks:
            break
        requests = {
            provider: TestRequest(rnd, tuple(
                TestItem(t, node.node_id, mask(n_rows, rows), parent)
                for t, node, rows, parent in items
            ))
            for provider, items in asks.items()
        }  # fmt: skip
        replies = yield tuple(Outgoing(p, r.to_bytes(config)) for p, r in requests.items())
        for (provider, items), reply in zip(asks.items(), replies, strict=True):
            answer = read_answer(reply, config, provider, requests[provider])
            for (t, node, rows, _), got in zip(items, answer, strict=True):
                for child, part, routed in (
                    (node.left, rows[got.left], got.to_left),
                    (node.right, rows[~got.left], got.to_right),
                ):
                    if part.size:
                        frontier[(t, child)] = (part, routed)
    return values
