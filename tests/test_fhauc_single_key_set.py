"""A single-key party refuses a session config that names a threshold key set (issue 27):
before, it ignored the field and joined, so an aggregator could announce a key-set reuse to a
single-key federation and the party's join said nothing of it. The refusal is at the join,
before any upload, and depends only on the public config."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from conftest import make_parties
from privfl.crypto import keywrap
from privfl.errors import ProtocolError
from privfl.evaluation import fhauc
from privfl.evaluation.fhauc.messages import SessionConfig

NAMES = ["p0", "p1", "p2"]


def setup(rows: int):
    ids = {n: keywrap.IdentityKey() for n in NAMES}
    roster = {n: k.public_bytes for n, k in ids.items()}
    policy = fhauc.Policy(fhauc.Security.SEMI_HONEST, max_samples_per_party=4096)
    public, bundles = fhauc.KeyHolder("p0", ids["p0"], roster).provision(policy)
    agg = fhauc.Aggregator()
    agg.receive_setup(public)
    s, y = make_parties(np.random.default_rng(3), 1, rows)[0]
    party = fhauc.Party("p1", ids["p1"], roster, "p0", s, y)
    party.receive_bundle(bundles["p1"])
    return agg, party


@pytest.mark.parametrize("rows", [60, 2000])
def test_a_single_key_party_refuses_a_config_naming_a_key_set_before_any_upload(rows):
    agg, party = setup(rows)
    honest = agg.start_session(NAMES, 10)
    party.join(honest)  # the same session without a key set is joined
    reuse = replace(SessionConfig.from_bytes(honest), key_set=bytes(16)).to_bytes()
    with pytest.raises(ProtocolError, match="names a threshold key set") as refused:
        party.join(reuse)
    assert str(rows) not in str(refused.value)  # a public reason, the same for any data
    assert party.state is not None and party.state.config == honest  # nothing joined
