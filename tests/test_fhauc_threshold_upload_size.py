"""The largest upload an honest threshold party can send fits the aggregator's decoder (issue
27): the upload step's bound once was the key messages' 64 MiB, and honest malicious AUC
uploads of about 80 MB (2 x 1,119 rows at N = 3,202, found by
``benchmarks/fhauc_acceptance.py --random``) were refused after the join as malformed. The
plan's count of an execution's upload bytes equals OpenFHE's ciphertext layout and a real
upload; the plan caps the executions so that the upload fits, and a party refuses at join,
before any upload, a provisioned count that would not."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

pytest.importorskip("openfhe")

import privfl
import privfl.metrics as pm
from conftest import make_parties
from privfl.crypto.threshold import ThresholdContext
from privfl.errors import InputError, MalformedMessageError
from privfl.evaluation.fhauc import sizing
from privfl.evaluation.fhauc.messages import SessionConfig
from privfl.evaluation.fhauc.policy import MAX_EXECUTIONS, Policy, Security
from privfl.evaluation.fhauc.reveal import Reveal
from privfl.evaluation.fhauc.threshold import messages as tmsg
from privfl.evaluation.fhauc.threshold import ops as threshold_ops
from privfl.evaluation.fhauc.threshold import plan as tp
from privfl.evaluation.statistics import interior_thresholds
from privfl.messages import SESSION_ID_BYTES


def session(parties: int, n_points: int, executions: int = 2, splits: int = 4):
    config = SessionConfig(
        bytes(SESSION_ID_BYTES), tuple(f"p{i}" for i in range(parties)),
        np.linspace(0.999, 0.001, n_points), security=Security.MALICIOUS, splits=splits,
        reveal=Reveal.AUC,
    )  # fmt: skip
    return config, Policy(Security.MALICIOUS, 2048, executions=executions)


def openfhe_upload_bytes(plan: tp.Plan, parties: int) -> int:
    """One execution's upload bytes from OpenFHE's own ciphertext layout at the plan's level."""
    ctx = ThresholdContext.for_parameters(plan.params, parties)
    per_ciphertext = ctx.ciphertext_layout(plan.upload_level, 2).vectors * ctx.ring * 8
    return plan.layout.ciphertexts_per_upload * per_ciphertext


@pytest.mark.parametrize(("parties", "n_points"), [(2, 4096), (1000, 4096), (2, 8192)])
def test_the_largest_honest_upload_fits_the_upload_steps_bound(parties, n_points):
    config, policy = session(parties, n_points)
    plan = tp.plan(config, policy)
    assert plan.upload_bytes == openfhe_upload_bytes(plan, parties)
    largest = plan.max_executions * plan.upload_bytes
    assert largest > 64 << 20  # the old bound refused each of these
    assert largest + tmsg.UPLOAD_FRAMING_BYTES <= tmsg.UploadStep.UPLOAD_LIMIT
    # the cap is the upload bound's here, below MAX_EXECUTIONS and the key set's budget
    assert plan.max_executions < MAX_EXECUTIONS
    assert (plan.max_executions + 1) * plan.upload_bytes > (
        tmsg.UploadStep.UPLOAD_LIMIT - tmsg.UPLOAD_FRAMING_BYTES
    )


def test_a_party_refuses_at_join_an_upload_beyond_the_bound():
    config, policy = session(2, 4096)
    cap = tp.plan(config, policy).max_executions
    tp.plan(config, replace(policy, executions=cap))
    with pytest.raises(InputError, match=r"refused before upload.*MiB an upload may hold"):
        tp.plan(config, replace(policy, executions=cap + 1))


@pytest.mark.parametrize(
    ("security", "reveal", "n_points"),
    [
        ("malicious", "auc", 40),  # joint layout
        ("malicious", "auc", 1500),  # T, F and D ciphertexts, chunked
        ("semi-honest", "auc", 3000),  # two chunks
        ("malicious", "curve", 40),  # T and F in one ciphertext
        ("malicious", "curve", 1500),  # three chunks per vector
    ],
)
def test_the_plans_upload_bytes_bound_a_real_upload(monkeypatch, security, reveal, n_points):
    """The plan the parties use (the policy the in-process run provisions from the data) counts
    64 bits a coefficient; the wire packs each tower's residues to its modulus' bits (60 +
    3 x 59 of 4 x 64: 93 %), so the plan's count bounds the real upload, tightly."""
    monkeypatch.setattr(threshold_ops, "FHAUC_PARAMETER_SET", "fhauc-test")  # fast, insecure
    parties = make_parties(np.random.default_rng(3), 2, 200)
    mode = Security.parse(security)
    interior = interior_thresholds(n_points, (0.0, 1.0))
    positives = sum(int(y.sum()) for _, y in parties)
    policy = sizing.in_process_policy(
        mode, "threshold", Reveal(reveal), interior, 2, [200, 200], positives, 400 - positives,
        max_samples=None, min_pairs=None, executions=None,
        required_accuracy=1e-6, min_guarantee_bits=8.0,
    )  # fmt: skip
    config = SessionConfig(
        bytes(SESSION_ID_BYTES), ("party-0", "party-1"), interior, security=mode,
        splits=2 if mode is Security.MALICIOUS else 1, reveal=Reveal(reveal),
    )  # fmt: skip
    plan = tp.plan(config, policy)
    options = {"security": security, "splits": 2, "keys": "threshold"}
    if reveal == "auc":
        upload = privfl.federated_auc(parties, n_points, **options).bytes.party_upload
    else:
        upload = pm.roc_curve(parties, n_points, **options).run["bytes"]["party_upload"]
    ciphertexts = plan.groups * plan.upload_bytes
    assert 0.9 * ciphertexts <= upload <= ciphertexts + tmsg.UPLOAD_FRAMING_BYTES


def test_an_upload_step_above_the_bound_is_refused():
    assert tmsg.UploadStep.from_bytes(tmsg.UploadStep(b"m", bytes(16)).to_bytes()).upload
    big = tmsg.UploadStep(b"m", bytes(tmsg.UploadStep.UPLOAD_LIMIT + 1)).to_bytes()
    with pytest.raises(MalformedMessageError):
        tmsg.UploadStep.from_bytes(big)


@pytest.mark.parametrize(("n_points", "chunks"), [(524_288, 64), (524_289, 65)])
def test_a_vector_the_upload_message_cannot_hold_is_refused_at_join(n_points, chunks):
    """A semi-honest AUC's vectors of ``N - 1`` values (N = ``n_points + 1`` decision
    points here) take ``ceil((N - 1) / 8192)`` ciphertexts each; the upload message holds at
    most ``tmsg.MAX_CIPHERTEXTS`` (64) per vector, so the plan refuses 65 at join (a review
    found the aggregator refusing such an honest upload as malformed after the parties had
    encrypted it), naming the fix."""
    config = SessionConfig(
        bytes(SESSION_ID_BYTES), ("a", "b", "c"), np.linspace(0, 1, n_points + 1)[1:-1],
        security=Security.SEMI_HONEST, reveal=Reveal.AUC,
    )  # fmt: skip
    policy = Policy(Security.SEMI_HONEST, 1000, max_points=n_points)
    if chunks <= tmsg.MAX_CIPHERTEXTS:
        assert tp.plan(config, policy).layout.chunks == chunks
        return
    with pytest.raises(InputError, match=r"65 ciphertexts of 8192 slots.*fewer decision points"):
        tp.plan(config, policy)
