"""Honest-session acceptance of the malicious FHAUC variant with default settings (issue 27).

For each setting (keys, reveal, parties x rows per party, decision points N, positive
rate), runs ``--sessions`` honest sessions, each on freshly drawn synthetic data and with
fresh session randomness, through :func:`privfl.federated_auc` (``reveal=auc``) or
:func:`privfl.metrics.roc_curve` (``reveal=curve``) with every option at its default, and
prints how many were accepted and why the others were refused (the error class), plus (AUC
reveal) the largest deviation from the binned reference among the accepted ones and the
executions the sizing chose.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python benchmarks/fhauc_acceptance.py \
        [--sessions 1000] [--settings single-auc-3x2000,...] [--fast-threshold]

``--fast-threshold`` runs threshold keys on the insecure ``fhauc-test`` ring (2^12) instead
of the default ``fhauc`` set (ring 2^14); the acceptance logic is the same, only the noise
figures differ.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before OpenFHE loads

import argparse
import time
from collections import Counter
from dataclasses import dataclass

import numpy as np

import privfl
import privfl.metrics as pm
from privfl.errors import ProtocolError
from privfl.evaluation.fhauc.threshold import ops as threshold_ops


@dataclass(frozen=True)
class Setting:
    name: str
    keys: str
    reveal: str
    parties: int
    rows: int
    n_points: int
    rate: float


SETTINGS = {
    s.name: s
    for s in [
        Setting("single-auc-3x2000", "single", "auc", 3, 2000, 100, 0.3),
        Setting("single-auc-8x800", "single", "auc", 8, 800, 100, 0.3),
        Setting("single-auc-2x100-N50", "single", "auc", 2, 100, 50, 0.5),
        # from 64 parties the malicious upload is one ciphertext per execution (joint layout)
        Setting("single-auc-64x100", "single", "auc", 64, 100, 100, 0.3),
        Setting("single-curve-3x2000", "single", "curve", 3, 2000, 100, 0.3),
        Setting("threshold-auc-3x2000", "threshold", "auc", 3, 2000, 100, 0.3),
        Setting("threshold-auc-8x800", "threshold", "auc", 8, 800, 100, 0.3),
    ]
}


def synthetic(parties: int, rows: int, rate: float, rng: np.random.Generator) -> list:
    out = []
    for _ in range(parties):
        y = (rng.random(rows) < rate).astype(np.int8)
        out.append((np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1), y))
    return out


def run(setting: Setting, sessions: int, seed: int) -> None:
    rng = np.random.default_rng(seed)  # benchmark data only, not secret
    outcomes: Counter[str] = Counter()
    worst, executions = 0.0, Counter[int]()
    start = time.perf_counter()
    for _ in range(sessions):
        data = synthetic(setting.parties, setting.rows, setting.rate, rng)
        try:
            if setting.reveal == "auc":
                res = privfl.federated_auc(
                    data, setting.n_points, security="malicious", keys=setting.keys
                )
                value, executions[res.executions] = res.auc, executions[res.executions] + 1
                worst = max(worst, abs(value - privfl.binned_auc(data, setting.n_points)))
            else:
                curve = pm.roc_curve(data, setting.n_points, security="malicious")
                if curve.run["verified"] is not True:
                    raise ProtocolError("the curve was not verified")
            outcomes["accepted"] += 1
        except ProtocolError as exc:
            outcomes[type(exc).__name__] += 1
    seconds = time.perf_counter() - start
    refused = sessions - outcomes["accepted"]
    print(
        f"{setting.name:24s} sessions {sessions:5d}  accepted {outcomes['accepted']:5d}  "
        f"refused {refused:4d} {dict((k, v) for k, v in outcomes.items() if k != 'accepted')}  "
        f"max |auc - binned| {worst:.1e}  executions {dict(sorted(executions.items()))}  "
        f"{seconds / sessions:.2f} s/session  load {os.getloadavg()[0]:.1f}",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--settings", default=",".join(SETTINGS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fast-threshold", action="store_true")
    args = ap.parse_args()
    if args.fast_threshold:
        threshold_ops.FHAUC_PARAMETER_SET = "fhauc-test"
    print(f"load average {os.getloadavg()} (2 cores shared)")
    for name in args.settings.split(","):
        run(SETTINGS[name], args.sessions, args.seed)


if __name__ == "__main__":
    main()
