"""Runs RevFRF's roles in one process: every message crosses as bytes through the runner,
which times each role's own steps (keys ``cs``, ``cc``, ``participant``; setup steps under
``<role>_setup`` and ``kgc_setup``) and counts bytes per channel (``cs->cc``, ...)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Protocol, TypeVar

from privfl.errors import ProtocolError
from privfl.forest.center_server import CenterServer
from privfl.forest.computation_provider import ComputationProvider
from privfl.forest.kgc import KeyGenerationCenter
from privfl.forest.messages import Job
from privfl.forest.participant import Participant
from privfl.runner import InProcessRunner

T = TypeVar("T")


class Peer(Protocol):
    """A role the CS talks to: its timing key and its message endpoint."""

    @property
    def role(self) -> str: ...

    def handle(self, data: bytes) -> bytes: ...


def drive(runner: InProcessRunner, job: Job[T], peers: Mapping[str, Peer]) -> T:
    """Run one of the CS's conversations: deliver each message it yields to the named peer
    and hand the peer's reply back, until the job returns its result."""
    try:
        out = runner.run("cs", next, job)
        while True:
            peer = peers.get(out.to)
            if peer is None:
                raise ProtocolError(f"CS addressed {out.to!r}, who is not in this session")
            reply = runner.run(peer.role, peer.handle, runner.send(f"cs->{peer.role}", out.data))
            out = runner.run("cs", job.send, runner.send(f"{peer.role}->cs", reply))
    except StopIteration as stop:
        result: T = stop.value
        return result


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
