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


# The longest tests as parts of their node ids, with their wall seconds in a measured run and
# whether they mostly wait (real Flower processes: Flower's 3 s SuperNode poll, a fresh
# ClientApp process per message; 13-28 % of their wall time is CPU). ``make test`` runs
# ``-n 6 --dist worksteal`` on 2 cores: xdist hands each worker one contiguous share of the
# collection, idle workers steal from the *end* of the others' shares, and the tests at the
# head of a share all run on that worker, one after another. The hook puts the long tests at
# the heads: the waiting ones on four workers (or all but as many as there are cores), the
# CPU-bound ones on the others (so the cores stay busy while the real-process tests wait: with
# every worker starting on a Flower test, main's `-n 4` run kept only 1.38 of 2 cores busy),
# each longest first on the worker whose head holds the fewest seconds so far.
# Wall seconds: main's `--cpu-report` of a quiet-machine run (issue 31 item 5, -n 4, 10:10).
# A timeline of a quiet `-n 6` run (completion times per worker) showed README's block and the
# Flower-apps training test, which wait on real processes too, filling the computing heads
# until 300 s while the 1,200 short CPU-bound tests waited behind them: they are waiting ones.
LONGEST = (
    ("test_flower_train_processes.py::test_privfl_flower_train_writes", 205, True),
    ("test_flower_train_private_auc.py", 182, True),
    ("test_flower_forest_local.py", 172, True),
    # 219 s in an idle `make test` (docs/reproducing.md, fifth pass), then 20 s more timeout
    ("test_flower_netns.py::test_fhauc_across_namespaces", 225, True),
    ("test_flower_revfrf.py::", 90, True),
    ("test_flower_integration.py::test_a_server_whose_port_was_taken", 19, True),
    ("runs_as_written[docs/deploy/fhauc.md]", 22, True),
    ("runs_as_written[README.md]", 51, True),  # `privfl flower local`: real processes
    ("test_random_honest_malicious_sessions_are_refused", 37, False),
    ("runs_as_written[docs/guide/training.md]", 36, False),
    ("test_flower_train.py::test_training_over_the_flower_apps", 23, True),
    ("no_oracle_at_2048_bits", 21, False),
    ("test_cli_schemas.py::test_train_json_has_one_schema_in_both_modes", 21, False),
    ("test_audit.py::test_fresh_disjoint_halves_stay_near_chance", 20, False),
    ("test_every_setting_is_accepted_with_its_guarantee_or_refused", 19, False),
    ("test_fhauc_malicious.py::test_honest_malicious_run_equals_binned_reference", 16, False),
    ("runs_as_written[docs/guide/threshold-keys.md]", 16, False),
    ("test_the_docs_site_builds_with_warnings_as_errors", 15, False),
    ("runs_as_written[docs/guide/audit.md]", 14, False),
    ("runs_as_written[docs/guide/training-data.md]", 13, False),
)


def _rank(nodeid: str) -> int:
    return next((k for k, (part, *_) in enumerate(LONGEST) if part in nodeid), len(LONGEST))


# Workers the waiting tests need so that none holds much more than the longest of them (their
# wall seconds add up to 4.4 times the longest's).
WAITING_WORKERS = 4


def heads(tests: list[tuple[float, bool]], workers: int, cores: int) -> list[list[int]]:
    """Deal long tests (wall seconds, whether it mostly waits; longest first) to ``workers``
    heads: the waiting ones to the first ``max(workers - cores, WAITING_WORKERS)`` (all, with
    fewer workers), the others to the rest (all workers when none is left), each to the head
    with the fewest seconds so far (ties: the lower worker). Returns each head's indices."""
    busy = max(0, workers - max(workers - cores, WAITING_WORKERS))
    waiting, computing = range(workers - busy), range(workers - busy, workers)
    dealt: list[list[int]] = [[] for _ in range(workers)]
    load = [0.0] * workers
    for k, (sec, waits) in enumerate(tests):
        w = min(waiting if waits or not busy else computing, key=lambda i: (load[i], i))
        dealt[w].append(k)
        load[w] += sec
    return dealt


def pytest_collection_modifyitems(config, items):
    """Long tests first, dealt longest-first to the heads of the xdist workers' shares."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))
    rank = {i.nodeid: _rank(i.nodeid) for i in items}
    long = sorted(
        (i for i in items if rank[i.nodeid] < len(LONGEST)),
        key=lambda i: -LONGEST[rank[i.nodeid]][1],
    )
    short = [i for i in items if rank[i.nodeid] == len(LONGEST)]
    if workers <= 1 or not long:
        items[:] = long + short
        return
    # the shares xdist's worksteal scheduler makes: len // workers, then of the rest, ...
    sizes, left = [], len(items)
    for k in range(workers):
        sizes.append(left // (workers - k))
        left -= sizes[-1]
    tests = [LONGEST[rank[i.nodeid]][1:] for i in long]
    dealt = heads(tests, workers, os.cpu_count() or 1)
    ordered, rest = [], iter(short)
    for picks, size in zip(dealt, sizes):
        head = [long[k] for k in picks]
        ordered += head + [next(rest) for _ in range(max(0, size - len(head)))]
    ordered += list(rest)
    items[:] = ordered


pytest_plugins = ["_cpu_report"]
