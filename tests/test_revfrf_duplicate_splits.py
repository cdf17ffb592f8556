"""A deviating CS has two *other* participants each split one node (issue 26, open item 2):
a victim asked for a threshold under each split gives two threshold equations in its own
(min, max) at that node. Node ids are now paths (children 2n+1, 2n+2) and a participant
accepts one split per node, unless the splitter's signed revocation is shown."""

import contextlib

import numpy as np
import pytest

from privfl.datasets import load_tabular
from privfl.errors import MalformedMessageError, ProtocolError
from privfl.forest import RevFRF
from privfl.forest.messages import CiphertextReply, NodeQuery, NodeRequest, Proposals
from privfl.forest.provenance import Provenance
from test_revfrf_attacks import KEYS, wine_forest


@pytest.fixture(scope="module")
def forest():
    return wine_forest(n_trees=1, max_depth=3)


def children(node):
    return 2 * node + 1, 2 * node + 2


def mask(n, rows):
    out = np.zeros(n, dtype=bool)
    out[rows] = True
    return out


def split_by(model, name, node, ids):
    """The CS has ``name`` propose at ``node`` and split it (children ``ids``): its signed
    receipt and the two children's μ, or None when ``name`` refuses."""
    cfg = model.center_server.config
    members = mask(cfg.n_samples, node.region.members)
    ask = NodeRequest(0, node.node_id, members, (0, 1), cfg.probe_size, cfg.candidates,
                      node.region.origin)  # fmt: skip
    got = Proposals.from_bytes(model.participants[name].handle(ask.to_bytes(cfg)), cfg, ask, name)
    sizes = [(int(m.sum()), int((~m).sum())) for m in got.go_right]
    index = next(i for i, pair in enumerate(sizes) if min(pair) >= cfg.min_node_size)
    request = NodeQuery("split-request", 0, node.node_id, index, ids).to_bytes(cfg)
    reply = model.participants[name].handle(request)
    key = model.center_server._roster[name].public
    receipt = CiphertextReply.from_bytes(
        reply, "split-upload", cfg, key, name, (0, node.node_id, 0)
    ).receipt
    right = node.region.members[got.go_right[index]]
    left = node.region.members[~got.go_right[index]]
    return receipt, (mask(cfg.n_samples, left), mask(cfg.n_samples, right))


def test_two_other_participants_splitting_one_node_give_the_victim_one_threshold(forest):
    """The attack: the root (split by X in the honest run) is split again by A and by B, and
    the victim V is asked for proposals (and a split) at a child under each receipt. On the
    old code V answered both (two thresholds with the same extreme samples); now it answers
    at most one split per node: here none, since it saw X's split of the root."""
    model, _, _ = forest
    cfg = model.center_server.config
    root = model.trees[0].root
    others = [n for n in model.participants if n != root.provider]
    # a victim that saw X's split of the root (asked at one of its children while the forest
    # grew), when there is one: whether anyone was depends on the grown tree (both children
    # may be leaves), so the stronger claim below holds only then
    saw = [n for n in others if (0, root.node_id) in model.participants[n]._gate.parents]
    victim = saw[0] if saw else others[2]
    a, b = [n for n in others if n != victim][:2]
    answered = 0
    for k, name in enumerate((a, b)):
        try:  # fresh ids, as the CS chose them before; the parent's path ids otherwise
            receipt, (left, _) = split_by(model, name, root, (900 + 2 * k, 901 + 2 * k))
        except MalformedMessageError:
            receipt, (left, _) = split_by(model, name, root, children(0))
        ask = NodeRequest(0, receipt.left, left, (0,), cfg.probe_size, cfg.candidates,
                          Provenance(receipt=receipt))  # fmt: skip
        try:
            model.participants[victim].handle(ask.to_bytes(cfg))
            answered += 1
        except ProtocolError:
            pass
    assert answered <= 1
    if saw:
        assert answered == 0  # V already saw X's split of the root while the forest grew


def test_child_ids_are_the_parents_path_and_made_up_ids_are_malformed(forest):
    model, _, _ = forest
    cfg = model.center_server.config
    for tree in model.trees:
        for node in tree.splits():
            assert (node.left, node.right) == children(node.node_id)
    root = model.trees[0].root
    with pytest.raises(MalformedMessageError, match="into children"):
        model.participants[root.provider].handle(
            NodeQuery("split-request", 0, 0, 0, (900, 901)).to_bytes(cfg)
        )


def test_a_revocation_reopens_only_the_revoked_participants_subtrees_once():
    """Regrowing after a revocation reuses the ids below the revoked participant's splits:
    the participants accept it because the CS shows that participant's signed revocation
    and its receipts; the same notice a second time is refused, and the regrown forest
    still predicts like the plain walk."""
    d = load_tabular("wine", seed=0)
    x, y = d.x_train[:300], d.y_train[:300]
    parts = {f"p{i}": x[:, 2 * i : 2 * i + 2] for i in range(4)}
    model = RevFRF(n_trees=2, max_depth=3, seed=1, **KEYS).fit(parts, y)
    target = model.trees[0].root.provider
    log = []
    send = model.runner.send
    model.runner.send = lambda ch, data: log.append(bytes(data)) or send(ch, data)
    report = model.revoke(target)
    assert report.destroyed_nodes > 0
    rows = {k: v[:20] for k, v in parts.items() if k != target}
    assert np.array_equal(model.predict(rows), model.predict_plain(rows))
    from privfl.forest.messages import CODEC
    from privfl.forest.reopen import ReopenNotice

    notice = next(m for m in log if CODEC.decode(m)[0].step == ReopenNotice.STEP)
    survivor = next(n for n in parts if n != target)
    with pytest.raises(ProtocolError, match="shown before"):
        model.participants[survivor].handle(notice)


def test_a_reopen_does_not_let_a_participant_split_a_top_node_a_second_time():
    """Review finding: the CS has a victim split the root too (the root provider X split it
    honestly); X's revocation reopens the root. On the old code the notice cleared the root
    from the victim's own splits, so the CS got a second threshold of the same samples."""
    model, parts, _ = wine_forest(n_trees=1, max_depth=3)
    root = model.trees[0].root
    victim = next(n for n in parts if n != root.provider)
    split_by(model, victim, root, children(0))
    # the honest regrowth may stop at the victim, which refuses the root now
    with contextlib.suppress(ProtocolError):
        model.revoke(root.provider)
    with pytest.raises(ProtocolError):
        split_by(model, victim, root, children(0))


def test_junk_split_requests_draw_no_randomness_beyond_the_pending_proposals(forest):
    """A batch's count of ``split-request`` headers is unchecked (any session, unparsed): the
    participant draws encryption randomness for at most its pending proposals, so junk
    headers cost it nothing (review finding: up to 65,536 draws of two exponentiations)."""
    model, _, _ = forest
    participant = next(iter(model.participants.values()))
    participant.prepare_uploads(65_536)
    assert len(participant._fresh) == len(participant._pending) < 65_536
