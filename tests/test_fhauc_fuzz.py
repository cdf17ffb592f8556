"""Every FHAUC decoder (and the primitives' decoders it relies on) fed with arbitrary and
mutated-valid bytes: only typed privfl errors, in bounded time and memory."""

from __future__ import annotations

import resource
import time
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from privfl.crypto import keywrap
from privfl.crypto.ckks import CKKSContext
from privfl.errors import PrivflError
from privfl.evaluation.fhauc.messages import (
    Done,
    Join,
    KeyBundle,
    PublicSetup,
    SessionConfig,
    Start,
)
from privfl.evaluation.fhauc.party_state import SessionState
from privfl.evaluation.fhauc.policy import Policy
from privfl.evaluation.fhauc.uploads import PartyUpload, Result
from privfl.messages import Reader, decode_message
from test_fhauc import Deployment

SECONDS = 2.0
MEGABYTES = 64


@pytest.fixture(scope="module")
def d():
    return Deployment(np.random.default_rng(3), security="malicious", n_points=20)


@pytest.fixture(scope="module")
def samples(d):
    """One valid message of every kind, keyed by decoder name."""
    ups = d.uploads()
    result = d.agg.handle_uploads(ups)
    return {
        "config": d.config,
        "join": d.joins["p0"],
        "start": d.start,
        "upload": ups["p0"],
        "result": result,
        "done": None,  # filled below
        "public": d.public,
        "bundle": d.bundles["p1"],
        "context": d.agg.context.serialize_public(),
        "ciphertext": Result.from_bytes(result, d.agg.context, d.agg.config.session)
        .replies[0]
        .numerator.to_bytes(),
    }


def decoders(d):
    cfg = SessionConfig.from_bytes(d.config)
    session, roster, ctx = cfg.session, d.roster, d.agg.context
    return {
        "config": lambda b: SessionConfig.from_bytes(b),
        "join": lambda b: Join.from_bytes(b, session, roster),
        "start": lambda b: Start.from_bytes(b, session),
        "upload": lambda b: PartyUpload.from_bytes(b, session, roster).open(ctx, 1, 0, 17),
        "result": lambda b: Result.from_bytes(b, ctx, session),
        "done": lambda b: Done.from_bytes(b, session, roster),
        "public": lambda b: PublicSetup.from_bytes(b),
        "bundle": lambda b: KeyBundle.from_bytes(b),
        "context": lambda b: CKKSContext.deserialize(b),
        "ciphertext": lambda b: ctx.fresh_ciphertext_from_bytes(b, 17),
        "policy": lambda b: Policy.from_bytes(b),
        "state": lambda b: SessionState.from_bytes(b),
        "wrapped": lambda b: keywrap.WrappedSecret.from_bytes(b),
        "frame": lambda b: decode_message(b, protocol="fhauc", version=2),
        "uint": lambda b: Reader(b).uint(4096),
    }


def attack(fn, data: bytes) -> None:
    """Run one decoder on hostile bytes: a typed error or a value, quickly and small
    (Python allocations by tracemalloc, native ones by the process's peak RSS)."""
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    tracemalloc.start()
    start = time.process_time()
    try:
        fn(data)
    except PrivflError:
        pass
    finally:
        elapsed = time.process_time() - start
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    assert elapsed < SECONDS, f"{elapsed:.1f} s on {len(data)} bytes"
    assert peak < MEGABYTES * 2**20, f"{peak / 2**20:.0f} MB on {len(data)} bytes"
    grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak_rss  # KiB
    assert grown < 4 * MEGABYTES * 1024, f"native peak grew {grown / 1024:.0f} MB"


NAMES = ["config", "join", "start", "upload", "result", "done", "public", "bundle", "context",
         "ciphertext", "policy", "state", "wrapped", "frame", "uint"]  # fmt: skip


@pytest.mark.parametrize("name", NAMES)
@given(data=st.binary(max_size=600))
@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_arbitrary_bytes_raise_only_typed_errors(d, name, data):
    attack(decoders(d)[name], data)


@pytest.mark.parametrize("name", ["config", "join", "start", "upload", "result", "public",
                                  "bundle", "context", "ciphertext"])  # fmt: skip
@given(
    cuts=st.lists(st.tuples(st.integers(0, 2**31), st.integers(0, 255)), min_size=1, max_size=4),
    truncate=st.integers(0, 2**31),
    mode=st.sampled_from(["flip", "truncate", "insert", "length"]),
)
@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_mutated_valid_messages_raise_only_typed_errors(d, samples, name, cuts, truncate, mode):
    attack(decoders(d)[name], mutate(samples[name], cuts, truncate, mode))


def test_party_steps_fed_with_garbage_raise_only_typed_errors(d):
    party = d.parties[0]
    rng = np.random.default_rng(0)
    for _ in range(50):
        junk = rng.bytes(int(rng.integers(0, 300)))
        for step in (party.join, party.upload, party.finish):
            with pytest.raises(PrivflError):
                step(junk)


@pytest.fixture(scope="module")
def joint():
    """A semi-honest session: every upload is one joint ciphertext (T and F)."""
    d = Deployment(np.random.default_rng(4), n_points=20)
    return d, d.uploads()["p0"]


def mutate(
    sample: bytes, cuts: list[tuple[int, int]], truncate: int, mode: str, other: bytes = b""
) -> bytes:
    """``sample`` with bytes flipped at ``cuts``, cut at ``truncate``, 9 bytes inserted, or a
    length prefix set to a huge value; any other ``mode``: ``other`` (arbitrary bytes)."""
    buf = bytearray(sample)
    if mode == "flip":
        for pos, val in cuts:
            buf[pos % len(buf)] ^= val or 1
    elif mode == "truncate":
        del buf[truncate % len(buf) :]
    elif mode == "insert":
        pos, val = cuts[0]
        buf[pos % len(buf) : pos % len(buf)] = bytes([val]) * 9
    elif mode == "length":
        pos = cuts[0][0] % max(1, len(buf) - 4)
        buf[pos : pos + 4] = b"\xff\xff\xff\xf0"
    else:
        buf = bytearray(other)
    return bytes(buf)


@given(
    cuts=st.lists(st.tuples(st.integers(0, 2**31), st.integers(0, 255)), min_size=1, max_size=4),
    truncate=st.integers(0, 2**31),
    mode=st.sampled_from(["flip", "truncate", "insert", "length", "arbitrary"]),
)
@settings(max_examples=100, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_mutated_joint_uploads_raise_only_typed_errors(joint, cuts, truncate, mode):
    d, sample = joint
    session, ctx, layout = d.agg.config.session, d.agg.context, d.agg.layout
    noise = np.random.default_rng(truncate).bytes(truncate % 600)
    buf = mutate(sample, cuts, truncate, mode, noise)

    def decode(b: bytes) -> None:
        msg = PartyUpload.from_bytes(b, session, d.roster)
        msg.open(ctx, layout.chunks, layout.denominator_ciphertexts, 40, layout.f_ciphertexts)

    attack(decode, bytes(buf))
