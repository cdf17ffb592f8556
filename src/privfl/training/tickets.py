"""What a party may help decrypt: the training schedule as a list of tickets.

A joint step (an interactive bootstrap or a joint decryption) is always *for* something the
schedule names: a :class:`Ticket` (purpose, round, epoch, index, step). A party answers a
request only if its ticket is one the public :class:`TrainingPlan` allows for that requester,
with the right kind of share, and only once (see :class:`~.desk.ShareDesk`). Every condition
here depends on public facts only (the roster, the parties' sample counts, the schedule), so a
refusal reveals nothing secret.

Purposes and who may ask:

``BOOT``      bootstrapping of the requester's own mini-batch ``index`` of ``epoch``
              (``step`` < the flow's bootstraps: 2 with one encrypted layer, 5 with two);
``BOUNDARY``  the joint decryption of that batch's boundary error ``e_T`` (step = the number
              of bootstraps: the flow's last joint step), for the batch's owner only;
``OUTPUT``    evaluation after round ``round``: the last layer's pre-activations of the
              requester's own rows, block ``index`` of ``ceil(n / K)`` (bootstraps first with
              two encrypted layers, then one decryption);
``PREDICT``   predictions for rows of the requester's choice, block ``index``: an oracle on
              the encrypted layer (``in + 1`` chosen rows reveal it), so it needs every
              party's signed consent, which names the recipient and the number of blocks;
``REVEAL``    the final encrypted layer ``index`` (decryption of the weights themselves), with
              every party's signed consent naming the recipient.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from privfl.errors import DecryptionNotPermittedError, InputError
from privfl.training.twin import Schedule

__all__ = ["KINDS", "Purpose", "Ticket", "TrainingPlan", "check_ticket"]

KINDS = ("boot", "decrypt")


class Purpose(StrEnum):
    """Why a joint step is asked for (see the module doc)."""

    BOOT = "boot"
    BOUNDARY = "boundary"
    OUTPUT = "output"
    PREDICT = "predict"
    REVEAL = "reveal"


@dataclass(frozen=True)
class Ticket:
    """One joint step of the schedule: ``purpose`` in ``round`` (``epoch`` for training
    batches, 0 otherwise), batch/block/layer ``index`` and the flow's ``step``."""

    purpose: Purpose
    round: int
    epoch: int
    index: int
    step: int

    def label(self) -> str:
        return f"{self.purpose.value}/{self.round}/{self.epoch}/{self.index}/{self.step}"


@dataclass(frozen=True)
class TrainingPlan:
    """The public facts every party checks requests against: the parties' names and pinned
    identities (X25519 || Ed25519, 64 bytes each), their sample counts, the schedule, how
    often the parties evaluate, and the number ``K`` of samples per ciphertext."""

    names: tuple[str, ...]
    roster: tuple[bytes, ...]
    samples: tuple[int, ...]
    schedule: Schedule
    evaluate_every: int
    blocks: int

    def __post_init__(self) -> None:
        n = len(self.names)
        if not n or len(set(self.names)) != n or len(self.roster) != n or len(self.samples) != n:
            raise InputError("a training plan needs distinct names, one identity and count each")
        if any(s < 1 for s in self.samples) or self.blocks < 1 or self.evaluate_every < 0:
            raise InputError("sample counts and blocks must be positive")

    @property
    def pinned(self) -> dict[str, bytes]:
        return dict(zip(self.names, self.roster, strict=True))

    def index_of(self, name: str) -> int:
        if name not in self.names:
            raise DecryptionNotPermittedError(f"{name!r} is not a party of this session")
        return self.names.index(name)

    def batches(self, name: str) -> int:
        """Mini-batches per epoch of party ``name`` (``ceil(n / B)``)."""
        return math.ceil(self.samples[self.index_of(name)] / self.schedule.batch_size)

    def output_blocks(self, name: str) -> int:
        return math.ceil(self.samples[self.index_of(name)] / self.blocks)

    @property
    def boots_per_batch(self) -> int:
        return 5 if self.schedule.secret_layers == 2 else 2

    @property
    def boots_per_output(self) -> int:
        return 2 if self.schedule.secret_layers == 2 else 0

    def evaluates_after(self, rnd: int) -> bool:
        rounds = self.schedule.rounds
        every = self.evaluate_every
        return 0 <= rnd < rounds and bool(every) and ((rnd + 1) % every == 0 or rnd + 1 == rounds)


def check_ticket(plan: TrainingPlan, requester: str, ticket: Ticket, kind: str) -> None:
    """Raise :class:`DecryptionNotPermittedError` unless ``requester`` may ask for a ``kind``
    share (``"boot"`` or ``"decrypt"``) for ``ticket`` (consents are checked by the caller;
    once-only by the desk). Public facts only."""
    s = plan.schedule
    p = ticket.purpose
    if kind not in KINDS:
        raise DecryptionNotPermittedError(f"unknown share kind {kind!r}")
    if p in (Purpose.BOOT, Purpose.BOUNDARY):
        ok = (
            0 <= ticket.epoch < s.epochs
            and ticket.round == ticket.epoch // s.local_epochs
            and 0 <= ticket.index < plan.batches(requester)
        )
        boots = plan.boots_per_batch
        if p is Purpose.BOOT:
            ok = ok and kind == "boot" and 0 <= ticket.step < boots
        else:
            ok = ok and kind == "decrypt" and ticket.step == boots
    elif p is Purpose.OUTPUT:
        boots = plan.boots_per_output
        ok = (
            plan.evaluates_after(ticket.round)
            and ticket.epoch == 0
            and 0 <= ticket.index < plan.output_blocks(requester)
            and 0 <= ticket.step <= boots
            and (kind == "boot") == (ticket.step < boots)
        )
    elif p is Purpose.PREDICT:
        boots = plan.boots_per_output
        ok = (
            ticket.round == s.rounds
            and ticket.epoch == 0
            and ticket.index >= 0
            and 0 <= ticket.step <= boots
            and (kind == "boot") == (ticket.step < boots)
        )
    else:
        ok = (
            ticket.round == s.rounds
            and ticket.epoch == 0
            and 0 <= ticket.index < s.secret_layers
            and ticket.step == 0
            and kind == "decrypt"
        )
    if not ok:
        raise DecryptionNotPermittedError(
            f"{requester} asked for a {kind} share for {ticket.label()}, which the schedule "
            "does not contain"
        )
