import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "privfl",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=bool(os.environ.get("CI")),
)
settings.load_profile("privfl")


def make_parties(rng, count, size, positive_rate=0.5, separation=0.2):
    """Synthetic (scores in [0,1], labels) per party."""
    out = []
    for _ in range(count):
        y = (rng.random(size) < positive_rate).astype(np.int8)
        s = np.clip(rng.normal(0.4 + separation * y, 0.2), 0.0, 1.0)
        out.append((s, y))
    return out


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


# The longest tests (real Flower processes, docs pages that deploy or train), longest first,
# as parts of their node ids. ``make test`` runs ``-n 4 --dist worksteal``: xdist hands each
# worker one contiguous share of the collection and idle workers steal from the *end* of the
# others' shares, so a long test started last would run alone at the end. The hook puts one
# long test at the head of each worker's share, in turn, so they start at once and overlap
# with the short ones (which are what the other workers steal).
# Ordered by the wall time of a measured run (issue 31: `-n 4 --dist worksteal`, load average
# 10-22 from other jobs, docs/reproducing.md): training-deployment.md (303 s) ranked 11th and
# started near the end; the refused-settings training CLI case (102 s) and the FHAUC property
# tests (60 s each) were missing.
# Re-ordered from `--cpu-report` (issue 31 item 5: the wall times of a run at load 10-17,
# the same tests' CPU): the training-deployment page no longer starts processes (its
# blocks run in test_flower_train_processes.py) and the too-few-levels refusal is instant.
LONGEST = (
    "test_flower_train_processes.py::test_privfl_flower_train_writes",
    "test_flower_forest_local.py",
    "test_flower_train_private_auc.py",
    "test_flower_netns.py::test_fhauc_across_namespaces",
    "test_flower_revfrf.py::",
    "test_flower_integration.py::test_a_supernode_killed",
    "runs_as_written[docs/guide/training.md]",
    "test_audit.py::test_memorising_model_is_detected",
    "test_fhauc_malicious.py::test_honest_malicious_run_equals_binned_reference",
    "runs_as_written[README.md]",
    "no_oracle_at_2048_bits",
    "test_cli_schemas.py::test_train_json_has_one_schema_in_both_modes",
    "test_random_honest_malicious_auc_sessions_are_accepted",
    "runs_as_written[docs/guide/training-data.md]",
    "runs_as_written[docs/deploy/",
)


def _rank(nodeid: str) -> int:
    return next((k for k, part in enumerate(LONGEST) if part in nodeid), len(LONGEST))


def pytest_collection_modifyitems(config, items):
    """Long tests first, one at the head of each xdist worker's initial share."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    rank = {i.nodeid: _rank(i.nodeid) for i in items}
    long = sorted((i for i in items if rank[i.nodeid] < len(LONGEST)), key=lambda i: rank[i.nodeid])
    short = [i for i in items if rank[i.nodeid] == len(LONGEST)]
    if workers <= 1 or not long:
        items[:] = long + short
        return
    # the shares xdist's worksteal scheduler makes: len // workers, then of the rest, ...
    sizes, left = [], len(items)
    for k in range(workers):
        sizes.append(left // (workers - k))
        left -= sizes[-1]
    heads: list[list] = [[] for _ in range(workers)]
    for k, item in enumerate(long):
        heads[k % workers].append(item)
    ordered, rest = [], iter(short)
    for head, size in zip(heads, sizes):
        ordered += head + [next(rest) for _ in range(max(0, size - len(head)))]
    ordered += list(rest)
    items[:] = ordered


pytest_plugins = ["_cpu_report"]
