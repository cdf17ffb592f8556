"""Noise of the one-ciphertext semi-honest threshold upload at scale (issue 27).

The semi-honest threshold upload is one ciphertext per party (T and F halves, summed by
rotations at the aggregator). For each setting, runs ``--sessions`` sessions of
:func:`privfl.federated_auc` with ``keys="threshold"`` on the DEFAULT parameter set (ring
2^14) and every other option at its default, and prints the largest ``|AUC - binned|``
against the documented tolerance 1e-6, the precision the parties reported, wall and CPU
time, and the load average.

Settings: ``PxR`` = P parties of R rows each. Rows above 10^5 per party reuse
``--distinct`` different data sets cycled over the parties (the same arrays, so that 1,000
parties x 10^6 rows fit in memory; the global counts still reach P x R = 10^9).

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python benchmarks/fhauc_threshold_noise.py \
        [--settings 1000x100,3x1000000,1000x1000000] [--sessions 1]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before OpenFHE loads

import argparse
import time

import numpy as np

import privfl

TOLERANCE = 1e-6
N_POINTS = 100


def synthetic(parties: int, rows: int, distinct: int, rng: np.random.Generator) -> list:
    base = []
    for _ in range(min(parties, distinct)):
        y = (rng.random(rows) < 0.3).astype(np.int8)
        base.append((np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1), y))
    return [base[i % len(base)] for i in range(parties)]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--settings", default="1000x100,3x1000000,1000x1000000")
    ap.add_argument("--sessions", type=int, default=1)
    ap.add_argument("--distinct", type=int, default=10)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)  # benchmark data only, not secret
    print(f"load average {os.getloadavg()} (2 cores shared)", flush=True)
    for setting in args.settings.split(","):
        parties, rows = (int(x) for x in setting.split("x"))
        for session in range(args.sessions):
            data = synthetic(parties, rows, args.distinct if rows > 10**5 else parties, rng)
            reference = privfl.binned_auc(data, N_POINTS)
            wall, cpu = time.perf_counter(), time.process_time()
            res = privfl.federated_auc(data, N_POINTS, keys="threshold")
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            error = abs(res.auc - reference)
            precision = res.precision if res.precision is not None else float("nan")
            print(
                f"{setting:14s} session {session + 1}  global rows {parties * rows:.1e}  "
                f"|auc - binned| {error:.1e}  reported precision {precision:.1e}  "
                f"{'within' if error <= TOLERANCE else 'ABOVE'} {TOLERANCE:.0e}  "
                f"wall {wall:.1f} s  cpu {cpu:.1f} s  load {os.getloadavg()[0]:.1f}",
                flush=True,
            )


if __name__ == "__main__":
    main()
