"""Gray-box audit timing for issue #8: the whole default membership audit (train the target,
4 runs of every per-layer attack, 100 attack epochs) must finish in under 5 minutes on digits.

    .venv/bin/python benchmarks/audit.py [--dataset digits8x8] [--runs 4] [--json OUT]

Prints the per-layer table, the wall-clock time and whether it meets the 300 s target.
"""

from __future__ import annotations

import argparse
import json

from privfl.studies.audit import membership_audit

TARGET_S = 300.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", default="digits8x8")
    parser.add_argument("--runs", type=int, default=4)
    parser.add_argument("--attack-epochs", type=int, default=100)
    parser.add_argument("--json", help="write the audit result as JSON")
    args = parser.parse_args()
    res = membership_audit(args.dataset, runs=args.runs, attack_epochs=args.attack_epochs)
    print(
        f"{res.dataset}: train accuracy {res.train_accuracy:.3f}, "
        f"test accuracy {res.test_accuracy:.3f}"
    )
    print(f"{'layer':>5} {'features':<28} {'acc':>7} {'acc max':>7} {'auc':>7} {'tpr@1%':>7}")
    for r in res.layers:
        print(
            f"{r.layer:>5} {r.features:<28} {r.accuracy:7.4f} {r.accuracy_max:7.4f} "
            f"{r.auc:7.4f} {r.tpr_at_1pct_fpr:7.4f}"
        )
    verdict = "meets" if res.seconds < TARGET_S else "MISSES"
    print(
        f"whole membership audit ({args.runs} runs, {args.attack_epochs} attack epochs): "
        f"{res.seconds:.1f} s, {verdict} the {TARGET_S:.0f} s target"
    )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(res.to_dict(), fh, indent=2)
            fh.write("\n")  # a JSON file ends with a newline


if __name__ == "__main__":
    main()
