"""Fuzzing every threshold-CKKS message decoder (hypothesis).

Random and mutated bytes must give :class:`privfl.errors.ProtocolError` subclasses only, in
bounded time and memory; a mutation that still decodes (a coefficient changed within its
modulus) is then fed to the role step that consumes it, which must return a result or raise a
typed privfl error: OpenFHE only ever parses bytes privfl rebuilt from its own templates.
"""

import contextlib
import dataclasses
import itertools
import time
import tracemalloc
from datetime import timedelta

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from test_threshold_support import require_openfhe_for_tests

require_openfhe_for_tests()

from privfl.crypto.threshold import Ciphertext, parameter_set  # noqa: E402
from privfl.crypto.threshold import messages as tm  # noqa: E402
from privfl.crypto.threshold import wire as wire  # noqa: E402
from privfl.errors import MalformedMessageError, PrivflError, ProtocolError  # noqa: E402
from privfl.threshold import ThresholdServer, make_roles  # noqa: E402

PARAMS = dataclasses.replace(parameter_set("test"), max_decryptions=1 << 16, name="fuzz")
SEED = bytes(32)
FRESH_IDS = itertools.count(1 << 40)


@pytest.fixture(scope="module")
def world():
    server, parties = make_roles(PARAMS, 2)
    shares = [p.keygen_share() for p in parties]
    joint = server.combine_keygen_shares(shares)
    mults = [p.keygen_mult_share(joint) for p in parties]
    keys = server.combine_mult_shares(mults)
    ct = server.encrypt(np.linspace(-1, 1, PARAMS.batch_size))
    request = server.request_decryption(ct)
    dshares = [p.decryption_share(request, SEED) for p in parties]
    boot = server.start_bootstrap(ct * 1.0)
    lead_request = server.request_decryption(ct)
    lead = parties[0].name
    lead_share = parties[1].decryption_share(lead_request)
    valid = {
        tm.KeyGenShare: shares[0],
        tm.JointPublicKeys: joint,
        tm.MultKeyShare: mults[0],
        tm.EvaluationKeys: keys,
        tm.CiphertextMessage: (ct * ct).to_message(server.session, "server"),
        tm.DecryptionRequest: request,
        tm.DecryptionShare: dshares[1],
        tm.MaskedDecryption: server.fuse_masked(request, dshares),
        tm.LeadDecryption: server.lead_decryption(lead_request, [lead_share], lead),
        tm.BootstrapRequest: boot,
        tm.BootstrapShare: parties[1].bootstrap_share(boot),
    }
    return {"server": server, "parties": parties, "ct": ct, "valid": valid, "shares": shares}


def _consume(world, msg):
    """Run the role step that would receive ``msg`` (a copy of the world's roles' state)."""
    server, parties, ct = world["server"], world["parties"], world["ct"]
    ctx, tag = server.context, server.tag
    if isinstance(msg, tm.KeyGenShare):
        fresh = ThresholdServer("server-2", ctx, server.session)
        fresh.combine_keygen_shares([msg, world["shares"][1]])
    elif isinstance(msg, tm.JointPublicKeys):
        saved = parties[0].public_key
        try:
            parties[0].keygen_mult_share(msg)
        finally:
            parties[0].public_key = saved
    elif isinstance(msg, tm.MultKeyShare | tm.EvaluationKeys):
        ctx.load("eval_key", ctx.switch_key_shape.layout, msg.mult_key, tag)
    elif isinstance(msg, tm.CiphertextMessage):
        received = Ciphertext.from_message(ctx, msg)
        server.request_decryption(received + received)
    elif isinstance(msg, tm.DecryptionRequest):  # a fresh id: each id is answered once
        parties[1].decryption_share(dataclasses.replace(msg, request_id=next(FRESH_IDS)))
    elif isinstance(msg, tm.DecryptionShare):
        request = parties[0].request_decryption(ct)
        share = dataclasses.replace(msg, request_id=request.request_id, sender="party-1")
        parties[0].fuse(request, [share], PARAMS.batch_size)
    elif isinstance(msg, tm.MaskedDecryption):
        parties[1].open_masked(msg, SEED, PARAMS.batch_size)
    elif isinstance(msg, tm.LeadDecryption):  # a fresh id each: each id is fused once
        # every slot the ring holds (the FHAUC lead's check: the sparse batch's copies and,
        # through the twin context decoding COMPLEX, the imaginary parts), then the batch
        for every_slot, length in ((True, ctx.ring // 2), (False, PARAMS.batch_size)):
            fresh = dataclasses.replace(msg, request_id=next(FRESH_IDS))
            parties[0].lead_decrypt(fresh, length, every_slot)
    elif isinstance(msg, tm.BootstrapRequest):
        parties[1].bootstrap_share(msg)
    elif isinstance(msg, tm.BootstrapShare):
        request = server.start_bootstrap(ct)
        mutated = dataclasses.replace(msg, request_id=request.request_id, sender="party-0")
        other = parties[1].bootstrap_share(request)
        server.finish_bootstrap(request, [mutated, other])


def _decode(world, cls, data):
    """``cls.from_bytes``: a message, or None for a typed ProtocolError (anything else and
    any slow or memory-hungry decode fails the test)."""
    start = time.process_time()
    try:
        return cls.from_bytes(data, world["server"].context, world["server"].session)
    except ProtocolError:
        return None
    finally:
        assert time.process_time() - start < 2.0


MESSAGES = [getattr(tm, name) for name in tm.__all__ if name != "CODEC"]

position = st.one_of(st.integers(0, 200), st.floats(0, 1, exclude_max=True))
mutation = st.tuples(
    st.sampled_from(["flip", "truncate", "insert", "huge_u32", "small_u32"]),
    position,
    st.integers(1, 255),
)


def _mutate(data: bytes, edits) -> bytes:
    out = bytearray(data)
    for kind, where, value in edits:
        if not out:
            break
        pos = int(where * len(out)) if isinstance(where, float) else min(where, len(out) - 1)
        if kind == "flip":
            out[pos] ^= value
        elif kind == "truncate":
            del out[pos:]
        elif kind == "insert":
            out[pos:pos] = bytes([value])
        elif kind == "huge_u32":
            out[pos : pos + 4] = (0xFFFFFFFF - value).to_bytes(4, "big")
        else:
            out[pos : pos + 4] = value.to_bytes(4, "big")
    return bytes(out)


@pytest.mark.parametrize("cls", MESSAGES, ids=lambda c: c.__name__)
@settings(max_examples=25, deadline=timedelta(seconds=10))
@given(data=st.binary(max_size=4096))
def test_random_bytes_never_decode(world, cls, data):
    assert _decode(world, cls, data) is None


@pytest.mark.parametrize("cls", MESSAGES, ids=lambda c: c.__name__)
@settings(max_examples=40, deadline=timedelta(seconds=20))
@given(edits=st.lists(mutation, min_size=1, max_size=3))
def test_mutated_messages_give_typed_errors_or_a_safe_message(world, cls, edits):
    valid = world["valid"][cls].to_bytes()
    msg = _decode(world, cls, _mutate(valid, edits))
    event("decoded" if msg is not None else "refused")
    if msg is None:
        return
    try:
        _consume(world, msg)
        event("consumed")
    except PrivflError as exc:
        event(f"step raised {type(exc).__name__}")


@pytest.mark.parametrize("cls", MESSAGES, ids=lambda c: c.__name__)
def test_valid_messages_round_trip_and_are_consumed(world, cls):
    msg = world["valid"][cls]
    assert _decode(world, cls, msg.to_bytes()) == msg
    _consume(world, msg)


@pytest.mark.parametrize("cls", MESSAGES, ids=lambda c: c.__name__)
def test_a_huge_declared_length_is_refused_before_anything_is_allocated(world, cls):
    valid = world["valid"][cls].to_bytes()
    tracemalloc.start()
    try:
        for pos in range(4, min(len(valid), 160)):
            crafted = valid[:pos] + b"\xff\xff\xff\xf0" + valid[pos + 4 :]
            _decode(world, cls, crafted)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * len(valid) + (1 << 20)


@pytest.mark.parametrize("cls", MESSAGES, ids=lambda c: c.__name__)
def test_an_unreduced_coefficient_is_refused(world, cls):
    valid = bytearray(world["valid"][cls].to_bytes())
    valid[-8:] = b"\xff" * 8  # the last coefficient (60 bits) is 2^60 - 1: above every modulus
    assert _decode(world, cls, bytes(valid)) is None


@pytest.mark.parametrize("cls", MESSAGES, ids=lambda c: c.__name__)
@settings(max_examples=15, deadline=timedelta(seconds=20))
@given(
    fill=st.sampled_from(["zeros", "max", "random"]),
    start=st.floats(0, 1, exclude_max=True),
    count=st.integers(1, 5000),
    seed=st.integers(0, 2**32 - 1),
)
def test_in_range_coefficients_of_any_value_reach_openfhe_safely(
    world, cls, fill, start, count, seed
):
    """Overwrite a run of coefficients (counted from the end of the message, all inside the
    last payload) with zeros, ``2^50 - 1`` or random values below ``2^50`` (reduced modulo
    every prime): the message decodes and the consuming step returns or raises a typed error."""
    valid = world["valid"][cls]
    name = dataclasses.fields(valid)[-1].name  # the last payload
    payload = bytearray(getattr(valid, name))
    last = len(payload) // 8
    first = int(start * last)
    count = min(count, last - first)
    if fill == "zeros":
        new = np.zeros(count, dtype="<u8")
    elif fill == "max":
        new = np.full(count, (1 << 50) - 1, dtype="<u8")
    else:
        gen = np.random.default_rng(seed)  # not secret: fuzz input
        new = gen.integers(0, 1 << 50, count, dtype=np.uint64).astype("<u8")
    end = len(payload) - 8 * first
    payload[end - 8 * count : end] = new.tobytes()
    data = dataclasses.replace(valid, **{name: bytes(payload)}).to_bytes()  # packed on the wire
    msg = _decode(world, cls, bytes(data))
    assert msg is not None, "in-range coefficients must decode"
    with contextlib.suppress(PrivflError):
        _consume(world, msg)


@given(
    values=st.lists(st.integers(0, (1 << 60) - 1), min_size=0, max_size=64).filter(
        lambda v: len(v) % 2 == 0
    )
)
def test_sixty_bit_packing_round_trips_and_saves_a_sixteenth(values):
    payload = np.array(values, dtype=np.uint64).tobytes()
    packed = wire.pack60(payload)
    assert len(packed) == len(payload) * 15 // 16
    assert wire.unpack60(packed, len(values), "x") == payload


@given(data=st.binary(max_size=64), count=st.integers(0, 10))
def test_any_bytes_of_the_packed_size_unpack_below_two_to_the_sixty(data, count):
    if len(data) != wire.packed_bytes(2 * count):
        with pytest.raises(MalformedMessageError):
            wire.unpack60(data, 2 * count, "x")
        return
    out = np.frombuffer(wire.unpack60(data, 2 * count, "x"), dtype=np.uint64)
    assert out.size == 2 * count and all(int(v) < 1 << 60 for v in out)
    assert wire.pack60(out.tobytes()) == data


def test_packing_refuses_a_coefficient_of_sixty_one_bits():
    with pytest.raises(ValueError, match="2\\^60"):
        wire.pack60(np.array([1 << 60, 0], dtype=np.uint64).tobytes())


def _rows_or_message(world, data):
    """What the aggregator's upload decoder (``tm.ciphertext_rows``, no copy into bytes) and
    ``CiphertextMessage.from_bytes`` make of ``data`` (None: a typed ProtocolError)."""
    ctx, session = world["server"].context, world["server"].session
    start = time.process_time()
    out = []
    for decode in (tm.CiphertextMessage.from_bytes, tm.ciphertext_rows):
        try:
            out.append(decode(data, ctx, session))
        except ProtocolError:
            out.append(None)
    assert time.process_time() - start < 4.0
    return out


@settings(max_examples=40, deadline=timedelta(seconds=20))
@given(edits=st.lists(mutation, min_size=1, max_size=3), noise=st.binary(max_size=4096))
def test_the_rows_decoder_refuses_exactly_what_the_message_decoder_refuses(world, edits, noise):
    valid = world["valid"][tm.CiphertextMessage].to_bytes()
    for data in (_mutate(valid, edits), noise, valid):
        msg, rows = _rows_or_message(world, data)
        assert (msg is None) == (rows is None)
        if msg is not None:
            assert (rows.sender, rows.level, rows.deg) == (msg.sender, msg.level, msg.deg)
            assert rows.rows.tobytes() == msg.payload and not rows.rows.flags.writeable
