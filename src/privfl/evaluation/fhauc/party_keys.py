"""The party side of FHAUC's key backend: what a party's keys add to the one :class:`~.party.Party`.

A party is one :class:`~.party.Party` (its data, its counts, the session config check, the
stage machine, the upload's packing and multipliers, the result) composed with one
:class:`PartyKeys` backend, chosen once by the role builder (:func:`~.roles.make_party`), the
mirror of :class:`~.rounds.KeyRounds` on the aggregator side:

* :class:`~.single_keys.SingleKeys`: the CKKS secret context from the key holder's bundle;
  encrypts the upload and decrypts the aggregator's reply itself in ``result``;
* :class:`~.threshold.party.ThresholdPartyKeys`: this party's own key share (``keygen``,
  ``keycheck``), encryption under the joint key, a decryption share (``decrypt``) or, as the
  lead, the fused reveal (``fuse``), the kept key set's decryption budget and the share's
  node-local export.

The backend never sees the party's data, and its identity key only once, to open its bundle
(``receive_bundle``); in a session it works through the :class:`PartySide` the party passes
to each call (the session's progress, the checked start, the session key, the counts,
signing), and the party never touches the backend's key material. ``PartySide`` is a typed
interface: at run time the backend is handed the party object itself, and the backends in this
package use only the interface's members (a fresh-eyes review checked it).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from privfl.crypto import keywrap
from privfl.evaluation.fhauc.layout import Layout
from privfl.evaluation.fhauc.messages import SessionConfig
from privfl.evaluation.fhauc.party_state import SessionState, Stage
from privfl.evaluation.fhauc.policy import Policy
from privfl.evaluation.fhauc.session import CheckedStart
from privfl.evaluation.fhauc.steps import Step
from privfl.evaluation.fhauc.variant import Outcome, Packed, PartyView
from privfl.evaluation.statistics import PartyCounts

__all__ = ["Finished", "PartyKeys", "PartySide", "Restored", "Sealable"]


class Sealable(Protocol):
    """A message the party signs with its identity key."""

    def seal(self, identity: keywrap.IdentityKey) -> bytes: ...


@dataclass(frozen=True)
class Finished:
    """What a key backend's ``result`` step recovered: the outcome, the number of executions
    and (threshold keys) the sessions abandoned on the kept key set."""

    outcome: Outcome
    executions: int
    abandoned: int = 0


@dataclass(frozen=True)
class Restored:
    """A party's progress read back from its node-local state (``abandoned``: the sessions it
    joined and never finished, when the backend's state records them)."""

    state: SessionState | None
    abandoned: tuple[str, ...] | None = None


class PartySide(Protocol):
    """What a key backend may use of its party, during one session."""

    @property
    def name(self) -> str: ...

    @property
    def roster(self) -> Mapping[str, bytes]: ...

    @property
    def policy(self) -> Policy: ...

    def config(self) -> SessionConfig:
        """The session this party joined."""
        ...

    def progress(self) -> SessionState:
        """The party's progress through the session it joined."""
        ...

    def expect(self, stage: Stage, step: str) -> SessionState:
        """The progress, if the party is at ``stage`` (else a :class:`ProtocolError`)."""
        ...

    def advance(self, stage: Stage) -> None:
        """Move to ``stage``."""
        ...

    def open_start(self, data: bytes) -> CheckedStart:
        """Check the aggregator's start message and every relayed join; count the data."""
        ...

    def set_transcript(self, transcript: bytes) -> None:
        """Fix the session's transcript (the session key derives from it)."""
        ...

    def session_key(self) -> bytes:
        """The key the parties share for this session (from the seed and the transcript)."""
        ...

    def view(self) -> PartyView:
        """The session as the variant's arithmetic sees it."""
        ...

    def counts(self) -> PartyCounts:
        """This party's counts at the session's decision points."""
        ...

    def pack(self, layout: Layout) -> list[Packed]:
        """The slot vectors of every execution (multipliers and masks applied)."""
        ...

    def curve_total(self) -> float:
        """This party's (weighted) sample total, for the curve's recovery."""
        ...

    def seal(self, message: Sealable) -> bytes:
        """``message`` signed by this party."""
        ...


class PartyKeys(Protocol):
    """A party's key backend (the module docstring)."""

    mode: str  # "single" | "threshold": labels the node-local state these keys wrote
    upload_after: Stage  # the stage the party's upload step needs
    finish_after: Stage  # the stage the party's result step needs

    def receive_bundle(
        self,
        data: bytes,
        name: str,
        identity: keywrap.IdentityKey,
        roster: Mapping[str, bytes],
        provisioner: str,
    ) -> tuple[bytes, Policy]:
        """Open this party's bundle from the pinned provisioning party; keep the key material
        it carries, return the shared seed and the policy."""
        ...

    def check_config(self, config: SessionConfig, policy: Policy) -> None:
        """Refuse a session these keys cannot run (at the join and when resuming)."""
        ...

    def abandon(self, config: SessionConfig, stage: Stage) -> None:
        """The party abandons the unfinished session ``config`` at ``stage``."""
        ...

    def begin(self, config: SessionConfig, policy: Policy) -> bytes:
        """Last checks before joining ``config`` (what verification could refuse later, a
        kept key set's budget); returns the nonce the party's join carries."""
        ...

    def handlers(self, party: PartySide) -> dict[Step, Callable[[bytes], bytes]]:
        """The key rounds and decryption steps these keys add (bytes in, bytes out)."""
        ...

    def upload(self, party: PartySide, data: bytes) -> bytes:
        """The party's upload message, answering ``data`` (encrypted statistics)."""
        ...

    def finish(self, party: PartySide, data: bytes) -> Finished:
        """Open the ``result`` message and recover the outcome; moves the party to
        ``finished`` once the message is the session's result."""
        ...

    def export_kept(self) -> bytes:
        """What these keys keep across sessions, for node-local storage (threshold keys: the
        key set with its decryption count); empty when nothing is kept."""
        ...

    def import_kept(self, data: bytes) -> None:
        """Reload :meth:`export_kept` (before :meth:`restore`: a session may use it)."""
        ...

    def export_state(self, state: SessionState | None, abandoned: Sequence[str]) -> bytes:
        """The party's progress and these keys' session material, for node-local storage."""
        ...

    def restore(
        self, data: bytes | None, check: Callable[[bytes], SessionConfig], policy: Policy | None
    ) -> Restored:
        """Read :meth:`export_state` back; ``check`` re-checks the joined config (``policy``:
        the party's, None before its bundle)."""
        ...
