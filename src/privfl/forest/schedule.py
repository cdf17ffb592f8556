"""Runs RevFRF's roles in one process: every message crosses as bytes through the runner,
which times each role's own steps (keys ``cs``, ``cc``, ``participant``; setup steps under
``<role>_setup`` and ``kgc_setup``) and counts bytes per channel (``cs->cc``, ...)."""

from __future__ import annotations

import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from privfl.crypto import dtpkc
from privfl.errors import ProtocolError
from privfl.forest import budget, query_auth, secure_ops
from privfl.forest.branch import TestGate
from privfl.forest.center_server import CenterServer
from privfl.forest.computation_provider import ComputationProvider
from privfl.forest.jobs import Batch, Par
from privfl.forest.kgc import KeyGenerationCenter
from privfl.forest.messages import CS, Job, Outgoing, SessionConfig
from privfl.forest.participant import MAX_QUERIES, Participant, Requester
from privfl.forest.psi import PsiComparer, PsiParty
from privfl.messages import Writer, new_session_id
from privfl.runner import InProcessRunner

T = TypeVar("T")


class Peer(Protocol):
    """A role the CS talks to: its timing key and its message endpoint."""

    @property
    def role(self) -> str: ...

    def handle(self, data: bytes) -> bytes: ...


def drive(runner: InProcessRunner, job: Job[T] | Par[T], peers: Mapping[str, Peer]) -> T:
    """Run one of the CS's conversations: deliver each message it yields (one
    :class:`Outgoing`, or a batch of them, see :mod:`.jobs`) to the named peer, in order,
    and hand the replies back, until the job returns its result."""
    try:
        step: Any = job  # a Job or a Par job: the yielded item says which
        out: Outgoing | Batch = runner.run("cs", next, step)
        while True:
            batch = out if isinstance(out, tuple) else (out,)
            replies = tuple(deliver(runner, o, peers) for o in batch)
            answer: bytes | tuple[bytes, ...] = replies if isinstance(out, tuple) else replies[0]
            out = runner.run("cs", step.send, answer)
    except StopIteration as stop:
        result: T = stop.value
        return result


def deliver(runner: InProcessRunner, out: Outgoing, peers: Mapping[str, Peer]) -> bytes:
    """One message of the CS to its peer and the peer's reply, through the runner."""
    peer = peers.get(out.to)
    if peer is None:
        raise ProtocolError(f"CS addressed {out.to!r}, who is not in this session")
    reply = runner.run(peer.role, peer.handle, runner.send(f"cs->{peer.role}", out.data))
    return runner.send(f"{peer.role}->cs", reply)


def provision(
    runner: InProcessRunner,
    kgc: KeyGenerationCenter,
    cs: CenterServer,
    cc: ComputationProvider,
    participants: Mapping[str, Participant],
) -> None:
    """Setup: the CC and the participants say hello to the KGC, which sends every role its
    keys on the provisioning channel."""
    cc_hello = runner.send("cc->kgc", runner.run("cc_setup", cc.hello))
    hellos = [
        runner.send("participant->kgc", runner.run("participant_setup", p.hello))
        for p in participants.values()
    ]
    grants = runner.run("kgc_setup", kgc.setup, cc_hello, hellos)
    runner.run("cs_setup", cs.install_keys, runner.send("kgc->cs", grants.cs))
    runner.run("cc_setup", cc.install_keys, runner.send("kgc->cc", grants.cc))
    for name, p in participants.items():
        data = runner.send("kgc->participant", grants.participants[name])
        runner.run("participant_setup", p.install_keys, data)


@dataclass
class SecureOpsWorld:
    """A CS, a CC and key holders (participants) provisioned by a KGC, without a forest:
    to run HoAdd and HoLT on their own (``world.less_than(x, y, "u")``).
    ``public_key(name)`` is a holder's public key (``public_key("CS")`` the CS's)."""

    runner: InProcessRunner
    kgc: KeyGenerationCenter
    cs: CenterServer
    cc: ComputationProvider
    holders: dict[str, Participant]
    requester: Ed25519PrivateKey  # the query-signing key of the world's requester "r"

    def run(self, job: Job[T]) -> T:
        return drive(self.runner, job, {**self.holders, self.cc.name: self.cc})

    def public_key(self, name: str) -> dtpkc.PublicKey:
        return self.kgc.issued[name]

    def open_query(self) -> bytes:
        """A fresh query of the world's requester, signed by it and opened at the CC (as
        FRF-Predict does before its comparisons): its query id."""
        digest = secrets.token_bytes(32)  # stands for the digest of a query's ciphertexts
        signed = query_auth.SignedQuery.sign(self.requester, self.cs.config, "r", digest)
        return self.run(query_auth.open_query(self.cs.config, signed))

    def less_than(self, x: dtpkc.Ciphertext, y: dtpkc.Ciphertext, holder: str) -> bool:
        """HoLT of x and y with ``holder``'s ParHDec1, charged to a fresh signed requester
        query (:meth:`open_query`) at node (0, 0), the split every holder of this world
        provides."""
        ticket = secure_ops.Ticket(self.open_query(), 0, 0, budget.REQUESTER_QUERY)
        return self.run(self.cs.secure_less_than(x, y, holder, ticket))


def secure_ops_world(
    key_bits: int = dtpkc.MIN_KEY_BITS, holders: tuple[str, ...] = ("u",), *,
    allow_insecure_key_bits: bool = False,
) -> SecureOpsWorld:  # fmt: skip
    """Provision a :class:`SecureOpsWorld` (one-sample, one-column holders)."""
    config = SessionConfig(new_session_id(), 1, 1, 1, 2, 1,
                           allow_insecure_key_bits=allow_insecure_key_bits)  # fmt: skip
    runner, cc = InProcessRunner(), ComputationProvider(config)
    parties = {name: Participant(name, [[0.0]], config) for name in holders}
    cs, kgc = CenterServer(config, [0]), KeyGenerationCenter(config, key_bits)
    provision(runner, kgc, cs, cc, parties)
    signing = Ed25519PrivateKey.generate()
    requester = Requester("r", config, signing_key=signing)
    _, registration = kgc.issue_requester(requester.hello())
    cs.register_requester(registration)
    cc.register_requester(registration)
    # every holder provides the split of node (0, 0) (threshold 0 on its one column): the
    # state a node saves, so HoLT can be run on its own against a real ParHDec1 budget
    budget = secure_ops.DecryptionBudget(MAX_QUERIES).to_bytes()
    state = Writer().u32(0).u32(1).u32(0).u32(0).u32(0).f64(0.0).u32(0).u32(0).u32(0)
    state.bytes_(budget).bytes_(b"")  # no split seen, no revocation shown
    state.bytes_(TestGate().to_bytes()).u32(0).u32(0)  # no test round, threshold, receipt
    for p in parties.values():
        p.restore_state(state.getvalue())
    return SecureOpsWorld(runner, kgc, cs, cc, parties, signing)


def align(
    runner: InProcessRunner, parties: Mapping[str, PsiParty], comparer: PsiComparer
) -> dict[str, np.ndarray]:
    """Private alignment (:mod:`.psi`): every party's rows of the common ids, in one order.
    Timing keys ``<role>_psi``; channels ``<role>->psi``/``psi-><role>``."""
    cfg = comparer.config

    def role(name: str) -> str:
        return "cs" if name == CS else "participant"

    cc_key = comparer.public_key
    held = {
        o: (o, runner.send(f"{role(o)}->psi", runner.run(f"{role(o)}_psi", p.start)))
        for o, p in parties.items()
    }
    for stage in range(1, len(cfg.parties)):
        for origin, (_, data) in list(held.items()):
            holder = cfg.holder(origin, stage)
            out = runner.run(f"{role(holder)}_psi", parties[holder].pass_on, data, cc_key)
            held[origin] = (holder, runner.send(f"{role(holder)}->psi", out))
    finals = {sender: data for sender, data in held.values()}
    results = runner.run("cc_psi", comparer.compare, finals)
    return {
        name: runner.run(
            f"{role(name)}_psi", p.finish, runner.send(f"psi->{role(name)}", results[name])
        )
        for name, p in parties.items()
    }
