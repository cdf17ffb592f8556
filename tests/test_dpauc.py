import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import privfl
from conftest import make_parties
from privfl.datasets import deal
from privfl.errors import InputError
from privfl.evaluation import dpauc as dp
from privfl.evaluation.statistics import interior_thresholds, party_counts
from privfl.studies.fhauc_vs_dpauc import accuracy_study, draw_sample, leakage_study


@pytest.mark.parametrize(
    "calibration, expected",
    [("total-budget", 4 * 50 / 2.0), ("per-count", 1 / 2.0), ("sensitivity-2", 8 * 50 / 2.0)],
)
def test_laplace_noise_spread_matches_its_calibrated_scale(calibration, expected):
    """200,000 draws at a fixed seed: sd = sqrt(2) b within 1.5 % (about 6 standard errors: the
    relative standard error of a Laplace sample's sd is sqrt(5/4n) = 0.25 %), E|z| = b within 6
    standard errors, and a Kolmogorov-Smirnov test against Lap(b) does not reject at 0.1 %."""
    from scipy import stats

    scale = dp.laplace_scale(2.0, 50, calibration)
    assert scale == pytest.approx(expected)
    z = dp.NoiseSource(seed=11).laplace(scale, 200_000)
    assert np.std(z) == pytest.approx(np.sqrt(2) * scale, rel=0.015)
    assert abs(np.abs(z).mean() - scale) < 6 * scale / np.sqrt(z.size)
    assert abs(z.mean()) < 6 * np.sqrt(2) * scale / np.sqrt(z.size)
    assert stats.kstest(z, "laplace", args=(0.0, scale)).pvalue > 1e-3


def test_laplace_release_adds_noise_of_that_scale_to_all_four_counts(rng):
    s, y = make_parties(rng, 1, 500)[0]
    c = party_counts(s, y, interior_thresholds(20))
    diffs = []
    noise = dp.NoiseSource(seed=3)
    for _ in range(300):
        rel = dp.laplace_release(c, 1.0, noise)
        diffs.append(np.concatenate([rel.tp - c.tp, rel.fp - c.fp]))
    d = np.concatenate(diffs)
    assert np.std(d) == pytest.approx(np.sqrt(2) * 4 * 20 / 1.0, rel=0.05)


def test_rr_debiasing_recovers_the_true_auc_in_expectation(rng):
    parties = make_parties(rng, 10, 600, positive_rate=0.3)
    truth = privfl.binned_auc(parties, 50)
    aucs = np.array([privfl.dpauc(parties, 50, 1.0, "rr", seed=i).auc for i in range(300)])
    assert abs(aucs.mean() - truth) < 5 * aucs.std() / np.sqrt(aucs.size)
    # the noisy-label AUC itself is biased towards 1/2: debiasing is what removes it
    noisy = privfl.dpauc(parties, 50, 1.0, "rr", seed=0).noisy_auc
    assert abs(noisy - 0.5) < abs(truth - 0.5)


def test_architecture_formula_would_be_biased(rng):
    """Regression guard for the corrected debiasing: (a+b-2ab)/2 leaves a bias of ab/(1-a-b)."""
    a = b = dp.flip_probability(1.0)
    auc = 0.8
    noisy = auc * (1 - a - b) + (a + b) / 2  # what RR produces in expectation
    rate = 0.5
    assert dp.debias_rr(noisy, rate, a) == pytest.approx(auc, abs=1e-12)
    wrong = (noisy - (a + b - 2 * a * b) / 2) / (1 - a - b)
    assert abs(wrong - auc) > 0.05


def test_dpauc_accuracy_improves_with_epsilon_and_reports_counts(rng):
    parties = make_parties(rng, 15, 400)
    truth = privfl.binned_auc(parties, 25)
    err = {
        e: np.mean([abs(privfl.dpauc(parties, 25, e, seed=i).auc - truth) for i in range(40)])
        for e in (1.0, 8.0)
    }
    assert err[8.0] < err[1.0]
    res = privfl.dpauc(parties, 25, 1.0)
    assert len(res.noisy_counts) == 15
    assert {"tp", "fp", "tn", "fn"} <= set(vars(res.noisy_counts[0]))
    assert res.noisy_counts[0].tp.shape == (25,)


def test_seeded_runs_are_reproducible_and_unseeded_are_not(rng):
    parties = make_parties(rng, 3, 100)
    assert privfl.dpauc(parties, 10, 1.0, seed=5).auc == privfl.dpauc(parties, 10, 1.0, seed=5).auc
    assert privfl.dpauc(parties, 10, 1.0).auc != privfl.dpauc(parties, 10, 1.0).auc


def test_attack_error_shrinks_as_epsilon_grows(rng):
    s, y = make_parties(rng, 1, 700)[0]
    rows = leakage_study(s, y, epsilons=(1, 8), thresholds=(50,), runs=100, seed=1)
    assert rows[1].total[0] < rows[0].total[0] / 3
    assert rows[1].positives[0] < rows[0].positives[0]


def test_attack_recovers_counts_from_rr_release(rng):
    s, y = make_parties(rng, 1, 5000)[0]
    rel = dp.rr_release(s, y, interior_thresholds(20), 4.0, dp.NoiseSource(seed=2))
    pos, neg = dp.infer_party_counts(rel)
    assert pos + neg == pytest.approx(y.size)
    assert abs(pos - y.sum()) < 150


def test_dpauc_threshold_grid_is_non_uniform():
    g = dp.dpauc_thresholds(102)
    assert g.size == 100 and np.all(np.diff(g) < 0)
    assert np.sum(g <= 0.2) == 50 and np.sum((g > 0.2) & (g <= 0.5)) == 25
    assert np.sum(g > 0.5) == 25 and g.max() < 1.0 and g.min() > 0.0
    assert dp.resolve_thresholds("dpauc", (0, 1)).size == 98
    assert dp.resolve_thresholds("dpauc:25", (0, 1)).size == 23


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"mechanism": "gauss"}, "mechanism"),
        ({"postprocess": "clip"}, "postprocess must be one of none, dpauc-authors"),
        ({"calibration": "tight"}, "calibration must be one of"),
        ({"epsilon": 0}, "epsilon must be a finite number > 0"),
        ({"epsilon": -1.0}, "epsilon must be a finite number > 0"),
        ({"epsilon": float("nan")}, "epsilon"),
        ({"epsilon": float("inf")}, "epsilon"),
        ({"epsilon": True}, "epsilon"),
        ({"epsilon": "1"}, "epsilon"),
        ({"epsilon": 10**400}, "epsilon"),
        ({"epsilon": 1e-320}, "too small"),
        ({"seed": -1}, "seed must be a non-negative integer"),
        ({"seed": 1.5}, "seed must be a non-negative integer"),
        ({"seed": "5"}, "seed must be a non-negative integer"),
        ({"thresholds": "uniform"}, "unknown threshold grid"),
        ({"thresholds": "20"}, "unknown threshold grid"),
        ({"thresholds": "dpauc:abc"}, r"'dpauc:N' needs an integer N >= 3"),
        ({"thresholds": "dpauc:"}, r"'dpauc:N' needs an integer N >= 3"),
        ({"thresholds": "dpauc:2"}, "3 <= N"),
        ({"thresholds": 2}, "3 <= N"),
        ({"thresholds": 100.5}, "not a whole number"),
        ({"thresholds": True}, "bool"),
        ({"thresholds": [2.0, 0.5]}, "inside the score range"),
        ({"thresholds": [0.2, 0.5]}, "strictly decreasing"),
        ({"thresholds": [[0.5]]}, "one-dimensional"),
        ({"thresholds": ["a"]}, "numbers"),
    ],
)
def test_bad_dpauc_arguments(rng, kwargs, match):
    with pytest.raises(InputError, match=match):
        privfl.dpauc(make_parties(rng, 2, 20), **kwargs)


def test_huge_n_is_refused_up_front_with_the_limit_named(rng):
    """Issue 14 finding 11: N = 10^9 used to die in a MemoryError; now nothing is allocated."""
    parties = make_parties(rng, 2, 20)
    for thresholds in (10**9, "dpauc:1000000000", np.zeros(10**6)):
        with pytest.raises(InputError, match="100,000"):
            privfl.dpauc(parties, thresholds)


def test_an_integral_float_n_is_n(rng):
    parties = make_parties(rng, 3, 50)
    assert privfl.dpauc(parties, 100.0, seed=1).auc == privfl.dpauc(parties, 100, seed=1).auc


def test_rr_at_huge_epsilon_is_exact_instead_of_overflowing(rng):
    """Issue 14 finding 11: ε = 1000 overflowed in 1/(1+e^ε); ρ is now e^-ε/(1+e^-ε) = 0."""
    parties = make_parties(rng, 3, 200)
    truth = privfl.binned_auc(parties, 30)
    for eps in (1000.0, 1e300):
        assert dp.flip_probability(eps) == 0.0
        assert privfl.dpauc(parties, 30, eps, "rr", seed=1).auc == pytest.approx(truth, abs=1e-12)
    assert dp.flip_probability(1.0) == pytest.approx(1 / (1 + np.e))


@pytest.mark.parametrize("mechanism", dp.MECHANISMS)
@pytest.mark.parametrize("postprocess", dp.POSTPROCESSING)
def test_both_variants_are_unbiased_in_the_limit_of_large_epsilon(rng, mechanism, postprocess):
    """The mean over 30 runs is within 5 standard errors of the binned AUC at ε = 3000 and
    10^6, and within 1e-5 at 10^6 (Laplace b = 100/ε per count). At small ε only the faithful
    variant stays unbiased: sorting noisy points by FPR pulls the authors' AUC down (README)."""
    parties = make_parties(rng, 15, 200)
    truth = privfl.binned_auc(parties, 25)
    for eps in (3000.0, 1e6):
        aucs = np.array(
            [
                privfl.dpauc(parties, 25, eps, mechanism, seed=i, postprocess=postprocess).auc
                for i in range(30)
            ]
        )
        assert abs(aucs.mean() - truth) <= 5 * aucs.std() / np.sqrt(aucs.size) + 1e-12
    assert abs(aucs.mean() - truth) < 1e-5


def test_the_faithful_laplace_variant_is_unbiased_at_small_epsilon(rng):
    parties = make_parties(rng, 15, 200)
    truth = privfl.binned_auc(parties, 25)
    aucs = np.array([privfl.dpauc(parties, 25, 30.0, seed=i).auc for i in range(100)])
    assert abs(aucs.mean() - truth) <= 5 * aucs.std() / np.sqrt(aucs.size)


@settings(max_examples=40, deadline=None)
@given(
    size=st.integers(4, 60),
    parties=st.integers(1, 4),
    eps=st.sampled_from([1e-3, 0.1, 1.0, 8.0]),
    n=st.integers(3, 40),
    seed=st.integers(0, 2**32),
)
def test_the_authors_variant_never_returns_an_auc_outside_the_unit_interval(
    size, parties, eps, n, seed
):
    data_rng = np.random.default_rng(seed)  # not secret: synthetic test data
    y = np.r_[0, 1, data_rng.integers(0, 2, size - 2)]
    s = data_rng.random(size)
    data = deal(s, y, min(parties, size), seed)
    res = privfl.dpauc(data, n, eps, seed=seed, postprocess="dpauc-authors")
    assert 0.0 <= res.auc <= 1.0 and not res.noise_dominates


def test_noise_dominates_is_flagged_and_the_authors_variant_repairs_it(rng):
    """Tiny data, tiny ε: the faithful AUC leaves [0, 1] (flagged); the same release under the
    authors' post-processing stays inside."""
    parties = make_parties(rng, 3, 10)
    outside = [privfl.dpauc(parties, 20, 0.05, seed=i) for i in range(20)]
    flagged = [r for r in outside if r.noise_dominates]
    assert flagged and all(not 0 <= r.auc <= 1 for r in flagged)
    assert flagged[0].to_dict()["noise_dominates"] is True
    for r in flagged:
        auc, _ = dp.aggregate(r.noisy_counts, "dpauc-authors")
        assert 0.0 <= auc <= 1.0


def test_authors_postprocessing_changes_nothing_on_rr_counts(rng):
    parties = make_parties(rng, 4, 300)
    for seed in range(5):
        a = privfl.dpauc(parties, 30, 1.0, "rr", seed=seed)
        b = privfl.dpauc(parties, 30, 1.0, "rr", seed=seed, postprocess="dpauc-authors")
        assert a.auc == b.auc and a.noisy_auc == b.noisy_auc


def test_authors_postprocessing_clips_sorts_and_empties_points():
    z = np.zeros(4)
    tp, fn = np.array([0.0, 3.0, -2.0, 10.0]), np.array([10.0, 7.0, 12.0, 0.0])
    fp, tn = np.array([0.0, 6.0, 2.0, 10.0]), np.array([10.0, 4.0, 8.0, 0.0])
    # (FPR, TPR): (0, 0), (0.6, 0.3), (0.2, 0 after clipping), (1, 1): sorted 0, 0.2, 0.6, 1
    expected = 0.2 * 0 + 0.4 * 0.15 + 0.4 * 0.65
    assert dp.trapezoid_auc(tp, fp, tn, fn, "dpauc-authors") == pytest.approx(expected)
    assert dp.trapezoid_auc(tp, fp, tn, fn) != pytest.approx(expected)
    # a point whose FP + TN is zero after clipping becomes (0, 0)
    fp, tn = np.array([-1.0, 0, 0, 5]), np.array([-1.0, 5, 5, 0])
    assert dp.trapezoid_auc(z + 5, fp, tn, z + 5, "dpauc-authors") == pytest.approx(0.5)


def test_fhauc_is_identical_across_runs_and_splits(rng):
    scores = rng.random(3000)
    labels = (rng.random(3000) < scores).astype(np.int8)
    sample = draw_sample(scores, labels, 2000, 0)
    results = []
    for iid in (True, False):
        data = deal(sample.scores, sample.labels, 15, 0, iid=iid)
        results += [privfl.federated_auc(data, 50).auc for _ in range(2)]
        if not iid:  # non-IID: contiguous score blocks
            assert all(a[0].max() <= b[0].min() for a, b in itertools.pairwise(data))
    ref = privfl.binned_auc([(sample.scores, sample.labels)], 50)
    assert max(results) - min(results) < 1e-9
    assert results[0] == pytest.approx(ref, abs=1e-9)


def test_accuracy_study_rows_have_every_column(rng):
    scores = rng.random(500)
    labels = (rng.random(500) < scores).astype(np.int8)
    rows = accuracy_study(scores, labels, [100, 1000], [10], [1.0, 8.0], parties=5, runs=4)
    assert [r.size for r in rows] == [100, 1000]
    assert rows[1].with_replacement and not rows[0].with_replacement
    d = rows[0].to_dict()
    plain = {"laplace eps=1", "laplace eps=8", "rr eps=1", "rr eps=8"}
    assert set(d["dpauc"]) == plain | {f"{k} dpauc-authors" for k in plain}
    assert abs(d["fhauc"] - d["binned"]) < 1e-6
    for key, stats in rows[0].dpauc.items():
        assert stats.runs == 4 and stats.non_finite_runs == 0
        if key.endswith("dpauc-authors"):
            assert stats.outside_unit_runs == 0


def test_adult_loader_reads_the_shipped_files():
    from privfl.datasets import load_adult

    train, test = load_adult("train"), load_adult("test")
    assert train.shape == (32561, 15) and test.shape == (16281, 15)
    assert int(train.income.sum()) == 7841 and int(test.income.sum()) == 3846


def test_missing_dataset_file_has_a_clear_error(monkeypatch, tmp_path):
    from privfl.datasets import DatasetNotFoundError, load_adult

    monkeypatch.setenv("PRIVFL_DATA_DIR", str(tmp_path))
    with pytest.raises(DatasetNotFoundError, match="PRIVFL_DATA_DIR"):
        load_adult()


def test_deal_is_the_one_split_iid_random_or_non_iid_score_blocks(rng):
    s, y = rng.random(103), (rng.random(103) < 0.5).astype(np.int8)
    iid = deal(s, y, 5, seed=3)
    order = np.random.default_rng(3).permutation(103)  # not secret: the documented deal
    assert [p[0].tolist() for p in iid] == [s[i].tolist() for i in np.array_split(order, 5)]
    blocks = deal(s, y, 5, seed=3, iid=False)
    assert [p[0].size for p in blocks] == [21, 21, 21, 20, 20]
    assert all(a[0].max() <= b[0].min() for a, b in itertools.pairwise(blocks))
    for bad in ({"seed": -1}, {"seed": 1.5}, {"seed": True}, {"parties": 0}, {"parties": 200}):
        kwargs = {"parties": 5} | bad
        with pytest.raises(InputError):
            deal(s, y, **kwargs)
    with pytest.raises(InputError, match="labels"):
        deal(s, y[:-1], 5)
