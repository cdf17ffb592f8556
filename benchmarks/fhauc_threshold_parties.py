"""In-process cost of one threshold FHAUC session by number of parties (issue 27, item 3's
1,000-party corner): where the process's CPU goes when :func:`privfl.federated_auc` /
:func:`privfl.metrics.roc_curve` simulate every party, with default settings.

One session per ``--parties`` value (100 rows per party, N = ``--thresholds`` (100),
positive rate 0.3, default
``fhauc`` ring unless ``--fast-threshold``): process CPU summed per timed key of the
in-process runner (``party_<step>``: all parties together; ``aggregator``,
``aggregator_keygen``), the run's wall and CPU time, the peak resident memory of the process
(``ru_maxrss``) and by how much each key raised it, the error
against the binned reference and the load average:

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python benchmarks/fhauc_threshold_parties.py \
        --parties 200 [--thresholds 100] [--reveal auc|curve] [--security malicious] \
        [--fast-threshold]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before OpenFHE loads

import argparse
import resource
import time
from collections import defaultdict
from typing import Any

import numpy as np

import privfl
import privfl.metrics as pm
from privfl.evaluation.fhauc.threshold import ops as threshold_ops
from privfl.runner import InProcessRunner

CPU: dict[str, float] = defaultdict(float)
PEAK: dict[str, float] = defaultdict(float)  # GiB the process's peak RSS grew by in each key


def peak_gib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB


def count_cpu() -> None:
    """Sum process CPU per runner key, and how much each key raised the peak resident memory
    (the runner's own wall timings keep working)."""
    plain = InProcessRunner.run

    def run(self: InProcessRunner, key: str, fn: Any, *args: Any, **kwargs: Any) -> Any:
        c0, p0 = time.process_time(), peak_gib()
        try:
            return plain(self, key, fn, *args, **kwargs)
        finally:
            CPU[key] += time.process_time() - c0
            PEAK[key] += peak_gib() - p0

    InProcessRunner.run = run  # type: ignore[method-assign]


def synthetic(parties: int, rows: int, seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)  # benchmark data only, not secret
    out = []
    for _ in range(parties):
        y = (rng.random(rows) < 0.3).astype(np.int8)
        out.append((np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1), y))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parties", type=int, default=200)
    ap.add_argument("--reveal", default="auc", choices=["auc", "curve"])
    ap.add_argument("--security", default="malicious")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--thresholds", type=int, default=100, help="N (default 100)")
    ap.add_argument("--fast-threshold", action="store_true")
    args = ap.parse_args()
    if args.fast_threshold:
        threshold_ops.FHAUC_PARAMETER_SET = "fhauc-test"
    count_cpu()
    data = synthetic(args.parties, 100, args.seed)
    options = {"keys": "threshold", "security": args.security}
    wall, cpu = time.perf_counter(), time.process_time()
    if args.reveal == "auc":
        value = privfl.federated_auc(data, args.thresholds, **options).auc
    else:
        value = pm.roc_curve(data, args.thresholds, **options).auc
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    error = abs(value - privfl.binned_auc(data, args.thresholds))
    peak = peak_gib()
    load = "/".join(f"{x:.2f}" for x in os.getloadavg())
    ring = "fhauc-test" if args.fast_threshold else "fhauc"
    print(
        f"{args.parties} parties, N = {args.thresholds}, {args.security} {args.reveal}, "
        f"threshold keys ({ring}): "
        f"wall {wall:.1f} s, cpu {cpu:.1f} s, peak RSS {peak:.2f} GiB, "
        f"|auc - binned| {error:.1e}, load {load}"
    )
    for key, seconds in sorted(CPU.items(), key=lambda kv: -kv[1]):
        share = 100 * seconds / max(cpu, 1e-9)
        print(f"    {key:>22} cpu {seconds:8.2f} s {share:5.1f} %  peak RSS +{PEAK[key]:.2f} GiB")


if __name__ == "__main__":
    main()
