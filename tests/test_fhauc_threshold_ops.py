"""The threshold aggregator's deferred rotate-and-sum (``fhauc.threshold.ops``): an integer
multiplier applied before the rotations gives the eager result, on one tower fewer.

Real joint keys and ciphertexts on the fast, insecure "test" set."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from test_threshold_support import require_openfhe_for_tests

openfhe = require_openfhe_for_tests()

from privfl.crypto.threshold import parameter_set  # noqa: E402
from privfl.evaluation.fhauc.threshold import ops as ops_module  # noqa: E402
from privfl.evaluation.fhauc.threshold.ops import ThresholdCiphertext  # noqa: E402
from privfl.runner import InProcessRunner  # noqa: E402
from privfl.threshold import make_roles, run_joint_decryption, run_key_generation  # noqa: E402

PARAMS = parameter_set("test")
M = 3
SLOTS = PARAMS.batch_size
BOUND = PARAMS.decryption_error_bound(M)


@pytest.fixture(scope="module")
def roles():
    server, parties = make_roles(PARAMS, M)
    run_key_generation(server, parties, InProcessRunner())
    return server, parties


def decrypt(parties, ct):
    return run_joint_decryption(parties[0], parties, ct.ct, InProcessRunner(), SLOTS)


def window_sum(v, w):
    return sum(np.roll(v, -i) for i in range(w))


def product(server, seed):
    gen = np.random.default_rng(seed)  # not secret: test data
    x, y = gen.uniform(-1, 1, SLOTS), gen.uniform(-1, 1, SLOTS)
    ct = ThresholdCiphertext(server.encrypt(x)) * ThresholdCiphertext(server.encrypt(y))
    return ct, x * y


@settings(max_examples=6, deadline=None)
@given(
    st.integers(0, 2**31),
    st.sampled_from([2, 8, 32]),
    st.integers(-(2**24), 2**24),
)
def test_a_multiplier_after_a_window_sum_equals_the_eager_order_on_one_tower_fewer(
    roles, seed, window, k
):
    server, parties = roles
    ct, xy = product(server, seed)
    eager = ThresholdCiphertext(ct.window_sum(window).ct) * k  # rotations first, then k
    deferred = ct.window_sum(window) * k  # k first, rescale, then the rotations
    expected = k * window_sum(xy, window)
    assert deferred.ct.levels_used == eager.ct.levels_used  # the same level budget left
    assert deferred.ct.deg == 1 and eager.ct.deg == 2  # rescaled before the rotations
    for got in (eager, deferred):
        assert np.max(np.abs(decrypt(parties, got) - expected)) < 4 * BOUND * window + abs(k) * 1e-9


@pytest.mark.parametrize("then", ["rotate", "add", "scale_by", "sub", "window_sum"])
def test_a_pending_window_sum_behaves_as_the_eager_one_under_every_later_operation(roles, then):
    server, parties = roles
    ct, xy = product(server, 7)
    other, xy2 = product(server, 8)
    w = 8
    ops = {
        "rotate": (lambda c: c.rotate(1), lambda v: np.roll(v, -1)),
        "add": (lambda c: c + other, lambda v: v + xy2),
        "scale_by": (lambda c: c.scale_by(0.5), lambda v: 0.5 * v),
        "sub": (lambda c: c - other, lambda v: v - xy2),
        "window_sum": (lambda c: c.window_sum(2), lambda v: window_sum(v, 2)),
    }
    op, plain = ops[then]
    for k in (1, 3):
        got = decrypt(parties, op(ct.window_sum(w) * k))
        assert np.max(np.abs(got - plain(k * window_sum(xy, w)))) < 8 * BOUND * w


@settings(max_examples=4, deadline=None)
@given(st.integers(0, 2**31), st.sampled_from([2, 32]), st.floats(2.0**-16, 4.0))
def test_a_real_multiplier_after_a_window_sum_equals_the_eager_order_and_folds(
    roles, seed, window, factor
):
    """The malicious reply's ``c / 2^j`` (``scale_by``) is applied, and rescaled, before the
    pending rotations: the same value and level budget as rotating first, and a second real
    factor (a deviating aggregator's rescale) still folds into the same level."""
    server, parties = roles
    ct, xy = product(server, seed)
    eager = ThresholdCiphertext(ct.window_sum(window).ct).scale_by(factor)
    rotated_at = []
    plain_sum = ops_module._rotate_and_sum

    def spy(x, w, stride=1):
        rotated_at.append(x.ct.levels_used)
        return plain_sum(x, w, stride)

    ops_module._rotate_and_sum = spy
    try:
        deferred = ct.window_sum(window).scale_by(factor)
        _ = deferred.ct  # runs the pending factor, then the rotations
    finally:
        ops_module._rotate_and_sum = plain_sum
    assert rotated_at == [eager.ct.levels_used]  # rotations after the factor's level
    twice = ct.window_sum(window).scale_by(factor * 2).scale_by(0.5)
    expected = factor * window_sum(xy, window)
    levels = eager.ct.levels_used
    for got in (eager, deferred, twice):
        assert got.ct.levels_used == levels
        assert np.max(np.abs(decrypt(parties, got) - expected)) < 4 * BOUND * window * max(
            factor, 1
        )
