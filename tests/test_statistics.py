import itertools
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from privfl.errors import InputError
from privfl.evaluation.reference import auc_from_counts, binned_auc, exact_auc
from privfl.evaluation.statistics import (
    interior_thresholds,
    numerator_vectors,
    party_counts,
    points_including,
    validate_party,
)


def brute_counts(scores, labels, interior):
    thr = np.concatenate([[np.inf], interior, [-np.inf]])
    tp = np.array([np.sum((scores >= t) & (labels == 1)) for t in thr])
    fp = np.array([np.sum((scores >= t) & (labels == 0)) for t in thr])
    return tp, fp


@given(
    st.lists(
        st.sampled_from([0.0, 0.25, 0.5, 0.5, 0.75, 1.0, 0.1, 0.9, 0.333]), min_size=1, max_size=60
    ),
    st.integers(3, 40),
    st.data(),
)
def test_counts_match_brute_force_including_ties_at_thresholds(scores, n_points, data):
    s = np.array(scores)
    y = np.array(
        data.draw(st.lists(st.integers(0, 1), min_size=s.size, max_size=s.size)), dtype=np.int8
    )
    interior = interior_thresholds(n_points)
    c = party_counts(s, y, interior)
    tp, fp = brute_counts(s, y, interior)
    assert np.array_equal(c.tp, tp) and np.array_equal(c.fp, fp)
    assert c.tp[0] == 0 and c.fp[0] == 0
    assert c.positives == y.sum() and c.negatives == (1 - y).sum()
    t, f = numerator_vectors(c)
    assert t.size == f.size == n_points - 1 and np.all(f >= 0)


def test_default_thresholds_are_uniform_and_decreasing():
    t = interior_thresholds(5)
    assert np.allclose(t, [0.75, 0.5, 0.25])
    t = interior_thresholds(5, (-2.0, 2.0))
    assert np.allclose(t, [1.0, 0.0, -1.0])


@pytest.mark.parametrize(
    "thresholds, match",
    [
        (2, "at least 3"),
        ([0.2, 0.5], "strictly decreasing"),
        ([0.5, 0.5], "strictly decreasing"),
        ([np.nan], "finite"),
        ([], "at least 1"),
        (True, "integer"),
    ],
)
def test_bad_thresholds_are_rejected(thresholds, match):
    with pytest.raises(InputError, match=match):
        interior_thresholds(thresholds)


@pytest.mark.parametrize(
    "scores, labels, match",
    [
        ([0.1, np.nan], [0, 1], "NaN or infinite"),
        ([0.1, np.inf], [0, 1], "NaN or infinite"),
        ([0.1, 1.5], [0, 1], "declared range"),
        ([0.1, 0.2], [0, 2], "labels must be 0 or 1"),
        ([0.1, 0.2], ["a", "b"], "labels must be 0 or 1"),
        ([], [], "no samples"),
        ([0.1, 0.2], [0], "2 scores but 1 labels"),
        (["x", "y"], [0, 1], "scores must be numbers"),
    ],
)
def test_bad_party_data_is_rejected_with_a_one_line_reason(scores, labels, match):
    with pytest.raises(InputError, match=match) as exc:
        validate_party(scores, labels, (0.0, 1.0), 3)
    assert "\n" not in str(exc.value)


def test_counting_ten_million_scores_takes_under_three_seconds():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 10**7).astype(np.int8)
    s = rng.random(10**7)
    start = time.process_time()
    c = party_counts(s, y, interior_thresholds(100))
    assert time.process_time() - start < 3.0
    assert c.positives + c.negatives == 10**7


def test_binned_auc_converges_to_sklearn_exact_auc_as_n_grows(rng):
    from conftest import make_parties

    parties = make_parties(rng, 4, 2000)
    exact = exact_auc(parties)
    errors = [abs(binned_auc(parties, n) - exact) for n in (5, 25, 100, 1000, 10000)]
    assert errors[-1] < 1e-4
    assert errors[-1] < errors[0] / 50
    assert all(b <= a * 1.5 + 1e-12 for a, b in itertools.pairwise(errors))


def test_binned_auc_with_every_score_a_threshold_is_exact():
    # scores on a grid that the thresholds hit exactly: binned == exact
    s = np.array([0.0, 0.25, 0.5, 0.75, 1.0, 0.5, 0.25])
    y = np.array([0, 0, 1, 1, 1, 0, 1])
    assert binned_auc([(s, y)], 5) == pytest.approx(exact_auc([(s, y)]), abs=1e-15)


@given(st.integers(3, 5000), st.sampled_from([(0.0, 1.0), (0.0, 10.0), (-1.0, 1.0), (0.0, 100.0)]))
def test_even_thresholds_are_the_exact_ratios_rounded_once(n, score_range):
    # every grid value a user writes is a threshold itself: t_k is (hi(N-1-k) + lo k)/(N-1)
    # rounded once (for these ranges the numerator is an exact integer)
    from fractions import Fraction

    lo, hi = score_range
    t = interior_thresholds(n, score_range)
    want = [float(Fraction(int(hi) * (n - 1 - k) + int(lo) * k, n - 1)) for k in range(1, n - 1)]
    assert t.tolist() == want
    assert np.all(np.diff(t) < 0)


@pytest.mark.parametrize("n, grid", [(11, 10), (101, 10), (101, 100), (21, 20)])
def test_scores_on_the_thresholds_grid_give_the_exact_auc(n, grid):
    # a score equal to a threshold counts as positive there (score >= t): on a grid the
    # thresholds hit, the binned AUC is the exact one (before, 1 - k/(N-1) put 0.3 at
    # 0.30000000000000004 and a score of exactly 0.3 fell below it: 0.758 for 0.759 at N = 11)
    rng = np.random.default_rng(n + grid)
    s = np.floor(rng.random(3000) * grid) / grid  # 0, 1/grid, ..., 1 - 1/grid: one per bin
    y = (rng.random(3000) < 0.3 + 0.4 * s).astype(np.int8)
    assert binned_auc([(s, y)], n) == pytest.approx(exact_auc([(s, y)]), abs=1e-12)


def test_too_narrow_a_range_for_the_decision_points_is_refused():
    with pytest.raises(InputError, match="too narrow"):
        interior_thresholds(1000, (1.0, 1.0 + 1e-13))


@pytest.mark.parametrize(
    "threshold, points, score_range, want",
    [
        (0.5, 100, (0.0, 1.0), 101),
        (0.3, 11, (0.0, 1.0), 11),
        (5.0, 100, (0.0, 10.0), 101),
        # the grid's point is 0.7000000000000001 / 0.49999999999999994: never suggested
        (0.7, 8, (0.2, 0.9), 0),
        (0.5, 100, (0.1, 0.7), 0),
        (1e-13, 3, (-1.0, 1.0), 0),
        # a larger N would be too narrow a range: no suggestion, no error
        (100.0000000003, 100, (100.0, 100.000000001), 0),
        (0.0, 100, (0.0, 1.0), 0),
        (float("nan"), 100, (0.0, 1.0), 0),
    ],
)
def test_points_including_suggests_only_grids_holding_the_value_exactly(
    threshold, points, score_range, want
):
    got = points_including(threshold, points, score_range)
    assert got == want
    if got:
        assert threshold in interior_thresholds(got, score_range).tolist()


def test_a_range_too_wide_for_doubles_is_refused():
    with pytest.raises(InputError, match="too wide"):
        interior_thresholds(4, (0.0, 1e308))


def test_auc_from_counts_requires_both_classes():
    with pytest.raises(InputError):
        auc_from_counts(np.array([0, 3]), np.array([0, 0]))
