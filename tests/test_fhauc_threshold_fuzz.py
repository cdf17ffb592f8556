"""Every decoder of threshold FHAUC's messages fed with arbitrary and mutated-valid bytes:
only typed privfl errors (or a well-formed message), never a numpy, OpenFHE or struct
traceback."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("openfhe")

import contextlib

from privfl.crypto import threshold as th
from privfl.errors import PrivflError
from privfl.evaluation.fhauc.schedule import run_session
from privfl.evaluation.fhauc.threshold import messages as tm
from privfl.evaluation.fhauc.threshold import ops as threshold_ops
from privfl.evaluation.fhauc.threshold.setup import ThresholdPublicSetup
from privfl.evaluation.fhauc.threshold.state import ThresholdState
from test_fhauc_threshold import deployment


@pytest.fixture(scope="module")
def world():
    saved = threshold_ops.FHAUC_PARAMETER_SET
    threshold_ops.FHAUC_PARAMETER_SET = "fhauc-test"
    try:
        _, parties, agg, rec, request = deployment(np.random.default_rng(11), m=2)
        from privfl.evaluation.fhauc.threshold import setup as threshold_setup

        public, _ = threshold_setup.provision(
            "p0", parties[0]._identity, parties[0].roster, parties[0].policy
        )
        run_session(agg, rec, request)
    finally:
        threshold_ops.FHAUC_PARAMETER_SET = saved
    session, roster = agg.config.session, agg.roster
    ctx, thr = agg.server.context, agg.server.session
    lead = tm.Relay.from_bytes(rec.down["fuse"][agg.lead], "th-lead", session).items[0]
    other = next(p for p in rec.up["decrypt"])
    decoders = {
        "keygen": (
            rec.up["keygen"]["p0"],
            lambda d: tm.KeyShareUpload.from_bytes(d, session, roster),
        ),
        "keycheck": (
            rec.up["keycheck"]["p1"],
            lambda d: tm.KeyCheck.from_bytes(d, session, roster),
        ),
        "keychecks": (
            rec.down["upload"]["p0"],
            lambda d: tm.Relay.from_bytes(d, "th-keychecks", session),
        ),
        "upload-step": (rec.up["upload"]["p0"], tm.UploadStep.from_bytes),
        "upload": (
            tm.UploadStep.from_bytes(rec.up["upload"]["p0"]).upload,
            lambda d: tm.ThresholdUpload.from_bytes(d, session, roster),
        ),
        "mult": (
            tm.UploadStep.from_bytes(rec.up["upload"]["p1"]).mult,
            lambda d: tm.MultShareUpload.from_bytes(d, session, roster),
        ),
        "requests": (
            rec.down["decrypt"][other],
            lambda d: tm.Relay.from_bytes(d, "th-decrypt", session),
        ),
        "shares": (
            rec.up["decrypt"][other],
            lambda d: tm.DecryptShares.from_bytes(d, session, roster),
        ),
        "lead-relay": (
            rec.down["fuse"][agg.lead],
            lambda d: tm.Relay.from_bytes(d, "th-lead", session),
        ),
        "lead": (lead, lambda d: th.LeadDecryption.from_bytes(d, ctx, thr)),
        "reveal": (rec.up["fuse"][agg.lead], lambda d: tm.Reveal.from_bytes(d, session, roster)),
        "public": (public, ThresholdPublicSetup.from_bytes),
        "pairs": (tm.write_pairs([(1.0, 2.0)]), lambda d: tm.read_pairs(d, 1)),
        "state": (parties[1].export_state(), ThresholdState.from_bytes),
    }
    return decoders


NAMES = [
    "keygen", "keycheck", "keychecks", "upload-step", "upload", "mult", "requests", "shares",
    "lead-relay", "lead", "reveal", "public", "pairs", "state",
]  # fmt: skip


def _decode(world, name, data):
    with contextlib.suppress(PrivflError):
        world[name][1](data)


@pytest.mark.parametrize("name", NAMES)
def test_valid_threshold_messages_decode(world, name):
    data, decode = world[name]
    decode(data)


@pytest.mark.parametrize("name", NAMES)
@given(data=st.binary(max_size=300))
@settings(max_examples=15)
def test_random_bytes_give_typed_errors_only(world, name, data):
    _decode(world, name, data)


@pytest.mark.parametrize("name", NAMES)
def test_mutated_threshold_messages_give_typed_errors_only(world, name):
    data = world[name][0]
    rng = np.random.default_rng(len(name))
    for _ in range(12):
        raw = bytearray(data)
        kind = int(rng.integers(0, 4))
        pos = int(rng.integers(0, len(raw)))
        if kind == 0:
            raw = raw[:pos]
        elif kind == 1:
            raw[pos] ^= 1 << int(rng.integers(0, 8))
        elif kind == 2:
            raw[pos:pos] = rng.bytes(int(rng.integers(1, 9)))
        else:  # a huge length field where a length field may be
            raw[pos : pos + 4] = b"\xff\xff\xff\xf0"
        _decode(world, name, bytes(raw))
