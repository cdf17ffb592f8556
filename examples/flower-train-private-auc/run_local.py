"""Run this example on a local Flower deployment: K SuperNodes on free loopback ports.

    python examples/flower-train-private-auc/run_local.py --clients 5 --rounds 3
        [--reveal-to-server] [--workdir DIR]

Provisions one key folder per client (site-1..site-K) into a fresh temporary folder (or
--workdir), starts a SuperLink and K SuperNodes with privfl's LocalFederation (readiness
checked, every process stopped at the end, also on Ctrl-C), runs the app with `flwr run` and
prints the per-round AUC each client wrote, and what the server recorded. Exits 1 if the run
failed.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

from privfl.federation.flower.local import LocalFederation
from privfl.federation.provisioning import provision

APP = Path(__file__).resolve().parent


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", type=int, default=5)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--eval-every", type=int, default=1)
    ap.add_argument("--thresholds", type=int, default=100)
    ap.add_argument("--max-rows", type=int, default=2000)
    ap.add_argument("--reveal-to-server", action="store_true")
    ap.add_argument("--workdir", type=Path, default=None)
    args = ap.parse_args()
    root = args.workdir or Path(tempfile.mkdtemp(prefix="privfl-train-auc-"))
    parties = [f"site-{k + 1}" for k in range(args.clients)]
    provision(parties, root / "keys")
    with LocalFederation(root) as fed:
        fed.start_superlink()
        for k, p in enumerate(parties):
            node = {
                "keys-dir": str(root / "keys" / p),
                "partition-id": k,
                "num-partitions": args.clients,
                "output-dir": str(root / "out" / p),
            }
            if args.reveal_to_server:
                node["reveal-to-server"] = "true"
            fed.start_supernode(p, node)
        fed.wait_for_nodes(args.clients)
        outcome = fed.run(
            APP,
            {
                "aggregator-keys": str(root / "keys" / "aggregator"),
                "num-server-rounds": args.rounds,
                "eval-every": args.eval_every,
                "thresholds": args.thresholds,
                "max-rows": args.max_rows,
                "reveal-to-server": args.reveal_to_server,
                "output-dir": str(root / "server"),
            },
            on_line=print,
        )
    history = json.loads(next((root / "server").glob("history-*.json")).read_text())
    print("\nserver's record per evaluation round:")
    for r in history["rounds"]:
        auc = "not revealed to the server" if r["auc"] is None else f"AUC {r['auc']:.6f}"
        print(f"  round {r['round']}: {r['status']}, {auc} {r['error'] or ''}")
    print("clients' AUC per round:")
    for p in parties:
        path = root / "out" / p / f"private-auc-{p}.json"
        rounds = json.loads(path.read_text())["rounds"] if path.is_file() else []
        print(f"  {p}: " + ", ".join(f"round {r['round']}: {r['auc']:.6f}" for r in rounds))
    print(f"run {outcome.run_id}: {outcome.status}; files in {root}")
    return 0 if outcome.ok else 1


if __name__ == "__main__":
    sys.exit(main())
