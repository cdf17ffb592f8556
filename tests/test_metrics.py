"""privfl.metrics (issue 18): every revealed value against its plaintext binned reference,
the references against scikit-learn, label handling, what the aggregator holds, and the
malicious variant's check of the revealed curve."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sklearn import metrics as skm

import privfl
import privfl.metrics as pm
from conftest import make_parties
from privfl.crypto import keywrap
from privfl.datasets import deal
from privfl.errors import DecryptionNotPermittedError, InputError, ProtocolError, VerificationError
from privfl.evaluation import curves, fhauc
from privfl.evaluation.fhauc import curve_tamper
from privfl.evaluation.fhauc.reveal import Reveal

TOL = 1e-6


def pooled(parties, weights=None):
    s = np.concatenate([p[0] for p in parties])
    y = np.concatenate([np.asarray(p[1]) for p in parties])
    w = None if weights is None else np.concatenate(weights)
    return s, y, w


def reference_values(ref, points):
    fpr, tpr = curves.roc_points(ref.tp, ref.fp)
    p, r, _t = curves.precision_recall_arrays(ref.tp, ref.fp, points)
    return (
        fpr,
        tpr,
        p,
        r,
        curves.binned_auc(ref.tp, ref.fp),
        curves.average_precision(ref.tp, ref.fp),
    )


# ----------------------------------------------------------------------------- protocol = reference
@st.composite
def small_federations(draw):
    m = draw(st.integers(2, 4))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    kind = draw(st.sampled_from(["01", "pm1", "str"]))
    weighted = draw(st.booleans())
    parties, weights = [], []
    for _ in range(m):
        n = int(rng.integers(5, 60))
        y = (rng.random(n) < draw(st.sampled_from([0.5, 0.1]))).astype(np.int8)
        s = np.round(np.clip(rng.normal(0.4 + 0.2 * y, 0.25), 0, 1), 2)
        labels = {"01": y, "pm1": 2 * y - 1, "str": np.where(y == 1, "spam", "ham")}[kind]
        parties.append((s, labels))
        weights.append(rng.random(n) * 3)
    y0 = np.asarray(parties[0][1]).copy()
    pos = {"01": 1, "pm1": 1, "str": "spam"}[kind]
    neg = {"01": 0, "pm1": -1, "str": "ham"}[kind]
    y0[:2] = [pos, neg]  # both classes present globally
    parties[0] = (parties[0][0], y0)
    pos_label = "spam" if kind == "str" else None
    return parties, (weights if weighted else None), pos_label


@given(small_federations(), st.sampled_from([3, 7, 20]))
@settings(max_examples=6)
def test_every_revealed_value_equals_its_binned_reference(fed, n_points):
    parties, weights, pos_label = fed
    kw = {"pos_label": pos_label, "sample_weight": weights}
    roc = pm.roc_curve(parties, n_points, **kw)
    ref = pm.binned_reference(parties, n_points, **kw)
    fpr, tpr, _p, _r, auc, ap = reference_values(ref, roc.decision_points)
    got_fpr, got_tpr, thr = roc
    assert np.allclose(got_fpr, fpr, atol=TOL) and np.allclose(got_tpr, tpr, atol=TOL)
    assert thr[0] == np.inf and thr[-1] == -np.inf and thr.size == n_points
    assert roc.auc == pytest.approx(auc, abs=TOL)
    assert roc.average_precision == pytest.approx(ap, abs=TOL)
    assert np.allclose(roc.curve.tp, ref.tp, atol=TOL) and np.allclose(
        roc.curve.fp, ref.fp, atol=TOL
    )
    for n in range(1, n_points):
        got = roc.metrics_at(roc.decision_points[n])
        point = (ref.tp[n], ref.fp[n], ref.tp[-1], ref.fp[-1])
        want = curves.metrics_at(*point, 0.0)
        for name in ("accuracy", "precision", "recall", "fpr", "f1", "balanced_accuracy", "mcc"):
            # a metric is as precise as the curve it is derived from (MCC amplifies: hypothesis
            # found a point where TOL on the counts moved it by 2e-6)
            bound = TOL + propagated(name, *point)
            assert getattr(got, name) == pytest.approx(getattr(want, name), abs=bound), name


def propagated(name, tp, fp, p, q):
    """How far ``name`` moves when each of the four counts moves by ``TOL``."""
    base = getattr(curves.metrics_at(tp, fp, p, q, 0.0), name)
    steps = (-TOL, TOL)
    return max(
        abs(getattr(curves.metrics_at(tp + a, fp + b, p + c, q + d, 0.0), name) - base)
        for a in steps for b in steps for c in steps for d in steps
    )  # fmt: skip


def test_malicious_curve_is_verified_and_equals_the_reference(rng):
    parties = make_parties(rng, 3, 150)
    roc = pm.roc_curve(parties, 30, security="malicious", splits=2)
    ref = pm.binned_reference(parties, 30)
    assert roc.run["verified"] is True and roc.run["precision"] < TOL
    assert roc.run["guarantee_log2"] <= -8
    assert np.allclose(roc.curve.tp, ref.tp, atol=TOL) and np.allclose(
        roc.curve.fp, ref.fp, atol=TOL
    )


@pytest.mark.parametrize("security", ["semi-honest", "malicious"])
def test_threshold_metrics_equal_scikit_learn_at_the_threshold(rng, security):
    parties = make_parties(rng, 3, 120)
    weights = [rng.random(p[0].size) * 2 for p in parties]
    res = pm.threshold_metrics(parties, threshold=0.5, sample_weight=weights, security=security)
    s, y, w = pooled(parties, weights)
    pred = (s >= 0.5).astype(int)
    want = {
        "accuracy": skm.accuracy_score(y, pred, sample_weight=w),
        "precision": skm.precision_score(y, pred, sample_weight=w),
        "recall": skm.recall_score(y, pred, sample_weight=w),
        "f1": skm.f1_score(y, pred, sample_weight=w),
        "balanced_accuracy": skm.balanced_accuracy_score(y, pred, sample_weight=w),
        "mcc": skm.matthews_corrcoef(y, pred, sample_weight=w),
    }
    for name, value in want.items():
        assert getattr(res, name) == pytest.approx(value, abs=TOL), name
    assert res.fpr == pytest.approx(np.sum(w * ((pred == 1) & (y == 0))) / np.sum(w * (y == 0)))
    assert res.to_dict()["reveal"] == "metrics"


def test_metrics_read_off_the_curve_count_a_score_equal_to_the_threshold_as_positive(rng):
    # scores rounded to 0.1: many equal 0.3 exactly. The curve's decision point 0.3 (N = 101)
    # was 0.30000000000000004, so metrics_at(0.3) counted them negative (accuracy 0.663 for
    # scikit-learn's 0.611 at score >= 0.3, found by a new-user review); now it is 0.3 itself
    parties = [(np.round(s, 1), y) for s, y in make_parties(rng, 3, 200)]
    got = pm.roc_curve(parties, 101).metrics_at(0.3)
    s, y, _ = pooled(parties, None)
    pred = (s >= 0.3).astype(int)
    assert np.count_nonzero(s == 0.3) > 0
    assert got.accuracy == pytest.approx(skm.accuracy_score(y, pred), abs=TOL)
    assert got.recall == pytest.approx(skm.recall_score(y, pred), abs=TOL)
    assert got.precision == pytest.approx(skm.precision_score(y, pred), abs=TOL)


def test_metrics_at_a_value_the_grid_only_approximates_is_refused_not_misread(rng):
    # on [0.2, 0.9] with N = 8 the point near 0.7 is 0.7000000000000001: a score of exactly 0.7
    # is below it, so reading it as "metrics at 0.7" would be wrong (a fresh-eyes review)
    parties = [(0.2 + 0.7 * s, y) for s, y in make_parties(rng, 2, 40)]
    roc = pm.roc_curve(parties, 8, score_range=(0.2, 0.9))
    assert 0.7 not in roc.decision_points.tolist()
    with pytest.raises(InputError, match="not one of the curve's 8 decision points"):
        roc.metrics_at(0.7)
    point = float(roc.decision_points[2])
    assert roc.metrics_at(point).threshold == point


def test_auc_and_average_precision_scores_and_their_reveal_modes(rng):
    parties = make_parties(rng, 3, 100)
    a = pm.roc_auc_score(parties, 25)
    assert a.reveal == "auc" and float(a) == pytest.approx(privfl.binned_auc(parties, 25), abs=TOL)
    b = pm.roc_auc_score(parties, 25, reveal="curve")
    assert b.reveal == "curve" and float(b) == pytest.approx(float(a), abs=TOL)
    ref = pm.binned_reference(parties, 25)
    assert float(pm.average_precision_score(parties, 25)) == pytest.approx(
        curves.average_precision(ref.tp, ref.fp), abs=TOL
    )
    with pytest.raises(InputError, match="reveal='curve'"):
        pm.average_precision_score(parties, 25, reveal="auc")
    with pytest.raises(InputError, match="sample_weight needs reveal='curve'"):
        pm.roc_auc_score(parties, 25, sample_weight=[np.ones(p[0].size) for p in parties])
    with pytest.raises(InputError, match="keys must be 'single' or 'threshold'"):
        pm.roc_curve(parties, 25, keys="dealer")
    with pytest.raises(InputError, match="unknown option"):
        pm.roc_curve(parties, 25, split=2)


# ----------------------------------------------------------------------------- references = sklearn
def test_references_equal_scikit_learn_exactly_at_the_distinct_scores(rng):
    parties = make_parties(rng, 4, 80)
    parties = [(np.round(s, 2), y) for s, y in parties]  # ties
    weights = [rng.random(s.size) for s, _ in parties]
    s, y, w = pooled(parties, weights)
    grid = np.unique(s)[::-1]
    for wts, sw in ((None, None), (weights, w)):
        ref = pm.binned_reference(parties, grid, sample_weight=wts)
        fpr, tpr = curves.roc_points(ref.tp, ref.fp)
        sk_fpr, sk_tpr, _ = skm.roc_curve(y, s, sample_weight=sw, drop_intermediate=False)
        assert np.allclose(fpr[:-1], sk_fpr) and np.allclose(tpr[:-1], sk_tpr)
        assert curves.binned_auc(ref.tp, ref.fp) == pytest.approx(
            skm.roc_auc_score(y, s, sample_weight=sw), abs=1e-12
        )
        assert curves.average_precision(ref.tp, ref.fp) == pytest.approx(
            skm.average_precision_score(y, s, sample_weight=sw), abs=1e-12
        )
        p, r, t = curves.precision_recall_arrays(ref.tp, ref.fp, np.r_[np.inf, grid, -np.inf])
        sk_p, sk_r, sk_t = skm.precision_recall_curve(y, s, sample_weight=sw)
        # scikit-learn stops at full recall; the binned curve repeats it down to -inf
        k = sk_t.size
        assert np.allclose(p[-k - 1 :], sk_p) and np.allclose(r[-k - 1 :], sk_r)
        assert np.allclose(t[-k:], sk_t)


@pytest.fixture(scope="module")
def adult():
    """Real scores on Adult's 16,281 test rows: a logistic regression on its numeric columns
    (fast; privfl.datasets.adult_scores' boosted model takes ~10 s to train)."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from privfl.datasets import load_adult

    train, test = load_adult("train"), load_adult("test")
    cols = [c for c in train.columns if c != "income" and train[c].dtype.kind in "if"]
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=200))
    model.fit(train[cols].to_numpy(float), train["income"].to_numpy())
    s = model.predict_proba(test[cols].to_numpy(float))[:, 1]
    return s, test["income"].to_numpy(np.int8)


def test_references_converge_to_scikit_learn_on_real_data(adult):
    s, y = adult
    parties = deal(s, y, 10, seed=0)
    exact_auc, exact_ap = skm.roc_auc_score(y, s), skm.average_precision_score(y, s)
    errors = {}
    for n in (100, 4096):
        ref = pm.binned_reference(parties, n)
        errors[n] = (
            abs(curves.binned_auc(ref.tp, ref.fp) - exact_auc),
            abs(curves.average_precision(ref.tp, ref.fp) - exact_ap),
        )
    assert errors[4096][0] < 1e-4 and errors[4096][1] < 1e-3
    assert errors[4096][0] <= errors[100][0] and errors[4096][1] <= errors[100][1]


# ----------------------------------------------------------------------------- labels
@pytest.mark.parametrize(
    ("labels", "pos_label", "match"),
    [
        (["a", "b", "c"], "a", "3 distinct values"),
        (["a", "b", "a"], "z", "pos_label='z' is not among"),
        (["a", "b", "a"], None, "pass pos_label="),
        ([0, 1, 2], None, "3 distinct values"),
        ([0.0, 1.0, np.nan], None, "NaN"),
    ],
)
def test_label_errors_name_the_problem(labels, pos_label, match):
    parties = [(np.array([0.1, 0.5, 0.9]), np.array(labels, dtype=object if pos_label else None))]
    with pytest.raises(InputError, match=match):
        pm.binned_reference(parties, 5, pos_label=pos_label)


@pytest.mark.parametrize(
    ("weights", "match"),
    [
        ([[1, -1, 1]], "negative"),
        ([[1, np.nan, 1]], "NaN"),
        ([[1, 1]], "3 samples but 2 sample weights"),
        ([[1, np.inf, 1]], "finite"),
        ([[0, 0, 0]], "sum to 0"),
        ([[1, 1, 1], [1]], "one weight array per party"),
    ],
)
def test_weight_errors_name_the_problem(weights, match):
    parties = [(np.array([0.1, 0.5, 0.9]), np.array([0, 1, 1]))]
    with pytest.raises(InputError, match=match):
        pm.roc_curve(parties, 5, sample_weight=weights)


def test_string_and_plus_minus_one_labels_give_the_same_curve(rng):
    parties = make_parties(rng, 2, 50)
    as_str = [(s, np.where(y == 1, "yes", "no")) for s, y in parties]
    as_pm = [(s, 2 * y.astype(int) - 1) for s, y in parties]
    base = pm.binned_reference(parties, 10)
    assert np.allclose(pm.binned_reference(as_str, 10, pos_label="yes").tp, base.tp)
    assert np.allclose(pm.binned_reference(as_pm, 10).tp, base.tp)
    flipped = pm.binned_reference(as_str, 10, pos_label="no")
    assert flipped.prevalence == pytest.approx(1 - base.prevalence)


# ----------------------------------------------------------------------------- what the roles hold
def wire(rng, reveal, security="semi-honest", n_points=12, count=3, agg=None):
    names = [f"p{i}" for i in range(count)]
    ids = {n: keywrap.IdentityKey() for n in names}
    roster = {n: k.public_bytes for n, k in ids.items()}
    data = make_parties(rng, count, 700)
    mode = fhauc.Security(security)
    policy = fhauc.Policy(
        mode, 1024 if mode is fhauc.Security.MALICIOUS else 10**7, max_points=n_points,
        max_splits=2 if mode is fhauc.Security.MALICIOUS else 1, min_pairs=1 << 18,
    )  # fmt: skip
    public, bundles = fhauc.KeyHolder(names[0], ids[names[0]], roster).provision(policy)
    agg = agg or fhauc.Aggregator()
    agg.receive_setup(public)
    parties = []
    for n, (s, y) in zip(names, data):
        p = fhauc.Party(n, ids[n], roster, names[0], s, y, reveals=(reveal,))
        p.receive_bundle(bundles[n])
        parties.append(p)
    thresholds = np.array([0.5]) if reveal == "metrics" else n_points
    config = agg.start_session(names, thresholds, security=mode, splits=2, reveal=reveal)
    start = agg.collect_joins({p.name: p.join(config) for p in parties})
    return agg, parties, data, start


def numbers_in(obj, seen=None):
    """Every number reachable from an object (attributes, containers, arrays)."""
    seen = set() if seen is None else seen
    if id(obj) in seen:
        return
    seen.add(id(obj))
    if isinstance(obj, bool):
        return
    if isinstance(obj, int | float | np.number):
        yield float(obj)
    elif isinstance(obj, np.ndarray) and obj.dtype.kind in "iuf":
        yield from (float(v) for v in obj.ravel()[:100000])
    elif isinstance(obj, dict):
        for v in obj.values():
            yield from numbers_in(v, seen)
    elif isinstance(obj, list | tuple | set | frozenset):
        for v in obj:
            yield from numbers_in(v, seen)
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        for v in vars(obj).values():
            yield from numbers_in(v, seen)
    elif hasattr(obj, "__slots__"):
        for name in obj.__slots__:
            yield from numbers_in(getattr(obj, name, None), seen)


@pytest.mark.parametrize("reveal", ["curve", "metrics"])
def test_the_aggregator_never_holds_a_plaintext_count_ratio_or_metric(rng, reveal):
    agg, parties, data, start = wire(rng, reveal)
    ups = {p.name: p.upload(start) for p in parties}
    result = agg.handle_uploads(ups)
    outcomes = [p.finish(result) for p in parties]
    thr = np.array([0.5]) if reveal == "metrics" else agg.session_config.thresholds
    ref = pm.binned_reference(data, thr)
    assert np.allclose(outcomes[0].outcome.curve.tp, ref.tp, atol=TOL)
    total = sum(y.size for _, y in data)
    secrets = set()
    for n in range(1, ref.tp.size):
        tp, fp = ref.tp[n] * total, ref.fp[n] * total
        m = curves.metrics_at(ref.tp[n], ref.fp[n], ref.tp[-1], ref.fp[-1], 0)
        # counts below 100 would coincide with small public integers (slots, bits, ...)
        secrets |= {c for c in (round(tp), round(fp)) if c > 100}
        secrets |= {ref.tp[n], ref.fp[n], ref.tp[n] / ref.tp[-1]}
        secrets |= {m.accuracy, m.precision, m.recall, m.fpr, m.f1, m.mcc, m.balanced_accuracy}
    secrets |= {ref.prevalence, ref.auc()}
    public = {0.0, 1.0, *map(float, thr)}  # a metric may coincide with a public threshold
    secrets = {v for v in secrets if v not in public and abs(v) > 1e-9}
    held = set(numbers_in(agg))
    leaked = [v for v in secrets if any(abs(h - v) <= 1e-9 * max(1, abs(v)) for h in held)]
    assert not leaked, f"the aggregator holds {leaked}"
    msg = fhauc.PartyUpload.from_bytes(ups["p0"], agg.config.session, agg.roster)
    with pytest.raises(DecryptionNotPermittedError):
        agg.context.decrypt(msg.open(agg.context, 1, 0, 40)[0].t[0])


def test_a_party_refuses_a_reveal_it_did_not_consent_to(rng):
    agg, parties, _, _ = wire(rng, "curve")
    shy = fhauc.Party.__new__(fhauc.Party)
    shy.__dict__ |= parties[0].__dict__ | {"reveals": frozenset({Reveal.AUC}), "state": None}
    config = agg.start_session([p.name for p in parties], 12, reveal="curve")
    with pytest.raises(ProtocolError, match="consented to \\['auc'\\] only"):
        shy.join(config)


# ----------------------------------------------------------------------------- malicious tamper
@pytest.mark.parametrize("attack", curve_tamper.CURVE_TAMPERS, ids=lambda c: c.__name__)
def test_a_deviating_aggregator_is_caught_on_the_curve(rng, attack):
    tamper, parties, _, start = wire(rng, "curve", "malicious", n_points=8, agg=attack())
    result = tamper.handle_uploads({p.name: p.upload(start) for p in parties})
    with pytest.raises(VerificationError):
        parties[0].finish(result)


def test_a_deviation_is_caught_in_the_metrics_reveal_too(rng):
    agg = curve_tamper.DoubleFalsePositives()
    tamper, parties, _, start = wire(rng, "metrics", "malicious", agg=agg)
    result = tamper.handle_uploads({p.name: p.upload(start) for p in parties})
    with pytest.raises(VerificationError):
        parties[1].finish(result)


# ----------------------------------------------------------------------------- confidence interval
def test_hanley_mcneil_interval_is_conservative_at_lower_bounds():
    lo, hi = curves.hanley_mcneil_interval(0.8, 500, 700)
    lo2, hi2 = curves.hanley_mcneil_interval(0.8, 100, 300)
    assert lo2 <= lo < 0.8 < hi <= hi2
    # by hand: A = 0.8, 50/50: Q1 = 2/3, Q2 = 0.7111; SE² = (0.16 + 49·0.02667 + 49·0.07111)
    # / 2500 = 0.0019804, SE = 0.04450
    lo3, hi3 = curves.hanley_mcneil_interval(0.8, 50, 50)
    assert (hi3 - lo3) / (2 * 1.959964) == pytest.approx(0.04450, abs=2e-5)
    p, q = curves.class_total_lower_bounds(30, 10, prevalence=0.5)
    assert (p, q) == (30, 30)


def test_score_interval_uses_what_the_parties_hold(rng):
    parties = make_parties(rng, 3, 100)
    a = pm.roc_auc_score(parties, 20)
    lo, hi = a.confidence_interval()
    _s, y, _ = pooled(parties)
    exact = curves.hanley_mcneil_interval(float(a), y.sum(), y.size - y.sum())
    assert lo <= exact[0] and hi >= exact[1]  # conservative
    assert a.confidence_interval(class_totals=(y.sum(), y.size - y.sum())) == exact


# ----------------------------------------------------------------------------- CLI
def test_cli_curve_with_string_labels_plot_metrics_and_json(tmp_path):
    import json

    import pandas as pd
    from typer.testing import CliRunner

    from privfl.cli import app

    rng = np.random.default_rng(4)
    y = rng.integers(0, 2, 300)
    s = np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1)
    path = tmp_path / "scores.csv"
    pd.DataFrame({"score": s, "label": np.where(y == 1, "fraud", "ok")}).to_csv(path, index=False)
    png = tmp_path / "roc.png"
    args = ["auc", str(path), "-s", "score", "-l", "label", "--parties", "3", "--thresholds",
            "21", "--pos-label", "fraud", "--reveal", "curve", "--plot", str(png),
            "--metrics-at", "0.5", "--compare"]  # fmt: skip
    out = CliRunner().invoke(app, [*args, "--json"])
    assert out.exit_code == 0, out.output
    got = json.loads(out.stdout)
    parties = deal(s, y.astype(np.int8), 3, seed=0)
    ref = pm.binned_reference(parties, 21)
    assert got["auc"] == pytest.approx(ref.auc(), abs=TOL)
    assert got["compare"]["ap_abs_error_vs_binned"] < TOL
    assert got["metrics"]["reveal"] == "curve"  # 0.5 is a decision point of N = 21
    assert got["metrics"]["recall"] == pytest.approx(
        skm.recall_score(y, (s >= 0.5).astype(int)), abs=TOL
    )
    assert png.stat().st_size > 10_000
    table = CliRunner().invoke(app, [*args[:12], "--reveal", "metrics", "--metrics-at", "0.42"])
    assert table.exit_code == 0 and "balanced accuracy" in table.stdout
    assert "from the metrics reveal" in table.stdout
    bad = CliRunner().invoke(app, [*args[:10], "--reveal", "auc", "--plot", str(png)])
    assert bad.exit_code == 2 and "--reveal curve" in bad.output


def test_the_documented_caveat_integer_counts_are_recoverable_up_to_their_gcd(rng):
    # reveal.py: the common scale does not hide unweighted counts; continued fractions of a
    # revealed ratio give the reduced fraction P/(P+Q) (here P and P+Q are coprime)
    y = np.zeros(997, dtype=np.int8)
    y[:331] = 1
    parties = [(rng.random(500), y[:500]), (rng.random(497), y[500:])]
    roc = pm.roc_curve(parties, 5)
    from fractions import Fraction

    guess = Fraction(roc.curve.prevalence).limit_denominator(10**5)
    assert (guess.numerator, guess.denominator) == (331, 997)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--reveal", "metrics"], "needs --metrics-at"),
        (["--reveal", "roc"], "--reveal must be"),
        (["--pos-label", "yes"], "is not a number"),
        (["--pos-label", "7"], "pos_label=7.0 is not among"),
        # no second session behind --reveal's back (the parties would learn more)
        (["--metrics-at", "0.5"], "more than --reveal auc"),
        (["--reveal", "curve", "--thresholds", "5", "--metrics-at", "0.3"], "not one of the"),
        # the default 100 points miss 0.5: the error names the N that includes it
        (["--reveal", "curve", "--metrics-at", "0.5"], "--thresholds 101 includes it"),
        # options of the malicious variant are refused elsewhere, not silently ignored
        (["--splits", "8", "--executions", "5"], "--splits, --executions only apply to"),
        (["--min-guarantee-bits", "20"], "--min-guarantee-bits only apply to"),
    ],
)
def test_cli_reveal_and_label_errors_exit_2(tmp_path, extra, message):
    import pandas as pd
    from typer.testing import CliRunner

    from privfl.cli import app

    path = tmp_path / "s.csv"
    pd.DataFrame({"score": [0.1, 0.6, 0.9, 0.3], "label": [0, 1, 1, 0]}).to_csv(path, index=False)
    out = CliRunner().invoke(app, ["auc", str(path), "-s", "score", "-l", "label",
                                   "--parties", "2", *extra])  # fmt: skip
    assert out.exit_code == 2 and message in out.output, out.output


@pytest.mark.parametrize(
    ("rows", "extra", "message"),
    [
        # a boolean label column: --pos-label true/false (any case) or 1/0
        ([("a", True), ("b", False), ("a", False), ("b", True)], ["--pos-label", "True"], None),
        ([("a", True), ("b", False), ("a", False), ("b", True)], ["--pos-label", "false"], None),
        ([("a", True), ("b", False)], ["--pos-label", "maybe"], "pass true or false"),
        ([("a", 1), ("a", 0)], [], "holds one value ('a')"),
        ([], [], "has a header but no rows"),
        ([("a", "yes"), ("b", "no"), ("a", "no"), ("b", "yes")], [], "--pos-label on the"),
    ],
)
def test_cli_label_and_party_column_edges(tmp_path, rows, extra, message):
    import json

    import pandas as pd
    from typer.testing import CliRunner

    from privfl.cli import app

    path = tmp_path / "s.csv"
    scores = [0.2, 0.7, 0.4, 0.9][: len(rows)]
    df = pd.DataFrame(rows, columns=["site", "label"]).assign(score=scores)
    df.to_csv(path, index=False)
    out = CliRunner().invoke(app, ["auc", str(path), "-s", "score", "-l", "label",
                                   "--party-column", "site", "--json", *extra])  # fmt: skip
    if message is not None:
        assert out.exit_code == 2 and message in out.output, out.output
        return
    assert out.exit_code == 0, out.output
    positive = extra[1].lower() == "true"
    y = (df.label == positive).astype(int)
    want = skm.roc_auc_score(y, df.score)
    assert json.loads(out.stdout)["auc"] == pytest.approx(want, abs=0.02)  # binning, N = 100


def test_curves_index_like_scikit_learns_tuples(rng):
    parties = make_parties(rng, 2, 50)
    roc, pr = pm.roc_curve(parties, 5), pm.precision_recall_curve(parties, 5)
    assert len(roc) == len(pr) == 3
    for result in (roc, pr):
        for k, array in enumerate(result):
            assert result[k] is array
    assert roc[-1] is roc.thresholds


@pytest.mark.parametrize("labels", [[0, 256, 1, 0], [0, 0.5, 1, 0], [0, float("nan"), 1, 0]])
def test_deal_refuses_labels_an_int8_cast_would_change(labels):
    """`deal` keeps labels as int8: 256 became 0 and 0.5 became 0, silently relabelling rows."""
    with pytest.raises(InputError, match="small integers"):
        deal([0.1, 0.2, 0.3, 0.4], labels, 2)


def test_deal_keeps_zero_one_and_minus_one_one_labels():
    for labels in ([0, 1, 1, 0], [-1, 1, 1, -1], [False, True, True, False]):
        dealt = deal([0.1, 0.2, 0.3, 0.4], labels, 2, seed=1)
        assert sorted(np.concatenate([y for _, y in dealt]).tolist()) == sorted(map(int, labels))
