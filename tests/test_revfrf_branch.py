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
