"""DT-PKC identities (property tests) and what each role can and cannot decrypt."""

import gmpy2
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.crypto import dtpkc
from privfl.errors import InputError, MalformedMessageError, WrongSessionError


@pytest.fixture(scope="module")
def system():
    kgc = dtpkc.KeyGenerationCenter(bits=512)
    sk_cs, pk_cs = kgc.new_key_pair()
    sk_u, pk_u = kgc.new_key_pair()
    sk_a, pk_a = kgc.new_key_pair()
    lam1, lam2 = kgc.strong_key_shares()
    cs = dtpkc.CenterServer(sk_cs, pk_cs, lam1)
    cc = dtpkc.ComputationProvider(lam2)
    return dict(
        kgc=kgc,
        sk_cs=sk_cs,
        pk_cs=pk_cs,
        sk_u=sk_u,
        pk_u=pk_u,
        sk_a=sk_a,
        pk_a=pk_a,
        lam1=lam1,
        lam2=lam2,
        cs=cs,
        cc=cc,
    )


def signed():
    return st.one_of(
        st.integers(-(2**60), 2**60),
        st.sampled_from(["max", "-max", 0, 1, -1]),
    )


def _value(v, params):
    if v == "max":
        return params.max_abs
    if v == "-max":
        return -params.max_abs
    return v


@given(signed())
@settings(max_examples=30)
def test_all_three_decryption_paths_invert_encryption(system, v):
    prm = system["kgc"].params
    m = _value(v, prm)
    c = dtpkc.encrypt(system["pk_a"], m)
    assert dtpkc.decrypt(system["sk_a"], c) == m
    assert system["kgc"].strong_decrypt(c) == m
    t = dtpkc.partial_decrypt_strong1(system["lam1"], c)
    assert dtpkc.partial_decrypt_strong2(system["lam2"], c, t) == m


def test_split_strong_key_satisfies_its_congruences(system):
    kgc = system["kgc"]
    s = (system["lam1"].value + system["lam2"].value) % (kgc._lambda * kgc.params.n2)
    assert s % kgc._lambda == 0 and s % kgc.params.n2 == 1
    assert gmpy2.gcd(kgc._lambda, kgc.params.n) == 1


def test_values_outside_the_signed_range_are_rejected(system):
    prm = system["kgc"].params
    with pytest.raises(InputError, match="range"):
        dtpkc.encrypt(system["pk_a"], prm.max_abs + 1)
    with pytest.raises(InputError, match="range"):
        dtpkc.encrypt(system["pk_a"], -prm.max_abs - 1)


@given(st.integers(-(2**200), 2**200), st.integers(-(2**200), 2**200), st.integers(-1000, 1000))
@settings(max_examples=30)
def test_same_key_homomorphism(system, x, y, k):
    pk, sk = system["pk_a"], system["sk_a"]
    cx, cy = dtpkc.encrypt(pk, x), dtpkc.encrypt(pk, y)
    assert dtpkc.decrypt(sk, dtpkc.add(cx, cy)) == x + y
    assert dtpkc.decrypt(sk, dtpkc.scale(cx, k)) == k * x
    assert dtpkc.decrypt(sk, dtpkc.negate(cx)) == -x
    assert dtpkc.decrypt(sk, dtpkc.negate_by_power(cx)) == -x
    assert dtpkc.decrypt(sk, dtpkc.rerandomize(cx)) == x
    assert dtpkc.rerandomize(cx).c1 != cx.c1


@given(st.integers(-(2**300), 2**300), st.integers(-(2**300), 2**300))
@settings(max_examples=15)
def test_hoadd_across_keys_lands_under_the_target_key(system, x, y):
    cx = dtpkc.encrypt(system["pk_a"], x)
    cy = dtpkc.encrypt(system["pk_u"], y)
    out = dtpkc.secure_add(system["cs"], system["cc"], cx, cy, system["pk_cs"])
    assert dtpkc.decrypt(system["sk_cs"], out) == x + y
    assert out.h == system["pk_cs"].h


comparison = st.one_of(st.integers(-(2**64), 2**64), st.sampled_from([0, 1, -1, "max", "-max"]))


@given(comparison, comparison, st.booleans())
@settings(max_examples=25)
def test_holt_returns_x_less_than_y_under_the_joint_key(system, a, b, equal):
    """Over the whole signed range |x|, |y| < 2^ell, including ties and both extremes."""
    prm = system["kgc"].params
    x = _value(a, prm)
    y = x if equal else _value(b, prm)
    cx = dtpkc.encrypt(system["pk_a"], x)
    cy = dtpkc.encrypt(system["pk_u"], y)
    cl = dtpkc.secure_less_than(
        system["cs"], system["cc"], cx, cy, holder_public_key=system["pk_u"]
    )
    assert cl.h == dtpkc.joint_public_key(system["pk_cs"], system["pk_u"]).h
    part = dtpkc.joint_partial_decrypt(system["sk_u"], cl)
    assert system["cs"].finish_decrypt(part) == int(x < y)


def test_reencryption_adds_the_center_servers_key(system):
    c = dtpkc.encrypt(system["pk_u"], 42)
    re = dtpkc.reencrypt(system["sk_cs"], c)
    joint = dtpkc.SecretKey(
        system["sk_u"].theta + system["sk_cs"].theta,
        dtpkc.joint_public_key(system["pk_u"], system["pk_cs"]),
    )
    assert dtpkc.decrypt(joint, re) == 42
    assert dtpkc.decrypt(system["sk_u"], re) != 42  # u alone no longer suffices
    assert system["cs"].finish_decrypt(dtpkc.joint_partial_decrypt(system["sk_u"], re)) == 42


def test_refreshed_ciphertext_needs_the_fresh_key_or_the_strong_key(system):
    c = dtpkc.encrypt(system["pk_u"], -7)
    rho = dtpkc.new_refresh_key(system["kgc"].params)
    ref = dtpkc.refresh(c, rho)
    assert dtpkc.decrypt(system["sk_u"], ref) != -7
    with_rho = dtpkc.SecretKey(system["sk_u"].theta + rho, ref.public_key)
    assert dtpkc.decrypt(with_rho, ref) == -7
    t = dtpkc.partial_decrypt_strong1(system["lam1"], ref)
    assert dtpkc.partial_decrypt_strong2(system["lam2"], ref, t) == -7
    # the revoked party's weak key together with CS's weak key does not open it either
    both = dtpkc.SecretKey(system["sk_u"].theta + system["sk_cs"].theta, ref.public_key)
    assert dtpkc.decrypt(both, ref) != -7


def test_one_strong_share_alone_decrypts_nothing(system):
    prm = system["kgc"].params
    c = dtpkc.encrypt(system["pk_a"], 123456789)
    # CC alone: its share with a fake T = 1
    assert dtpkc.partial_decrypt_strong2(system["lam2"], c, gmpy2.mpz(1)) != 123456789
    # CS alone: L(C1^λ1)
    t = dtpkc.partial_decrypt_strong1(system["lam1"], c)
    assert prm.decode(((t - 1) // prm.n) % prm.n) != 123456789


def test_weak_key_of_another_party_cannot_decrypt(system):
    c = dtpkc.encrypt(system["pk_a"], 99)
    assert dtpkc.decrypt(system["sk_u"], c) != 99


def test_malformed_ciphertexts_are_rejected(system):
    prm = system["kgc"].params
    good = dtpkc.encrypt(system["pk_a"], 5)
    with pytest.raises(MalformedMessageError, match="outside"):
        dtpkc.Ciphertext.checked(prm, 0, good.c2)
    with pytest.raises(MalformedMessageError, match="outside"):
        dtpkc.Ciphertext.checked(prm, prm.n2 + 3, good.c2)
    with pytest.raises(MalformedMessageError, match="invertible"):
        dtpkc.Ciphertext.checked(prm, good.c1, prm.n)
    with pytest.raises(MalformedMessageError):
        dtpkc.Ciphertext.from_bytes(prm, good.to_bytes()[:-3])
    other = dtpkc.KeyGenerationCenter(bits=768)
    _, pk_other = other.new_key_pair()
    big = dtpkc.encrypt(pk_other, 1)
    with pytest.raises(MalformedMessageError):  # a ciphertext of another (larger) system
        dtpkc.Ciphertext.from_bytes(prm, big.to_bytes())
    assert dtpkc.Ciphertext.from_bytes(prm, good.to_bytes()) == good


def test_protocol_message_from_another_session_is_rejected(system):
    cs, cc = system["cs"], system["cc"]
    cx = dtpkc.encrypt(system["pk_a"], 1)
    request, _ = cs.hoadd_request(cx, cx, system["pk_cs"], b"A" * 16)
    with pytest.raises(WrongSessionError):
        cc.hoadd_respond(request, b"B" * 16)


def test_mixing_keys_in_same_key_addition_is_refused(system):
    with pytest.raises(InputError, match="same key"):
        dtpkc.add(dtpkc.encrypt(system["pk_a"], 1), dtpkc.encrypt(system["pk_u"], 1))


@given(st.floats(-1e6, 1e6, allow_nan=False))
def test_fixed_point_round_trip(x):
    assert abs(dtpkc.from_fixed_point(dtpkc.to_fixed_point(x)) - x) <= 2**-32


def test_fixed_point_errors(system):
    with pytest.raises(InputError):
        dtpkc.to_fixed_point(float("nan"))
    with pytest.raises(InputError, match="exceeds"):
        dtpkc.to_fixed_point(2.0**600, params=system["kgc"].params)


def test_parameter_condition_is_checked_at_setup():
    kgc = dtpkc.KeyGenerationCenter(bits=512)
    with pytest.raises(InputError, match="2\\^sigma"):
        dtpkc.PublicParams(kgc.params.n, kgc.params.g, 200, 400)


def test_full_size_system_works_at_2048_bits():
    kgc = dtpkc.KeyGenerationCenter(bits=2048)
    assert kgc.params.bits == 2048
    sk, pk = kgc.new_key_pair()
    l1, l2 = kgc.strong_key_shares()
    c = dtpkc.encrypt(pk, -(2**100))
    assert dtpkc.decrypt(sk, c) == -(2**100)
    assert dtpkc.partial_decrypt_strong2(l2, c, dtpkc.partial_decrypt_strong1(l1, c)) == -(2**100)
