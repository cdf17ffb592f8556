"""The decoders issue 18 changed, fed with arbitrary and mutated-valid bytes of the new
modes: a ``curve`` result with extra ciphertexts (two chunks per vector) and a config
carrying a reveal. Only typed privfl errors, in bounded time and memory."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privfl.evaluation.fhauc.messages import SessionConfig
from privfl.evaluation.fhauc.reveal import Reveal
from privfl.evaluation.fhauc.uploads import Result
from test_fhauc_fuzz import attack, mutate
from test_metrics import wire


@pytest.fixture(scope="module")
def curve_session():
    # N = 4098: 4097 positions per vector need two ciphertexts each, so the reply carries
    # two extra ciphertexts
    agg, parties, _, start = wire(np.random.default_rng(7), "curve", n_points=4098, count=2)
    result = agg.handle_uploads({p.name: p.upload(start) for p in parties})
    return agg, parties, result


def test_a_two_chunk_curve_reply_round_trips(curve_session):
    agg, parties, result = curve_session
    parsed = Result.from_bytes(result, agg.context, agg.config.session)
    assert len(parsed.replies[0].extra) == 2
    cfg = SessionConfig.from_bytes(agg.config.to_bytes())
    assert cfg.reveal is Reveal.CURVE and cfg.digest == agg.config.digest
    out = parties[0].finish(result)
    assert out.outcome.curve is not None and out.outcome.curve.tp.size == 4098


def decoders(agg):
    session, ctx = agg.config.session, agg.context
    return {
        "result": lambda b: Result.from_bytes(b, ctx, session),
        "config": lambda b: SessionConfig.from_bytes(b),
    }


@pytest.mark.parametrize("name", ["result", "config"])
@given(
    cuts=st.lists(st.tuples(st.integers(0, 2**31), st.integers(0, 255)), min_size=1, max_size=4),
    truncate=st.integers(0, 2**31),
    mode=st.sampled_from(["flip", "truncate", "insert", "length", "random"]),
    noise=st.binary(max_size=400),
)
@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_mutated_curve_messages_raise_only_typed_errors(
    curve_session, name, cuts, truncate, mode, noise
):
    agg, _, result = curve_session
    sample = result if name == "result" else agg.config.to_bytes()
    attack(decoders(agg)[name], mutate(sample, cuts, truncate, mode, noise))


def test_a_metrics_config_needs_exactly_one_threshold():
    from privfl.errors import MalformedMessageError

    cfg = SessionConfig(b"\x01" * 16, ("a",), np.array([0.7, 0.3]), reveal=Reveal.METRICS)
    with pytest.raises(MalformedMessageError, match="exactly one interior threshold"):
        SessionConfig.from_bytes(cfg.to_bytes())
