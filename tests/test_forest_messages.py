"""RevFRF messages under attack: every decoder and role endpoint fuzzed (only typed errors,
bounded time and memory), sizes bounded by the session (issue 14 findings 4, 5), signed and
fresh revocation requests (finding 12), and role isolation (no role holds another's secret)."""

import dataclasses
import time
import types

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from gmpy2 import mpz
from hypothesis import given, settings
from hypothesis import strategies as st

from _forest_fuzz import decode_safely, payloads
from privfl.crypto import dtpkc
from privfl.errors import MalformedMessageError, UnknownPartyError, WrongSessionError
from privfl.forest import RevFRF, branch, schedule
from privfl.forest import messages as fm
from privfl.forest.kgc import Hello, KeyGrant
from privfl.forest.query_auth import Query
from privfl.forest.secure_ops import BlindedRequest, HoLTResult, RefreshBatch, Reply
from privfl.messages import Writer

KEYS = {"key_bits": 512, "allow_insecure_key_bits": True}  # INSECURE, for speed only


def build(level=2):
    """A small forest that went through every protocol, and the messages it exchanged."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(40, 3))
    parts = {"a": x[:, :1], "b": x[:, 1:2], "c": x[:, 2:]}
    y = (x[:, 0] + x[:, 1] > 0).astype(int)
    model = RevFRF(n_trees=2, max_depth=3, seed=1, **KEYS)
    log = []
    send = model.runner.send
    model.runner.send = lambda ch, data: log.append(bytes(data)) or send(ch, data)
    model.fit(parts, y)
    model.predict({k: v[:3] for k, v in parts.items()})  # FRF-Test: plain-compare only
    cs, holder = model.center_server, "a"  # HoAdd on its own (HoLT no longer runs it)
    c = dtpkc.encrypt(cs._roster[holder].public, 5)
    schedule.drive(model.runner, cs.secure_add(c, c, holder), model._peers())
    model.predict_plain({k: v[:3] for k, v in parts.items()})
    model.predict_for("r", {k: v[0] for k, v in parts.items()})
    target = max(model.report().nodes_per_participant.items(), key=lambda kv: kv[1])[0]
    model.revoke(target, level=level)
    return model, log, y


@pytest.fixture(scope="module")
def session():
    return build()


def header(data):
    return fm.CODEC.decode(data)[0]


def pair(log, ask, answer):
    """The first (request, reply) of these steps, next to each other in the log."""
    for i, data in enumerate(log[:-1]):
        if header(data).step == ask and header(log[i + 1]).step == answer:
            return data, log[i + 1]
    raise AssertionError(f"no {ask} -> {answer} exchange")


def sender_key(cs, data):
    """The public key of a message's claimed sender, as the receiving role looks it up (a
    name outside the roster is refused there with UnknownPartyError)."""
    name = header(data).sender
    if name not in cs._roster:
        raise UnknownPartyError(f"unknown sender {name!r}")
    return cs._roster[name].public


def first(log, step):
    return next(d for d in log if header(d).step == step)


def cases(model, log):
    """name -> (a valid message, its decoder, a check of the decoded sizes)."""
    cs, cc = model.center_server, model.computation_provider
    cfg, params = cs.config, cs._material().sk.public.params
    node_ask, proposals = pair(log, "node-request", "proposals")
    owner = header(proposals).sender
    node_req = fm.NodeRequest.from_bytes(node_ask, cfg, 1)
    plain_ask, plain_answer = pair(log, "plain-compare", "plain-compared")
    plain_req = branch.TestRequest.from_bytes(plain_ask, cfg, 64, 3)
    hoadd_ask, hoadd_answer = pair(log, "hoadd-request", "hoadd-response")
    hoadd = BlindedRequest.from_bytes(hoadd_ask, "hoadd-request", cfg, params)
    active_holt, active_hoadd = (next(  # a comparison for a holder the CC still serves
        d for d in log if header(d).step == step
        and BlindedRequest.from_bytes(d, step, cfg, params).holder not in model.revoked
    ) for step in ("holt-request", "hoadd-request"))  # fmt: skip
    op, holder = hoadd.op, cs._roster[hoadd.holder].public
    joint = dtpkc.joint_public_key(holder, cs._material().sk.public)
    return {
        "node-request": (node_ask, lambda b: fm.NodeRequest.from_bytes(b, cfg, 1),
                         lambda m: m.members.size == cfg.n_samples and len(m.columns) <= 1),
        "proposals": (proposals, lambda b: fm.Proposals.from_bytes(b, cfg, node_req, owner),
                      lambda m: all(v.size == node_req.members.sum() for v in m.go_right)
                      and len(m.columns) <= cfg.candidates),
        "split-upload": (first(log, "split-upload"), lambda b: fm.CiphertextReply.from_bytes(
            b, "split-upload", cfg, sender_key(cs, b), None, (0, 0, 0)),
            lambda m: 0 < m.value.c1 < params.n2),
        "plain-compare": (plain_ask, lambda b: branch.TestRequest.from_bytes(b, cfg, 64, 3),
                          lambda m: all(i.rows.size == 3 for i in m.items)),
        "plain-compared": (plain_answer, lambda b: branch.read_answer(
            b, cfg, header(plain_answer).sender, plain_req),
            lambda m: len(m) == len(plain_req.items)),
        "hoadd-request": (hoadd_ask, lambda b: BlindedRequest.from_bytes(
            b, "hoadd-request", cfg, params), lambda m: len(m.values) == len(m.shares) == 2),
        "hoadd-response": (hoadd_answer, lambda b: Reply.from_bytes(
            b, "hoadd-response", cfg, "CC", op, joint), lambda m: m.op == op),
        "holt-request": (first(log, "holt-request"),
                         lambda b: BlindedRequest.from_bytes(b, "holt-request", cfg, params),
                         lambda m: len(m.values) == len(m.shares) == 2),
        "holt-result": (first(log, "holt-result"), lambda b: HoLTResult.from_bytes(
            b, "holt-result", cfg, "CC", params), lambda m: len(m.signature) <= 64),
        "refreshed": (first(log, "refreshed"), lambda b: RefreshBatch.from_bytes(
            b, "refreshed", cfg, "CC", params), lambda m: len(m.values) <= cfg.max_internal_nodes),
        "query": (first(log, "query"), lambda b: Query.from_bytes(
            b, cfg, "r", cs._requesters["r"][0], 3), lambda m: len(m.values) == 3),
        "revocation": (first(log, "revocation"),
                       lambda b: fm.RevocationRequest.from_bytes(b, cfg), lambda m: True),
        "cs-keys": (first(log, "cs-keys"), lambda b: KeyGrant.from_bytes(b, "cs-keys", cfg),
                    lambda m: len(m.roster) <= 4096),
        "participant-keys": (first(log, "participant-keys"),
                             lambda b: KeyGrant.from_bytes(b, "participant-keys", cfg),
                             lambda m: len(m.roster) <= 4096),
        "participant-hello": (first(log, "participant-hello"),
                              lambda b: Hello.from_bytes(b, "participant-hello", cfg),
                              lambda m: len(m.verify_key) == 32),
        # the role endpoints: whatever arrives, only typed errors
        **{f"participant {step}": endpoint(model, log, step) for step in PARTICIPANT_STEPS},
        "cc holt-request": (active_holt, cc.handle, lambda m: True),
        "cc hoadd-request": (active_hoadd, cc.handle, lambda m: True),
        "cc refresh-request": (first(log, "refresh-request"), cc.handle, lambda m: True),
    }  # fmt: skip


PARTICIPANT_STEPS = (
    "node-request", "split-request", "plain-compare", "forget", "partial-decrypt"
)  # fmt: skip


def endpoint(model, log, step):
    """A message of ``step`` the CS sent, and the endpoint of the participant that answered."""
    for i, data in enumerate(log[:-1]):
        answering = header(log[i + 1]).sender
        if header(data).step == step and answering not in model.revoked:
            return data, model.participants[answering].handle, lambda m: True
    raise AssertionError(f"no {step} in the log")


NAMES = [
    "node-request", "proposals", "split-upload", "plain-compare",
    "plain-compared", "hoadd-request", "hoadd-response", "holt-request", "holt-result",
    "refreshed", "query", "revocation", "cs-keys", "participant-keys", "participant-hello",
    *(f"participant {step}" for step in PARTICIPANT_STEPS),
    "cc holt-request", "cc hoadd-request", "cc refresh-request",
]  # fmt: skip


@pytest.mark.parametrize("name", [n for n in NAMES if not n.startswith(("participant ", "cc "))])
def test_valid_messages_decode(session, name):
    model, log, _ = session
    valid, decoder, check = cases(model, log)[name]
    assert check(decoder(valid))


@pytest.mark.parametrize("name", NAMES)
@given(data=st.data())
@settings(max_examples=40)
def test_fuzzed_messages_raise_only_typed_errors_in_bounded_time(session, name, data):
    model, log, _ = session
    valid, decoder, check = cases(model, log)[name]
    out = decode_safely(decoder, data.draw(payloads(valid)))
    if out is not None:
        assert check(out)


# ------------------------------------------------------------------ finding 5: sizes
def test_a_node_request_for_a_million_candidates_is_refused_at_once(session):
    model = session[0]
    cfg = model.center_server.config
    participant = next(iter(model.participants.values()))
    mask = np.ones(cfg.n_samples, dtype=bool)
    for probe, candidates in [(32, 10**6), (10**6, 8), (2**32 - 1, 2**32 - 1)]:
        data = fm.NodeRequest(0, 0, mask, (0,), probe, candidates).to_bytes(cfg)
        start = time.process_time()
        with pytest.raises(MalformedMessageError, match="agreed"):
            participant.handle(data)
        assert time.process_time() - start < 0.1
    body = Writer().u32(0).u32(0).bytes_(b"\xff" * 5).u32(2**32 - 1)  # 4 billion columns
    with pytest.raises(MalformedMessageError, match="columns"):
        participant.handle(fm.CODEC.encode("node-request", cfg.session, "CS", body.getvalue()))
    for mask_bytes in (b"\xff" * 4, b"\xff" * 6, b"\xff" * 1000):  # 40 samples = 5 bytes
        body = Writer().u32(0).u32(0).bytes_(mask_bytes).u32(0).u32(32).u32(8)
        with pytest.raises(MalformedMessageError):
            participant.handle(fm.CODEC.encode("node-request", cfg.session, "CS", body.getvalue()))
    body = Writer().u32(99).u32(0).bytes_(b"\xff" * 5).u32(0).u32(32).u32(8)  # no tree 99
    with pytest.raises(MalformedMessageError, match="tree 99"):
        participant.handle(fm.CODEC.encode("node-request", cfg.session, "CS", body.getvalue()))


def test_a_reply_about_another_node_is_stale(session):
    model, log, _ = session
    cfg = model.center_server.config
    node_ask, proposals = pair(log, "node-request", "proposals")
    request = fm.NodeRequest.from_bytes(node_ask, cfg, 1)
    other = dataclasses.replace(request, node=request.node + 1)
    with pytest.raises(fm.StaleMessageError):
        fm.Proposals.from_bytes(proposals, cfg, other, header(proposals).sender)
    with pytest.raises(UnknownPartyError):  # and from whom it was expected
        fm.Proposals.from_bytes(proposals, cfg, request, "someone else")


# ------------------------------------------------------------------ finding 12: revocation
def revocation(model, name, timestamp_ms=None, nonce=b"N" * 16, session=None, key=None):
    p = model.participants[name]
    cfg = p._config
    signed_cfg = cfg if session is None else dataclasses.replace(cfg, session=session)
    ts = int(time.time() * 1000) if timestamp_ms is None else timestamp_ms
    request = fm.RevocationRequest.sign(key or p._signing_key, signed_cfg, name, nonce, ts)
    return request.to_bytes(cfg)


def test_revocation_requests_must_be_fresh_unreplayed_and_bound_to_the_session():
    model, _, _ = build(level=1)
    name = next(n for n in model.participants if n not in model.revoked)
    now = int(time.time() * 1000)
    for ts, match in [(0, "older"), (now - 301_000, "older"), (now + 3_600_000, "future")]:
        with pytest.raises(fm.StaleMessageError, match=match):
            model.revoke(name, request=revocation(model, name, ts))
    with pytest.raises(UnknownPartyError, match="invalid signature"):  # signed for another run
        model.revoke(name, request=revocation(model, name, session=b"S" * 16))
    other = fm.SessionConfig(b"S" * 16, 40, 2, 3, 32, 8, allow_insecure_key_bits=True)
    p = model.participants[name]
    foreign = fm.RevocationRequest.sign(p._signing_key, other, name, b"F" * 16, now).to_bytes(other)
    with pytest.raises(WrongSessionError):
        model.revoke(name, request=foreign)
    valid = revocation(model, name, nonce=b"R" * 16)
    model.revoke(name, request=valid)
    assert name in model.revoked
    # the same bytes again reach the CS as a replay (the facade's own check bypassed)
    cs = model.center_server
    with pytest.raises(fm.StaleMessageError, match="replayed"):
        schedule.drive(model.runner, cs.revoke(valid), model._peers())


def test_a_revocation_request_names_its_sender(session):
    model, _, _ = session
    name = next(n for n in model.participants if n not in model.revoked)
    cfg = model.center_server.config
    p = model.participants[name]
    request = fm.RevocationRequest.sign(
        p._signing_key, cfg, name, b"X" * 16, int(time.time() * 1e3)
    )
    body = Writer().str_(name).bytes_(request.nonce).u64(request.timestamp_ms)
    relabelled = fm.CODEC.encode("revocation", cfg.session, "mallory", body.bytes_(
        request.signature).getvalue())  # fmt: skip
    with pytest.raises(UnknownPartyError, match="mallory"):
        model.revoke(name, request=relabelled)
    forged = revocation(model, name, key=Ed25519PrivateKey.generate())
    with pytest.raises(UnknownPartyError, match="invalid signature"):
        model.revoke(name, request=forged)


# ------------------------------------------------------------------ role isolation
LEAVES = (str, bytes, float, bool, type(None), np.ndarray, np.generic, type(mpz(0)), int)
SKIP = (types.ModuleType, types.FunctionType, types.BuiltinFunctionType, types.MethodType, type)


def reachable(root):
    """Every object reachable from ``root`` through attributes, containers and fields."""
    seen, stack, out = set(), [root], []
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, SKIP):
            continue
        seen.add(id(obj))
        out.append(obj)
        if isinstance(obj, LEAVES):
            continue
        if isinstance(obj, dict):
            stack += [*obj.keys(), *obj.values()]
        elif isinstance(obj, list | tuple | set | frozenset):
            stack += list(obj)
        else:
            if dataclasses.is_dataclass(obj):
                stack += [getattr(obj, f.name) for f in dataclasses.fields(obj)]
            stack += list(getattr(obj, "__dict__", {}).values())
    return out


def integers(root):
    return {int(o) for o in reachable(root) if isinstance(o, int | type(mpz(0)))}


def test_no_role_holds_another_roles_secret(session):
    model, _, y = session
    cs, cc, kgc = model.center_server, model.computation_provider, model._kgc
    material = cs._material()
    theta = {name: p._sk.theta for name, p in model.participants.items()}
    requester = model._requesters["r"]._sk.theta
    kgc_secret = {kgc._secret.p, kgc._secret.q, kgc._secret.lam}
    lam1, lam2, theta_cs = material.lam1.value, cc._lam2.value, material.sk.theta
    signing = {id(p._signing_key) for p in model.participants.values()} | {id(cc._signing_key)}

    in_cs = integers(cs)
    assert theta_cs in in_cs and lam1 in in_cs  # the walk does find what the CS holds
    assert not in_cs & ({*theta.values(), requester, lam2} | kgc_secret)
    assert not {id(o) for o in reachable(cs)} & signing
    in_cc = integers(cc)
    assert lam2 in in_cc
    assert not in_cc & ({*theta.values(), requester, lam1, theta_cs} | kgc_secret)
    for name, p in model.participants.items():
        mine = integers(p)
        assert theta[name] in mine
        others = {t for n, t in theta.items() if n != name}
        assert not mine & (others | {requester, lam1, lam2, theta_cs} | kgc_secret)
        arrays = [o for o in reachable(p) if isinstance(o, np.ndarray)]
        assert not any(a.shape == y.shape and np.array_equal(a, y) for a in arrays)  # no labels
    assert not integers(model._requesters["r"]) & ({*theta.values(), lam1, lam2, theta_cs})
    # the KGC keeps no secret key it issued
    assert not integers(kgc) & ({*theta.values(), requester, lam1, lam2, theta_cs})


def test_the_isolation_walk_would_find_a_leaked_secret(session):
    model, _, _ = session
    leaked = model.computation_provider._lam2.value

    class Leaky:
        def __init__(self):
            self.cache = {"x": [(1, leaked)]}

    assert leaked in integers(Leaky())


@pytest.fixture(scope="module")
def fuzz_target(session):
    """The participant the structure-aware fuzzing attacks and its split ids, taken once, so
    every example draws from the same ids (hypothesis needs a fixed strategy)."""
    model = session[0]
    name = next(n for n in model.participants if n not in model.revoked)
    participant = model.participants[name]
    return participant, sorted(participant._splits) or [(0, 0)]


@given(st.data())
@settings(max_examples=80)
def test_well_framed_requests_with_wrong_sizes_reach_a_participant_only_as_typed_errors(
    session, fuzz_target, data
):
    """Structure-aware fuzzing: the real encoders, with sizes and ids a hostile CS picks.
    Each example starts from the same participant state (a 'forget' is undone after it)."""
    model = session[0]
    cfg = model.center_server.config
    participant, splits = fuzz_target
    saved_splits, saved_pending = dict(participant._splits), participant._pending
    saved_tests = participant._tests.to_bytes()
    ids = st.one_of(st.sampled_from(splits), st.tuples(st.integers(0, 3), st.integers(0, 40)))
    bits = st.integers(0, 90).map(lambda n: np.ones(n, dtype=bool))
    kind = data.draw(st.sampled_from(["plain-compare", "forget", "node", "split", "value"]))
    if kind == "plain-compare":
        items = data.draw(st.lists(st.tuples(ids, bits), max_size=4))
        rnd = data.draw(st.integers(0, 3))
        parent = branch.RoutedRows(participant.name, rnd, 0, 1, np.ones(3, bool), bytes(64))
        payload = branch.TestRequest(rnd, tuple(
            branch.TestItem(*i, m, data.draw(st.sampled_from([None, parent]))) for i, m in items
        )).to_bytes(cfg)  # fmt: skip
    elif kind == "forget":
        items = data.draw(st.lists(st.tuples(ids, bits), max_size=4))
        message = fm.NodeBatch(kind, tuple(i for i, _ in items), tuple(m for _, m in items))
        payload = message.to_bytes(cfg, "CS")
    elif kind == "node":
        columns = tuple(data.draw(st.lists(st.integers(0, 3), max_size=3)))
        tree, node = data.draw(ids)
        probe, count = data.draw(st.sampled_from([(32, 8), (2, 1), (32, 9)]))
        payload = fm.NodeRequest(tree, node, data.draw(bits), columns, probe, count).to_bytes(cfg)
    else:
        tree, node = data.draw(ids)
        step = "split-request" if kind == "split" else "value-request"
        children = (node + 1, node + 2) if kind == "split" else (0, 0)
        index = data.draw(st.integers(0, 50))
        payload = fm.NodeQuery(step, tree, node, index, children).to_bytes(cfg)
    try:
        decode_safely(participant.handle, payload)
    finally:
        participant._splits.clear()
        participant._splits.update(saved_splits)
        participant._pending = saved_pending
        participant._tests = branch.TestGate.from_bytes(saved_tests)


def test_a_plain_comparison_mask_must_cover_exactly_the_rows_held(session):
    model = session[0]
    cfg = model.center_server.config
    participant = next(p for p in model.participants.values() if p._splits)
    held = participant._rows.shape[0]
    node = sorted(participant._splits)[0]
    for size in (held - 1, held + 1, 0):
        ask = branch.TestRequest(9, (branch.TestItem(*node, np.ones(size, dtype=bool)),))
        with pytest.raises(MalformedMessageError, match="mask"):
            participant.handle(ask.to_bytes(cfg))


@given(st.data())
@settings(max_examples=60)
def test_well_framed_replies_with_wrong_sizes_reach_the_cs_only_as_typed_errors(session, data):
    """Proposals and CC replies built by the real encoders with hostile sizes and values."""
    model, log, _ = session
    cfg = model.center_server.config
    node_ask, proposals = pair(log, "node-request", "proposals")
    owner = header(proposals).sender
    request = fm.NodeRequest.from_bytes(node_ask, cfg, 1)
    n_node = int(request.members.sum())
    count = data.draw(st.integers(0, 10))
    masks = tuple(
        np.ones(data.draw(st.sampled_from([n_node, n_node - 1, n_node + 1, 0])), dtype=bool)
        for _ in range(count)
    )
    columns = tuple(data.draw(st.sampled_from([0, 1])) for _ in range(count))
    reply = fm.Proposals(request.tree, request.node, columns, masks).to_bytes(cfg, owner)
    out = decode_safely(lambda b: fm.Proposals.from_bytes(b, cfg, request, owner), reply)
    if out is not None:
        assert all(m.size == n_node for m in out.go_right) and len(out.columns) <= cfg.candidates
    params = model.center_server._material().sk.public.params
    values = data.draw(st.lists(st.integers(0, 2 * int(params.n2)), min_size=2, max_size=2))
    body = Writer().u64(1).str_("b")
    for v in values:
        body.uint(v).uint(values[0]).uint(v)  # C1, C2, a PSDec1 share: any integers
    crafted = fm.CODEC.encode("hoadd-request", cfg.session, "CS", body.getvalue())
    decode_safely(model.computation_provider.handle, crafted)
