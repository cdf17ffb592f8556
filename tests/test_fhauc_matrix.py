"""Every combination of security x keys x reveal (12), with fast parameters.

Every combination runs through the one role builder and equals the binned plaintext
reference within 1e-6 (curve: its AUC and every normalised point; metrics: recall and FPR).
"""

from __future__ import annotations

import numpy as np
import pytest

import privfl
import privfl.metrics as pm
from conftest import make_parties
from privfl.evaluation.fhauc.threshold import ops as threshold_ops
from privfl.evaluation.metric_reference import binned_reference

TOL = 1e-6
N = 10
SECURITY = ["semi-honest", "malicious"]
KEYS = ["single", "threshold"]
REVEALS = ["auc", "curve", "metrics"]


@pytest.fixture(autouse=True)
def fast_threshold_ring(monkeypatch):
    monkeypatch.setattr(threshold_ops, "FHAUC_PARAMETER_SET", "fhauc-test")  # fast, insecure


def run(data, security, keys, reveal, events):
    kw = {"security": security, "keys": keys, "progress": events.append}
    if reveal == "auc":
        return privfl.federated_auc(data, N, **kw).auc
    if reveal == "curve":
        return pm.roc_curve(data, N, **kw)
    return pm.threshold_metrics(data, 0.5, **kw)


@pytest.mark.parametrize("reveal", REVEALS)
@pytest.mark.parametrize("keys", KEYS)
@pytest.mark.parametrize("security", SECURITY)
def test_every_combination_equals_the_binned_reference(security, keys, reveal):
    data = make_parties(np.random.default_rng(5), 3, 300)
    events: list[object] = []
    got = run(data, security, keys, reveal, events)
    assert events  # the protocol ran
    if reveal == "metrics":
        s = np.concatenate([d[0] for d in data])
        y = np.concatenate([d[1] for d in data])
        pred = s >= 0.5
        assert got.recall == pytest.approx(np.sum(pred & (y == 1)) / np.sum(y == 1), abs=TOL)
        assert got.fpr == pytest.approx(np.sum(pred & (y == 0)) / np.sum(y == 0), abs=TOL)
    elif reveal == "curve":
        ref = binned_reference(data, N)
        assert got.fpr == pytest.approx(ref.fp / ref.fp[-1], abs=TOL)
        assert got.tpr == pytest.approx(ref.tp / ref.tp[-1], abs=TOL)
        auc = float(np.sum((got.tpr[1:] + got.tpr[:-1]) * np.diff(got.fpr)) / 2)
        assert auc == pytest.approx(privfl.binned_auc(data, N), abs=TOL)
    else:
        assert got == pytest.approx(privfl.binned_auc(data, N), abs=TOL)
