"""FHAUC against a malicious aggregator: correctness, verification, and a tamper suite.

Each tamper case is a small Aggregator subclass; every one must make the parties raise
VerificationError (no AUC output). The 100-seed detection rates are printed by
benchmarks/fhauc_malicious.py; here each case runs on a few seeds.
"""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import privfl
from conftest import make_parties
from privfl.errors import (
    InputError,
    InsufficientPrecisionError,
    VerificationError,
    WeakGuaranteeError,
)
from privfl.evaluation.fhauc import malicious

TOL = 1e-6


@given(
    st.integers(2, 12),
    st.integers(2, 9),
    st.sampled_from([3, 10, 50, 100]),
    st.integers(0, 2**32 - 1),
)
@settings(max_examples=15)
def test_honest_malicious_run_equals_binned_reference(m, splits, n_points, seed):
    rng = np.random.default_rng(seed)
    parties = make_parties(rng, m, int(rng.integers(20, 400)))
    # correctness at every size; the guarantee gate (which needs more executions at large
    # S·N) is tested on its own
    res = privfl.federated_auc(
        parties, n_points, security="malicious", splits=splits, min_guarantee_bits=0
    )
    assert res.verified is True
    assert res.auc == pytest.approx(privfl.binned_auc(parties, n_points), abs=TOL)


def test_many_positions_are_chunked_over_several_ciphertexts(rng):
    parties = make_parties(rng, 3, 300)
    # 9000 slots: correctness of the chunked layout (at S·N = 9000 the CKKS noise is larger,
    # so the default 2^-8 guarantee would need more executions: not what this test is about)
    res = privfl.federated_auc(parties, 1000, security="malicious", splits=9, min_guarantee_bits=0)
    assert res.auc == pytest.approx(privfl.binned_auc(parties, 1000), abs=TOL)


def test_cheat_probability_matches_the_paper_bound(rng):
    res = privfl.federated_auc(make_parties(rng, 3, 50), 10, security="malicious", splits=4)
    s, n = 4, 40
    exact = (math.factorial(s) * math.factorial(n - s) / math.factorial(n)) ** 2
    assert res.cheat_probability == pytest.approx(exact, rel=1e-9)
    assert res.cheat_probability_log2 == pytest.approx(math.log2(exact), rel=1e-9)
    assert res.to_dict()["verified"] is True


def test_malicious_upload_costs_two_semi_honest_uploads_per_execution(rng):
    """A semi-honest upload is one joint ciphertext (T and F); the malicious variant uploads
    T and F apart (two ciphertexts) in each execution."""
    parties = make_parties(rng, 3, 100)
    semi = privfl.federated_auc(parties, 100)
    for k in (2, 3):
        mal = privfl.federated_auc(
            parties, 100, security="malicious", splits=4, executions=k, min_guarantee_bits=0
        )
        ratio = mal.bytes["party_upload"] / semi.bytes["party_upload"]
        assert 0.9 * 2 * k < ratio < 1.1 * 2 * k


def test_honest_runs_raise_no_false_alarm(rng):
    """Honest runs are never taken for a deviation (the guarantee gate is tested apart)."""
    for _ in range(20):
        parties = make_parties(
            rng,
            int(rng.integers(2, 8)),
            int(rng.integers(5, 300)),
            positive_rate=float(rng.uniform(0.05, 0.95)),
        )
        privfl.federated_auc(
            parties,
            int(rng.integers(3, 200)),
            security="malicious",
            splits=int(rng.integers(2, 10)),
            min_guarantee_bits=0,
        )


def test_tolerance_is_far_above_the_honest_spread_and_far_below_a_1e_6_deviation(rng):
    parties = make_parties(rng, 5, 1000)
    res = privfl.federated_auc(parties, 100, security="malicious", splits=4)
    assert res.spread < res.tolerance / 3  # honest executions agree much more tightly
    assert res.tolerance < 1e-8 and res.guarantee_log2 < -5
    sizes = malicious.Sizes.for_session(10, 100, 4, 512, 0)
    rnd = malicious.derive(bytes(32), 0, 0, sizes)
    assert sizes.sigma_execution(rnd, 1e8) < sizes.sigma_execution(rnd, 1e4)


def test_bad_malicious_parameters_are_rejected(rng):
    parties = make_parties(rng, 3, 20)
    with pytest.raises(InputError, match="splits"):
        privfl.federated_auc(parties, 10, security="malicious", splits=1)
    with pytest.raises(InputError, match="2 parties"):
        privfl.federated_auc(parties[:1], 10, security="malicious")
    with pytest.raises(InputError, match="do not fit"):
        privfl.federated_auc(parties, 10, security="malicious", hiding_bits=40)


# ----------------------------------------------------------------------------- tamper suite
from privfl.evaluation.tamper import (  # noqa: E402
    TAMPERS,
    AddEncryptedConstant,
    ForgeAUC099,
    PerExecution,
)


@pytest.mark.parametrize("tamper", TAMPERS, ids=lambda c: c.__name__)
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_tampering_aggregator_is_detected(tamper, seed):
    rng = np.random.default_rng(seed)
    parties = make_parties(rng, 4, 1000)
    with pytest.raises(VerificationError):
        privfl.federated_auc(parties, 50, security="malicious", splits=4, aggregator=tamper())


def test_honest_subclass_of_the_tamper_base_is_accepted(rng):
    parties = make_parties(rng, 4, 1000)
    res = privfl.federated_auc(parties, 50, security="malicious", aggregator=PerExecution())
    assert res.auc == pytest.approx(privfl.binned_auc(parties, 50), abs=TOL)


def test_semi_honest_mode_cannot_detect_tampering_which_is_why_malicious_exists(rng):
    parties = make_parties(rng, 4, 1000)
    res = privfl.federated_auc(parties, 50, aggregator=ForgeAUC099())
    assert res.auc == pytest.approx(0.99, abs=1e-6)


class AddTinyConstant(AddEncryptedConstant):
    constant = 1e3


def test_undetectable_perturbations_are_harmless(rng):
    """Either verification fails or the output is within the verified precision."""
    parties = make_parties(rng, 4, 1000)
    try:
        res = privfl.federated_auc(parties, 50, security="malicious", aggregator=AddTinyConstant())
    except VerificationError:
        return
    assert res.auc == pytest.approx(privfl.binned_auc(parties, 50), abs=TOL)


def test_a_verified_auc_comes_with_the_provisioned_guarantee_or_not_at_all(rng):
    parties = make_parties(rng, 4, 300)
    res = privfl.federated_auc(parties, 50, security="malicious", min_guarantee_bits=8)
    assert res.guarantee_log2 <= -8
    with pytest.raises(WeakGuaranteeError, match="executions"):  # two executions cannot
        privfl.federated_auc(parties, 50, security="malicious", executions=2,
                             min_guarantee_bits=40)  # fmt: skip
    # without a provisioned bound on the global pairs no party can bound its verification
    # from public values (its own counts would make the refusal a probe of them): every
    # party refuses at join, before any upload, and names min_pairs
    with pytest.raises(InsufficientPrecisionError, match="min_pairs"):
        privfl.federated_auc(parties, 50, security="malicious", executions=6, min_pairs=0,
                             min_guarantee_bits=0)  # fmt: skip
