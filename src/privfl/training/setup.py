"""The setup of a training session as steps over a :class:`~.schedule.Transport`: the party
nodes introduce themselves, agree on the public plan and generate the threshold key jointly
(no dealer), before :func:`~.schedule.run_training` runs the rounds. In process
(:func:`~.federated.train_federated`) and over Flower alike.

Steps (exchange names; one exchange = one Flower round in a deployment)::

    "setup-hello"  server nonce          -> NodeHello (name, identity, rows, features, nonce)
    "setup-plan"   SessionPlan           -> KeyGenShare (or an ack without encrypted layers)
    "setup-joint"  JointPublicKeys       -> KeyCheck (signed sketch of the node's own share)
    "setup-check"  KeyChecks (all nodes) -> MultKeyShare, once the joint key checked out
    "setup-keys"   EvaluationKeys        -> ack; the node now holds its PartyNode

What a node checks before it generates its key share (:meth:`NodeHost._plan`): the parameter
set is the one its operator accepts (no downgrade to the insecure test ring), the plan's
roster is the one its operator pinned (every name, every public identity: a server that put
its own key in place of a party's could otherwise receive that party's sealed shares), its own
entry (identity, row count, nonce), its data against the model's widths and the initial
model's range, and the schedule (:func:`~.config.check_schedule`). The session id derives from
every node's nonce (:func:`~.setup_messages.session_id`).

What a node checks before it uses the joint key (:meth:`NodeHost._check`, before its
relinearisation share, computed from the joint switching key, and before anything is
encrypted under the joint public key): every node's signed sketch of its own contribution,
relayed by the server and verified against the pinned roster, adds up to the sketch of the
joint public and switching keys (:mod:`privfl.crypto.threshold.keycheck`). A server that
substitutes a key it knows, drops or alters a contribution, or gives nodes different joint
keys is refused there, with the reason. What the server learns: each
party's name, public identity, row count and feature count, and the public key material.
"""

from __future__ import annotations

import secrets
from collections.abc import Mapping, Sequence
from typing import Any

from privfl._typing import FloatArray, IntArray
from privfl.crypto.identity import IdentityKey
from privfl.crypto.threshold.keycheck import joint_rows, own_sketch, verify_sketches
from privfl.errors import InputError, MalformedMessageError, ProtocolError, UnknownPartyError
from privfl.messages import Reader, Writer
from privfl.training.config import check_schedule, secret_layout
from privfl.training.messages import CODEC
from privfl.training.node import PartyNode
from privfl.training.packing import chebyshev_sigmoid
from privfl.training.party import Party
from privfl.training.server import Server
from privfl.training.setup_messages import NONCE_BYTES, KeyCheck, KeyChecks, NodeHello, SessionPlan
from privfl.training.tickets import TrainingPlan
from privfl.training.twin import Schedule, initial_model, plain_forward

__all__ = ["SETUP_STEPS", "NodeHost", "check_initial_range", "party_names", "run_setup"]

SETUP_STEPS = ("setup-hello", "setup-plan", "setup-joint", "setup-check", "setup-keys")
ACK = "setup-ack"
MAX_SETUP_BYTES = 1 << 31


def party_names(count: int) -> tuple[str, ...]:
    """The parties' names in a session: ``party-0`` .. ``party-{count-1}``."""
    return tuple(f"party-{k}" for k in range(count))


def _request(step: str, payload: bytes) -> bytes:
    return Writer().str_(step).bytes_(payload).getvalue()


def _ack(session: bytes, sender: str) -> bytes:
    return CODEC.encode(ACK, session, sender, b"")


def check_initial_range(parties: Sequence[tuple[FloatArray, IntArray]], schedule: Schedule) -> None:
    """The data must keep the initial model's encrypted pre-activations inside the sigmoid's
    range (InputError naming the party, the layer and the range)."""
    model = initial_model(schedule)
    t = schedule.plain_layers
    low, high = schedule.sigmoid_range
    for k, (x, _) in enumerate(parties):
        h = plain_forward(model.weights[:t], model.biases[:t], x)[-1]
        for layer in range(t, model.layers):
            u = h @ model.weights[layer].T + model.biases[layer]
            h = chebyshev_sigmoid(u, low, high, schedule.sigmoid_degree)
            if u.min() < low or u.max() > high:
                raise InputError(
                    f"party {k}: the initial model's layer-{layer + 1} pre-activations reach "
                    f"[{u.min():.2f}, {u.max():.2f}], outside the sigmoid range [{low}, {high}]; "
                    "scale the inputs or declare a wider range (and a higher degree)"
                )


class NodeHost:
    """One party's node for a whole session, run by that party: its rows (features, labels
    already mapped to ``0..C-1`` with the agreed class list), its identity key, the roster its
    operator pinned (name -> public identity), and ``reveal_to`` (the party its operator
    agrees may receive the final layers, or None). :meth:`step` answers the setup steps (module
    doc), then every training envelope through its :class:`~.node.PartyNode`."""

    def __init__(
        self,
        name: str,
        x: FloatArray,
        y: IntArray,
        identity: IdentityKey,
        pinned: Mapping[str, bytes],
        reveal_to: str | None = None,
        context: Any = None,
        parameters: str = "secure",
    ) -> None:
        """``parameters``: the parameter set this node's operator accepts (a plan naming
        another, e.g. a server downgrading to the insecure ``"test"`` ring, is refused).
        ``context``: a :class:`~privfl.crypto.threshold.ThresholdContext` to share with
        other roles in this process (public parameters only; default: the node's own)."""
        if x.ndim != 2 or y.shape != (x.shape[0],) or not x.shape[0]:
            raise InputError(f"{name}: give X with one row per label (at least one row)")
        self.name, self.x, self.y = name, x, y
        self.identity = identity
        self.pinned = dict(pinned)
        if self.pinned.get(name) != identity.public_bytes:
            raise UnknownPartyError(f"the pinned roster does not hold {name}'s identity")
        self.reveal_to = reveal_to
        self.context = context
        self.parameters = parameters
        self.stage = 0
        self.failed = False
        self.nonce = secrets.token_bytes(NONCE_BYTES)
        self.server_nonce = b""
        self.plan: SessionPlan | None = None
        self.crypto: Any = None
        self._own: Any = None  # this node's rows of the joint key (its own contribution)
        self._joint_key: Any = None
        self._joint_bytes = b""
        self.party: Party | None = None
        self.node: PartyNode | None = None

    def step(self, data: bytes) -> bytes:
        """The server's message -> this node's answer (setup steps in order, then training)."""
        if self.node is not None:
            return self.node.step(data)
        r = Reader(data, "setup request")
        step, payload = r.str_(32), r.bytes_(MAX_SETUP_BYTES)
        r.end()
        if self.failed:
            raise ProtocolError(f"{self.name} refused a setup step of this session; start anew")
        if self.stage >= len(SETUP_STEPS) or step != SETUP_STEPS[self.stage]:
            raise ProtocolError(f"{self.name} got {step!r} out of order")
        self.stage += 1
        handler = (self._hello, self._plan, self._joint, self._check, self._keys)[self.stage - 1]
        try:
            return handler(payload)
        except Exception:
            self.failed = True  # a refused step is final: no later step runs on unchecked keys
            raise

    def _hello(self, payload: bytes) -> bytes:
        r = Reader(payload, "setup hello")
        self.server_nonce = r.bytes_(NONCE_BYTES)
        r.end()
        if len(self.server_nonce) != NONCE_BYTES:
            raise MalformedMessageError(f"the server's nonce is {NONCE_BYTES} bytes")
        hello = NodeHello(
            self.server_nonce, self.name, self.identity.public_bytes, int(self.x.shape[0]),
            int(self.x.shape[1]), self.nonce,
        )  # fmt: skip
        return hello.to_bytes()

    def _plan(self, payload: bytes) -> bytes:
        plan = SessionPlan.from_bytes(payload)
        if plan.server_nonce != self.server_nonce or self.name not in plan.names:
            raise ProtocolError(f"a plan for another session or without {self.name}")
        k = plan.names.index(self.name)
        if plan.names != party_names(len(plan.names)):
            raise ProtocolError("the parties of a session are named party-0, party-1, ...")
        if dict(zip(plan.names, plan.roster, strict=True)) != self.pinned:
            raise UnknownPartyError("the plan's roster is not the one this node's operator pinned")
        if (plan.samples[k], plan.nonces[k]) != (self.x.shape[0], self.nonce):
            raise ProtocolError(f"the plan misstates {self.name}'s rows or nonce")
        if plan.parameters != self.parameters:
            raise ProtocolError(
                f"the plan asks for the {plan.parameters!r} parameters; this node's operator "
                f"accepts {self.parameters!r}"
            )
        s = plan.schedule
        check_schedule(s, plan.parameters, len(plan.names))
        if s.sizes[0] != self.x.shape[1] or int(self.y.max()) >= s.sizes[-1] or self.y.min() < 0:
            raise InputError(f"{self.name}'s data does not fit the model {s.sizes}")
        layout = secret_layout(s)
        blocks = layout.blocks if layout is not None else s.batch_size
        tplan = TrainingPlan(plan.names, plan.roster, plan.samples, s, plan.evaluate_every, blocks)
        self.plan = plan
        if layout is None:
            self._build(tplan, None)
            self.stage = len(SETUP_STEPS)
            return _ack(plan.session, self.name)
        check_initial_range([(self.x, self.y)], s)
        from privfl.crypto.threshold import ThresholdContext
        from privfl.threshold import ThresholdParty
        from privfl.training.params import check_levels, training_parameters

        params = training_parameters(layout, plan.parameters)
        check_levels(params, s.sigmoid_degree)
        ctx = self.context or ThresholdContext.for_parameters(params, len(plan.names))
        self.crypto = ThresholdParty(self.name, k, ctx, plan.session)
        self._tplan = tplan
        share = self.crypto.keygen_share()
        self._own = joint_rows(ctx, share.public_key, share.switch_key)
        return bytes(share.to_bytes())

    def _joint(self, payload: bytes) -> bytes:
        """The joint key: answer with this node's signed sketch of its own contribution
        (coefficients bound to the joint key's bytes); nothing is computed from it yet."""
        from privfl.crypto.threshold import JointPublicKeys

        ctx, session = self.crypto.context, self.crypto.session
        self._joint_key = JointPublicKeys.from_bytes(payload, ctx, session)
        self._joint_bytes = payload
        own = own_sketch(ctx, session, self._own, payload)
        return KeyCheck(session, self.name, own).seal(self.identity)

    def _check(self, payload: bytes) -> bytes:
        """Every node's signed sketch (relayed by the server): refuse unless they come from
        exactly the plan's parties under their pinned identities and add up to the joint key;
        only then the relinearisation share, computed from the joint switching key."""
        if self.plan is None:
            raise ProtocolError("no plan")
        session, names = self.plan.session, self.plan.names
        relay = KeyChecks.from_bytes(payload, session)
        checks = [KeyCheck.from_bytes(item, session, self.pinned) for item in relay.items]
        sketches = [(c.sender, c.sketch) for c in checks]
        verify_sketches(
            self.crypto.context, session, names, sketches, self._joint_key, self._joint_bytes
        )
        return bytes(self.crypto.keygen_mult_share(self._joint_key).to_bytes())

    def _keys(self, payload: bytes) -> bytes:
        from privfl.crypto.threshold import EvaluationKeys

        ctx, session = self.crypto.context, self.crypto.session
        self.crypto.receive_evaluation_keys(EvaluationKeys.from_bytes(payload, ctx, session))
        self._build(self._tplan, self.crypto)
        return _ack(session, self.name)

    def _build(self, plan: TrainingPlan, crypto: Any) -> None:
        """This party's role (the one builder of a party, in process and deployed)."""
        from privfl.training.desk import ShareDesk

        if self.plan is None:
            raise ProtocolError("no plan")
        k, s = plan.names.index(self.name), plan.schedule
        desk = ShareDesk(self.identity, plan, crypto) if crypto is not None else None
        layout = secret_layout(s)
        self.party = Party(k, self.plan.session, self.x, self.y, s, desk, layout)
        self.node = PartyNode(self.party, plan.names, self.reveal_to)


def _check_ack(data: bytes, session: bytes, sender: str) -> None:
    header, r = CODEC.decode(data, step=ACK, session=session)
    r.end()
    if header.sender != sender:
        raise MalformedMessageError(f"an acknowledgement from {header.sender!r}, not {sender!r}")


def run_setup(
    transport: Any,
    count: int,
    schedule: Schedule,
    parameters: str,
    evaluate_every: int = 1,
    max_update_norm: float | None = None,
    context: Any = None,
    run: Any = None,
) -> tuple[Server, TrainingPlan]:
    """The server's side of the setup with ``count`` party nodes (``transport``: a
    :class:`~.schedule.Transport`); returns the server role and the public plan. The server
    holds no key share: it only combines the parties' public key material. ``context``: a
    threshold context to share with the nodes in this process (default: its own); ``run``:
    a step runner timing the server's steps (``run(key, fn, *args)``, e.g.
    :meth:`privfl.runner.InProcessRunner.run`)."""
    timed = run or (lambda _key, fn, *args: fn(*args))
    check_schedule(schedule, parameters, count)
    names = party_names(count)
    nonce = secrets.token_bytes(NONCE_BYTES)
    got = _all(transport, "setup-hello", names, Writer().bytes_(nonce).getvalue())
    hellos = [NodeHello.from_bytes(got[n], nonce, n) for n in names]
    if any(h.features != schedule.sizes[0] for h in hellos):
        raise InputError(f"every party's data must have {schedule.sizes[0]} features")
    plan = SessionPlan(
        nonce, names, tuple(h.identity for h in hellos), tuple(h.samples for h in hellos),
        tuple(h.nonce for h in hellos), schedule, evaluate_every, parameters,
    )  # fmt: skip
    session = plan.session
    layout = secret_layout(schedule)
    blocks = layout.blocks if layout is not None else schedule.batch_size
    tplan = TrainingPlan(names, plan.roster, plan.samples, schedule, evaluate_every, blocks)
    got = _all(transport, "setup-plan", names, plan.to_bytes())
    if layout is None:
        for n in names:
            _check_ack(got[n], session, n)
        return Server(schedule, session, None, None, max_update_norm), tplan
    from privfl.crypto.threshold import KeyGenShare, MultKeyShare, ThresholdContext
    from privfl.threshold import ThresholdServer
    from privfl.training.params import check_levels, training_parameters

    params = training_parameters(layout, parameters)
    check_levels(params, schedule.sigmoid_degree)
    ctx = context or ThresholdContext.for_parameters(params, count)
    server = ThresholdServer("server", ctx, session)
    shares = [_from(KeyGenShare, got[n], ctx, session, n) for n in names]
    joint = timed("server:setup-joint", server.combine_keygen_shares, shares).to_bytes()
    got = _all(transport, "setup-joint", names, joint)
    roster = dict(zip(names, plan.roster, strict=True))
    for n in names:  # relayed unchanged; every node checks them itself
        if KeyCheck.from_bytes(got[n], session, roster).sender != n:
            raise MalformedMessageError(f"{n} answered with another party's key check")
    relay = KeyChecks(session, tuple(got[n] for n in names)).to_bytes()
    got = _all(transport, "setup-check", names, relay)
    mult = [_from(MultKeyShare, got[n], ctx, session, n) for n in names]
    keys = timed("server:setup-keys", server.combine_mult_shares, mult).to_bytes()
    got = _all(transport, "setup-keys", names, keys)
    for n in names:
        _check_ack(got[n], session, n)
    return Server(schedule, session, server, layout, max_update_norm), tplan


def _all(transport: Any, step: str, names: Sequence[str], payload: bytes) -> dict[str, bytes]:
    request = _request(step, payload)
    got: dict[str, bytes] = transport.exchange(step, {n: request for n in names})
    missing = [n for n in names if n not in got]
    if missing:
        raise ProtocolError(f"no answer from {missing} in step {step!r}")
    return got


def _from(cls: Any, data: bytes, ctx: Any, session: bytes, sender: str) -> Any:
    msg = cls.from_bytes(data, ctx, session)
    if msg.sender != sender:
        raise MalformedMessageError(f"{sender} answered with {msg.sender}'s key material")
    return msg
