"""The parties check each round's encrypted aggregate (issue 28, item 1): the server sends
``T = sum_k D_k`` and every party's signed commitment, each party signs a random linear sketch
of its own update, and a party computes ``W + T/N`` itself only once the sketches add up.

Every attack is a deviating server: either its ``aggregate`` replaced, or a transport that
rewrites what the server sends (envelopes carry no server signature: the server can send
anything). Each must be refused before any party uses an encrypted layer computed from the
bad aggregate. Real threshold-CKKS ciphertexts on the ``"test"`` ring, one batch per party.
"""

from __future__ import annotations

import contextlib
import hashlib

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

pytest.importorskip("openfhe")

from privfl.crypto.threshold import Ciphertext, CiphertextMessage
from privfl.crypto.threshold.wire import uniform_coefficients
from privfl.errors import ProtocolError, UnknownPartyError
from privfl.messages import new_session_id
from privfl.runner import InProcessRunner
from privfl.threshold import ThresholdParty
from privfl.training.config import secret_layout
from privfl.training.desk import ShareDesk
from privfl.training.envelope import Envelope, pack_parts, unpack_parts
from privfl.training.federated import _build
from privfl.training.node import PartyNode
from privfl.training.party import Party
from privfl.training.schedule import InProcessTransport, run_training
from privfl.training.secret import initial_layers
from privfl.training.server import Server
from privfl.training.sumcheck import (
    LayerDigest,
    SumCheck,
    UpdateCommitment,
    challenge,
    coefficients,
    inner,
    sum_updates,
)
from privfl.training.twin import Schedule, initial_model

LAYERS = (6, 5, 4)


def _data(count=3, rows=4, seed=7):
    rng = np.random.default_rng(seed)  # not secret: test data
    return [(rng.uniform(0, 1, (rows, 6)), rng.integers(0, 4, rows)) for _ in range(count)]


_KEYED: dict[int, tuple] = {}


def _roles(rounds=1):
    """A fresh server and fresh party nodes of a session through its setup. The setup (the
    joint threshold key generation, the nodes' key check: about 1.1 s of CPU) runs once per
    test module and ``rounds``; every call gets new role objects with their own round state,
    each party's key share and once-only records restored from its node-local state as the
    setup left them (what a deployed node loads for each message), so no test sees another's
    rounds, decryptions or refusals. No test here tampers with the keys (test_training_keycheck
    does, with keys of its own)."""
    if rounds not in _KEYED:
        sched = Schedule(LAYERS, 1, rounds, rounds, 4, 1.0, 0)
        session, _, plan = _build(_data(), sched, "test", 0)
        local = [p.desk.export_local_state() for p in session.parties]
        _KEYED[rounds] = (session, plan, local)
    session, plan, local = _KEYED[rounds]
    old, sched = session.server, plan.schedule
    server = Server(sched, old.session, old.crypto, old.layout, old.max_update_norm)
    nodes = []
    for k, ((x, y), state) in enumerate(zip(_data(), local, strict=True)):
        crypto = ThresholdParty(plan.names[k], k, old.crypto.context, old.session)
        desk = ShareDesk(session.parties[k].desk._identity, plan, crypto)
        desk.import_local_state(state)
        party = Party(k, old.session, x, y, sched, desk, secret_layout(sched))
        nodes.append(PartyNode(party, plan.names))
    return server, plan, nodes


def _layers(nodes):
    """Each party's own global encrypted layers, as bytes."""
    return [[m.payload for m in _global(n)] for n in nodes]


def _global(node):
    p = node.party
    return [w.to_message(p.session, p.name) for w in p._global]


class Rewriting(InProcessTransport):
    """A deviating server's transport: ``rewrite(step, party, envelope) -> envelope``."""

    def __init__(self, nodes, rewrite):
        super().__init__(nodes, InProcessRunner())
        self.rewrite = rewrite

    def exchange(self, step, messages):
        sid = next(iter(self.nodes.values())).party.session
        out = {}
        for name, data in messages.items():
            env = self.rewrite(step, name, Envelope.from_bytes(data, sid))
            out[name] = env.to_bytes()
        return super().exchange(step, out)


def _run_attack(server, plan, nodes, rewrite=None, match=None):
    """Run one round under the attack; it must be refused and no party may have moved its
    encrypted layer off the initial one."""
    before = [[m.payload for m in server.global_model(0)[1]]] * len(nodes)
    transport = Rewriting(nodes, rewrite or (lambda step, name, env: env))
    with pytest.raises(ProtocolError, match=match):
        run_training(server, plan, transport)
    # no layer at all (refused before round 0), or still the public initial one
    assert all(got in ([], initial) for got, initial in zip(_layers(nodes), before))


def test_honest_parties_compute_byte_identical_layers_equal_to_the_servers_sum():
    server, plan, nodes = _roles(rounds=2)
    report = run_training(server, plan, InProcessTransport(nodes, InProcessRunner()))
    layers = _layers(nodes)
    assert layers[0] == layers[1] == layers[2]
    # the same bytes as ``W + (1/N) sum_k D_k`` computed by OpenFHE on the server, as before
    assert [m.payload for m in server.global_model(2)[1]] == layers[0]
    # one extra exchange per aggregation
    assert report.exchanges["sum"] == 2


def test_the_coefficient_sum_is_what_openfhe_adds():
    server, _, _ = _roles()
    ctx = server.crypto.context
    a = server.crypto.encrypt([0.5, -1.0])
    b = server.crypto.encrypt([2.0, 0.25])
    sid = server.session
    total = sum_updates(ctx, sid, "server", [a.to_message(sid, "x"), b.to_message(sid, "x")])
    assert total.payload == (a + b).to_message(sid, "x").payload


def _substitute(server, victim, source):
    honest = server.aggregate

    def aggregate(plains, updates):
        updates = list(updates)
        updates[victim] = updates[source]
        return honest(plains, updates)

    server.aggregate = aggregate


def test_a_server_substituting_one_partys_update_is_refused():
    server, plan, nodes = _roles()
    _substitute(server, 1, 0)
    _run_attack(server, plan, nodes, match="not the sum")


def test_a_server_adding_a_crafted_ciphertext_to_the_sum_is_refused():
    server, plan, nodes = _roles()
    honest = server.aggregate
    sid = server.session
    ctx = server.crypto.context

    def aggregate(plains, updates):
        totals = honest(plains, updates)
        t = totals[0]
        # any coefficient vectors of T's shape are a ciphertext the server can add (here
        # uniform ones; in the attack, a target ciphertext times a one-hot mask)
        moduli = ctx.ciphertext_layout(t.level, t.deg).moduli
        raw = uniform_coefficients(b"\x01" * 32, "crafted", moduli, ctx.ring)
        crafted = CiphertextMessage(sid, "server", t.level, t.deg, raw)
        return [sum_updates(ctx, sid, "server", [t, crafted]), *totals[1:]]

    server.aggregate = aggregate
    _run_attack(server, plan, nodes, match="not the sum")


def _sum_parts(env):
    totals, commits = unpack_parts(env.body, 2)
    return unpack_parts(totals), unpack_parts(commits)


def _with_sum_parts(env, totals, commits):
    body = pack_parts([pack_parts(totals), pack_parts(commits)])
    return Envelope(env.session, env.sender, env.step, env.round, env.items, env.done, body)


def test_a_server_sending_different_sums_to_different_parties_is_refused():
    server, plan, nodes = _roles()
    ctx = server.crypto.context
    sid = server.session

    def rewrite(step, name, env):
        if step != "sum" or name != "party-2":
            return env
        totals, commits = _sum_parts(env)
        t = CiphertextMessage.from_bytes(totals[0], ctx, sid)
        twice = sum_updates(ctx, sid, "server", [t, t])
        return _with_sum_parts(env, [twice.to_bytes(), *totals[1:]], commits)

    _run_attack(server, plan, nodes, rewrite, match="different")


def _model_parts(env):
    return unpack_parts(env.body)


def _with_model_parts(env, parts):
    return Envelope(
        env.session, env.sender, env.step, env.round, env.items, env.done, pack_parts(parts)
    )


@pytest.mark.parametrize("how", ["drop", "repeat", "reorder"])
def test_a_server_dropping_or_shuffling_a_relayed_sketch_is_refused(how):
    server, plan, nodes = _roles()

    def rewrite(step, name, env):
        if step != "finish":
            return env
        plain, *checks = _model_parts(env)
        if how == "drop":
            checks = checks[:-1]
        elif how == "repeat":
            checks = [checks[0], checks[0], checks[2]]
        else:
            checks = [checks[1], checks[0], checks[2]]
        return _with_model_parts(env, [plain, *checks])

    _run_attack(server, plan, nodes, rewrite, match="one sketch from each party")


def test_a_server_forging_a_relayed_sketch_to_cover_a_crafted_sum_is_refused():
    """The server adds ``X`` to ``T`` for every party and moves party-1's sketch by
    ``<r, X>`` so that the sum would pass: the forged sketch's signature fails."""
    server, plan, nodes = _roles()
    ctx = server.crypto.context
    sid = server.session
    state = {}

    def rewrite(step, name, env):
        if step == "sum":
            totals, commits = _sum_parts(env)
            t = CiphertextMessage.from_bytes(totals[0], ctx, sid)
            crafted = sum_updates(ctx, sid, "server", [t, t])
            state["x"] = coefficients(ctx, t)  # crafted - T = T
            state["t"] = crafted
            return _with_sum_parts(env, [crafted.to_bytes(), *totals[1:]], commits)
        if step == "finish":
            plain, *checks = _model_parts(env)
            forged = SumCheck.from_bytes(checks[1], sid)
            moduli = ctx.ciphertext_layout(state["t"].level, state["t"].deg).moduli
            r = challenge(ctx, sid, 0, 0, state["t"], forged.commitments)
            shift = inner(state["x"], moduli, r)
            moved = tuple((a + b) % int(q) for a, b, q in zip(forged.sketches[0], shift, moduli))
            forged = SumCheck(
                sid, forged.sender, forged.round, forged.totals, forged.commitments,
                (moved, *forged.sketches[1:]), forged.signature,
            )  # fmt: skip
            checks[1] = forged.to_bytes()
            return _with_model_parts(env, [plain, *checks])
        return env

    transport_error = UnknownPartyError
    before = [[m.payload for m in server.global_model(0)[1]]] * len(nodes)
    with pytest.raises(transport_error):
        run_training(server, plan, Rewriting(nodes, rewrite))
    assert _layers(nodes) == before


def test_a_server_altering_a_commitment_is_refused():
    server, plan, nodes = _roles()
    sid = server.session

    def rewrite(step, name, env):
        if step != "sum":
            return env
        totals, commits = _sum_parts(env)
        c = UpdateCommitment.from_bytes(commits[0], sid)
        d = c.layers[0]
        fake = LayerDigest(d.level, d.deg, hashlib.sha256(b"another update").digest())
        commits[0] = UpdateCommitment(sid, c.sender, c.round, (fake,), c.signature).to_bytes()
        return _with_sum_parts(env, totals, commits)

    before = [[m.payload for m in server.global_model(0)[1]]] * len(nodes)
    with pytest.raises(UnknownPartyError):
        run_training(server, plan, Rewriting(nodes, rewrite))
    assert _layers(nodes) == before


@pytest.mark.parametrize("step", ["train", "finish"])
def test_a_server_sending_a_crafted_layer_is_refused(step):
    """The old way: the server sends the encrypted layer itself, the initial one (``train``
    of round 0) or the next round's (``finish``, in place of the sketches); a node takes no
    encrypted layer from the server any more."""
    server, plan, nodes = _roles()
    sid = server.session
    layout = server.layout

    def rewrite(got, name, env):
        if got != step:
            return env
        plain, *_ = _model_parts(env)
        crafted = server.crypto.encrypt(layout.pack_weights(np.zeros((4, 5)), np.ones(4)))
        return _with_model_parts(env, [plain, crafted.to_message(sid, "server").to_bytes()])

    _run_attack(server, plan, nodes, rewrite)


def test_every_party_computes_the_same_public_initial_layer():
    """The initial encrypted layer is the trivial encryption of the public initial model:
    byte-identical at every party, ``c1 = 0``, and it decrypts to ``initial_model``."""
    server, plan, nodes = _roles()
    run_training(server, plan, InProcessTransport(nodes, InProcessRunner()))
    firsts = [initial_layers(n.party.crypto, n.party.schedule, n.party.layout) for n in nodes]
    payloads = [[w.to_message(server.session, "x").payload for w in f] for f in firsts]
    assert payloads[0] == payloads[1] == payloads[2]
    half = len(payloads[0][0]) // 2
    assert payloads[0][0][half:] == bytes(half)  # c1 = 0: no randomness, nothing hidden
    # the same construction under a key pair of this test's own decrypts to the initial model
    p = nodes[0].party
    ctx, cc = p.crypto.context, p.crypto.context.cc
    pair = cc.KeyGen()
    zero = Ciphertext(ctx, cc.Encrypt(pair.publicKey, cc.MakeCKKSPackedPlaintext([0.0], 1, 0)))
    model = initial_model(p.schedule)
    own = (zero - zero) + list(p.layout.pack_weights(model.weights[-1], model.biases[-1]))
    assert own.to_message(server.session, "x").payload == payloads[0][0]
    plain = cc.Decrypt(pair.secretKey, own.native)
    plain.SetLength(ctx.slots)
    w, b = p.layout.unpack_weights(np.array(plain.GetRealPackedValue()))
    assert np.allclose(w, model.weights[-1], atol=1e-4)
    assert np.allclose(b, model.biases[-1], atol=1e-4)


def test_a_second_aggregate_for_the_same_round_is_refused():
    """Answered once, a round's aggregate cannot be sent again (it would be added twice)."""
    server, plan, nodes = _roles()
    seen = {}

    def rewrite(step, name, env):
        seen.setdefault((step, name), env)
        return env

    run_training(server, plan, Rewriting(nodes, rewrite))
    again = seen[("sum", "party-0")]
    with pytest.raises(ProtocolError, match="no update of round 0"):
        nodes[0].step(again.to_bytes())


def test_a_server_skipping_the_check_is_refused():
    server, plan, nodes = _roles(rounds=2)

    def rewrite(step, name, env):
        if step == "train" and env.round == 1:
            plain, *_ = _model_parts(env)
            return _with_model_parts(env, [plain])
        return env

    _run_attack(server, plan, nodes, rewrite, match="one sketch from each party")


def test_a_server_skipping_finish_gets_neither_consent_nor_reveal():
    """The last round's sketches arrive with ``finish``: a server that skips it and asks for
    consent and the reveal would have the recipient reveal its own unchecked local layer
    (found by the review). Consent and reveal now need the checked final model."""
    from privfl.messages import Writer
    from privfl.training import schedule as sch

    sched = Schedule(LAYERS, 1, 1, 1, 4, 1.0, 0)
    session, _, plan = _build(_data(count=2), sched, "test", 0)
    reveal_to = plan.names[0]
    nodes = [PartyNode(p, plan.names, reveal_to) for p in session.parties]
    d = sch._Driver(session.server, plan, InProcessTransport(nodes, InProcessRunner()), sch._direct)
    d.aggregate(0, d.relay(0, d.all("train", 0, d.model(0)), "train"))
    end = sched.rounds
    body = Writer().str_(reveal_to).u32(sched.secret_layers).getvalue()
    with pytest.raises(ProtocolError, match="no checked final model"):
        d.all("consent", end, body)
    assert nodes[0].verifier is not None and nodes[0].verifier.pending == 0
    assert not nodes[0].revealed
    d.all("finish", end, d.model(end))  # the honest order still works
    assert nodes[0].verifier.pending is None
    consents = pack_parts([e.body for e in d.all("consent", end, body).values()])
    assert len(unpack_parts(consents)) == 2


# ---------------------------------------------------------------------- decoders fuzzed

SESSION = new_session_id()


def _mutants(data, flips, cut):
    raw = bytearray(data)
    for pos, bit in flips:
        raw[pos % len(raw)] ^= 1 << bit
    return bytes(raw), data[: cut % len(data)]


@given(
    rnd=st.integers(0, 2**32 - 1),
    layers=st.lists(
        st.tuples(
            st.integers(0, 2**32 - 1),
            st.integers(0, 2**32 - 1),
            st.binary(min_size=32, max_size=32),
        ),
        max_size=3,
    ),
    sig=st.binary(min_size=64, max_size=64),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 7)), max_size=3),
    cut=st.integers(0, 10**6),
)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_update_commitments_round_trip_and_mutations_raise_typed_errors_only(
    rnd, layers, sig, flips, cut
):
    c = UpdateCommitment(SESSION, "party-0", rnd, tuple(LayerDigest(*d) for d in layers), sig)
    data = c.to_bytes()
    assert UpdateCommitment.from_bytes(data, SESSION) == c
    for candidate in _mutants(data, flips, cut):
        with contextlib.suppress(ProtocolError):
            UpdateCommitment.from_bytes(candidate, SESSION)


@given(
    rnd=st.integers(0, 2**32 - 1),
    layers=st.lists(
        st.tuples(
            st.binary(min_size=32, max_size=32),
            st.lists(st.integers(0, 2**64 - 1), max_size=6),
        ),
        max_size=3,
    ),
    commitments=st.binary(min_size=32, max_size=32),
    sig=st.binary(min_size=64, max_size=64),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 7)), max_size=3),
    cut=st.integers(0, 10**6),
)
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_sum_checks_round_trip_and_mutations_raise_typed_errors_only(
    rnd, layers, commitments, sig, flips, cut
):
    totals = tuple(d for d, _ in layers)
    sketches = tuple(tuple(v) for _, v in layers)
    c = SumCheck(SESSION, "party-1", rnd, totals, commitments, sketches, sig)
    data = c.to_bytes()
    assert SumCheck.from_bytes(data, SESSION) == c
    for candidate in _mutants(data, flips, cut):
        with contextlib.suppress(ProtocolError):
            SumCheck.from_bytes(candidate, SESSION)
