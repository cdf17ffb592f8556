"""FHAUC against a malicious aggregator: figures for issue #3.

    .venv/bin/python benchmarks/fhauc_malicious.py grid      # time/size over parties, S, N
    .venv/bin/python benchmarks/fhauc_malicious.py tamper    # detection rate per tamper, 100 seeds
    .venv/bin/python benchmarks/fhauc_malicious.py honest    # false alarms over 1000 honest runs

``grid`` prints the aggregator time (both executions, including deserialisation; median of 3
at 100 parties / N=100 / S=4), the per-party upload (both executions), and the semi-honest
aggregator time at the same setting for the cost ratio.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np

import privfl
from privfl.errors import VerificationError
from privfl.evaluation.tamper import TAMPERS


def synthetic(parties: int, size: int, seed: int = 0, rate: float = 0.5):
    rng = np.random.default_rng(seed)  # not secret: benchmark data
    out = []
    for _ in range(parties):
        y = (rng.random(size) < rate).astype(np.int8)
        out.append((np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1), y))
    return out


def grid(quick: bool) -> list[dict]:
    rows = []
    party_counts = (15, 100) if quick else (15, 100, 1000)
    print(
        f"{'parties':>7} {'S':>2} {'N':>4} {'agg s':>7} {'semi agg s':>10} {'upload KB':>10} "
        f"{'|err|':>8} {'log2 P':>7}"
    )
    for m in party_counts:
        data = synthetic(m, 100)
        for s in (4, 7, 9):
            for n in (25, 50, 100):
                reps = 3 if (m, s, n) == (100, 4, 100) else 1
                runs = [
                    privfl.federated_auc(data, n, security="malicious", splits=s)
                    for _ in range(reps)
                ]
                semi = [privfl.federated_auc(data, n) for _ in range(reps)]
                ref = privfl.binned_auc(data, n)
                row = {
                    "parties": m,
                    "splits": s,
                    "N": n,
                    "aggregator_s": statistics.median(r.timings["aggregator"] for r in runs),
                    "semi_honest_aggregator_s": statistics.median(
                        r.timings["aggregator"] for r in semi
                    ),
                    "party_upload_bytes": runs[0].bytes["party_upload"],
                    "abs_error": max(abs(r.auc - ref) for r in runs),
                    "cheat_probability_log2": runs[0].cheat_probability_log2,
                }
                rows.append(row)
                print(
                    f"{m:>7} {s:>2} {n:>4} {row['aggregator_s']:>7.3f} "
                    f"{row['semi_honest_aggregator_s']:>10.3f} "
                    f"{row['party_upload_bytes'] / 1e3:>10.1f} {row['abs_error']:>8.1e} "
                    f"{row['cheat_probability_log2']:>7.1f}",
                    flush=True,
                )
    return rows


def tamper(seeds: int) -> dict:
    rates = {}
    for cls in TAMPERS:
        caught = 0
        for seed in range(seeds):
            data = synthetic(4, 1000, seed=seed)
            try:
                privfl.federated_auc(data, 50, security="malicious", splits=4, aggregator=cls())
            except VerificationError:
                caught += 1
        rates[cls.__name__] = caught / seeds
        print(
            f"{cls.__name__:<40} detected {caught}/{seeds} ({100 * caught / seeds:.0f}%)",
            flush=True,
        )
    return rates


def honest(runs: int) -> dict:
    rng = np.random.default_rng(7)  # not secret: benchmark data
    alarms, worst = 0, 0.0
    start = time.perf_counter()
    for i in range(runs):
        m = int(rng.integers(2, 20))
        data = synthetic(m, int(rng.integers(5, 500)), seed=i, rate=float(rng.uniform(0.05, 0.95)))
        n = int(rng.integers(3, 200))
        try:
            res = privfl.federated_auc(
                data, n, security="malicious", splits=int(rng.integers(2, 10))
            )
            worst = max(worst, abs(res.auc - privfl.binned_auc(data, n)))
        except VerificationError:
            alarms += 1
    print(
        f"{runs} honest runs: {alarms} false alarms; worst |AUC - binned| = {worst:.2e}; "
        f"{time.perf_counter() - start:.0f} s"
    )
    return {"runs": runs, "false_alarms": alarms, "worst_abs_error": worst}


def noise(runs: int, parties: list[int] | None = None) -> list[dict]:
    """Calibrate the noise model: per setting, the rms of the executions' disagreement
    (spread / sqrt 2 estimates one execution's std) against the model's sigma (the parties'
    tolerance / 10, at their own lower bound on TP·FP). The model must stay above the
    measured std everywhere, with margin. ``parties``: only N = 100, S = 4 at these party
    counts (from ``JOINT_MIN_PARTIES`` on, the joint layout and its rotation)."""
    from privfl.evaluation.fhauc import malicious

    rows = []
    print(f"{'M':>3} {'N':>4} {'S':>2} {'n/party':>7} {'rate':>5} {'C':>8} {'meas std':>9} "
          f"{'model':>9} {'ratio':>6} {'|err|max':>9} {'tol':>9} {'log2 G':>7}")  # fmt: skip
    settings = [
        (m, n, s, size, rate, bound)
        for m in (2, 10, 50)
        for n in (10, 100)
        for s in (2, 4, 9)
        for size, rate in ((50, 0.5), (1000, 0.5), (1000, 0.05), (10000, 0.3))
        for bound in (None, 10**6)
    ]
    if parties:
        settings = [
            (m, 100, 4, size, rate, None)
            for m in parties
            for size, rate in ((50, 0.5), (1000, 0.05), (10000, 0.3))
        ]
    for i, (m, n, s, size, rate, bound) in enumerate(settings):
        data = synthetic(m, size, seed=i, rate=rate)
        ref = privfl.binned_auc(data, n)
        spreads, errs, tols, guar = [], [], [], []
        for _ in range(runs):
            try:
                res = privfl.federated_auc(
                    data, n, security="malicious", splits=s, max_samples_per_party=bound
                )
            except privfl.InputError:  # InsufficientPrecisionError: masks too wide
                break
            spreads.append(res.spread)
            errs.append(abs(res.auc - ref))
            tols.append(res.tolerance)
            guar.append(res.guarantee_log2)
        if not spreads:
            continue
        c = bound or 1 << max(0, (size - 1).bit_length())
        measured = float(np.sqrt(np.mean(np.square(spreads)) / 2))
        model = float(np.mean(tols)) / malicious.TOLERANCE_SIGMAS
        row = {
            "parties": m, "N": n, "S": s, "per_party": size, "rate": rate, "bound": c,
            "measured_std": measured, "model_sigma": model, "ratio": measured / model,
            "max_abs_error": max(errs), "tolerance": float(np.mean(tols)),
            "guarantee_log2": float(np.mean(guar)),
        }  # fmt: skip
        rows.append(row)
        print(f"{m:>3} {n:>4} {s:>2} {size:>7} {rate:>5} {c:>8} {measured:>9.2e} {model:>9.2e} "
              f"{measured / model:>6.3f} {max(errs):>9.2e} {row['tolerance']:>9.2e} "
              f"{row['guarantee_log2']:>7.1f}", flush=True)  # fmt: skip
    worst = max(r["ratio"] for r in rows)
    print(f"largest measured std / model sigma: {worst:.3f} over {len(rows)} settings")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["grid", "tamper", "honest", "noise", "all"])
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--runs", type=int, default=1000)
    ap.add_argument("--noise-runs", type=int, default=8)
    ap.add_argument("--noise-parties", help="comma-separated party counts (N 100, S 4)")
    ap.add_argument("--json")
    args = ap.parse_args()
    out = {}
    if args.what in ("grid", "all"):
        out["grid"] = grid(args.quick)
    if args.what in ("tamper", "all"):
        out["tamper"] = tamper(args.seeds)
    if args.what in ("honest", "all"):
        out["honest"] = honest(args.runs)
    if args.what == "noise":
        counts = [int(m) for m in args.noise_parties.split(",")] if args.noise_parties else None
        out["noise"] = noise(args.noise_runs, counts)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(out, fh, indent=2)
            fh.write("\n")  # a JSON file ends with a newline


if __name__ == "__main__":
    main()
