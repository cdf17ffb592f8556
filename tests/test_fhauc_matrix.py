"""Every combination of security x keys x reveal (12), with fast parameters.

Each combination the engine runs equals the binned plaintext reference within 1e-6; each it
cannot run yet (threshold keys with a curve or metrics reveal) is refused with an
InputError that names the reason before any protocol step runs (no progress event).
"""

from __future__ import annotations

import numpy as np
import pytest

import privfl
import privfl.metrics as pm
from conftest import make_parties
from privfl.errors import InputError
from privfl.evaluation.fhauc import threshold_ops

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
        return pm.roc_auc_score(data, N, reveal="curve", **kw).value
    return pm.threshold_metrics(data, 0.5, **kw)


@pytest.mark.parametrize("reveal", REVEALS)
@pytest.mark.parametrize("keys", KEYS)
@pytest.mark.parametrize("security", SECURITY)
def test_every_combination_equals_the_reference_or_is_refused_before_any_work(
    security, keys, reveal
):
    data = make_parties(np.random.default_rng(5), 3, 300)
    events: list[object] = []
    if keys == "threshold" and reveal != "auc":
        with pytest.raises(InputError, match="not supported yet"):
            run(data, security, keys, reveal, events)
        assert events == []
        return
    got = run(data, security, keys, reveal, events)
    assert events  # the protocol ran
    if reveal == "metrics":
        s = np.concatenate([d[0] for d in data])
        y = np.concatenate([d[1] for d in data])
        pred = s >= 0.5
        assert got.recall == pytest.approx(np.sum(pred & (y == 1)) / np.sum(y == 1), abs=TOL)
        assert got.fpr == pytest.approx(np.sum(pred & (y == 0)) / np.sum(y == 0), abs=TOL)
    else:
        assert got == pytest.approx(privfl.binned_auc(data, N), abs=TOL)
