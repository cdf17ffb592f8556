"""The setup of a training session (:mod:`privfl.training.setup`): its decoders fuzzed, and a
node's checks of the server's plan, in process with real threshold keys. What a deviating
server tries here: substitute a party's pinned identity, misstate a node's rows or nonce,
replay a plan of another session, send the steps out of order."""

from __future__ import annotations

import contextlib
import secrets

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privfl.crypto.identity import IdentityKey
from privfl.errors import InputError, ProtocolError, UnknownPartyError
from privfl.messages import Writer
from privfl.training.setup import NodeHost, party_names
from privfl.training.setup_messages import KeyCheck, KeyChecks, NodeHello, SessionPlan
from privfl.training.twin import Schedule

SCHEDULE = Schedule((6, 5, 4), 1, 2, 2, 4, 1.0, 3)
NONCE = bytes(range(32))


def _plan(k: int = 3, **changes) -> SessionPlan:
    fields = dict(
        server_nonce=NONCE, names=party_names(k), roster=tuple(bytes([i]) * 64 for i in range(k)),
        samples=tuple(range(5, 5 + k)), nonces=tuple(bytes([9 + i]) * 32 for i in range(k)),
        schedule=SCHEDULE, evaluate_every=1, parameters="test",
    )  # fmt: skip
    fields.update(changes)
    return SessionPlan(**fields)


def _mutations(data: bytes, flips, cut):
    raw = bytearray(data)
    for pos, bit in flips:
        raw[pos % len(raw)] ^= 1 << bit
    return bytes(raw), data[: cut % len(data)]


FLIPS = st.lists(st.tuples(st.integers(0, 10**6), st.integers(0, 7)), max_size=3)


@given(k=st.integers(1, 5), flips=FLIPS, cut=st.integers(0, 10**6), junk=st.binary(max_size=200))
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_setup_messages_round_trip_and_mutations_raise_typed_errors_only(k, flips, cut, junk):
    plan = _plan(k)
    assert SessionPlan.from_bytes(plan.to_bytes()) == plan
    hello = NodeHello(NONCE, "party-0", bytes(64), 7, 6, bytes(32))
    assert NodeHello.from_bytes(hello.to_bytes(), NONCE, "party-0") == hello
    for candidate in (*_mutations(plan.to_bytes(), flips, cut), junk):
        with contextlib.suppress(ProtocolError):
            SessionPlan.from_bytes(candidate)
    for candidate in (*_mutations(hello.to_bytes(), flips, cut), junk):
        with contextlib.suppress(ProtocolError):
            NodeHello.from_bytes(candidate, NONCE, "party-0")


SESSION = bytes(16)
SIGNER = IdentityKey()
ROSTER = {"party-0": SIGNER.public_bytes}


@given(
    sketch=st.lists(st.integers(0, 2**64 - 1), max_size=8), flips=FLIPS, cut=st.integers(0, 10**6),
    junk=st.binary(max_size=200),
)  # fmt: skip
@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_key_checks_round_trip_and_mutations_raise_typed_errors_only(sketch, flips, cut, junk):
    """The signed key check and the server's relay of them: every mutation is refused with a
    typed error (a flipped sketch value fails the signature), never accepted altered."""
    data = KeyCheck(SESSION, "party-0", tuple(sketch)).seal(SIGNER)
    check = KeyCheck.from_bytes(data, SESSION, ROSTER)
    assert (check.sender, check.sketch) == ("party-0", tuple(sketch))
    relay = KeyChecks(SESSION, (data, junk)).to_bytes()
    assert KeyChecks.from_bytes(relay, SESSION).items == (data, junk)
    for candidate in (*_mutations(data, flips, cut), junk):
        try:
            got = KeyCheck.from_bytes(candidate, SESSION, ROSTER)
        except ProtocolError:
            continue
        assert got.sketch == tuple(sketch)  # only a change the signature does not cover
    for candidate in (*_mutations(relay, flips, cut), junk):
        with contextlib.suppress(ProtocolError):
            KeyChecks.from_bytes(candidate, SESSION)


@given(data=st.binary(max_size=300))
@settings(max_examples=100, deadline=None)
def test_a_node_answers_any_bytes_with_a_typed_error_or_its_hello(data):
    ident = IdentityKey()
    host = NodeHost("party-0", np.ones((4, 6)), np.zeros(4, dtype=np.int64), ident,
                    {"party-0": ident.public_bytes})  # fmt: skip
    with contextlib.suppress(ProtocolError):
        host.step(data)


def _request(step: str, payload: bytes) -> bytes:
    return Writer().str_(step).bytes_(payload).getvalue()


@pytest.fixture
def hosts():
    rng = np.random.default_rng(0)
    ids = [IdentityKey() for _ in range(3)]
    pinned = {n: i.public_bytes for n, i in zip(party_names(3), ids, strict=True)}
    out = [
        NodeHost(n, rng.uniform(0, 1, (8, 6)), rng.integers(0, 4, 8), i, pinned, parameters="test")
        for n, i in zip(party_names(3), ids, strict=True)
    ]
    hellos = [
        NodeHello.from_bytes(h.step(_request("setup-hello", Writer().bytes_(NONCE).getvalue())),
                             NONCE, h.name)
        for h in out
    ]  # fmt: skip
    honest = _plan(
        roster=tuple(h.identity for h in hellos), samples=tuple(h.samples for h in hellos),
        nonces=tuple(h.nonce for h in hellos),
    )  # fmt: skip
    return out, honest


def _send_plan(host: NodeHost, plan: SessionPlan) -> bytes:
    return host.step(_request("setup-plan", plan.to_bytes()))


def test_a_plan_with_a_substituted_identity_is_refused_before_any_key_share(hosts):
    nodes, honest = hosts
    server_key = IdentityKey().public_bytes  # the server puts its own key in party-1's place
    roster = (honest.roster[0], server_key, honest.roster[2])
    with pytest.raises(UnknownPartyError, match="pinned"):
        _send_plan(nodes[0], _plan(**{**_fields(honest), "roster": roster}))
    assert nodes[0].crypto is None  # no key share was generated


def _fields(plan: SessionPlan) -> dict:
    return {f: getattr(plan, f) for f in plan.__dataclass_fields__ if f != "STEP"}


@pytest.mark.parametrize(
    "change",
    [
        lambda f: {"samples": (f["samples"][0] + 1, *f["samples"][1:])},  # party-0's rows
        lambda f: {"nonces": (secrets.token_bytes(32), *f["nonces"][1:])},  # an old session
        lambda f: {"server_nonce": secrets.token_bytes(32)},  # a plan of another hello
        lambda f: {"parameters": "secure"},  # not the parameter set this operator accepts
    ],
)
def test_a_plan_misstating_the_node_or_of_another_session_is_refused(hosts, change):
    nodes, honest = hosts
    f = _fields(honest)
    with pytest.raises(ProtocolError):
        _send_plan(nodes[0], _plan(**{**f, **change(f)}))
    assert nodes[0].crypto is None


def test_setup_steps_out_of_order_are_refused(hosts):
    nodes, honest = hosts
    with pytest.raises(ProtocolError, match="out of order"):
        nodes[0].step(_request("setup-keys", b""))
    ident = IdentityKey()
    fresh = NodeHost("party-0", np.ones((4, 6)), np.zeros(4, dtype=np.int64), ident,
                     {"party-0": ident.public_bytes})  # fmt: skip
    with pytest.raises(ProtocolError, match="out of order"):
        _send_plan(fresh, honest)  # a plan before the hello


def test_data_that_does_not_fit_the_model_is_refused_with_what_to_fix(hosts):
    nodes, honest = hosts
    wide = Schedule((7, 5, 4), 1, 2, 2, 4, 1.0, 3)
    with pytest.raises(InputError, match="does not fit the model"):
        _send_plan(nodes[0], _plan(**{**_fields(honest), "schedule": wide}))
