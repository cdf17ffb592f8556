"""privfl's own Laplace sampler (issue 29, item 4): a difference of two exponentials of
uniform doubles drawn with ``secrets`` (or DPAUC's seeded CSPRNG stream), no diffprivlib."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy import stats

from privfl.errors import InputError
from privfl.evaluation import dpauc as dp
from privfl.evaluation import laplace


@pytest.mark.parametrize("scale", [0.5, 3.0, 400.0])
def test_seeded_laplace_noise_passes_a_ks_test_at_its_scale(scale):
    z = dp.NoiseSource(seed=5).laplace(scale, 100_000)
    assert stats.kstest(z, "laplace", args=(0.0, scale)).pvalue > 1e-3
    assert abs(z.mean()) < 5 * scale * np.sqrt(2 / z.size)


def test_laplace_noise_from_secrets_has_the_laplace_distribution():
    z = laplace.laplace(2.0, 100_000)
    assert stats.kstest(z, "laplace", args=(0.0, 2.0)).pvalue > 1e-5
    # symmetric: as many positive as negative draws (binomial, 6 sigma)
    assert abs(int((z > 0).sum()) - z.size / 2) < 6 * np.sqrt(z.size / 4)


def test_secure_uniforms_are_in_the_half_open_unit_interval_and_never_zero():
    u = laplace.secure_uniform(200_000)
    assert u.min() > 0 and u.max() <= 1
    assert stats.kstest(u, "uniform").pvalue > 1e-5
    assert np.all(np.isfinite(laplace.laplace(1.0, 10_000)))


@given(st.floats(min_value=2.0**-53, max_value=1.0), st.floats(min_value=2.0**-53, max_value=1.0))
def test_the_difference_of_exponentials_is_antisymmetric_and_bounded(u1, v):
    a, b = np.array([u1]), np.array([v])
    assert laplace.standard_laplace(a, b)[0] == -laplace.standard_laplace(b, a)[0]
    assert abs(laplace.standard_laplace(a, b)[0]) <= 53 * np.log(2) + 1e-9


def test_the_extreme_uniforms_give_the_bounded_tail():
    smallest = np.array([2.0**-53])
    one = np.array([1.0])
    assert laplace.standard_laplace(smallest, one)[0] == pytest.approx(53 * np.log(2))


@pytest.mark.parametrize("scale", [0.0, -1.0, float("inf"), float("nan")])
def test_a_bad_scale_is_refused(scale):
    with pytest.raises(InputError):
        laplace.laplace(scale, 3)


def test_dpauc_no_longer_needs_diffprivlib():
    import sys

    import privfl.evaluation.dpauc  # noqa: F401

    assert "diffprivlib" not in sys.modules
    assert dp.laplace_scale(2.0, 50, "total-budget") == pytest.approx(100.0)
    assert dp.laplace_scale(2.0, 50, "sensitivity-2") == pytest.approx(200.0)
    assert dp.laplace_scale(2.0, 50, "per-count") == pytest.approx(0.5)
