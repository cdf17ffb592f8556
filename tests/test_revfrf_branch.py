"""FRF-Test and reopened nodes against a deviating CS (issue 26, review findings R2 and R1b).

R2: a provider compared any test row at any node it split, so the CS got one bit of its
choice per (row, released threshold). Now it answers a row at a node only where it splits
in the tree, for rows the parent's provider's signed bits route there, once per round.
R1b: after a reopen, replaying a third participant's older receipt rebuilt a node's μ and
the CS got a second threshold on the same samples; now a participant releases at most one
threshold per (column, μ), ever."""

import numpy as np
import pytest

from privfl.errors import ProtocolError, UnknownPartyError
from privfl.forest import branch
from privfl.forest.messages import NodeQuery, NodeRequest, Proposals, StaleMessageError
from privfl.forest.reopen import ReopenNotice
from privfl.forest.tree import Split
from test_revfrf_attacks import wine_forest

ROWS = 40


@pytest.fixture(scope="module")
def forest():
    model, parts, _ = wine_forest(n_trees=2, max_depth=4)
    rng = np.random.default_rng(3)  # not secret: the providers' test rows
    rows = {k: v[rng.choice(len(v), ROWS, replace=False)] for k, v in parts.items()}
    return model, rows


def ask(model, provider, rnd, items):
    """The CS's ``plain-compare`` to ``provider``; its answer per item (:class:`Compared`)."""
    cfg = model.center_server.config
    request = branch.TestRequest(rnd, tuple(items))
    reply = model.participants[provider].handle(request.to_bytes(cfg))
    return branch.read_answer(reply, cfg, provider, request)


def all_rows():
    return np.ones(ROWS, dtype=bool)


def path_child(tree, got=None):
    """The root, a split below it (one the root's answer ``got`` sends rows to, if given)
    and, with ``got``, the root provider's statements for that child and for its sibling."""
    root = tree.root
    for cid, sibling in ((root.left, root.right), (root.right, root.left)):
        routes = {got.to_left.node: got.to_left, got.to_right.node: got.to_right} if got else {}
        if isinstance(tree.nodes[cid], Split) and (got is None or routes[cid].rows.any()):
            return root, tree.nodes[cid], routes.get(cid), routes.get(sibling)
    raise AssertionError("no split below the root")


def new_round(model, rows):
    """Load the rows (a new round for every provider) and the CS's next round number."""
    model.predict(rows)  # an honest round, so the CS's counter and the providers agree
    model.center_server._test_round += 1
    return model.center_server._test_round


def test_r2_a_provider_compares_only_rows_its_parent_routed_to_its_node(forest):
    """The attack of the review: the CS asks the provider of a depth-1 node for every test
    row (on the old code: answered, one chosen bit per row against that threshold, whatever
    the row's path). Now it answers only the rows the root's provider's signed bits send
    there; the rows sent to the sibling, and any row without signed bits, are refused."""
    model, rows = forest
    tree = model.trees[0]
    rnd = new_round(model, rows)
    (got,) = ask(model, tree.root.provider, rnd, [branch.TestItem(0, 0, all_rows())])
    root, child, route, sibling = path_child(tree, got)
    here = route.rows
    with pytest.raises(ProtocolError, match="parent's signed rows"):
        ask(model, child.provider, rnd, [branch.TestItem(0, child.node_id, all_rows())])
    with pytest.raises(ProtocolError, match="another node"):  # the sibling's statement
        ask(model, child.provider, rnd, [branch.TestItem(0, child.node_id, sibling.rows, sibling)])
    if not here.all():
        with pytest.raises(ProtocolError, match="did not route"):
            ask(model, child.provider, rnd, [branch.TestItem(0, child.node_id, all_rows(), route)])
    (answer,) = ask(model, child.provider, rnd, [branch.TestItem(0, child.node_id, here, route)])
    assert answer.left.size == here.sum()
    with pytest.raises(ProtocolError, match="already compared"):
        ask(model, child.provider, rnd, [branch.TestItem(0, child.node_id, here, route)])
    with pytest.raises(ProtocolError, match="already compared"):
        ask(model, root.provider, rnd, [branch.TestItem(0, 0, all_rows())])


def test_r2_forged_foreign_or_stale_branch_bits_route_nothing(forest):
    """Bits the CS made up, bits of a provider that did not split the parent, bits of an
    earlier round, and a round before the providers' last row load: all refused."""
    model, rows = forest
    tree = model.trees[1]
    old = new_round(model, rows)
    (before,) = ask(model, tree.root.provider, old, [branch.TestItem(1, 0, all_rows())])
    root, child, stale, _ = path_child(tree, before)
    rnd = new_round(model, rows)
    (fresh,) = ask(model, root.provider, rnd, [branch.TestItem(1, 0, all_rows())])
    _, _, route, _ = path_child(tree, fresh)
    here = route.rows
    with pytest.raises(ProtocolError, match="another round"):
        ask(model, child.provider, rnd, [branch.TestItem(1, child.node_id, stale.rows, stale)])
    other = next(n for n in model.participants if n != root.provider)
    foreign = branch.RoutedRows(other, rnd, 1, child.node_id, here, route.signature)
    with pytest.raises(ProtocolError, match="did not split the parent"):
        ask(model, child.provider, rnd, [branch.TestItem(1, child.node_id, here, foreign)])
    widened = branch.RoutedRows(root.provider, rnd, 1, child.node_id, all_rows(), route.signature)
    with pytest.raises(UnknownPartyError, match="not signed"):
        ask(model, child.provider, rnd, [branch.TestItem(1, child.node_id, all_rows(), widened)])
    with pytest.raises(StaleMessageError, match="past it"):
        ask(model, root.provider, old, [branch.TestItem(1, 0, all_rows())])


def test_r2_no_answer_at_a_node_the_provider_only_proposed_at(forest):
    """A node the CS had a participant propose at but never chose it for is no split of
    its in the tree: refused, as is a node it never saw."""
    model, rows = forest
    tree = model.trees[0]
    root = tree.root
    victim = next(n for n in model.participants if n != root.provider)
    cfg = model.center_server.config
    members = np.zeros(cfg.n_samples, dtype=bool)
    members[root.region.members] = True
    request = NodeRequest(0, 0, members, (0,), cfg.probe_size, cfg.candidates, root.region.origin)
    model.participants[victim].handle(request.to_bytes(cfg))
    rnd = new_round(model, rows)
    with pytest.raises(ProtocolError, match="no split of this provider"):
        ask(model, victim, rnd, [branch.TestItem(0, 0, all_rows())])


def test_the_last_u32_round_is_refused_before_anything_is_recorded(forest):
    """A review found that a CS asking at round 2**32-1 made the gate's floor 2**32 after
    the next row load: the node's state no longer saved (struct.error) and every later round
    was refused. The request is now malformed before any check or record."""
    from privfl.errors import MalformedMessageError

    model, _ = forest
    provider = model.trees[0].root.provider
    before = model.participants[provider].export_state()
    with pytest.raises(MalformedMessageError, match="past the last one"):
        ask(model, provider, branch.MAX_ROUND, [branch.TestItem(0, 0, all_rows())])
    assert model.participants[provider].export_state() == before


def test_r2_honest_frf_test_still_predicts_the_plaintext_forest(forest):
    model, rows = forest
    first = model.predict(rows)
    assert np.array_equal(first, model.predict(rows))  # a second round answers again
    assert np.array_equal(first, model.predict_plain(rows))


def _three_providers_path(model):
    """A path top -> child -> grandchild of one tree split by three different providers."""
    for tree in model.trees:
        for top in tree.splits():
            for cid in (top.left, top.right):
                child = tree.nodes[cid]
                if not isinstance(child, Split) or child.provider == top.provider:
                    continue
                for gid in (child.left, child.right):
                    grand = tree.nodes[gid]
                    if isinstance(grand, Split) and grand.provider not in (
                        top.provider,
                        child.provider,
                    ):
                        return tree, top, child, grand
    raise AssertionError("no path with three providers")


def test_r1b_a_replayed_receipt_after_a_reopen_gives_no_second_threshold():
    """The review's replay: V split a top node, T its child, X the grandchild g (threshold
    s1 on column c). The CS shows X V's signed revocation (reopen), then replays T's older
    receipt to rebuild g's μ and has X split g again at another candidate. On the old code
    X released a second threshold on the same (column, μ): two equations in the same two
    raw values. Now X offers only s1 for column c there."""
    model, _, _ = wine_forest(n_trees=3, max_depth=5)
    cfg = model.center_server.config
    tree, top, _, grand = _three_providers_path(model)
    victim = model.participants[grand.provider]
    col, s1 = victim._splits[(tree.tree_id, grand.node_id)]
    v = model.participants[top.provider]
    top_receipt = tree.nodes[top.left].region.origin.receipt
    notice = ReopenNotice(v.revocation_request(), (top_receipt,)).to_bytes(cfg)
    victim.handle(notice)
    members = np.zeros(cfg.n_samples, dtype=bool)
    members[grand.region.members] = True
    replay = NodeRequest(
        tree.tree_id,
        grand.node_id,
        members,
        (col,),
        cfg.probe_size,
        cfg.candidates,
        grand.region.origin,
    )  # T's older receipt
    got = Proposals.from_bytes(victim.handle(replay.to_bytes(cfg)), cfg, replay, victim.name)
    offered = victim._pending[(tree.tree_id, grand.node_id)][1]
    index = max(range(len(offered)), key=lambda i: abs(offered[i][1] - s1))  # another k
    assert got.columns[index] == col
    ids = (grand.left, grand.right)
    victim.handle(NodeQuery("split-request", tree.tree_id, grand.node_id, index, ids).to_bytes(cfg))
    assert victim._splits[(tree.tree_id, grand.node_id)] == (col, s1)
    assert [s for c, s in offered if c == col] == [s1]


def test_r2_a_revoked_participant_compares_no_row_at_its_replaced_nodes():
    """Its nodes were regrown by others under the same ids; on the old code the revoked
    participant still held its thresholds and compared any row there for the CS. It drops
    them when it signs its revocation request."""
    model, parts, _ = wine_forest(n_trees=1, max_depth=3)
    rows = {k: v[:ROWS] for k, v in parts.items()}
    leaving = model.trees[0].root.provider
    model.predict(rows)
    model.revoke(leaving)
    rnd = model.center_server._test_round + 1
    with pytest.raises(ProtocolError, match=r"no split of this provider|at most 0"):
        ask(model, leaving, rnd, [branch.TestItem(0, 0, all_rows())])
    rest = {k: v for k, v in rows.items() if k != leaving}
    assert np.array_equal(model.predict(rest), model.predict_plain(rest))


def _statements(model, rnd, rows):
    """Round ``rnd`` of FRF-Test by hand: every root's provider, then every depth-1 node's,
    answer; their signed statements for the depth-1 and depth-2 nodes, by (tree, node)."""
    out = {}
    for tree in model.trees:
        t = tree.tree_id
        (got,) = ask(model, tree.root.provider, rnd, [branch.TestItem(t, 0, rows)])
        out[(t, got.to_left.node)], out[(t, got.to_right.node)] = got.to_left, got.to_right
        for cid in (tree.root.left, tree.root.right):
            node, st = tree.nodes[cid], out[(t, cid)]
            if isinstance(node, Split) and st.rows.any():
                (g,) = ask(model, node.provider, rnd, [branch.TestItem(t, cid, st.rows, st)])
                out[(t, g.to_left.node)], out[(t, g.to_right.node)] = g.to_left, g.to_right
    return out


def _shape(model):
    """Per (tree, node) of a split: its provider and its samples (public to the CS)."""
    return {
        (t.tree_id, n.node_id): (n.provider, tuple(n.region.members))
        for t in model.trees
        for n in t.splits()
    }


def _regrown_under_the_same_provider(before, after, leaving, nodes):
    """Nodes c of ``nodes`` whose parent p was split by the same provider before and after
    the regrowth but on other samples (so another split), c not split by the revoked
    participant ``leaving``: where a statement about p's old split would still route rows."""
    out = []
    for t, c in nodes:
        p = (t, (c - 1) // 2)
        if (
            p in before and p in after and after.get((t, c), ("",))[0] != leaving
            and before[p][0] == after[p][0] and before[p][1] != after[p][1]
        ):  # fmt: skip
            out.append((t, c))
    return out


def test_r2_a_statement_from_before_a_revocation_routes_no_row_after_the_regrowth():
    """Review finding 1 (issue 26): statements signed in round r by the provider P of node
    p, before a revocation reopened p's subtree; the tree is regrown honestly, P splits p
    again on other samples. On the old code the CS replayed them to the child's provider,
    which compared rows the regrown tree does not route there (the statement named no
    split). Now each names the parent's split (its receipt) and a reopen raises the floor."""
    for attempt in range(8):  # the participants' probes are random: find a regrown parent
        model, parts, _ = wine_forest(n_trees=4, max_depth=4)
        rows = {k: v[:ROWS] for k, v in parts.items()}
        rnd = new_round(model, rows)
        stale, before = _statements(model, rnd, all_rows()), _shape(model)
        leaving = model.trees[0].root.provider
        model.revoke(leaving)
        after = _shape(model)
        targets = [
            k
            for k in _regrown_under_the_same_provider(before, after, leaving, stale)
            if k in after and k[1] > 2 and stale[k].rows.any()  # depth 2: providers not asked
        ]
        if targets:
            break
    else:
        raise AssertionError("no parent regrown under the same provider in 8 forests")
    for t, c in targets:
        st, provider = stale[(t, c)], after[(t, c)][0]
        with pytest.raises(ProtocolError, match=r"past it|not signed"):
            ask(model, provider, rnd, [branch.TestItem(t, c, st.rows, st)])
    assert np.array_equal(model.predict(rows), model.predict_plain(rows))


def _path(node):
    """The node ids from the root down to ``node``."""
    out = [node]
    while out[-1]:
        out.append((out[-1] - 1) // 2)
    return out[::-1]


def test_r2_a_child_never_shown_the_reopen_refuses_the_parents_new_split():
    """The variant: the CS keeps the reopen (and the regrowth) from the child's provider Q,
    which keeps its old split at c and its record of p's split. The parent's provider P
    splits p again after the regrowth; on the old code Q compared the rows P's new split
    sends to c at Q's split of a tree no longer grown. Now P's statement names its new
    split, which is not the one Q saw: refused."""
    for attempt in range(20):  # the participants' probes are random: find such a c
        model, parts, _ = wine_forest(n_trees=4, max_depth=4)
        rows = {k: v[:ROWS] for k, v in parts.items()}
        before, leaving = _shape(model), model.trees[0].root.provider
        states = {n: p.export_state() for n, p in model.participants.items()}
        model.revoke(leaving)
        after = _shape(model)
        found = [
            (t, c, before[(t, c)][0])
            for t, c in _regrown_under_the_same_provider(before, after, "", list(before))
            if before[(t, c)][0] != leaving  # c itself need not be split after the regrowth
            and all(after[(t, a)][0] != before[(t, c)][0] for a in _path((c - 1) // 2))
        ]  # fmt: skip
        if found:
            break
    else:
        raise AssertionError("no split under a parent regrown by its provider in 20 forests")
    t, c, q = found[0]
    rnd = new_round(model, rows)
    model.participants[q].restore_state(states[q])  # Q never saw the reopen nor the regrowth
    route = None
    for node in _path((c - 1) // 2):  # the regrown path down to p, honestly
        rows_here = all_rows() if route is None else route.rows
        item = branch.TestItem(t, node, rows_here, route)
        (got,) = ask(model, after[(t, node)][0], rnd, [item])
        nxt = _path(c)[len(_path(node))]
        route = got.to_left if got.to_left.node == nxt else got.to_right
    with pytest.raises(UnknownPartyError, match="parent's split"):
        ask(model, q, rnd, [branch.TestItem(t, c, route.rows, route)])


def test_r2_a_statement_about_other_test_rows_routes_none_of_the_new_ones(forest):
    """Review finding 2 (issue 26): the CS restarts the test PSI, so row i is another
    person, and replays a statement about the old rows. On the old code a provider
    compared the new row i at a node the old row i reached, both in process (the floor was
    relative to its own last round) and on a Flower node (``restore_state`` after
    ``load_rows`` dropped the reload). Now each statement names the rows' identity."""
    model, rows = forest
    rnd = new_round(model, rows)
    for tree in model.trees:  # a child's provider not asked in this round, if there is one
        t = tree.tree_id
        (got,) = ask(model, tree.root.provider, rnd, [branch.TestItem(t, 0, all_rows())])
        _, child, route, _ = path_child(tree, got)
        if child.provider != tree.root.provider:
            break
    victim = model.participants[child.provider]
    saved = victim.export_state()
    perm = np.random.default_rng(7).permutation(ROWS)  # a new alignment of the same ids
    new = rows[child.provider][perm]
    item = branch.TestItem(t, child.node_id, route.rows, route)
    for order in ("restore, then load", "load, then restore"):
        if order == "restore, then load":  # what a Flower node does now
            victim.restore_state(saved)
            victim.load_rows(new)
        else:  # the order a node used before: the loaded rows keep their identity
            victim.load_rows(new)
            victim.restore_state(saved)
        with pytest.raises(ProtocolError, match=r"test rows|past it"):
            ask(model, child.provider, rnd, [item])
    model.predict(rows)  # every provider loads the same rows again: an honest round works
