"""DT-PKC primitives: identities (property tests), what each key can and cannot decrypt, key
sizes, and decoders that survive hostile bytes (the HoAdd/HoLT protocols are tested in
test_forest_secure_ops.py)."""

import time
from pathlib import Path

import gmpy2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from _forest_fuzz import decode_safely, payloads
from privfl.crypto import dtpkc
from privfl.errors import InputError, MalformedMessageError, ProtocolError
from privfl.messages import Writer

SRC = Path(__file__).resolve().parents[1] / "src" / "privfl"


@pytest.fixture(scope="module")
def system():
    params, secret = dtpkc.generate_system(512, allow_insecure_key_bits=True)
    lam1, lam2 = dtpkc.split_strong_key(params, secret)
    keys = {name: dtpkc.new_key_pair(params) for name in ("cs", "u", "a")}
    return params, secret, lam1, lam2, keys


@pytest.fixture(scope="module")
def valid_ciphertext(system):
    return dtpkc.encrypt(system[4]["a"].public, 77).to_bytes()


def signed():
    return st.one_of(st.integers(-(2**60), 2**60), st.sampled_from(["max", "-max", 0, 1, -1]))


def _value(v, params):
    return {"max": params.max_abs, "-max": -params.max_abs}.get(v, v)


@given(signed())
@settings(max_examples=30)
def test_all_three_decryption_paths_invert_encryption(system, v):
    params, secret, lam1, lam2, keys = system
    m = _value(v, params)
    c = dtpkc.encrypt(keys["a"].public, m)
    assert dtpkc.decrypt(keys["a"], c) == m
    assert dtpkc.strong_decrypt(params, secret, c) == m
    t = dtpkc.partial_decrypt_strong1(lam1, c)
    assert dtpkc.partial_decrypt_strong2(lam2, c, t) == m


def test_split_strong_key_satisfies_its_congruences(system):
    params, secret, lam1, lam2, _ = system
    s = (lam1.value + lam2.value) % (secret.lam * params.n)
    assert s % secret.lam == 0 and s % params.n == 1
    assert max(lam1.value, lam2.value) < secret.lam * params.n  # 2|N| bits, not 3|N|
    assert gmpy2.gcd(secret.lam, params.n) == 1


def test_values_outside_the_signed_range_are_rejected(system):
    params, _, _, _, keys = system
    with pytest.raises(InputError, match="range"):
        dtpkc.encrypt(keys["a"].public, params.max_abs + 1)
    with pytest.raises(InputError, match="range"):
        dtpkc.encrypt(keys["a"].public, -params.max_abs - 1)


@given(st.integers(-(2**200), 2**200), st.integers(-(2**200), 2**200), st.integers(-1000, 1000))
@settings(max_examples=30)
def test_same_key_homomorphism(system, x, y, k):
    params, _, _, _, keys = system
    pk, sk = keys["a"].public, keys["a"]
    cx, cy = dtpkc.encrypt(pk, x), dtpkc.encrypt(pk, y)
    assert dtpkc.decrypt(sk, dtpkc.add(cx, cy)) == x + y
    assert dtpkc.decrypt(sk, dtpkc.scale(cx, k)) == k * x
    assert dtpkc.decrypt(sk, dtpkc.negate(cx)) == -x
    assert dtpkc.decrypt(sk, dtpkc.scale(cx, params.n - 1)) == -x  # the spec's C^(N-1)
    rerandomized = dtpkc.add(cx, dtpkc.encrypt(pk, 0))
    assert dtpkc.decrypt(sk, rerandomized) == x and rerandomized.c1 != cx.c1


def test_reencryption_adds_the_center_servers_key(system):
    _, _, _, _, keys = system
    sk_u, sk_cs = keys["u"], keys["cs"]
    c = dtpkc.encrypt(sk_u.public, 42)
    re = dtpkc.reencrypt(sk_cs, c)
    joint = dtpkc.SecretKey(
        sk_u.theta + sk_cs.theta, dtpkc.joint_public_key(sk_u.public, sk_cs.public)
    )
    assert re.h == joint.public.h
    assert dtpkc.decrypt(joint, re) == 42
    assert dtpkc.decrypt(sk_u, re) != 42  # u alone no longer suffices
    assert dtpkc.decrypt(sk_cs, dtpkc.joint_partial_decrypt(sk_u, re)) == 42


def test_refreshed_ciphertext_needs_the_refresh_key_or_the_strong_key(system):
    params, _, lam1, lam2, keys = system
    sk_u, sk_cs = keys["u"], keys["cs"]
    c = dtpkc.encrypt(sk_u.public, -7)
    refresh_key = dtpkc.new_refresh_key(params)
    ref = dtpkc.refresh(c, refresh_key)
    assert dtpkc.decrypt(sk_u, ref) != -7
    assert dtpkc.decrypt(dtpkc.SecretKey(sk_u.theta + refresh_key, ref.public_key), ref) == -7
    t = dtpkc.partial_decrypt_strong1(lam1, ref)
    assert dtpkc.partial_decrypt_strong2(lam2, ref, t) == -7
    # the revoked party's weak key together with CS's weak key does not open it either
    both = dtpkc.SecretKey(sk_u.theta + sk_cs.theta, ref.public_key)
    assert dtpkc.decrypt(both, ref) != -7


def test_one_strong_share_alone_decrypts_nothing(system):
    params, _, lam1, lam2, keys = system
    c = dtpkc.encrypt(keys["a"].public, 123456789)
    assert dtpkc.partial_decrypt_strong2(lam2, c, gmpy2.mpz(1)) != 123456789  # CC alone
    t = dtpkc.partial_decrypt_strong1(lam1, c)  # CS alone: L(C1^λ1)
    assert params.decode(((t - 1) // params.n) % params.n) != 123456789


def test_weak_key_of_another_party_cannot_decrypt(system):
    _, _, _, _, keys = system
    assert dtpkc.decrypt(keys["u"], dtpkc.encrypt(keys["a"].public, 99)) != 99


def test_malformed_ciphertexts_are_rejected(system):
    params, _, _, _, keys = system
    good = dtpkc.encrypt(keys["a"].public, 5)

    def encoded(c1, c2):
        return Writer().uint(c1).uint(c2).getvalue()

    for c1, c2, match in [
        (0, good.c2, "outside"),
        (params.n2 + 3, good.c2, "bits|outside"),
        (good.c1, params.n, "invertible"),
    ]:
        with pytest.raises(MalformedMessageError, match=match):
            dtpkc.Ciphertext.from_bytes(params, encoded(int(c1), int(c2)))
    with pytest.raises(MalformedMessageError):
        dtpkc.Ciphertext.from_bytes(params, good.to_bytes()[:-3])
    other, _ = dtpkc.generate_system(768, allow_insecure_key_bits=True)
    big = dtpkc.encrypt(dtpkc.new_key_pair(other).public, 1)
    with pytest.raises(MalformedMessageError):  # a ciphertext of another (larger) system
        dtpkc.Ciphertext.from_bytes(params, big.to_bytes())
    back = dtpkc.Ciphertext.from_bytes(params, good.to_bytes(), keys["a"].public)
    assert back == good


def test_mixing_keys_in_same_key_addition_is_a_protocol_error(system):
    _, _, _, _, keys = system
    with pytest.raises(ProtocolError, match="same key"):
        dtpkc.add(dtpkc.encrypt(keys["a"].public, 1), dtpkc.encrypt(keys["u"].public, 1))


@given(st.floats(-1e6, 1e6, allow_nan=False))
def test_fixed_point_round_trip(x):
    assert abs(dtpkc.from_fixed_point(dtpkc.to_fixed_point(x)) - x) <= 2**-32


@pytest.mark.parametrize("value", [float("nan"), float("inf"), 1e300, -1e300, 2.0**600])
def test_fixed_point_refuses_what_it_cannot_represent(system, value):
    with pytest.raises(InputError, match=r"fixed point|exceeds"):
        dtpkc.to_fixed_point(value, params=system[0])


def test_parameter_condition_is_checked_at_setup(system):
    params = system[0]
    with pytest.raises(InputError, match="2\\^sigma"):
        dtpkc.PublicParams(params.n, params.g, 200, 400)


# ------------------------------------------------------------------ key sizes (finding 9)
@pytest.mark.parametrize("bits", [64, 512, 1024, 2046])
def test_weak_moduli_are_refused_without_the_explicit_opt_in(bits):
    with pytest.raises(InputError, match=r"insecure|allow_insecure_key_bits"):
        dtpkc.generate_system(bits)


@pytest.mark.parametrize("bits", [64, 256, 513, 8194, "2048", 2048.0, True])
def test_key_sizes_outside_the_bounds_are_refused_even_with_the_opt_in(bits):
    with pytest.raises(InputError):
        dtpkc.check_key_bits(bits, allow_insecure_key_bits=True)


def test_a_weak_public_key_from_the_wire_is_refused(system):
    keys = system[4]
    data = keys["a"].public.to_bytes()
    with pytest.raises(MalformedMessageError, match="weak 512-bit"):
        dtpkc.PublicKey.from_bytes(data)
    assert dtpkc.PublicKey.from_bytes(data, allow_insecure_key_bits=True) == keys["a"].public


def test_full_size_system_works_at_2048_bits():
    params, secret = dtpkc.generate_system()
    assert params.bits == 2048
    sk = dtpkc.new_key_pair(params)
    l1, l2 = dtpkc.split_strong_key(params, secret)
    c = dtpkc.encrypt(sk.public, -(2**100))
    assert dtpkc.decrypt(sk, c) == -(2**100)
    assert dtpkc.partial_decrypt_strong2(l2, c, dtpkc.partial_decrypt_strong1(l1, c)) == -(2**100)
    assert dtpkc.PublicKey.from_bytes(sk.public.to_bytes()) == sk.public


# ------------------------------------------------------------------ hostile bytes (4, 5)
# gmpy2.to_binary(gmpy2.mpfr(1, 0x7fffffff)) begins like this: an mpfr claiming 2^31-1 bits of
# precision. Handed to gmpy2.from_binary, 54 such bytes crashed the process.
MPFR_54 = bytes.fromhex("04410000ffffff7f01000000") + bytes(41) + b"\x80"


def test_no_wire_bytes_reach_a_general_gmpy2_deserialiser():
    for path in [SRC / "crypto" / "dtpkc.py", *(SRC / "forest").rglob("*.py")]:
        assert "from_binary" not in path.read_text(), path


def test_the_54_byte_mpfr_payload_is_read_as_a_plain_bounded_integer(system):
    """Where an integer is expected, the bytes are a big-endian number and nothing else:
    either a unit below N² (then it is just that number) or a typed error."""
    params, _, _, _, keys = system
    assert len(MPFR_54) == 54
    as_int = int.from_bytes(MPFR_54, "big")
    good = dtpkc.encrypt(keys["a"].public, 5)
    c1_slot = Writer().bytes_(MPFR_54).uint(int(good.c2)).getvalue()
    assert dtpkc.Ciphertext.from_bytes(params, c1_slot).c1 == as_int
    for data in [
        Writer().uint(int(good.c1)).bytes_(MPFR_54 + MPFR_54 + MPFR_54).getvalue(),  # > N²
        Writer().bytes_(b"\x00" + MPFR_54).uint(int(good.c2)).getvalue(),  # non-canonical
        MPFR_54,
    ]:
        with pytest.raises(MalformedMessageError):
            dtpkc.Ciphertext.from_bytes(params, data)
    key = Writer().uint(int(params.n)).uint(int(params.g)).u32(80).u32(100).bytes_(MPFR_54)
    assert dtpkc.PublicKey.from_bytes(key.getvalue(), allow_insecure_key_bits=True).h == as_int
    with pytest.raises(MalformedMessageError):
        dtpkc.PublicKey.from_bytes(MPFR_54 * 3, allow_insecure_key_bits=True)


def test_a_public_key_with_huge_sigma_and_ell_is_refused_at_once():
    params, _ = dtpkc.generate_system()
    h = dtpkc.new_key_pair(params).public.h
    for sigma, ell in [(2**32 - 1, 2**32 - 1), (80, 2**32 - 1), (2**32 - 1, 100), (80, 2048)]:
        w = Writer().uint(int(params.n)).uint(int(params.g)).u32(sigma).u32(ell).uint(int(h))
        start = time.process_time()
        with pytest.raises(MalformedMessageError, match="sigma"):
            dtpkc.PublicKey.from_bytes(w.getvalue())
        assert time.process_time() - start < 0.1


def test_a_modulus_beyond_the_maximum_size_is_refused_before_conversion():
    w = Writer().bytes_(b"\x01" + bytes(dtpkc.MAX_KEY_BITS // 8)).uint(3).u32(80).u32(100)
    with pytest.raises(MalformedMessageError, match="at most"):
        dtpkc.PublicKey.from_bytes(w.getvalue())


@given(st.data())
@settings(max_examples=150)
def test_fuzzed_ciphertexts_raise_only_typed_errors_in_bounded_time(system, valid_ciphertext, data):
    params = system[0]
    blob = data.draw(payloads(valid_ciphertext))
    out = decode_safely(lambda b: dtpkc.Ciphertext.from_bytes(params, b), blob)
    if out is not None:
        assert 0 < out.c1 < params.n2 and 0 < out.c2 < params.n2


@given(st.data())
@settings(max_examples=150)
def test_fuzzed_public_keys_raise_only_typed_errors_in_bounded_time(system, data):
    blob = data.draw(payloads(system[4]["a"].public.to_bytes()))
    out = decode_safely(lambda b: dtpkc.PublicKey.from_bytes(b, allow_insecure_key_bits=True), blob)
    if out is not None:
        assert out.params.bits <= dtpkc.MAX_KEY_BITS and 0 < out.h < out.params.n2


@given(st.integers(2, 2**1000), st.integers(0, 2**510 - 1), st.integers(2, 8))
@settings(max_examples=40, deadline=None)
def test_a_fixed_base_table_power_equals_powmod(system, base, e, window):
    from privfl.crypto import fixed_base

    n2 = system[0].n2
    rows = fixed_base.table(base, n2, 510, window)
    assert fixed_base.power(rows, e, window, n2) == gmpy2.powmod(base, e, n2)
    with pytest.raises(ValueError):
        fixed_base.power(rows, gmpy2.mpz(1) << (len(rows) * window), window, n2)


def test_the_window_is_chosen_by_the_count_and_a_single_power_uses_no_table():
    from privfl.crypto import fixed_base

    assert fixed_base.best_window(2046, 1) is None  # a table costs more than one powmod
    windows = [fixed_base.best_window(2046, k) for k in (8, 100, 1000, 10000)]
    assert None not in windows and windows == sorted(windows)  # larger tables pay off later


@pytest.mark.parametrize("count", [1, 3, 40])
def test_encryptions_with_randomness_drawn_ahead_decrypt_and_are_fresh(system, count):
    params, secret, _, _, keys = system
    pk = keys["a"].public
    fresh = dtpkc.randomizers(pk, count)
    assert len({r for r in fresh}) == count  # independent r per encryption
    cts = [dtpkc.encrypt(pk, m - 20, r) for m, r in enumerate(fresh)]
    assert [dtpkc.decrypt(keys["a"], c) for c in cts] == [m - 20 for m in range(count)]
    assert all(dtpkc.strong_decrypt(params, secret, c) == m - 20 for m, c in enumerate(cts))


def test_a_participants_weak_key_from_its_grant_equals_the_recomputed_one():
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from privfl.forest.kgc import KeyGrant, RosterEntry

    params, _ = dtpkc.generate_system(512, allow_insecure_key_bits=True)
    sk = dtpkc.new_key_pair(params)
    entry = RosterEntry("p", sk.public, 1, Ed25519PrivateKey.generate().public_key())
    grant = KeyGrant("participant-keys", params, sk.theta, 0, sk.public.h, bytes(32), (entry,))
    assert grant.weak_key("p") == grant.weak_key() == sk
    other = dtpkc.new_key_pair(params).public  # a roster entry that is not g^θ: refused
    swapped = RosterEntry("p", other, 1, entry.revocation_key)
    with pytest.raises(MalformedMessageError, match="not g"):
        KeyGrant(
            "participant-keys", params, sk.theta, 0, sk.public.h, bytes(32), (swapped,)
        ).weak_key("p")
    with pytest.raises(MalformedMessageError):
        KeyGrant(
            "participant-keys", params, params.n, 0, sk.public.h, bytes(32), (entry,)
        ).weak_key("p")
