"""Training as one step sequence over a transport (issue 28, item 2): the envelope decoder
fuzzed, hostile envelopes refused by a node and by the server's schedule, and the number of
exchanges per epoch.

Real threshold-CKKS ciphertexts on the ``"test"`` parameter set (small ring, fast).
"""

from __future__ import annotations

import contextlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("openfhe")

import privfl
from privfl.errors import ProtocolError
from privfl.messages import Writer, new_session_id
from privfl.runner import InProcessRunner
from privfl.training.envelope import Envelope, Item, pack_parts
from privfl.training.federated import _build
from privfl.training.messages import GlobalPlainLayers
from privfl.training.node import PartyNode
from privfl.training.schedule import InProcessTransport, _Driver, run_training
from privfl.training.twin import Schedule

LAYERS = (6, 5, 4)
SESSION = new_session_id()


def _data(count=3, rows=8, seed=4):
    rng = np.random.default_rng(seed)  # not secret: test data
    return [(rng.uniform(0, 1, (rows, 6)), rng.integers(0, 4, rows)) for _ in range(count)]


@pytest.fixture(scope="module")
def built():
    sched = Schedule(LAYERS, 1, 2, 2, 4, 1.0, 0)
    session, _, plan = _build(_data(), sched, "test", 1)
    # every node agrees to reveal to party-0 only: the server cannot name another recipient
    nodes = [PartyNode(p, plan.names, "party-0") for p in session.parties]
    return session, plan, nodes


def _envelope(step="relay", rnd=0, items=(), done=False, body=b"", sender="server"):
    return Envelope(SESSION, sender, step, rnd, tuple(items), done, body)


@given(
    step=st.sampled_from(["train", "relay", "evaluate", "finish"]),
    rnd=st.integers(0, 2**32 - 1),
    items=st.lists(
        st.tuples(
            st.text(max_size=8), st.sampled_from(["request", "share"]), st.binary(max_size=40)
        ),
        max_size=4,
    ),
    done=st.booleans(),
    body=st.binary(max_size=64),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 7)), max_size=3),
    cut=st.integers(0, 10**6),
)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_envelopes_round_trip_and_mutations_raise_typed_errors_only(
    step, rnd, items, done, body, flips, cut
):
    env = _envelope(step, rnd, [Item(*i) for i in items], done, body)
    data = env.to_bytes()
    assert Envelope.from_bytes(data, SESSION) == env
    raw = bytearray(data)
    for pos, bit in flips:
        raw[pos % len(raw)] ^= 1 << bit
    for candidate in (bytes(raw), data[: cut % len(data)]):
        with contextlib.suppress(ProtocolError):
            Envelope.from_bytes(candidate, SESSION)


def test_a_node_refuses_envelopes_a_server_should_not_send(built):
    session, plan, nodes = built
    node = nodes[0]
    sid = session.server.session
    peer = plan.names[1]
    hostile = [
        Envelope(sid, peer, "relay", 0),  # not from the server
        Envelope(sid, "server", "relay", 0, (Item("stranger", "request", b"x"),)),
        Envelope(sid, "server", "relay", 0, (Item(node.name, "request", b"x"),)),  # itself
        Envelope(sid, "server", "relay", 0, (Item(peer, "share", b"x"),)),  # nothing pending
        Envelope(sid, "server", "relay", 0, (Item(peer, "request", b"junk"),)),
        Envelope(sid, "server", "train", 0),  # no global model delivered
        Envelope(sid, "server", "evaluate", 1),
        Envelope(sid, "server", "evaluate", 0),
        Envelope(sid, "server", "consent", 2, body=b"\x00"),
        Envelope(sid, "server", "consent", 2, body=Writer().str_(peer).u32(1).getvalue()),
        Envelope(new_session_id(), "server", "finish", 0),
    ]
    made = node.party.crypto.decryption_shares_made
    for env in hostile:
        with pytest.raises(ProtocolError):
            node.step(env.to_bytes())
    assert node.party.crypto.decryption_shares_made == made


class _Lossy:
    """A transport that forwards to the nodes and then drops, swaps or rewrites answers."""

    def __init__(self, inner, mutate, session):
        self.inner, self.mutate, self.session = inner, mutate, session

    def exchange(self, step, messages):
        return self.mutate(step, self.inner.exchange(step, messages), self.session)


def _drop(step, got, sid):
    return {k: v for k, v in got.items() if k != "party-1"}


def _swap(step, got, sid):
    return {**got, "party-0": got["party-1"]}


def _to_itself(step, got, sid):
    env = Envelope(sid, "party-2", step, 0, (Item("party-2", "request", b""),))
    return {**got, "party-2": env.to_bytes()}


def _stale(step, got, sid):
    return {**got, "party-2": Envelope(sid, "party-2", step, 7).to_bytes()}


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (_drop, "no answer"),
        (_swap, "not 'party-0'"),
        (_to_itself, "addressed an item"),
        (_stale, "of round 7"),
    ],
)
def test_the_schedule_refuses_a_missing_misattributed_misrouted_or_stale_answer(mutate, reason):
    sched = Schedule(LAYERS, 0, 1, 1, 4, 1.0, 0)
    session, _, plan = _build(_data(), sched, "test", 1)
    nodes = [PartyNode(p, plan.names) for p in session.parties]
    inner = InProcessTransport(nodes, InProcessRunner())
    transport = _Lossy(inner, mutate, session.server.session)
    with pytest.raises(ProtocolError, match=reason):
        run_training(session.server, plan, transport)


def test_one_epoch_takes_two_exchanges_per_joint_step_with_the_parties_in_parallel():
    res = privfl.train_federated(_data(), LAYERS, 1, 1, 4, 1.0, parameters="test", evaluate_every=0)
    # each party: 2 batches x 3 joint steps (2 bootstraps, e_T), all parties at once; each
    # joint step is one exchange for the request and one for the shares
    assert res.exchanges["relay"] == 2 * 2 * 3
    # the upload rides on the envelope that ends a node's training step: no round of its own
    assert res.exchanges["train"] == 1 and "upload" not in res.exchanges
    assert "evaluate" not in res.exchanges


def test_a_node_uploads_only_once_its_batches_are_done(built):
    """Until a node's batches of the round are done its envelopes carry no body; the
    envelope that says ``done`` carries the upload, and an "upload" step is no step."""
    session, _, nodes = built
    plain, _ = session.server.global_model(0)
    body = pack_parts([plain.to_bytes()])  # the parties compute the initial encrypted layer
    node = nodes[1]
    sid = session.server.session
    out = Envelope.from_bytes(
        node.step(Envelope(sid, "server", "train", 0, body=body).to_bytes()), sid
    )
    assert not out.done and {i.peer for i in out.items} == {"party-0", "party-2"}
    assert out.body == b""
    with pytest.raises(ProtocolError):
        node.step(Envelope(sid, "server", "upload", 0).to_bytes())


def _crafted_evaluation(session, plan, nodes, target: float, rnd: int) -> list[tuple]:
    """What the server sees of an evaluation round under a crafted model: plaintext layers
    that give every row the same input (zero weights) and an encrypted layer whose output
    unit 0 is ``target`` on every row (in the attack: a slot of another party's encrypted
    update or of the layer, times a one-hot mask, plus a known bias). A node now takes no
    encrypted layer from the server at all (``tests/test_training_sumcheck.py``), so the
    crafted layer is installed on the nodes directly: the evaluation step itself must still
    report nothing whatever the layer (defence in depth)."""
    server = session.server
    sid, layout = server.session, server.layout
    plain = GlobalPlainLayers(sid, "server", rnd, (np.zeros((5, 6)),), (np.zeros(5),))
    bias = np.array([target, 0.0, 0.0, 0.0])
    layer = server.crypto.encrypt(layout.pack_weights(np.zeros((4, 5)), bias))
    for node in nodes:
        node.party.receive_model(plain, [layer.to_message(sid, "server")])
        node.model_round = rnd
    seen: list[tuple] = []

    class Tap(InProcessTransport):
        def exchange(self, step, messages):
            got = super().exchange(step, messages)
            for data in got.values():
                env = Envelope.from_bytes(data, sid)
                kinds = tuple((i.peer, i.kind) for i in env.items)
                seen.append((env.sender, env.step, env.round, env.done, kinds, env.body))
            return got

    d = _Driver(server, plan, Tap(nodes, InProcessRunner()), lambda k, fn, *a: fn(*a))
    d.relay(rnd, d.all("evaluate", rnd), "evaluate")
    return [view[:2] + view[3:] for view in seen]  # everything but the round number


def test_a_crafted_layer_reads_nothing_through_evaluation():
    """The server's view of an evaluation round is the same whatever the crafted layer
    outputs: no loss, accuracy or ``max |u|`` leaves a node (before, each node's ``max |u|``
    was the target slot). The nodes themselves keep their figures."""
    session, _, plan = _build(_data(), Schedule(LAYERS, 1, 2, 2, 4, 1.0, 0), "test", 1)
    nodes = [PartyNode(p, plan.names) for p in session.parties]
    first = _crafted_evaluation(session, plan, nodes, 0.25, 1)
    second = _crafted_evaluation(session, plan, nodes, 2.5, 2)
    assert first == second
    assert all(body == b"" for *_, body in first)
    got = [[e.max_abs_u for e in n.evaluations] for n in nodes]
    assert np.allclose(got, [[0.25, 2.5]] * 3, atol=1e-2)  # the nodes' own records
