"""Issue 30: privfl chooses OpenFHE's OpenMP threading (thread count, passive waiting) before
the first ``import openfhe``, leaves the user's own settings alone and leaks nothing into the
environment."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from privfl.crypto.threshold import threads as threshold_threads
from privfl.errors import InputError

pytest.importorskip("openfhe")

PROBE = """
import ctypes, json, os
from privfl.crypto.threshold.params import require_openfhe
from privfl.crypto.threshold import threads as threshold_threads
require_openfhe()
gomp = [l.split()[-1] for l in open("/proc/self/maps") if "openfhe/lib/libgomp" in l][0]
c = threshold_threads.choice()
print(json.dumps({
    "max_threads": ctypes.CDLL(gomp).omp_get_max_threads(),
    "threads": c.threads, "wait": c.wait_policy, "by": c.chosen_by,
    "env": [os.environ.get("OMP_NUM_THREADS"), os.environ.get("OMP_WAIT_POLICY")],
}))
"""


def _probe(**env: str) -> dict[str, object]:
    clean = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OMP_NUM_THREADS", "OMP_WAIT_POLICY", threshold_threads.THREADS_VARIABLE)
    }
    out = subprocess.run(
        [sys.executable, "-c", PROBE],
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_user_who_sets_nothing_gets_one_passive_thread_and_a_clean_environment():
    got = _probe()
    assert got["max_threads"] == threshold_threads.DEFAULT_THREADS == 1
    assert (got["threads"], got["wait"], got["by"]) == ("1", "passive", "privfl")
    assert got["env"] == [None, None]  # restored after the import: nothing leaks


def test_the_users_own_openmp_settings_win():
    got = _probe(OMP_NUM_THREADS="2", OMP_WAIT_POLICY="active")
    assert got["max_threads"] == 2
    assert (got["threads"], got["wait"], got["by"]) == ("2", "active", "user")
    assert got["env"] == ["2", "active"]


def test_privfl_openfhe_threads_sets_openfhes_count_only():
    got = _probe(PRIVFL_OPENFHE_THREADS="2")
    assert got["max_threads"] == 2
    assert (got["threads"], got["wait"], got["by"]) == ("2", "passive", "privfl")
    assert got["env"] == [None, None]


def test_privfl_openfhe_threads_wins_over_omp_num_threads_for_openfhe_only():
    got = _probe(PRIVFL_OPENFHE_THREADS="2", OMP_NUM_THREADS="1")
    assert got["max_threads"] == 2
    assert got["env"] == ["1", None]  # the process's own OMP_NUM_THREADS is back


@pytest.mark.parametrize("bad", ["0", "-1", "two", "", "\u00b2", "99999"])
def test_a_bad_thread_count_is_refused_with_its_name(bad):
    with pytest.raises(InputError, match=threshold_threads.THREADS_VARIABLE):
        threshold_threads.planned({threshold_threads.THREADS_VARIABLE: bad})
