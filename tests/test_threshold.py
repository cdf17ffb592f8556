"""Threshold CKKS (OpenFHE): real keys, real ciphertexts, real shares; the fast "test" set."""

import dataclasses
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from test_threshold_support import require_openfhe_for_tests

openfhe = require_openfhe_for_tests()

from privfl.crypto.threshold import (  # noqa: E402
    Ciphertext,
    CiphertextMessage,
    DecryptionRequest,
    DecryptionShare,
    JointDecryptionError,
    KeyGenShare,
    LevelBudgetError,
    MaskedDecryption,
    ThresholdContext,
    estimate_noise_bits,
    parameter_set,
)
from privfl.crypto.threshold import messages as tm  # noqa: E402
from privfl.crypto.threshold import wire as wire  # noqa: E402
from privfl.crypto.threshold.ciphertext import fuse_and_decode  # noqa: E402
from privfl.crypto.threshold.params import DECRYPTION_TOWERS  # noqa: E402
from privfl.errors import InputError, ProtocolError, WrongSessionError  # noqa: E402
from privfl.messages import new_session_id  # noqa: E402
from privfl.runner import InProcessRunner  # noqa: E402
from privfl.threshold import (  # noqa: E402
    DecryptionBudgetExhaustedError,
    make_roles,
    run_interactive_bootstrap,
    run_joint_decryption,
    run_key_generation,
    run_masked_decryption,
)

PARAMS = parameter_set("test")
M = 3
SLOTS = PARAMS.batch_size
BOUND = PARAMS.decryption_error_bound(M)
MASK_SEED = bytes(range(32))


@pytest.fixture(scope="module")
def roles():
    server, parties = make_roles(PARAMS, M)
    runner = InProcessRunner()
    run_key_generation(server, parties, runner)
    return server, parties, runner


def values(seed, scale=1.0):
    return scale * np.random.default_rng(seed).uniform(-1, 1, SLOTS)  # not secret: test data


def decrypt(parties, ct, requester=0):
    return run_joint_decryption(parties[requester], parties, ct, InProcessRunner(), SLOTS)


# ---------------------------------------------------------------- key generation
def test_parameter_sets_are_named_and_flooding_is_configured_in_openfhe(roles):
    server, _, _ = roles
    assert {"training", "fhauc", "test"} <= set(["training", "fhauc", "test"])
    with pytest.raises(InputError, match="unknown threshold parameter set"):
        parameter_set("nope")
    cc = server.context.cc
    assert cc.GetNoiseEstimate() == pytest.approx(PARAMS.noise_estimate_bits(M))
    assert math.log2(cc.GetScalingFactorReal(0)) == pytest.approx(59, abs=0.01)
    training = ThresholdContext.for_parameters(parameter_set("training"), 3)
    assert training.ring == 1 << 15 and training.levels == 12
    assert training.cc.GetNoiseEstimate() == pytest.approx(
        parameter_set("training").noise_estimate_bits(3)
    )


def test_a_budget_openfhe_would_refuse_is_an_input_error():
    greedy = dataclasses.replace(PARAMS, circuit_noise_bits=39.0, name="greedy")
    with pytest.raises(InputError, match="flooding noise"):
        greedy.check(3)
    with pytest.raises(InputError, match="decoder"):
        dataclasses.replace(PARAMS, circuit_noise_bits=30.0, max_decryptions=2**10).check(16)


def test_key_generation_traffic_per_party_does_not_grow_with_the_number_of_parties():
    per_party = {}
    for parties in (2, 4):
        server, roles_ = make_roles(PARAMS, parties)
        runner = InProcessRunner()
        run_key_generation(server, roles_, runner)
        per_party[parties] = {ch: sizes[0] for ch, sizes in runner.sizes.items()}
        assert all(len(set(s)) == 1 and len(s) == parties for s in runner.sizes.values())
    assert per_party[2] == per_party[4]
    ctx = ThresholdContext.for_parameters(PARAMS, 2)
    b_vectors = len(ctx.public_key_shape.b_index) + len(ctx.switch_key_shape.b_index)
    b_vectors += len(ctx.automorphism_shape.b_index)
    assert per_party[2]["keygen_share"] == pytest.approx(b_vectors * ctx.ring * 7.5, rel=0.001)


def test_the_server_holds_no_secret_share_and_each_party_exactly_its_own(roles):
    server, parties, _ = roles

    def private_keys(obj, seen):
        if id(obj) in seen:
            return []
        seen.add(id(obj))
        if isinstance(obj, openfhe.PrivateKey):
            return [obj]
        if isinstance(obj, dict):
            items = list(obj.values())
        elif isinstance(obj, list | tuple | set):
            items = list(obj)
        elif hasattr(obj, "__dict__") and not isinstance(obj, type):
            items = list(vars(obj).values())
        else:
            items = []
        return [k for item in items for k in private_keys(item, seen)]

    assert private_keys(server, set()) == []
    own = [private_keys(p, {id(server.context)}) for p in parties]
    assert [len(k) for k in own] == [1] * M
    tags = {openfhe.Serialize(k[0], openfhe.BINARY) for k in own}
    assert len(tags) == M  # three different shares
    assert not hasattr(server, "decryption_share") and not hasattr(server, "fuse")


def test_server_sums_equal_openfhe_multiadd_of_the_rebuilt_key_shares():
    """The server adds b halves modulo each prime; OpenFHE's MultiAddPubKeys must agree."""
    server, parties = make_roles(PARAMS, 2)
    ctx = server.context
    shares = [p.keygen_share() for p in parties]
    joint = server.combine_keygen_shares(shares)
    shape = ctx.public_key_shape
    crp = ctx.crp(shape, server.session, "public-key")
    keys = []
    for s in shares:
        b = np.frombuffer(s.public_key, dtype=np.uint64).reshape(len(shape.b_index), ctx.ring)
        keys.append(ctx.load("public_key", shape.layout, shape.merge(crp, b), server.tag))
    summed = ctx.cc.MultiAddPubKeys(keys[0], keys[1], server.tag)
    assert ctx.dump(shape.layout, summed) == ctx.dump(shape.layout, server.public_key)
    b = np.frombuffer(joint.public_key, dtype=np.uint64).reshape(len(shape.b_index), ctx.ring)
    assert shape.merge(crp, b) == ctx.dump(shape.layout, summed)


def test_the_common_reference_polynomials_are_the_same_at_every_role_and_differ_per_session():
    ctx = ThresholdContext.for_parameters(PARAMS, M)
    s1, s2 = new_session_id(), new_session_id()
    shape = ctx.switch_key_shape
    a1 = ctx.crp(shape, s1, "switch-key")
    assert np.array_equal(a1, ctx.crp(shape, s1, "switch-key"))
    assert not np.array_equal(a1, ctx.crp(shape, s2, "switch-key"))
    assert bool((a1 < shape.layout.moduli[shape.a_index][:, None]).all())


def test_crp_keys_shared_by_parties_in_one_process_are_unchanged_by_keygen_and_per_session():
    from privfl.threshold import ThresholdParty

    ctx = ThresholdContext.for_parameters(PARAMS, M)
    s1, s2 = new_session_id(), new_session_id()
    kinds = [("public-key", "public_key", ctx.public_key_shape)]
    kinds += [("switch-key", "eval_key", ctx.switch_key_shape)]
    kinds += [("automorphism", "eval_key_map", ctx.automorphism_shape)]

    def crp_bytes(session):
        return [ctx.serialize(ctx.crp_key(shape, session, p, k)) for p, k, shape in kinds]

    def built(session):  # what crp_key computes, without the process-wide copy
        zeros = [np.zeros((len(shape.b_index), ctx.ring), dtype=np.uint64) for *_, shape in kinds]
        return [
            ctx.serialize(
                ctx.load(k, shape.layout, shape.merge(ctx.crp(shape, session, p), z), session.hex())
            )
            for (p, k, shape), z in zip(kinds, zeros, strict=True)
        ]

    first = crp_bytes(s1)
    for i in range(2):  # two parties of session s1 generate their shares from the shared CRPs
        ThresholdParty(f"p{i}", i, ctx, s1).keygen_share()
    assert crp_bytes(s1) == first == built(s1)  # OpenFHE only read them
    assert crp_bytes(s2) == built(s2) != first  # another session: its own CRPs
    p, k, shape = kinds[2]
    assert ctx.crp_key(shape, s2, p, k) is ctx.crp_key(shape, s2, p, k)  # built once


# ---------------------------------------------------------------- joint decryption
@pytest.mark.parametrize("requester", range(M))
def test_joint_decryption_of_an_encryption_under_the_joint_key_equals_the_plaintext(
    roles, requester
):
    server, parties, _ = roles
    x = values(requester, scale=100.0)
    assert np.max(np.abs(decrypt(parties, server.encrypt(x), requester) - x)) < BOUND


def test_any_m_minus_1_real_shares_fail_to_decrypt(roles):
    server, parties, _ = roles
    ctx = server.context
    x = values(7)
    lead = parties[0]
    request = lead.request_decryption(server.encrypt(x))
    compressed = lead._decryptions[request.request_id]
    shares = [p.decryption_share(request) for p in parties[1:]]
    layout = ctx.c1_layout(request.level, request.deg)
    natives = [ctx.load("ciphertext", layout, s.share, lead.tag) for s in shares]
    lead_share = ctx.cc.MultipartyDecryptLead([compressed], lead._share())[0]
    full = fuse_and_decode(ctx, [lead_share, *natives], SLOTS)
    assert np.max(np.abs(full - x)) < BOUND
    subsets = [[lead_share, natives[1]], [lead_share, natives[0]]]  # without party 1 / 2
    c0_only = compressed.Clone()
    c0_only.RemoveElement(1)
    subsets.append([c0_only, *natives])  # all but the lead's share
    for subset in subsets:
        try:
            got = fuse_and_decode(ctx, subset, SLOTS)
        except JointDecryptionError:
            continue
        assert np.max(np.abs(got - x)) > 1e3
    again = lead.request_decryption(server.encrypt(x))
    with pytest.raises(ProtocolError, match="all 3 parties"):
        lead.fuse(again, [parties[1].decryption_share(again)], SLOTS)


def test_masked_decryption_reveals_the_result_to_the_parties_and_a_uniform_polynomial_to_the_server(
    roles,
):
    server, parties, _ = roles
    ctx = server.context
    x = values(11, scale=10.0)
    ct = server.encrypt(x)
    runner = InProcessRunner()
    for got in run_masked_decryption(server, parties, ct, MASK_SEED, runner, SLOTS):
        assert np.max(np.abs(got - x)) < BOUND
    assert runner.sizes["masked_result"] == [runner.sizes["masked_result"][0]] * M
    # what the server holds: c0 + sum of shares, one of them masked
    request = server.request_decryption(ct)
    shares = [p.decryption_share(request, MASK_SEED) for p in parties]
    masked = server.fuse_masked(request, shares)
    layout = ctx.c1_layout(masked.level, masked.deg)
    as_ct = ctx.load("ciphertext", layout, masked.masked, server.tag)
    try:
        leaked = fuse_and_decode(ctx, [as_ct], SLOTS)
        assert np.max(np.abs(leaked - x)) > 1e3
    except JointDecryptionError:
        pass
    rows = np.frombuffer(masked.masked, dtype=np.uint64).reshape(DECRYPTION_TOWERS, ctx.ring)
    top_bits = (rows >> (layout.moduli[:, None].astype(np.uint64) * 0 + np.uint64(56))).ravel()
    counts = np.bincount(top_bits.astype(np.int64), minlength=16)[:8]
    assert counts.min() > 0.5 * counts.mean()  # no concentration: uniform modulo q
    # without the parties' mask the same fusion would give the plaintext away
    request = server.request_decryption(ct)
    plain = server.fuse_masked(request, [p.decryption_share(request) for p in parties])
    clear = ctx.load("ciphertext", layout, plain.masked, server.tag)
    assert np.max(np.abs(fuse_and_decode(ctx, [clear], SLOTS) - x)) < BOUND


def test_the_decryption_error_has_the_documented_size(roles):
    server, parties, _ = roles
    errors = np.concatenate([decrypt(parties, server.encrypt(np.zeros(SLOTS))) for _ in range(8)])
    predicted = 2.0 ** PARAMS.decryption_error_bits(M)
    assert 0.6 * predicted < errors.std() < 1.5 * predicted


def test_the_decryption_budget_is_enforced_per_party():
    tight = dataclasses.replace(PARAMS, max_decryptions=2, name="tight")
    server, parties = make_roles(tight, 2)
    run_key_generation(server, parties, InProcessRunner())
    ct = server.encrypt([1.0])
    for _ in range(2):
        parties[1].decryption_share(server.request_decryption(ct))
    with pytest.raises(DecryptionBudgetExhaustedError, match="fresh keys"):
        parties[1].decryption_share(server.request_decryption(ct))


def test_shares_are_bound_to_their_request_and_session(roles):
    server, parties, _ = roles
    ctx = server.context
    ct = server.encrypt([0.5])
    r1, r2 = server.request_decryption(ct), server.request_decryption(ct)
    shares = [p.decryption_share(r1) for p in parties]
    with pytest.raises(ProtocolError, match="another request"):
        server.fuse_masked(r2, shares)
    with pytest.raises(ProtocolError):
        server.fuse_masked(r1, [shares[0]] * M)
    with pytest.raises(ProtocolError, match="was answered"):
        parties[0].decryption_share(r1, MASK_SEED)  # a repeated id would reuse the mask
    with pytest.raises(WrongSessionError):
        DecryptionShare.from_bytes(shares[0].to_bytes(), ctx, new_session_id())
    with pytest.raises(ProtocolError):
        DecryptionRequest.from_bytes(shares[0].to_bytes(), ctx, server.session)


# ---------------------------------------------------------------- evaluation and levels
@settings(max_examples=5, deadline=None)
@given(st.lists(st.floats(-4, 4), min_size=1, max_size=SLOTS), st.floats(-3, 3))
def test_homomorphic_operations_decrypt_to_the_plaintext_results(roles, xs, k):
    server, parties, _ = roles
    x = np.zeros(SLOTS)
    x[: len(xs)] = xs
    ct = server.encrypt(x)
    checks = [
        (ct * ct + k, x * x + k),
        (ct * k - ct, x * k - x),
        (ct.rotate(1), np.roll(x, -1)),
        (ct.rotate(-1), np.roll(x, 1)),
        (ct.sum_slots(), np.full(SLOTS, x.sum())),
    ]
    for enc, expected in checks:
        assert np.max(np.abs(decrypt(parties, enc) - expected)) < 4 * BOUND


def test_a_ciphertext_survives_the_wire(roles):
    server, parties, _ = roles
    x = values(3)
    ct = server.encrypt(x) * server.encrypt(x)  # level 0, degree 2
    msg = ct.to_message(server.session, server.name)
    back = CiphertextMessage.from_bytes(msg.to_bytes(), server.context, server.session)
    again = Ciphertext.from_message(server.context, back)
    assert (again.level, again.deg) == (0, 2)
    assert np.max(np.abs(decrypt(parties, again) - x * x)) < BOUND


@pytest.mark.parametrize("owner_is_server", [True, False])
def test_interactive_bootstrapping_restores_levels_and_keeps_the_values(roles, owner_is_server):
    server, parties, _ = roles
    x = values(5, scale=3.0)
    ct = server.encrypt(x)
    while ct.levels_used < PARAMS.bootstrap_max_level:
        ct = ct * 1.0
    assert ct.levels_used == PARAMS.bootstrap_max_level
    owner = server if owner_is_server else parties[1]
    fresh = run_interactive_bootstrap(owner, parties, ct, InProcessRunner())
    assert (fresh.level, fresh.deg) == (0, 1)
    assert np.max(np.abs(decrypt(parties, fresh) - x)) < 2 * BOUND
    deep = fresh
    for _ in range(PARAMS.decrypt_max_level):  # the refreshed ciphertext has all levels again
        deep = deep * 1.0
    assert np.max(np.abs(decrypt(parties, deep) - x)) < 2 * BOUND


def test_a_ciphertext_that_consumed_too_many_levels_is_refused_not_corrupted(roles):
    server, _, _ = roles
    ct = server.encrypt(values(9))
    while ct.levels_used <= PARAMS.bootstrap_max_level:
        ct = ct * 1.0
    with pytest.raises(LevelBudgetError, match="interactive bootstrapping"):
        server.start_bootstrap(ct)
    while ct.levels_used < PARAMS.multiplicative_depth:
        ct = ct * 1.0
    with pytest.raises(LevelBudgetError, match="joint decryption needs 2 towers"):
        server.request_decryption(ct)
    with pytest.raises(LevelBudgetError, match="no level left"):
        ct * ct
    assert issubclass(LevelBudgetError, InputError)


def test_keygen_messages_carry_only_b_halves_and_bind_the_session(roles):
    server, _, _ = roles
    ctx = server.context
    _, parties = make_roles(PARAMS, M, session=server.session)
    share = parties[0].keygen_share()
    decoded = KeyGenShare.from_bytes(share.to_bytes(), ctx, server.session)
    assert decoded == share
    with pytest.raises(WrongSessionError):
        KeyGenShare.from_bytes(share.to_bytes(), ctx, new_session_id())
    with pytest.raises(ProtocolError, match="already generated"):
        parties[0].keygen_share()


# ---------------------------------------------------------------- identities and noise
@settings(max_examples=50)
@given(st.data())
def test_modular_vector_arithmetic_matches_python_integers(data):
    moduli = np.array(
        data.draw(
            st.lists(st.integers(3, (1 << 62) - 1).map(lambda q: q | 1), min_size=1, max_size=3)
        ),
        dtype=np.uint64,
    )
    ring = 4
    a = np.array(
        [[data.draw(st.integers(0, int(q) - 1)) for _ in range(ring)] for q in moduli],
        dtype=np.uint64,
    )
    b = np.array(
        [[data.draw(st.integers(0, int(q) - 1)) for _ in range(ring)] for q in moduli],
        dtype=np.uint64,
    )
    s, d = wire.add_mod(a, b, moduli), wire.sub_mod(a, b, moduli)
    acc = a.copy()
    wire.add_mod_into(acc, b, moduli)  # the in-place running sum agrees with add_mod
    assert (acc == s).all()
    for i, q in enumerate(moduli.tolist()):
        for j in range(ring):
            assert int(s[i, j]) == (int(a[i, j]) + int(b[i, j])) % q
            assert int(d[i, j]) == (int(a[i, j]) - int(b[i, j])) % q


@settings(max_examples=10, deadline=None)
@given(st.binary(min_size=32, max_size=32), st.text(min_size=1, max_size=8))
def test_seeded_coefficients_are_reduced_and_deterministic(seed, label):
    ctx = ThresholdContext.for_parameters(PARAMS, M)
    moduli = ctx.q_moduli[:2]
    raw = wire.uniform_coefficients(seed, label, moduli, ctx.ring)
    assert raw == wire.uniform_coefficients(seed, label, moduli, ctx.ring)
    wire.check_coefficients(moduli, ctx.ring, raw, "seeded")


def test_extract_then_splice_rebuilds_the_same_object(roles):
    server, _, _ = roles
    ctx = server.context
    ct = server.encrypt(values(1))
    layout = ctx.ciphertext_layout(0, 1)
    payload = ctx.dump(layout, ct.native)
    rebuilt = ctx.load("ciphertext", layout, payload, server.tag)
    assert ctx.serialize(rebuilt) == ctx.serialize(ct.native)


def test_the_declared_circuit_noise_covers_the_measured_noise_of_the_fhauc_circuit():
    fhauc = parameter_set("fhauc")
    n = fhauc.batch_size
    gen = np.random.default_rng(0)  # not secret: test data

    def circuit(cc, encrypt):
        t, f = encrypt(gen.random(n)), encrypt(gen.random(n) / n)
        return cc.EvalMult(cc.EvalSum(cc.EvalMult(t, f), n), 0.73)

    assert estimate_noise_bits(fhauc, circuit) < fhauc.circuit_noise_bits - 1
    assert estimate_noise_bits(PARAMS, lambda cc, enc: enc([0.5] * 8)) < PARAMS.circuit_noise_bits


def test_mask_messages_round_trip(roles):
    server, parties, _ = roles
    request = server.request_decryption(server.encrypt([1.0]))
    shares = [p.decryption_share(request, MASK_SEED) for p in parties]
    masked = server.fuse_masked(request, shares)
    assert MaskedDecryption.from_bytes(masked.to_bytes(), server.context, server.session) == masked


def test_the_server_keeps_the_key_generation_rounds_in_order():
    """Round 2 only after round 1 is complete; each round finishes once; typed errors."""
    server, roles_ = make_roles(PARAMS, 3)
    shares = [r.keygen_share() for r in roles_]
    for s in shares[:2]:
        server.add_keygen_share(s)
    with pytest.raises(ProtocolError, match="one share from each"):
        server.joint_public_keys()
    server.add_keygen_share(shares[2])
    with pytest.raises(ProtocolError, match="second"):
        server.add_keygen_share(shares[0])
    joint = server.joint_public_keys()
    with pytest.raises(ProtocolError, match="already"):
        server.joint_public_keys()
    mults = [r.keygen_mult_share(joint) for r in roles_]
    server.add_mult_share(mults[0])
    with pytest.raises(ProtocolError, match="once"):
        server.add_mult_share(mults[0])
    with pytest.raises(ProtocolError, match="each party of round 1"):
        server.evaluation_keys()


def test_relinearisation_shares_before_the_joint_keys_are_refused():
    server, roles_ = make_roles(PARAMS, 2)
    for r in roles_:
        server.add_keygen_share(r.keygen_share())
    early = tm.MultKeyShare(server.session, roles_[0].name, b"")
    with pytest.raises(ProtocolError, match="after the joint public keys"):
        server.add_mult_share(early)
