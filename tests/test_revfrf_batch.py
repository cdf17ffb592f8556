"""Batched, packed secure prediction (RevFRF FRF-Predict, issue 30): slot identities
(hypothesis), packed HoLT on real DT-PKC ciphertexts, the same predictions as row by row,
every slot charged at the CC and the holder (all or nothing), out-of-range slots answered
at random per slot, and the new decoders fuzzed."""

import secrets

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _forest_fuzz import decode_safely, payloads
from privfl.crypto import dtpkc
from privfl.errors import InputError, ProtocolError, UnknownPartyError
from privfl.forest import packed_holt, packing, query_auth, schedule
from privfl.forest.budget import REQUESTER_QUERY, Ticket
from privfl.forest.messages import CC, CS
from privfl.forest.revfrf import RevFRF

VALUE = 1 << (packing.PACK_VALUE_BITS - 1)
SLOW_OK = settings(
    max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@pytest.fixture(scope="module")
def world():
    return schedule.secure_ops_world(512, ("u", "a"), allow_insecure_key_bits=True)


# ------------------------------------------------------------------ pure slot arithmetic
@given(st.integers(8, 300).flatmap(
    lambda k: st.tuples(st.just(k), st.lists(st.integers(-(1 << (k - 1)), (1 << (k - 1)) - 1),
                                             min_size=1, max_size=12))))  # fmt: skip
def test_pack_then_unpack_is_the_identity_and_slots_do_not_spill(case):
    k, values = case
    packed = packing.pack(values, k)
    assert 0 <= packed < 1 << (k * len(values))
    assert packing.unpack(packed, len(values), k) == values
    for i, v in enumerate(values):  # each slot is read from its own k bits only
        assert packing.chunk(packed, i, k) == v


@given(st.lists(st.integers(0, 1), min_size=1, max_size=40))
def test_packed_bits_round_trip_and_reject_anything_else(bits):
    assert packing.unpack_bits(packing.pack_bits(bits), len(bits)) == bits
    with pytest.raises(ValueError):
        packing.unpack_bits(1 << len(bits), len(bits))


def test_slot_geometry_fits_the_modulus_and_the_honest_range(world):
    prm = world.public_key("u").params
    k, n = packing.slot_bits(prm), packing.slot_count(prm)
    assert [(bits - 1) // k for bits in (512, 1024, 2048, 3072)] == [2, 4, 9, 14]
    assert n * k <= prm.bits - 1  # the packed value is below N: its residue is the integer
    worst = (1 << prm.sigma) * ((VALUE - 1) * 4 + 1)  # |r (2x + 1 - 2y)| at the bounds
    assert worst < 1 << packing.slot_range_bits(prm) <= 1 << (k - 1 - packing.PACK_MARGIN_BITS)


# ------------------------------------------------------------------ packed HoLT, real keys
def _tickets(world, n):
    return [Ticket(world.open_query(), 0, 0, REQUESTER_QUERY) for _ in range(n)]


def _packed(world, xs, ys, holder="u", tickets=None):
    """Blind a pack as the CS does, send it to the real CC and holder, read the answers."""
    cs = world.cs._material()
    tickets = tickets or _tickets(world, len(xs))
    request, coins = packed_holt.blind_pack(cs.sk, cs.lam1, 7, xs, ys, holder, tickets)
    cfg = world.cs.config
    reply = world.cc.handle(packed_holt.write_batch("holt-batch", cfg, CS, [request]))
    results = packed_holt.read_results(reply, "holt-batch-result", cfg, CC, cs.sk.public.params)
    back = world.holders[holder].handle(
        packed_holt.write_batch("partial-decrypt-batch", cfg, CS, results)
    )
    (partial,) = packed_holt.read_partials(back, cfg, holder, [7], cs.sk.public)
    return packed_holt.read_pack(cs.sk, partial, coins)


@given(st.lists(st.tuples(st.integers(-VALUE + 1, VALUE - 1), st.integers(-VALUE + 1, VALUE - 1),
                          st.booleans()), min_size=1, max_size=2))  # fmt: skip
@SLOW_OK
def test_a_pack_answers_x_less_than_y_for_every_slot(world, pairs):
    req, u = world.public_key("a"), world.public_key("u")
    xs = [dtpkc.encrypt(req, x) for x, _, _ in pairs]
    ys = [dtpkc.encrypt(u, x if equal else y) for x, y, equal in pairs]
    want = [False if equal else x < y for x, y, equal in pairs]
    assert _packed(world, xs, ys) == want


@given(st.integers(-VALUE + 1, VALUE - 1), st.integers(-VALUE + 1, VALUE - 1))
@SLOW_OK
def test_blinded_slots_decrypt_to_signed_r_times_2x_plus_1_minus_2y(world, x, y):
    """The CC's view, with the KGC's strong key: l = A - B holds per slot ±r(2x+1-2y) + the
    offset, and A alone is not the slot value (β)."""
    cs = world.cs._material()
    xs = [dtpkc.encrypt(world.public_key("a"), x)] * 2
    ys = [dtpkc.encrypt(world.public_key("u"), y)] * 2
    request, coins = packed_holt.blind_pack(cs.sk, cs.lam1, 1, xs, ys, "u", _tickets(world, 2))
    lam2 = world.cc._share()
    a = dtpkc.partial_decrypt_strong2(lam2, request.a, request.share_a)
    b = dtpkc.partial_decrypt_strong2(lam2, request.b, request.share_b)
    prm = cs.sk.public.params
    slots = packing.unpack((a - b) % int(prm.n), 2, packing.slot_bits(prm))
    for s, c in zip(slots, coins, strict=True):
        d = 2 * x + 1 - 2 * y
        r = s // d if c else -s // d
        assert s == (r * d if c else -r * d) and r % 2 == 1 and 0 < r < 1 << prm.sigma
    world.cc._queries.spent.clear()  # these tickets were never sent to the CC


def test_an_out_of_range_slot_gets_a_random_bit_without_touching_its_neighbour(world):
    """A deviating CS packs an honest slot beside a slot of value 0 and one beyond the slot
    range: the CC answers each slot on its own chunk only, alarms, and the honest one is
    right."""
    cs, cfg = world.cs._material(), world.cs.config
    prm, k = cs.sk.public.params, packing.slot_bits(cs.sk.public.params)
    lam2 = world.cc._share()
    for bad in (0, 1 << (packing.slot_range_bits(prm) + 1)):
        honest = -12345  # slot 0 negative: the CC answers 1
        packed = packing.pack([honest, bad], k)
        a = dtpkc.encrypt_residue(world.public_key("a"), packed)
        b = dtpkc.encrypt_residue(world.public_key("u"), 0)
        ta, tb = (dtpkc.partial_decrypt_strong1(cs.lam1, c) for c in (a, b))
        req = packed_holt.PackRequest(3, "u", tuple(_tickets(world, 2)), a, b, ta, tb)
        registry = {"u": dtpkc.joint_public_key(cs.sk.public, world.public_key("u"))}
        result, _, in_range = packed_holt.cc_holt_pack(
            lam2, registry, world.cc._signing_key, cfg, req
        )
        assert not in_range
        u_sk = world.holders["u"]._sk
        bits = dtpkc.decrypt(cs.sk, dtpkc.joint_partial_decrypt(u_sk, result.bits))
        assert bits & 1 == 1
    before = len(world.cc.alarms)
    xs = [dtpkc.encrypt(world.public_key("a"), 1)]
    ys = [dtpkc.encrypt(world.public_key("u"), 2)]
    assert _packed(world, xs, ys) == [True] and len(world.cc.alarms) == before


# ------------------------------------------------------------------ charging, all or nothing
def test_the_cc_charges_every_slot_and_refuses_a_batch_whole(world):
    cs, cfg = world.cs._material(), world.cs.config
    xs = [dtpkc.encrypt(world.public_key("a"), 1)] * 2
    ys = [dtpkc.encrypt(world.public_key("u"), 2)] * 2
    fresh, used = _tickets(world, 1)[0], _tickets(world, 1)[0]
    assert _packed(world, xs[:1], ys[:1], tickets=[used]) == [True]
    spent = set(world.cc._queries.spent)
    request, _ = packed_holt.blind_pack(cs.sk, cs.lam1, 9, xs, ys, "u", [fresh, used])
    with pytest.raises(ProtocolError, match="already compared"):
        world.cc.handle(packed_holt.write_batch("holt-batch", cfg, CS, [request]))
    assert world.cc._queries.spent == spent  # the fresh slot was not charged either
    twice, _ = packed_holt.blind_pack(cs.sk, cs.lam1, 9, xs, ys, "u", [fresh, fresh])
    with pytest.raises(ProtocolError, match="already compared"):  # max_depth 1 per tree too
        world.cc.handle(packed_holt.write_batch("holt-batch", cfg, CS, [twice]))
    minted = Ticket(secrets.token_bytes(32), 0, 0, REQUESTER_QUERY)
    forged, _ = packed_holt.blind_pack(cs.sk, cs.lam1, 9, xs[:1], ys[:1], "u", [minted])
    with pytest.raises(ProtocolError, match="no requester signed"):
        world.cc.handle(packed_holt.write_batch("holt-batch", cfg, CS, [forged]))
    assert world.cc._queries.spent == spent
    stranger, _ = packed_holt.blind_pack(cs.sk, cs.lam1, 9, xs[:1], ys[:1], "CS", [fresh])
    with pytest.raises(UnknownPartyError, match="registered holders"):  # never h_CS alone
        world.cc.handle(packed_holt.write_batch("holt-batch", cfg, CS, [stranger]))
    assert world.cc._queries.spent == spent


def test_a_holder_pays_every_slot_or_strips_nothing(world):
    """A CC-signed pack whose second slot names a node the holder does not provide: the
    holder refuses the whole batch and its budget is unchanged (the first slot unpaid)."""
    cs, cfg = world.cs._material(), world.cs.config
    xs = [dtpkc.encrypt(world.public_key("a"), 1)] * 2
    ys = [dtpkc.encrypt(world.public_key("u"), 2)] * 2
    q1, q2 = world.open_query(), world.open_query()
    tickets = [Ticket(q1, 0, 0, REQUESTER_QUERY), Ticket(q2, 0, 2, REQUESTER_QUERY)]
    request, _ = packed_holt.blind_pack(cs.sk, cs.lam1, 11, xs, ys, "u", tickets)
    reply = world.cc.handle(packed_holt.write_batch("holt-batch", cfg, CS, [request]))
    results = packed_holt.read_results(reply, "holt-batch-result", cfg, CC, cs.sk.public.params)
    holder = world.holders["u"]
    spent = set(holder._budget.spent)
    with pytest.raises(ProtocolError, match="no split provided"):
        holder.handle(packed_holt.write_batch("partial-decrypt-batch", cfg, CS, results))
    assert holder._budget.spent == spent
    with pytest.raises(Exception, match="meant for"):  # and never for another holder
        world.holders["a"].handle(packed_holt.write_batch("partial-decrypt-batch", cfg, CS,
                                                          results))  # fmt: skip


# ------------------------------------------------------------------ what users get
@pytest.fixture(scope="module")
def forest():
    rng = np.random.default_rng(3)
    parts = {f"p{i}": rng.normal(size=(150, 1)) * 1000 for i in range(3)}
    y = (parts["p0"][:, 0] + parts["p1"][:, 0] - parts["p2"][:, 0] > 0).astype(int)
    model = RevFRF(n_trees=3, max_depth=4, key_bits=512, seed=1, allow_insecure_key_bits=True)
    return model.fit(parts, y), parts


def test_batched_prediction_equals_row_by_row_and_the_plaintext_path(forest):
    model, parts = forest
    rows = {k: v[:10] for k, v in parts.items()}
    before = model.computation_provider.comparisons_charged
    many = model.predict_many("batch", rows)
    charged = model.computation_provider.comparisons_charged - before
    one = [model.predict_for("single", {k: v[i] for k, v in parts.items()}) for i in range(10)]
    assert np.array_equal(many, np.asarray(one))
    assert np.array_equal(many, model.predict(rows))
    single = model.computation_provider.comparisons_charged - before - charged
    assert charged == single  # every packed slot charged as one comparison, as row by row


def test_one_cc_message_per_level_and_one_per_holder(forest):
    model, parts = forest
    model.runner.sizes.clear()
    model.predict_many("levels", {k: v[:20] for k, v in parts.items()})
    depth = max(max(_depth(t, n) for n in t.nodes) for t in model.trees)
    cc_batches = [n for n in model.runner.sizes["cs->cc"] if n > 2000]  # not the query-opens
    assert 1 <= len(cc_batches) <= depth
    assert len(model.runner.sizes["requester->cs"]) == 1


def _depth(tree, node_id):
    d = 0
    while node_id:
        node_id, d = (node_id - 1) // 2, d + 1
    return d


def test_a_requester_value_beyond_the_packed_range_is_refused_up_front(forest):
    model, parts = forest
    rows = {k: v[:2].copy() for k, v in parts.items()}
    rows["p0"][1, 0] = 2.0**70
    with pytest.raises(InputError, match="too large"):
        model.predict_many("big", rows)


# ------------------------------------------------------------------ decoders fuzzed
@pytest.fixture(scope="module")
def valid_messages(world):
    """Valid encodings, made once (a fuzz case must not depend on fresh randomness)."""
    cs, cfg = world.cs._material(), world.cs.config
    xs = [dtpkc.encrypt(world.public_key("a"), 1)]
    ys = [dtpkc.encrypt(world.public_key("u"), 2)]
    tk = [Ticket(bytes(32), 0, 0, REQUESTER_QUERY)]
    request, _ = packed_holt.blind_pack(cs.sk, cs.lam1, 5, xs, ys, "u", tk)
    result = packed_holt.PackResult(5, "u", tuple(tk), xs[0], bytes(64))
    partial = packed_holt.write_partials(cfg, "u", [5], xs)
    query = query_auth.Query(tuple(xs), bytes(64))
    batch = query_auth.QueryBatch((query,)).to_bytes(cfg, "r")
    return request, result, partial, batch


@given(data=st.data())
@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
def test_packed_decoders_raise_only_typed_errors_in_bounded_time(world, valid_messages, data):
    cfg, prm = world.cs.config, world.public_key("u").params
    request, result, partial, batch = valid_messages
    key = world.public_key("a")
    decoders = {  # the encodings are deterministic given the parts made once above
        "holt-batch": (packed_holt.write_batch("holt-batch", cfg, CS, [request]),
                       lambda d: packed_holt.read_requests(d, cfg, prm)),
        "results": (packed_holt.write_batch("holt-batch-result", cfg, CC, [result]),
                    lambda d: packed_holt.read_results(d, "holt-batch-result", cfg, CC, prm)),
        "partials": (partial, lambda d: packed_holt.read_partials(d, cfg, "u", [5], key)),
        "query-batch": (batch, lambda d: query_auth.QueryBatch.from_bytes(d, cfg, "r", key, 1,
                                                                          8)),
    }  # fmt: skip
    name = data.draw(st.sampled_from(sorted(decoders)))
    valid, decode = decoders[name]
    decode_safely(decode, data.draw(payloads(valid)))


def test_a_participant_value_beyond_the_packed_range_is_refused_at_setup():
    """A holder's values (hence its splits) must fit a packed comparison too: before this
    check, splits above 2^64 were accepted and ``predict_many`` silently answered them with
    random bits while ``predict_for`` was exact (found by the review)."""
    rng = np.random.default_rng(5)  # not secret: test data
    parts = {"p0": np.full((40, 1), 1e20), "p1": rng.normal(size=(40, 1))}
    model = RevFRF(n_trees=1, max_depth=1, key_bits=512, seed=1, allow_insecure_key_bits=True)
    with pytest.raises(InputError, match="packed comparisons"):
        model.fit(parts, rng.integers(0, 2, 40))
