"""FHAUC reveal modes (issue 18): cost of reveal="curve" and reveal="metrics" against
reveal="auc", and the average precision's error against scikit-learn.

Prints, per (security, N, reveal) at 100 parties of 100 samples (the metrics reveal always
runs at N = 3, one threshold; its ratios are against the N = 100 AUC run): the aggregator's time
including deserialising the uploads (median of the runs), the largest party upload and the
reply per party, with the ratio to the AUC mode; then the AUC and the average precision of
the revealed curve against the binned and scikit-learn's exact values on the demo data.

    nice .venv/bin/python benchmarks/fhauc_metrics.py [--repeats 3] [--json OUT.json]
"""

from __future__ import annotations

import argparse
import json
import statistics

import numpy as np

import privfl
import privfl.metrics as pm
from privfl.datasets import breast_cancer_scores, deal
from privfl.evaluation import curves


def synthetic(parties: int, size: int, seed: int = 0):
    rng = np.random.default_rng(seed)  # not secret: benchmark data
    out = []
    for _ in range(parties):
        y = rng.integers(0, 2, size).astype(np.int8)
        out.append((np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1), y))
    return out


def run(data, n_points: int, reveal: str, security: str) -> tuple[float, int, int]:
    """(aggregator seconds, upload bytes per party, reply bytes per party) of one session."""
    kw = {"security": security, "splits": 4}
    if reveal == "auc":
        r = privfl.federated_auc(data, n_points, **kw)
        return r.timings["aggregator"], r.bytes["party_upload"], r.bytes["aggregator_reply"]
    if reveal == "curve":
        run_info = pm.roc_curve(data, n_points, **kw).run
    else:
        run_info = pm.threshold_metrics(data, 0.5, **kw).run
    t, b = run_info["timings"], run_info["bytes"]
    return t["aggregator"], b["party_upload"], b["aggregator_reply"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--json", help="also write the figures to this file")
    args = ap.parse_args()

    data = synthetic(100, 100)
    rows = []
    print(
        f"{'security':>11} {'N':>5} {'reveal':>8} {'agg s (med)':>11} {'x auc':>6} "
        f"{'upload KB':>10} {'x auc':>6} {'reply KB':>9} {'x auc':>6}"
    )
    for security in ("semi-honest", "malicious"):
        for n in (100, 1000):
            base = None
            # reveal="metrics" runs at N = 3 whatever the grid: measured once per security
            for reveal in ("auc", "curve", "metrics") if n == 100 else ("auc", "curve"):
                runs = [run(data, n, reveal, security) for _ in range(args.repeats)]
                agg = statistics.median(r[0] for r in runs)
                up, reply = runs[0][1], runs[0][2]
                if base is None:
                    base = (agg, up, reply)
                row = {
                    "security": security, "N": n if reveal != "metrics" else 3,
                    "grid_N": n, "reveal": reveal, "aggregator_s_median": agg,
                    "party_upload_bytes": up, "reply_bytes": reply,
                    "time_ratio_vs_auc": agg / base[0], "upload_ratio_vs_auc": up / base[1],
                    "reply_ratio_vs_auc": reply / base[2],
                }  # fmt: skip
                rows.append(row)
                print(
                    f"{security:>11} {row['N']:>5} {reveal:>8} {agg:>11.3f} "
                    f"{row['time_ratio_vs_auc']:>6.2f} {up / 1e3:>10.1f} "
                    f"{row['upload_ratio_vs_auc']:>6.2f} {reply / 1e3:>9.1f} "
                    f"{row['reply_ratio_vs_auc']:>6.2f}",
                    flush=True,
                )

    scores, labels = breast_cancer_scores()
    demo = deal(scores, labels, 15, seed=0)
    exact = pm.exact_scores(demo)
    accuracy = []
    print("\nreveal='curve' on the demo data (breast cancer, 285 test samples, 15 parties):")
    for n in (100, 4096):
        roc = pm.roc_curve(demo, n)
        ref = pm.binned_reference(demo, n)
        b_auc, b_ap = curves.binned_auc(ref.tp, ref.fp), curves.average_precision(ref.tp, ref.fp)
        item = {
            "N": n, "auc": roc.auc, "average_precision": roc.average_precision,
            "auc_err_binned": abs(roc.auc - b_auc), "auc_err_sklearn": abs(roc.auc - exact["auc"]),
            "ap_err_binned": abs(roc.average_precision - b_ap),
            "ap_err_sklearn": abs(roc.average_precision - exact["average_precision"]),
        }  # fmt: skip
        accuracy.append(item)
        print(
            f"  N={n:>5}: AUC {roc.auc:.8f} (|err| binned {item['auc_err_binned']:.1e}, "
            f"sklearn {item['auc_err_sklearn']:.1e})  AP {roc.average_precision:.8f} "
            f"(|err| binned {item['ap_err_binned']:.1e}, sklearn {item['ap_err_sklearn']:.1e})"
        )
    print(f"  scikit-learn exact: AUC {exact['auc']:.8f}  AP {exact['average_precision']:.8f}")

    if args.json:
        with open(args.json, "w") as fh:
            json.dump({"rows": rows, "accuracy": accuracy}, fh, indent=2)


if __name__ == "__main__":
    main()
