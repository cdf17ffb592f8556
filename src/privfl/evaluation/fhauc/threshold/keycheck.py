"""The parties' check of the joint key (threshold FHAUC): the signed :class:`KeyCheck`
messages relayed by the aggregator, checked against the pinned roster, then the sketch
arithmetic of :mod:`privfl.crypto.threshold.keycheck` (shared with encrypted training). Run by
every party before it encrypts anything under the joint key; it learns nothing but whether the
check passed.
"""

from __future__ import annotations

from collections.abc import Mapping

from privfl import threshold as tr
from privfl.crypto import threshold as th
from privfl.crypto.threshold.keycheck import verify_sketches
from privfl.errors import ProtocolError
from privfl.evaluation.fhauc.messages import SessionConfig
from privfl.evaluation.fhauc.threshold import messages as tmsg


def verify_joint_key(
    config: SessionConfig,
    roster: Mapping[str, bytes],
    keys: tr.ThresholdParty,
    joint: th.JointPublicKeys,
    joint_bytes: bytes,
    items: tuple[bytes, ...],
) -> list[bytes]:
    """Refuse (``ProtocolError``) unless the signed key checks ``items`` come from exactly the
    session's parties and their sketches add up to the sketch of ``joint``; returns the lead
    secrets they reveal, in party order (:func:`~.transcript.check_reveals` opens them)."""
    checks = [tmsg.KeyCheck.from_bytes(item, config.session, roster) for item in items]
    sketches = [(c.sender, c.sketch) for c in checks]
    verify_sketches(keys.context, keys.session, config.parties, sketches, joint, joint_bytes)
    by_sender = {c.sender: c.lead_secret for c in checks}
    return [by_sender[p] for p in config.parties]


def lead_secrets(
    config: SessionConfig, roster: Mapping[str, bytes], items: tuple[bytes, ...]
) -> list[bytes]:
    """A session reusing a checked key set: the lead secrets of the signed key checks
    ``items``, exactly one per party of the session (``ProtocolError`` otherwise), in party
    order."""
    checks = [tmsg.KeyCheck.from_bytes(item, config.session, roster) for item in items]
    by_sender = {c.sender: c.lead_secret for c in checks}
    if len(checks) != len(by_sender) or set(by_sender) != set(config.parties):
        raise ProtocolError("the key checks do not come from exactly the session's parties")
    return [by_sender[p] for p in config.parties]
