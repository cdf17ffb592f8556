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


# The longest tests (real Flower processes, docs pages that deploy or train) as parts of their
# node ids, with their wall seconds in a measured run. ``make test`` runs ``-n 4 --dist
# worksteal``: xdist hands each worker one contiguous share of the collection and idle workers
# steal from the *end* of the others' shares, so a long test started last would run alone at
# the end, and the tests at the head of a share all run on that worker, one after another. The
# hook puts the long tests at the heads of the shares, longest first, each on the worker whose
# head holds the fewest seconds so far (longest-processing-time-first): no worker gets two of
# the longest real-process tests while another gets none of them (the rank-by-rank deal before
# put the 205 s and 111 s tests on one worker), and the short tests overlap with them.
# Wall seconds: main's `--cpu-report` of a quiet-machine run (issue 31 item 5, -n 4, 10:10).
LONGEST = (
    ("test_flower_train_processes.py::test_privfl_flower_train_writes", 205),
    ("test_flower_train_private_auc.py", 182),
    ("test_flower_forest_local.py", 172),
    ("test_flower_netns.py::test_fhauc_across_namespaces", 153),
    ("test_flower_revfrf.py::", 111),
    ("test_flower_integration.py::test_a_supernode_killed", 85),
    ("runs_as_written[README.md]", 51),
    ("test_random_honest_malicious_sessions_are_refused", 37),
    ("runs_as_written[docs/guide/training.md]", 36),
    ("test_flower_train.py::test_training_over_the_flower_apps", 23),
    ("runs_as_written[docs/deploy/fhauc.md]", 22),
    ("no_oracle_at_2048_bits", 21),
    ("test_cli_schemas.py::test_train_json_has_one_schema_in_both_modes", 21),
    ("test_audit.py::test_fresh_disjoint_halves_stay_near_chance", 20),
    ("test_every_setting_is_accepted_with_its_guarantee_or_refused", 19),
    ("test_flower_integration.py::test_a_server_whose_port_was_taken", 19),
    ("test_fhauc_malicious.py::test_honest_malicious_run_equals_binned_reference", 16),
    ("runs_as_written[docs/guide/threshold-keys.md]", 16),
    ("test_the_docs_site_builds_with_warnings_as_errors", 15),
    ("runs_as_written[docs/guide/audit.md]", 14),
    ("runs_as_written[docs/guide/training-data.md]", 13),
)


def _rank(nodeid: str) -> int:
    return next((k for k, (part, _) in enumerate(LONGEST) if part in nodeid), len(LONGEST))


def heads(seconds: list[float], workers: int) -> list[list[int]]:
    """Deal long tests (their wall seconds, longest first) to ``workers`` heads: each to the
    head with the fewest seconds so far (ties: the lower worker). Returns their indices."""
    dealt: list[list[int]] = [[] for _ in range(workers)]
    load = [0.0] * workers
    for k, sec in enumerate(seconds):
        w = min(range(workers), key=lambda i: (load[i], i))
        dealt[w].append(k)
        load[w] += sec
    return dealt


def pytest_collection_modifyitems(config, items):
    """Long tests first, dealt longest-first to the heads of the xdist workers' shares."""
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
    dealt = heads([LONGEST[rank[i.nodeid]][1] for i in long], workers)
    ordered, rest = [], iter(short)
    for picks, size in zip(dealt, sizes):
        head = [long[k] for k in picks]
        ordered += head + [next(rest) for _ in range(max(0, size - len(head)))]
    ordered += list(rest)
    items[:] = ordered


pytest_plugins = ["_cpu_report"]
