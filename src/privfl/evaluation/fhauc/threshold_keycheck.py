"""The parties' check of the joint key (threshold FHAUC), as a pure function.

Before a party encrypts anything under the joint key the aggregator returned, it checks that
key against every party's signed *sketch*: a random linear combination of that party's own
public-key and switching-key contribution, with coefficients derived from the session key and
the joint key itself. The sketches of honest contributions add up to the sketch of their sum,
so an aggregator that substitutes a key it knows, drops or alters a contribution, or gives
parties different joint keys is caught before any upload. Run by every party; it learns
nothing but whether the check passed.
"""

from __future__ import annotations

from collections.abc import Mapping

from privfl.crypto import threshold as th
from privfl.errors import MalformedMessageError, ProtocolError
from privfl.evaluation.fhauc import threshold_messages as tmsg
from privfl.evaluation.fhauc import threshold_plan as tp
from privfl.evaluation.fhauc.messages import SessionConfig
from privfl.evaluation.fhauc.threshold_plan import joint_rows, row_moduli


def verify_joint_key(
    config: SessionConfig,
    roster: Mapping[str, bytes],
    keys: th.ThresholdParty,
    joint: th.JointPublicKeys,
    joint_bytes: bytes,
    items: tuple[bytes, ...],
) -> None:
    """Refuse (``ProtocolError``) unless the signed key checks ``items`` come from exactly the
    session's parties and their sketches add up to the sketch of ``joint``."""
    seen: dict[str, tuple[int, ...]] = {}
    for item in items:
        check = tmsg.KeyCheck.from_bytes(item, config.session, roster)
        if check.sender not in config.parties or check.sender in seen:
            raise ProtocolError(f"unexpected or repeated key check from {check.sender!r}")
        seen[check.sender] = check.sketch
    missing = [p for p in config.parties if p not in seen]
    if missing:
        raise ProtocolError(f"no key check from {missing}")
    moduli = row_moduli(keys.context)
    rows = joint_rows(keys.context, joint.public_key, joint.switch_key)
    coeffs = tp.sketch_coefficients(keys.session, joint_bytes, rows.shape[0], keys.context.ring)
    expected = tp.sketch(rows, moduli, coeffs)
    if any(len(s) != len(expected) for s in seen.values()):
        raise MalformedMessageError("a key check has the wrong number of rows")
    total = [sum(s[i] for s in seen.values()) % int(q) for i, q in enumerate(moduli)]
    if tuple(total) != expected:
        raise ProtocolError(
            "the joint key is not the sum of the parties' contributions (the aggregator "
            "altered or substituted it, or gave parties different keys); nothing was "
            "encrypted under it"
        )
