"""Issue 30: a party's checks stay O(M) (each join parsed and verified once per process, the
config digest computed once) without weakening them: any changed byte is checked in full."""

from __future__ import annotations

import numpy as np
import pytest

import privfl
from conftest import make_parties
from privfl.crypto.identity import IdentityKey
from privfl.errors import MalformedMessageError, ProtocolError, UnknownPartyError
from privfl.evaluation.fhauc import messages, session
from privfl.evaluation.fhauc.messages import Join, SessionConfig
from privfl.messages import new_session_id


def _signed_joins(names: list[str]) -> tuple[SessionConfig, list[bytes], dict[str, bytes]]:
    keys = {n: IdentityKey() for n in names}
    roster = {n: k.public_bytes for n, k in keys.items()}
    config = SessionConfig(new_session_id(), tuple(names), np.linspace(0.9, 0.1, 9))
    joins = [
        Join(config.session, n, config.digest, session.new_nonce()).seal(keys[n]) for n in names
    ]
    return config, joins, roster


def test_a_remembered_join_list_never_vouches_for_a_changed_one():
    config, joins, roster = _signed_joins(["a", "b", "c"])
    assert [j.sender for j in session.check_joins(config, joins, roster)] == ["a", "b", "c"]
    forged = bytearray(joins[1])
    forged[-1] ^= 1  # last byte of b's signature
    with pytest.raises(UnknownPartyError):
        session.check_joins(config, [joins[0], bytes(forged), joins[2]], roster)
    substituted = dict(roster, b=IdentityKey().public_bytes)  # another pinned key for b
    with pytest.raises(UnknownPartyError):
        session.check_joins(config, joins, substituted)
    with pytest.raises(ProtocolError, match="no join"):
        session.check_joins(config, joins[:2], roster)
    with pytest.raises(ProtocolError, match="twice"):
        session.check_joins(config, [*joins, joins[0]], roster)
    other = SessionConfig(config.session, config.parties, np.linspace(0.8, 0.2, 9))
    with pytest.raises(ProtocolError, match="different configuration"):
        session.check_joins(other, joins, roster)
    with pytest.raises(MalformedMessageError):
        session.check_joins(config, [joins[0], bytearray(b"junk"), joins[2]], roster)
    with pytest.raises(MalformedMessageError):
        session.check_joins(config, [joins[0], 7, joins[2]], roster)
    assert len(session.check_joins(config, joins, roster)) == 3  # the honest list still passes


def test_session_config_is_immutable_so_its_digest_cannot_go_stale():
    config, _, _ = _signed_joins(["a", "b"])
    digest = config.digest
    with pytest.raises(ValueError):
        config.thresholds[0] = 0.5
    assert SessionConfig.from_bytes(config.to_bytes()).digest == digest


def test_party_checks_are_linear_in_the_number_of_parties(rng, monkeypatch):
    m = 12
    counted = {"join": 0, "config": 0}
    parse_join, encode_config = Join.from_bytes.__func__, SessionConfig.body

    def counting_join(cls, *args, **kwargs):
        counted["join"] += 1
        return parse_join(cls, *args, **kwargs)

    def counting_body(self):
        counted["config"] += 1
        return encode_config(self)

    monkeypatch.setattr(messages.Join, "from_bytes", classmethod(counting_join))
    monkeypatch.setattr(messages.SessionConfig, "body", counting_body)
    data = make_parties(rng, m, 50)
    res = privfl.federated_auc(data, 10)
    assert abs(res.auc - privfl.binned_auc(data, 10)) < 1e-6
    # each of the M relayed joins is parsed and verified once (the aggregator's check), not
    # once per party (M^2); the config is encoded a constant number of times, not per join
    assert counted["join"] <= 2 * m
    assert counted["config"] <= 8
