import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.crypto import keywrap
from privfl.crypto.ckks import FRESH_NOISE_BOUND, CKKSContext, window_steps
from privfl.crypto.prng import SharedRandomness, new_seed
from privfl.errors import DecryptionNotPermittedError, MalformedMessageError, UnknownPartyError

TOL = 1e-6


@pytest.fixture(scope="module")
def contexts():
    secret = CKKSContext.generate(rotation_steps=window_steps(4096))
    public = CKKSContext.deserialize(secret.serialize_public())
    party = CKKSContext.deserialize(secret.serialize_secret())
    return secret, public, party


values = st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=64)


@given(values)
@settings(max_examples=25)
def test_ckks_decrypt_of_encrypt_is_identity(contexts, xs):
    _, _, party = contexts
    out = party.decrypt(party.encrypt(xs))[: len(xs)]
    assert np.allclose(out, xs, atol=TOL)


@given(values, values)
@settings(max_examples=25)
def test_ckks_add_and_sub_are_homomorphic_after_transport(contexts, xs, ys):
    _, public, party = contexts
    n = min(len(xs), len(ys))
    a = public.ciphertext_from_bytes(party.encrypt(xs[:n]).to_bytes())
    b = public.ciphertext_from_bytes(party.encrypt(ys[:n]).to_bytes())
    x, y = np.array(xs[:n]), np.array(ys[:n])
    assert np.allclose(party.decrypt(a + b)[:n], x + y, atol=TOL)
    assert np.allclose(party.decrypt(a - b)[:n], x - y, atol=TOL)
    assert np.allclose(party.decrypt(-a)[:n], -x, atol=TOL)


@given(
    st.lists(st.integers(0, 10**7), min_size=1, max_size=200),
    st.lists(st.integers(0, 10**7), min_size=1, max_size=200),
    st.integers(1, 2**20),
)
@settings(max_examples=25)
def test_ckks_inner_product_times_integer_is_exact_for_large_counts(contexts, xs, ys, c):
    _, public, party = contexts
    n = min(len(xs), len(ys))
    x, y = np.array(xs[:n], dtype=float), np.array(ys[:n], dtype=float)
    a = public.ciphertext_from_bytes(party.encrypt(x).to_bytes())
    b = public.ciphertext_from_bytes(party.encrypt(y).to_bytes())
    out = party.decrypt(((a * b).window_sum(4096)) * c)
    expect = float(np.dot(xs[:n], ys[:n])) * c
    # every slot holds the full sum; each product x*y carries x*e_y + y*e_x with |e| below the
    # backend's fresh-noise bound, so the sum is off by at most c * (sum|x| + sum|y|) * bound
    bound = c * (np.abs(x).sum() + np.abs(y).sum()) * FRESH_NOISE_BOUND + 1e-6 * c
    assert np.all(np.abs(out - expect) <= bound + 1e-15 * abs(expect))


def test_rotation_moves_slots_left(contexts):
    _, public, party = contexts
    ct = public.ciphertext_from_bytes(party.encrypt(np.arange(8.0)).to_bytes())
    assert np.allclose(party.decrypt(ct.rotate(2))[:6], np.arange(2.0, 8.0), atol=TOL)


def test_aggregator_public_context_cannot_decrypt(contexts):
    secret, public, party = contexts
    assert not public.is_private and party.is_private
    ct = public.ciphertext_from_bytes(party.encrypt([1.0, 2.0]).to_bytes())
    with pytest.raises(DecryptionNotPermittedError):
        public.decrypt(ct)
    with pytest.raises(DecryptionNotPermittedError):
        public.serialize_secret()
    # the secret key bytes do not appear anywhere in what the aggregator receives
    sk_blob = secret.serialize_secret()
    assert sk_blob[-4096:-64] not in secret.serialize_public()


def test_public_context_holds_only_the_requested_rotations():
    small = CKKSContext.generate(rotation_steps=window_steps(256))
    full = CKKSContext.generate(rotation_steps=window_steps(4096))
    pub = CKKSContext.deserialize(small.serialize_public())
    assert pub.rotation_steps == (1, 2, 4, 8, 16, 32, 64, 128)
    assert len(small.serialize_public()) < 0.75 * len(full.serialize_public())
    ct = pub.ciphertext_from_bytes(
        CKKSContext.deserialize(small.serialize_secret()).encrypt([1.0]).to_bytes()
    )
    with pytest.raises(ValueError, match="Galois"):
        ct.rotate(256)


def test_seeded_upload_ciphertext_is_half_the_size_of_an_evaluated_one(contexts):
    _, public, party = contexts
    fresh = party.encrypt(np.ones(4096)).to_bytes()
    evaluated = (
        public.ciphertext_from_bytes(fresh) + public.ciphertext_from_bytes(fresh)
    ).to_bytes()
    assert len(fresh) < 0.6 * len(evaluated)


@pytest.mark.parametrize("cut", [0, 1, 10, 1000, -1])
def test_truncated_or_corrupted_ciphertext_bytes_raise_malformed(contexts, cut):
    _, public, party = contexts
    data = party.encrypt([1.0, 2.0]).to_bytes()
    bad = data[:cut] if cut >= 0 else data[:100] + bytes(len(data) - 100)
    with pytest.raises(MalformedMessageError):
        public.ciphertext_from_bytes(bad)


@pytest.mark.parametrize("keep", [-1, -4096, 100])
def test_a_truncated_ciphertext_is_refused_right_after_its_whole_copy_was_loaded(contexts, keep):
    """Loads reuse one memory file per thread: the bytes of the object loaded before (here
    the very ciphertext, whole) must not complete a truncated one."""
    _, public, party = contexts
    data = party.encrypt([3.0]).to_bytes()
    evaluated = (public.ciphertext_from_bytes(data) + public.ciphertext_from_bytes(data)).to_bytes()
    for before in (data, evaluated):
        public.ciphertext_from_bytes(before)
        with pytest.raises(MalformedMessageError):
            public.ciphertext_from_bytes(before[:keep])
    assert party.decrypt(public.ciphertext_from_bytes(data))[0] == pytest.approx(3.0, abs=TOL)


def test_ciphertexts_load_correctly_in_several_threads_at_once(contexts):
    from concurrent.futures import ThreadPoolExecutor

    _, public, party = contexts
    blobs = [party.encrypt([float(k)]).to_bytes() for k in range(8)]

    def load_all(k):
        return [float(party.decrypt(public.ciphertext_from_bytes(blobs[k]))[0]) for _ in range(5)]

    with ThreadPoolExecutor(4) as pool:
        got = list(pool.map(load_all, range(8)))
    assert got == [pytest.approx([float(k)] * 5, abs=TOL) for k in range(8)]


def test_ciphertext_under_other_parameters_is_rejected(contexts):
    from privfl.crypto.ckks import CKKSParameters

    _, public, _ = contexts
    other = CKKSContext.generate(CKKSParameters(4096, (40, 20, 40), 20))
    with pytest.raises(MalformedMessageError):
        public.ciphertext_from_bytes(other.encrypt([1.0]).to_bytes())


def test_context_bytes_are_checked():
    with pytest.raises(MalformedMessageError):
        CKKSContext.deserialize(b"garbage")
    good = CKKSContext.generate(rotation_steps=[1]).serialize_public()
    with pytest.raises(MalformedMessageError):
        CKKSContext.deserialize(good[: len(good) // 2])


# ----------------------------------------------------------------------------- prng
def test_shared_randomness_is_deterministic_per_seed_and_label():
    seed = new_seed()
    a = SharedRandomness(seed, "masks").integers(0, 10**30, 50)
    b = SharedRandomness(seed, "masks").integers(0, 10**30, 50)
    c = SharedRandomness(seed, "perm").integers(0, 10**30, 50)
    d = SharedRandomness(new_seed(), "masks").integers(0, 10**30, 50)
    assert a == b and a != c and a != d


@given(st.integers(-(10**20), 10**20), st.integers(1, 10**20))
@settings(max_examples=50)
def test_shared_integers_stay_in_range(low, span):
    xs = SharedRandomness(b"\x01" * 32, "t").integers(low, low + span, 20)
    assert all(low <= x < low + span for x in xs)


def test_shared_integers_have_no_modulo_bias():
    # span 3 in 2 bits: a modulo reduction would make 0 twice as likely as 2
    xs = np.array(SharedRandomness(b"\x02" * 32, "bias").integers(0, 3, 30000))
    counts = np.bincount(xs, minlength=3)
    assert np.all(np.abs(counts - 10000) < 4 * np.sqrt(30000 * (1 / 3) * (2 / 3)))


def test_shared_permutation_is_a_permutation_and_floats_in_unit_interval():
    r = SharedRandomness(b"\x03" * 32, "p")
    perm = r.permutation(1000)
    assert sorted(perm.tolist()) == list(range(1000))
    u = r.uniform(10000)
    assert u.min() >= 0 and u.max() < 1 and abs(u.mean() - 0.5) < 0.02
    bits = r.bits(10000)
    assert set(np.unique(bits)) <= {0, 1} and abs(bits.mean() - 0.5) < 0.03


# ----------------------------------------------------------------------------- keywrap
def _roster(*names):
    ids = {n: keywrap.IdentityKey() for n in names}
    return ids, {n: k.public_bytes for n, k in ids.items()}


def test_wrapped_secret_opens_only_for_its_recipient_from_the_pinned_sender():
    ids, roster = _roster("holder", "a", "b")
    w = keywrap.wrap(
        b"top secret",
        sender="holder",
        sender_key=ids["holder"],
        recipient="a",
        recipient_public=roster["a"],
        purpose="p",
    )
    w = keywrap.WrappedSecret.from_bytes(w.to_bytes())
    assert (
        keywrap.unwrap(
            w,
            recipient="a",
            recipient_key=ids["a"],
            roster=roster,
            expected_sender="holder",
            purpose="p",
        )
        == b"top secret"
    )
    with pytest.raises(UnknownPartyError):
        keywrap.unwrap(
            w,
            recipient="b",
            recipient_key=ids["b"],
            roster=roster,
            expected_sender="holder",
            purpose="p",
        )
    with pytest.raises(MalformedMessageError):
        keywrap.unwrap(
            w,
            recipient="a",
            recipient_key=ids["a"],
            roster=roster,
            expected_sender="holder",
            purpose="other",
        )


def test_substituted_sender_key_is_rejected():
    ids, roster = _roster("holder", "a")
    mallory = keywrap.IdentityKey()  # claims to be the holder with its own key
    w = keywrap.wrap(
        b"fake",
        sender="holder",
        sender_key=mallory,
        recipient="a",
        recipient_public=roster["a"],
        purpose="p",
    )
    with pytest.raises(UnknownPartyError, match="authentication"):
        keywrap.unwrap(
            w,
            recipient="a",
            recipient_key=ids["a"],
            roster=roster,
            expected_sender="holder",
            purpose="p",
        )


def test_tampered_wrapped_secret_is_rejected():
    ids, roster = _roster("holder", "a")
    w = keywrap.wrap(
        b"x" * 40,
        sender="holder",
        sender_key=ids["holder"],
        recipient="a",
        recipient_public=roster["a"],
        purpose="p",
    )
    bad = keywrap.WrappedSecret(
        w.sender,
        w.recipient,
        w.purpose,
        w.ephemeral_public,
        w.nonce,
        bytes([w.ciphertext[0] ^ 1]) + w.ciphertext[1:],
    )
    with pytest.raises(UnknownPartyError):
        keywrap.unwrap(
            bad,
            recipient="a",
            recipient_key=ids["a"],
            roster=roster,
            expected_sender="holder",
            purpose="p",
        )
    with pytest.raises(MalformedMessageError):
        keywrap.WrappedSecret.from_bytes(w.to_bytes()[:-5])


# ----------------------------------------------------------------------------- identities
from privfl.crypto.identity import IdentityKey, PublicIdentity, verify_signed  # noqa: E402


@given(st.binary(max_size=200), st.text(max_size=20), st.integers(0, 10**6))
@settings(max_examples=30)
def test_a_signature_verifies_only_for_its_signer_data_and_domain(data, domain, flip):
    ids, roster = _roster("a", "b")
    sig = ids["a"].sign(domain, data)
    verify_signed(roster, "a", sig, domain, data)
    with pytest.raises(UnknownPartyError):
        verify_signed(roster, "b", sig, domain, data)  # another roster key
    with pytest.raises(UnknownPartyError):
        verify_signed(roster, "a", sig, domain + "x", data)  # another purpose
    if data:
        changed = bytearray(data)
        changed[flip % len(data)] ^= 1 + flip % 255
        with pytest.raises(UnknownPartyError):
            verify_signed(roster, "a", sig, domain, bytes(changed))
    with pytest.raises(UnknownPartyError):
        verify_signed(roster, "mallory", sig, domain, data)


def test_identity_keys_round_trip_and_refuse_old_or_short_files():
    key = IdentityKey()
    again = IdentityKey.from_private_bytes(key.private_bytes())
    assert again.public == key.public
    assert PublicIdentity.from_bytes(key.public_bytes) == key.public
    with pytest.raises(MalformedMessageError, match="re-provision"):
        IdentityKey.from_private_bytes(key.private_bytes()[:32])  # a 32-byte key of v1
    with pytest.raises(MalformedMessageError):
        PublicIdentity.from_bytes(key.public_bytes[:32])


# ----------------------------------------------------------------------------- session keys
from privfl.evaluation.fhauc.messages import Join, SessionConfig  # noqa: E402
from privfl.evaluation.fhauc.policy import Policy, Security  # noqa: E402
from privfl.evaluation.fhauc.session import session_key, transcript_hash  # noqa: E402


def _config(**change):
    base = {
        "session": b"\x01" * 16,
        "parties": ("a", "b"),
        "thresholds": np.array([0.75, 0.5, 0.25]),
        "score_range": (0.0, 1.0),
        "security": Security.MALICIOUS,
        "splits": 4,
    }
    return SessionConfig(**(base | change))


@pytest.mark.parametrize(
    "change",
    [
        {"session": b"\x02" * 16},
        {"parties": ("b", "a")},
        {"thresholds": np.array([0.75, 0.5, 0.2])},
        {"score_range": (0.0, 2.0)},
        {"security": Security.SEMI_HONEST, "splits": 1},
        {"splits": 3},
    ],
)
def test_every_config_field_changes_the_session_key(change):
    seed, policy = bytes(32), Policy(Security.MALICIOUS)
    nonces = [Join(b"\x01" * 16, p, b"", bytes([i]) * 32) for i, p in enumerate("ab")]
    ref = session_key(seed, transcript_hash(_config(), policy, nonces))
    other = _config(**change)
    joins = [Join(other.session, j.sender, b"", j.nonce) for j in nonces]
    assert session_key(seed, transcript_hash(other, policy, joins)) != ref


@given(st.binary(min_size=32, max_size=32), st.integers(1, 10**6))
@settings(max_examples=20)
def test_the_session_key_is_a_function_of_seed_policy_and_every_nonce(nonce, bound):
    seed, cfg = bytes(32), _config()
    joins = [Join(cfg.session, "a", b"", nonce), Join(cfg.session, "b", b"", bytes(32))]
    policy = Policy(Security.MALICIOUS, max_samples_per_party=bound)
    key = session_key(seed, transcript_hash(cfg, policy, joins))
    assert key == session_key(seed, transcript_hash(cfg, policy, list(reversed(joins))))
    flipped = bytes([nonce[0] ^ 1]) + nonce[1:]
    joins2 = [Join(cfg.session, "a", b"", flipped), joins[1]]
    assert session_key(seed, transcript_hash(cfg, policy, joins2)) != key
    other_policy = Policy(Security.MALICIOUS, max_samples_per_party=bound + 1)
    assert session_key(seed, transcript_hash(cfg, other_policy, joins)) != key
    assert session_key(bytes([1]) + seed[1:], transcript_hash(cfg, policy, joins)) != key
