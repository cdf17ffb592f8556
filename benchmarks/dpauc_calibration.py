"""Which DPAUC_Lap calibration reproduces which of the FHAUC paper's tables (issue 21).

The FHAUC paper's Table 1 gives DPAUC_Lap's spread on its Criteo predictions (4.58 x 10^5
samples, 15 parties); Criteo is not available here, so the setting is simulated with the shape
of the FHAUC repository's Criteo sample (scores roughly uniform on [0, 1], labels
Bernoulli(score), AUC 0.833). On the real predictions privfl's default gave
±0.003 / 0.005 / 0.010 at N = 25 / 50 / 100 and ε = 1 (issue 21); the simulation gives the same.

    PYTHONPATH=src python benchmarks/dpauc_calibration.py [--runs 200] [--json OUT]

Prints, per calibration and post-processing, the standard deviation of the AUC over the runs
next to the paper's Table 1, and the count-inference error of Table 2 per calibration.
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np

from privfl._typing import FloatArray, Int8Array
from privfl.studies.fhauc_vs_dpauc import accuracy_study, leakage_study, variant_key

SIZE, PARTIES = 458_000, 15
PAPER_TABLE1 = {  # FHAUC paper, Table 1, DPAUC_Lap spread on Criteo, by (epsilon, N)
    (1.0, 25): 0.0047, (1.0, 50): 0.0101, (1.0, 100): 0.0187,
    (8.0, 25): 0.00055, (8.0, 50): 0.00105, (8.0, 100): 0.00188,
}  # fmt: skip
CALIBRATIONS = ("total-budget", "sensitivity-2", "per-count")


def criteo_like(size: int, seed: int = 0) -> tuple[FloatArray, Int8Array]:
    """Scores uniform on [0, 1], labels Bernoulli(score) (exact AUC 5/6)."""
    rng = np.random.default_rng(seed)  # not secret: simulated evaluation data
    scores = rng.random(size)
    return scores, (rng.random(size) < scores).astype(np.int8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--json", help="write the measured spreads as JSON")
    args = parser.parse_args()
    start = time.perf_counter()
    scores, labels = criteo_like(SIZE)
    eps, ns = (1.0, 8.0), (25, 50, 100)
    spreads: dict[str, dict[str, float]] = {}
    for cal in CALIBRATIONS:
        rows = accuracy_study(
            scores, labels, [SIZE], ns, eps, PARTIES, args.runs, mechanisms=("laplace",),
            calibration=cal,
        )  # fmt: skip
        for r in rows:
            for e in eps:
                for pp in ("none", "dpauc-authors"):
                    stats = r.dpauc[variant_key("laplace", e, pp)]
                    spreads.setdefault(f"{cal} / {pp}", {})[f"eps={e:g} N={r.thresholds}"] = (
                        stats.std
                    )
    cols = [f"eps={e:g} N={n}" for e in eps for n in ns]
    print(f"DPAUC_Lap: std of the AUC over {args.runs} runs, {SIZE:,} samples, {PARTIES} parties")
    print(f"{'':34}" + "".join(f"{c:>14}" for c in cols))
    paper = [PAPER_TABLE1[(e, n)] for e in eps for n in ns]
    print(f"{'FHAUC paper, Table 1':34}" + "".join(f"{v:14.5f}" for v in paper))
    for name, row in spreads.items():
        print(f"{name:34}" + "".join(f"{row[c]:14.5f}" for c in cols))
    party = (scores[: SIZE // PARTIES], labels[: SIZE // PARTIES])
    leaks = {}
    print("\nTable 2: count inference on one party, mean |error| of its total (samples)")
    for cal in CALIBRATIONS[:2]:
        leak = leakage_study(*party, eps, ns, args.runs, calibration=cal)
        leaks[cal] = {f"eps={r.epsilon:g} N={r.thresholds}": r.total[0] for r in leak}
        print(f"{cal:34}" + "".join(f"{leaks[cal][c]:14.1f}" for c in cols))
    print(f"\n{time.perf_counter() - start:.0f} s")
    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"runs": args.runs, "table1_std": spreads, "table2_total": leaks}, fh)
            fh.write("\n")  # a JSON file ends with a newline


if __name__ == "__main__":
    main()
