"""The nodes' check of the joint key in encrypted training (issue 28): a deviating server that
substitutes a joint key it knows, gives nodes different joint keys, or drops a party's
contribution is refused by the nodes before any of them computes anything from the joint key
(relinearisation share) or encrypts under it. Real threshold keys (OpenFHE), the setup steps
of a deployment over the in-process transport; the server's deviation is a transport that
rewrites its "setup-joint" messages."""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.crypto.identity import IdentityKey
from privfl.crypto.threshold import KeyGenShare, ThresholdContext
from privfl.crypto.threshold.keycheck import joint_rows, row_moduli, sketch, sketch_coefficients
from privfl.errors import ProtocolError, UnknownPartyError
from privfl.messages import Reader, Writer
from privfl.runner import InProcessRunner
from privfl.threshold import ThresholdParty, ThresholdServer
from privfl.training.config import secret_layout
from privfl.training.params import training_parameters
from privfl.training.schedule import InProcessTransport
from privfl.training.setup import NodeHost, party_names, run_setup
from privfl.training.setup_messages import KeyCheck, KeyChecks, SessionPlan
from privfl.training.twin import Schedule

SCHEDULE = Schedule((6, 5, 4), 1, 2, 2, 4, 1.0, 3)
K = 3

Rewrite = Callable[[str, bytes, ThresholdContext, bytes, list[KeyGenShare]], bytes]


class DeviatingServer:
    """The server's transport: delivers what the honest server sends, except that ``rewrite``
    replaces the payload of ``step`` per node; records the nodes' key shares (public)."""

    def __init__(
        self, inner: InProcessTransport, ctx: ThresholdContext, rewrite: Rewrite, step: str
    ) -> None:
        self.inner, self.ctx, self.rewrite, self.step = inner, ctx, rewrite, step
        self.shares: list[KeyGenShare] = []
        self.steps: list[str] = []
        self.session = b""

    def exchange(self, step: str, messages: Mapping[str, bytes]) -> dict[str, bytes]:
        self.steps.append(step)
        if step == "setup-plan":
            self.session = SessionPlan.from_bytes(_payload(next(iter(messages.values())))).session
        if step == self.step:
            out = {}
            for name, data in messages.items():
                fake = self.rewrite(name, _payload(data), self.ctx, self.session, self.shares)
                out[name] = Writer().str_(step).bytes_(fake).getvalue()
            messages = out
        got = self.inner.exchange(step, messages)
        if step == "setup-plan":
            self.shares = [
                KeyGenShare.from_bytes(got[n], self.ctx, self.session) for n in party_names(K)
            ]
        return got


def _payload(request: bytes) -> bytes:
    r = Reader(request)
    r.str_(32)
    return r.bytes_()


def _joint_of(ctx: ThresholdContext, session: bytes, shares: list[KeyGenShare]) -> bytes:
    server = ThresholdServer("server", ctx, session)
    return bytes(server.combine_keygen_shares(shares).to_bytes())


def _own_key(_name: str, _honest: bytes, ctx, session, _shares) -> bytes:
    """The server's own joint key: it plays every party itself, so it knows the secret."""
    fakes = [ThresholdParty(n, i, ctx, session) for i, n in enumerate(party_names(K))]
    return _joint_of(ctx, session, [p.keygen_share() for p in fakes])


_KNOWN: dict[bytes, bytes] = {}


def _split(name: str, honest: bytes, ctx, session, shares) -> bytes:
    """party-0 gets a key the server knows, the others the honest one."""
    if name != "party-0":
        return honest
    if session not in _KNOWN:
        _KNOWN[session] = _own_key(name, honest, ctx, session, shares)
    return _KNOWN[session]


def _drop(_name: str, _honest: bytes, ctx, session, shares) -> bytes:
    """party-2's contribution dropped, the server's own in its place (it knows that part)."""
    own = ThresholdParty("party-2", 2, ctx, session).keygen_share()
    return _joint_of(ctx, session, [*shares[:2], own])


def _honest(_name: str, honest: bytes, *_args) -> bytes:
    return honest


def _setup(rewrite: Rewrite, step: str = "setup-joint"):
    rng = np.random.default_rng(1)
    names = party_names(K)
    ids = [IdentityKey() for _ in names]
    pinned = {n: i.public_bytes for n, i in zip(names, ids, strict=True)}
    layout = secret_layout(SCHEDULE)
    ctx = ThresholdContext.for_parameters(training_parameters(layout, "test"), K)
    hosts = [
        NodeHost(n, rng.uniform(0, 1, (8, 6)), rng.integers(0, 4, 8), i, pinned, None, ctx, "test")
        for n, i in zip(names, ids, strict=True)
    ]
    transport = DeviatingServer(InProcessTransport(hosts, InProcessRunner()), ctx, rewrite, step)
    return hosts, transport, lambda: run_setup(transport, K, SCHEDULE, "test", context=ctx)


@pytest.mark.parametrize("rewrite", [_own_key, _split, _drop], ids=["own", "split", "drop"])
def test_a_server_that_tampers_with_the_joint_key_is_refused_before_any_use(rewrite):
    hosts, transport, run = _setup(rewrite)
    with pytest.raises(ProtocolError, match="not the sum of the parties' contributions"):
        run()
    # no node took the joint public key (keygen_mult_share loads it) nor built its role
    assert all(h.crypto.public_key is None and h.node is None for h in hosts)
    assert transport.steps[-1] == "setup-check"
    # the refusing node stays refused: a server that carries on gets nothing more from it
    refused = hosts[0]
    with pytest.raises(ProtocolError, match="refused a setup step"):
        refused.step(Writer().str_("setup-keys").bytes_(b"").getvalue())
    assert refused.node is None


def test_honest_setup_passes_the_key_check_and_every_node_holds_the_joint_key():
    hosts, transport, run = _setup(_honest)
    _server, plan = run()
    assert transport.steps == ["setup-hello", "setup-plan", "setup-joint", "setup-check",
                               "setup-keys"]  # fmt: skip
    assert all(h.node is not None and h.crypto.public_key is not None for h in hosts)
    assert plan.names == party_names(K)


def _drop_check(_name: str, payload: bytes, _ctx, session, _shares) -> bytes:
    """The relay of the signed checks without party-2's."""
    checks = KeyChecks.from_bytes(payload, session)
    return KeyChecks(session, checks.items[:2]).to_bytes()


def _forge_check(_name: str, payload: bytes, _ctx, session, _shares) -> bytes:
    """party-2's check replaced by one the server signed itself (any sketch it likes)."""
    checks = KeyChecks.from_bytes(payload, session)
    forged = KeyCheck(session, "party-2", (1, 2, 3)).seal(IdentityKey())
    return KeyChecks(session, (*checks.items[:2], forged)).to_bytes()


@pytest.mark.parametrize(
    ("rewrite", "error", "match"),
    [(_drop_check, ProtocolError, "no key check from"),
     (_forge_check, UnknownPartyError, "pinned key")],
    ids=["drop", "forge"],
)  # fmt: skip
def test_a_server_that_drops_or_forges_a_key_check_is_refused(rewrite, error, match):
    hosts, _, run = _setup(rewrite, "setup-check")
    with pytest.raises(error, match=match):
        run()
    assert all(h.crypto.public_key is None and h.node is None for h in hosts)


@given(seed=st.binary(min_size=16, max_size=16), parts=st.integers(1, 4))
@settings(max_examples=30, deadline=None)
def test_sketches_are_linear_in_the_rows(seed, parts):
    """The identity the check rests on: the sum of the parties' sketches is the sketch of the
    coefficient-wise sum of their rows (mod each row's modulus)."""
    ctx = _CTX
    moduli = row_moduli(ctx)
    rng = np.random.default_rng(int.from_bytes(seed[:8], "big"))
    rows = [
        np.stack([rng.integers(0, int(q), ctx.ring, dtype=np.uint64) for q in moduli])
        for _ in range(parts)
    ]
    total = rows[0].copy()
    for extra in rows[1:]:
        total = np.stack([(a + b) % q for a, b, q in zip(total, extra, moduli, strict=True)])
    coeffs = sketch_coefficients(seed, b"joint", len(moduli), ctx.ring)
    parts_sum = [
        sum(v) % int(q)
        for v, q in zip(zip(*(sketch(r, moduli, coeffs) for r in rows)), moduli, strict=True)
    ]
    assert tuple(parts_sum) == sketch(total, moduli, coeffs)
    pk = total[: len(ctx.public_key_shape.b_index)].tobytes()
    sw = total[len(ctx.public_key_shape.b_index) :].tobytes()
    assert np.array_equal(joint_rows(ctx, pk, sw), total)


_CTX = ThresholdContext.for_parameters(training_parameters(secret_layout(SCHEDULE), "test"), K)
