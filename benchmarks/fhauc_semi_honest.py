"""FHAUC (semi-honest) cost and accuracy: what `make bench` prints.

Prints, per (parties, N): aggregator time including deserialising the uploads (median of
3 runs), the largest single party upload, the reply per party and the aggregator's public
context; then the AUC error against scikit-learn's exact AUC on the demo data, and the time
to count 10^7 scores. Progress (which row, elapsed seconds) goes to stderr.

    .venv/bin/python benchmarks/fhauc_semi_honest.py [--quick] [--json OUT.json]

The full run takes 10 minutes or more on 2 cores (the 1000-party row alone most of it);
``--quick`` (``make bench QUICK=1``) measures 15 and 100 parties at N = 100 and 100 parties at
N = 1000, one run each, the demo data at N = 100 and counting 10^6 scores: about 20 s.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time

import numpy as np

import privfl
from privfl.datasets import breast_cancer_scores, deal
from privfl.evaluation.statistics import interior_thresholds, party_counts


def synthetic(parties: int, size: int, seed: int = 0):
    rng = np.random.default_rng(seed)  # not secret: benchmark data
    out = []
    for _ in range(parties):
        y = rng.integers(0, 2, size).astype(np.int8)
        out.append((np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1), y))
    return out


def progress(started: float, message: str) -> None:
    print(f"[{time.perf_counter() - started:6.1f} s] {message}", file=sys.stderr, flush=True)


def measure(parties: int, n_points: int, repeats: int = 3) -> dict:
    data = synthetic(parties, 100)
    runs = [privfl.federated_auc(data, n_points) for _ in range(repeats)]
    ref = privfl.binned_auc(data, n_points)
    return {
        "parties": parties,
        "N": n_points,
        "aggregator_s_median": statistics.median(r.timings["aggregator"] for r in runs),
        "party_encrypt_s": statistics.median(r.timings["party_encrypt"] for r in runs),
        "party_upload_bytes": runs[0].bytes["party_upload"],
        "reply_bytes": runs[0].bytes["aggregator_reply"],
        "public_context_bytes": runs[0].bytes["setup_public_context"],
        "abs_error_vs_binned": max(abs(r.auc - ref) for r in runs),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a one-minute subset, one run per row")
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()

    settings = [(100, 100), (15, 100), (1000, 100), (100, 25), (100, 50), (100, 1000), (100, 4096)]
    repeats, demo_points, count_size = 3, (100, 4096), 10**7
    if args.quick:
        settings, repeats, demo_points, count_size = (
            [(15, 100), (100, 100), (100, 1000)],
            1,
            (100,),
            10**6,
        )
    started = time.perf_counter()
    rows = []
    print(
        f"{'parties':>7} {'N':>5} {f'agg s (med{repeats})':>12} {'enc s':>7} {'upload KB':>10} "
        f"{'reply KB':>9} {'pub ctx MB':>10} {'|err| binned':>12}"
    )
    for k, (parties, n) in enumerate(settings, 1):
        progress(started, f"row {k}/{len(settings)}: {parties} parties, N = {n}, {repeats} run(s)")
        r = measure(parties, n, repeats)
        rows.append(r)
        print(
            f"{parties:>7} {n:>5} {r['aggregator_s_median']:>12.3f} {r['party_encrypt_s']:>7.3f} "
            f"{r['party_upload_bytes'] / 1e3:>10.1f} {r['reply_bytes'] / 1e3:>9.1f} "
            f"{r['public_context_bytes'] / 1e6:>10.2f} {r['abs_error_vs_binned']:>12.1e}",
            flush=True,
        )

    progress(started, "the demo data (breast cancer)")
    scores, labels = breast_cancer_scores()
    demo = deal(scores, labels, 15, seed=0)
    exact = privfl.exact_auc(demo)
    accuracy = []
    print("\nAUC error on the demo data (breast cancer, 285 test samples, 15 parties):")
    for n in demo_points:
        res = privfl.federated_auc(demo, n)
        accuracy.append(
            {"N": n, "fhauc": res.auc, "sklearn": exact, "abs_error": abs(res.auc - exact)}
        )
        print(
            f"  N={n:>5}: FHAUC {res.auc:.8f}  sklearn {exact:.8f}  "
            f"|error| {abs(res.auc - exact):.2e}"
        )

    progress(started, f"counting {count_size:.0e} scores")
    rng = np.random.default_rng(1)  # not secret: benchmark data
    y = rng.integers(0, 2, count_size).astype(np.int8)
    s = rng.random(count_size)
    start = time.perf_counter()
    party_counts(s, y, interior_thresholds(100))
    count_s = time.perf_counter() - start
    print(f"\ncounting 10^{len(str(count_size)) - 1} scores at N=100: {count_s:.2f} s")
    progress(started, "done")

    if args.json:
        with open(args.json, "w") as fh:
            json.dump(
                {"rows": rows, "accuracy": accuracy, "count_size": count_size, "count_s": count_s},
                fh,
                indent=2,
            )
            fh.write("\n")  # a JSON file ends with a newline


if __name__ == "__main__":
    main()
