"""The CS's batched FRF-Predict walk (:meth:`.CenterServer.predict_queries`): all rows x trees
level by level, every comparison of a level packed (:mod:`.packed_holt`) and sent in ONE
``holt-batch`` to the CC, then ONE ``partial-decrypt-batch`` to each holder of that level.

Run by the CS on its own keys; it learns, per row, the branch bit at each node of the row's
path in each tree (what one row at a time gives it) and nothing else. Each comparison is
charged to its own row's query ticket (query id, tree, node) at the CC and at the holder,
exactly as a row at a time charges it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from privfl.crypto import dtpkc
from privfl.crypto.parallel import thread_map
from privfl.errors import ProtocolError, UnknownPartyError
from privfl.forest import budget, packed_holt, packing, query_auth
from privfl.forest.jobs import Par, gather, lift
from privfl.forest.messages import CC, CS, Outgoing, SessionConfig
from privfl.forest.tree import Leaf, Node, Split, Tree

Comparison = tuple[int, int, Split]  # (row, tree index, the split node it is at)


def open_rows(
    config: SessionConfig, data: bytes, requester: str,
    keys: tuple[dtpkc.PublicKey, Ed25519PublicKey], features: Sequence[int],
) -> Par[tuple[list[dict[int, dtpkc.Ciphertext]], list[bytes]]]:  # fmt: skip
    """CS: read a requester's ``query-batch`` (``keys``: its DT-PKC key and pinned Ed25519
    key), verify every row's signature, and open every row's query at the CC (one round of
    ``query-open`` messages): per row, feature -> ciphertext, and the query ids."""
    batch = query_auth.QueryBatch.from_bytes(
        data, config, requester, keys[0], len(features), packed_holt.MAX_BATCH_ROWS
    )
    signed = [q.statement(requester) for q in batch.rows]
    for s in signed:
        s.verify(keys[1], config)
    qids = yield from gather(lift(query_auth.open_query(config, s)) for s in signed)
    return [dict(zip(features, q.values, strict=True)) for q in batch.rows], qids


def walk_rows(
    config: SessionConfig, sk: dtpkc.SecretKey, lam1: dtpkc.StrongKeyShare, trees: Sequence[Tree],
    rows: Sequence[Mapping[int, dtpkc.Ciphertext]], qids: Sequence[bytes],
    next_op: Callable[[], int],
) -> Par[list[list[float]]]:  # fmt: skip
    """The leaf value of every row in every tree (``[tree][row]``): ``rows[i]`` maps a
    feature to row i's ciphertext of it, ``qids[i]`` is row i's opened query id."""
    at = {(i, t): tree.root for t, tree in enumerate(trees) for i in range(len(rows))}
    while True:
        todo = [(i, t, n) for (i, t), n in at.items() if isinstance(n, Split)]
        if not todo:
            break
        went_left = yield from _level(config, sk, lam1, trees, rows, qids, next_op, todo)
        for (i, t, node), left in zip(todo, went_left, strict=True):
            at[(i, t)] = trees[t].nodes[node.left if left else node.right]
    return [[_leaf_value(at[(i, t)]) for i in range(len(rows))] for t in range(len(trees))]


def _leaf_value(node: Node) -> float:
    if not isinstance(node, Leaf):  # pragma: no cover - the loop above ends at leaves
        raise ProtocolError("a walk ended at a split")
    return float(node.value)


def _level(
    config: SessionConfig, sk: dtpkc.SecretKey, lam1: dtpkc.StrongKeyShare, trees: Sequence[Tree],
    rows: Sequence[Mapping[int, dtpkc.Ciphertext]], qids: Sequence[bytes],
    next_op: Callable[[], int], todo: Sequence[Comparison],
) -> Par[list[bool]]:  # fmt: skip
    """One level: pack the comparisons by holder, one CC message, one message per holder;
    ``x < split`` for every comparison of ``todo``, in its order."""
    n = packing.slot_count(sk.public.params)
    by_holder: dict[str, list[int]] = defaultdict(list)
    for j, (_, _, node) in enumerate(todo):
        by_holder[node.provider].append(j)
    specs: list[tuple[str, list[int], int]] = [
        (holder, idx[s : s + n], next_op())
        for holder, idx in by_holder.items()
        for s in range(0, len(idx), n)
    ]

    def blind(spec: tuple[str, list[int], int]) -> tuple[packed_holt.PackRequest, list[int]]:
        holder, part, op = spec
        xs = [rows[todo[j][0]][todo[j][2].feature] for j in part]
        ys = [todo[j][2].encrypted_split for j in part]
        tickets = [
            budget.Ticket(qids[i], trees[t].tree_id, node.node_id, budget.REQUESTER_QUERY)
            for i, t, node in (todo[j] for j in part)
        ]
        return packed_holt.blind_pack(sk, lam1, op, xs, ys, holder, tickets)

    packs = [(*blinded, spec[1]) for spec, blinded in zip(specs, thread_map(blind, specs),
                                                          strict=True)]  # fmt: skip
    data = packed_holt.write_batch("holt-batch", config, CS, [p[0] for p in packs])
    (reply,) = yield (Outgoing(CC, data),)
    results = packed_holt.read_results(reply, "holt-batch-result", config, CC, sk.public.params)
    if len(results) != len(packs):
        raise ProtocolError(f"the CC answered {len(results)} packs of {len(packs)}")
    for res, (req, _, _) in zip(results, packs, strict=True):
        if (res.op, res.holder, res.tickets) != (req.op, req.holder, req.tickets):
            raise UnknownPartyError(f"a packed result for another pack than op {req.op}")
    mine: dict[str, list[int]] = defaultdict(list)
    for k, (req, _, _) in enumerate(packs):
        mine[req.holder].append(k)
    holders = list(mine)
    replies = yield tuple(
        Outgoing(h, packed_holt.write_batch("partial-decrypt-batch", config, CS,
                                            [results[k] for k in mine[h]]))
        for h in holders
    )  # fmt: skip
    if len(replies) != len(holders):
        raise ProtocolError(f"{len(replies)} replies for {len(holders)} holders")
    out: list[bool] = [False] * len(todo)
    opened: list[tuple[dtpkc.Ciphertext, int]] = []
    for h, reply in zip(holders, replies, strict=True):
        ops = [packs[k][0].op for k in mine[h]]
        partials = packed_holt.read_partials(reply, config, h, ops, sk.public)
        opened += list(zip(partials, mine[h], strict=True))
    read = thread_map(lambda pk: packed_holt.read_pack(sk, pk[0], packs[pk[1]][1]), opened)
    for (_, k), bits in zip(opened, read, strict=True):
        for j, less in zip(packs[k][2], bits, strict=True):
            out[j] = less
    return out
