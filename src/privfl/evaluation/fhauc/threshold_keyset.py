"""Threshold key sets kept across FHAUC sessions, within their decryption budget.

A key set is what the key rounds of one session produce: every party's own key share (never
sent), the joint public key, and the aggregator's joint evaluation keys. Its noise flooding
is sized for ``max_decryptions`` decryption shares per party (:class:`~privfl.crypto.
threshold.ThresholdParameters`); a session spends ``executions x requests_per_execution``
of them at every party (the lead's fusion counts like a share).

Reuse: the aggregator announces a kept key set by its id in the session config
(``SessionConfig.key_set``; bound by the config's digest, so every party sees the same). A
party joins such a session only if it holds that key set, for exactly the session's parties
in the same order, and its *own* count of the shares it made leaves enough budget for the
session's plan; otherwise it refuses at the join, before any upload, and names the fix
(announce a session that generates a fresh key set: re-key). The count is the party's, never
the aggregator's. A reuse session skips key generation and the key check: its ``keycheck``
step only reveals the lead secret (:mod:`.threshold_plan`); the joint key was checked by every
party when it was generated.

What reuse changes for each role: the aggregator links the sessions that share a key set
(it chose them); a party learns nothing new (the key set's shares and joint key are what it
already held). Every session still has its own transcript, session key, masks and lead.
Kept in memory by the role objects: a deployment that runs every session in fresh processes
(Flower) generates a key set per session.
"""

from __future__ import annotations

from dataclasses import dataclass

from privfl import threshold as tr
from privfl.crypto import threshold as th
from privfl.errors import ProtocolError
from privfl.evaluation.fhauc.messages import SessionConfig

__all__ = ["KeySet", "ServerKeySet", "check_reuse"]


@dataclass
class KeySet:
    """A party's kept key set: its id (the threshold session id it was generated under,
    public), the parties in key order, and the :class:`~privfl.threshold.
    ThresholdParty` holding this party's share, the joint public key and its count of the
    decryption shares it made (node-local; never sent)."""

    key_id: bytes
    parties: tuple[str, ...]
    keys: tr.ThresholdParty

    @property
    def remaining(self) -> int:
        """Decryption shares this party may still make under the key set."""
        budget = self.keys.context.params.max_decryptions
        return max(0, budget - self.keys.decryption_shares_made)


def check_reuse(key_set: KeySet | None, config: SessionConfig, need: int) -> tr.ThresholdParty:
    """A party, at the join of a session announcing ``config.key_set``: the kept key share
    to use, or :class:`ProtocolError` before any upload when the party does not hold that key
    set for these parties, or when ``need`` more decryption shares would exceed its budget.
    The conditions depend on public values and the party's own count only."""
    if key_set is None or key_set.key_id != config.key_set:
        raise ProtocolError(
            "the session reuses a key set this party does not hold: announce a session that "
            "generates a fresh key set"
        )
    if key_set.parties != config.parties:
        raise ProtocolError("the session's parties differ from the reused key set's parties")
    if need > key_set.remaining:
        raise ProtocolError(
            f"the session needs {need} decryption shares and the reused key set allows "
            f"{key_set.remaining} more (budget {key_set.keys.context.params.max_decryptions}): "
            "re-key (announce a session that generates a fresh key set)"
        )
    return key_set.keys


@dataclass
class ServerKeySet:
    """The aggregator's kept key set: its id, the parties in key order, the
    :class:`~privfl.threshold.ThresholdServer` holding the joint public and evaluation
    keys (no share), and the decryption shares each party spent under it, as the aggregator
    counts them (to announce reuse only when the parties will accept it; each party keeps its
    own count)."""

    key_id: bytes
    parties: tuple[str, ...]
    server: tr.ThresholdServer
    used: int = 0

    def fits(self, parties: tuple[str, ...], need: int, params: th.ThresholdParameters) -> bool:
        """Whether a session of ``parties`` spending ``need`` shares can reuse this set."""
        same = self.server.context.params == params and self.parties == parties
        return same and self.used + need <= params.max_decryptions
