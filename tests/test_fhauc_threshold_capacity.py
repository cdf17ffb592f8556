"""The threshold AUC reply's decode capacity (``fhauc.threshold.ops``, issue 27), derived.

OpenFHE's decoder refuses a reply whose per-slot imaginary error exceeds ``2^-5 sqrt(2n)``;
the error that grows with magnitude is the encoding's, relative ``rho`` per uploaded slot,
carried through the product by the *slot products* of the shares. Real OpenFHE ciphertexts on
the insecure ring 2^12 ``"fhauc-test"`` set (the FHAUC chain: scale 2^59, two towers at
decryption), a throwaway single key: the decoder and the encoding are the joint key's."""

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from test_threshold_support import require_openfhe_for_tests

openfhe = require_openfhe_for_tests()

from privfl.crypto.threshold import ThresholdContext, parameter_set  # noqa: E402
from privfl.errors import InputError  # noqa: E402
from privfl.evaluation.fhauc import malicious  # noqa: E402
from privfl.evaluation.fhauc.threshold import ops  # noqa: E402
from privfl.evaluation.fhauc.threshold import plan as tp  # noqa: E402

PARAMS = parameter_set("fhauc-test")
RHO_BITS = -49.7  # the encoding's relative error per slot (ops.py, measured)


@pytest.fixture(scope="module")
def single_key():
    ctx = ThresholdContext.for_parameters(PARAMS, 2)
    cc = ctx.cc
    keys = cc.KeyGen()
    cc.EvalMultKeyGen(keys.secretKey)
    cc.EvalAtIndexKeyGen(keys.secretKey, [1 << i for i in range(int(math.log2(PARAMS.batch_size)))])
    return cc, keys


def reply(cc, keys, a, b):
    """``sum_i a_i b_i`` in every slot (product, rotate-and-sum), compressed to the two towers
    joint decryption keeps, decrypted: the values, or None when the decoder refuses."""
    enc = [
        cc.Encrypt(keys.publicKey, cc.MakeCKKSPackedPlaintext(list(map(float, v)))) for v in (a, b)
    ]
    ct = cc.EvalMult(*enc)
    step = 1
    while step < PARAMS.batch_size:
        ct = cc.EvalAdd(ct, cc.EvalRotate(ct, step))
        step *= 2
    try:
        pt = cc.Decrypt(cc.Compress(ct, 2), keys.secretKey)
    except RuntimeError:
        return None
    pt.SetLength(PARAMS.batch_size)
    return np.array(pt.GetRealPackedValue())


@settings(
    max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    product_bits=st.one_of(st.integers(28, 44), st.integers(58, 62)),  # each side of the limit
    f_bits=st.integers(8, 20),
    seed=st.integers(0, 2**32 - 1),
)
def test_a_reply_decodes_iff_its_slot_products_stay_under_the_derived_limit(
    single_key, product_bits, f_bits, seed
):
    """FHAUC-shaped factors: additive shares of up to 2^share_bits whose sum per position is
    small, times F repeated: the reply is small, the slot products are not. The derived
    imaginary error ``rho sqrt(2 sum (a_i b_i)^2)`` against ``2^-5 sqrt(2n)`` decides: under
    the limit (2 bits margin) the reply decodes; the estimate is an upper one (OpenFHE's
    own estimate was 1.4 to 6 bits lower), so the refusal is asserted from 10 bits over."""
    cc, keys = single_key
    rng = np.random.default_rng(seed)
    share_bits = product_bits - f_bits
    n, used, splits = PARAMS.batch_size, 400, 4
    shares = rng.uniform(-1, 1, (used // splits, splits)) * 2.0**share_bits
    shares[:, -1] = rng.uniform(0, 100, used // splits) - shares[:, :-1].sum(axis=1)
    a, b = np.zeros(n), np.zeros(n)
    a[:used] = shares.ravel()
    b[:used] = np.repeat(rng.uniform(0, 1, used // splits) * 2.0**f_bits, splits)
    s_bits = RHO_BITS + 0.5 * math.log2(2 * float(np.sum((a * b) ** 2)))
    limit_bits = -5 + 0.5 * math.log2(2 * n)
    got = reply(cc, keys, a, b)
    if s_bits <= limit_bits - 2:
        event("under the limit: decodes")
        assert got is not None, f"refused at 2^{s_bits:.1f} (limit 2^{limit_bits})"
        assert abs(got[0] - float(a @ b)) < 2.0 ** (s_bits + 6)  # a real part as small
    elif s_bits >= limit_bits + 10:
        event("over the limit: refused")
        assert got is None, f"decoded at 2^{s_bits:.1f} (limit 2^{limit_bits})"


@settings(max_examples=30, deadline=None)
@given(
    parties=st.integers(2, 1000),
    size_bits=st.integers(7, 21),
    splits=st.integers(2, 8),
)
def test_every_malicious_plan_keeps_the_reply_under_the_decode_capacity(parties, size_bits, splits):
    """The (k, j) each role derives keep ``c' 4 (M C)^2 2^-2k`` below the capacity, from the
    policy alone: the parties never upload for a reply the decoder would refuse."""
    size = 2**size_bits
    sizes = malicious.Sizes.for_session(parties, 99, splits, size, 0)
    params = parameter_set("fhauc")
    ring = 1 << 14
    k, j = tp.multiplier_scaling(
        sizes, params, ring, sizes.slots_used, float(sizes.value_bits), (20.0, 21.0)
    )
    reply_bits = 21.0 - j + 2 * math.log2(parties * size) + 2 - 2 * k
    assert reply_bits <= ops.capacity_bits(ring) + 1e-9


def test_a_malicious_threshold_auc_with_hiding_bits_is_refused_before_any_work():
    import privfl

    rng = np.random.default_rng(3)
    data = [(rng.random(50), np.r_[0, 1, rng.integers(0, 2, 48)].astype(np.int8)) for _ in range(2)]
    with pytest.raises(InputError, match="hiding_bits=4"):
        privfl.federated_auc(data, 10, keys="threshold", security="malicious", hiding_bits=4)
