"""A whole in-process FHAUC session as the number of parties grows (issue 30).

Per number of parties ``M`` (N = 100, 100 samples per party, single key, semi-honest by
default): the wall and CPU time of one ``privfl.federated_auc`` call (setup, every party's
join/upload/finish checks, the aggregator), the aggregator's own time, and the AUC's distance
to the plaintext binned AUC. The load average is printed with every row.

    nice -n 5 .venv/bin/python benchmarks/fhauc_scale.py \
        [--parties 100,300,1000] [--security semi-honest]

Run it once with ``PYTHONPATH`` pointing at another checkout's ``src`` for a before/after.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

import privfl


def synthetic(parties: int, size: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)  # not secret: benchmark data
    out = []
    for _ in range(parties):
        y = rng.integers(0, 2, size).astype(np.int8)
        out.append((np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1), y))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parties", default="100,300,1000")
    ap.add_argument("--security", default="semi-honest")
    args = ap.parse_args()
    print(f"privfl from {os.path.dirname(privfl.__file__)}; N = 100, security = {args.security}")
    print(f"{'parties':>7} {'wall s':>8} {'cpu s':>8} {'agg s':>7} {'|err|':>8}  load avg (1/5/15)")
    for m in (int(p) for p in args.parties.split(",")):
        data = synthetic(m, 100)
        ref = privfl.binned_auc(data, 100)
        w0, c0 = time.perf_counter(), time.process_time()
        res = privfl.federated_auc(data, 100, security=args.security)
        wall, cpu = time.perf_counter() - w0, time.process_time() - c0
        load = "/".join(f"{x:.2f}" for x in os.getloadavg())
        print(
            f"{m:>7} {wall:>8.1f} {cpu:>8.1f} {res.timings['aggregator']:>7.2f} "
            f"{abs(res.auc - ref):>8.1e}  {load}",
            flush=True,
        )


if __name__ == "__main__":
    main()
