"""What the FHAUC ClientApp's node-state load costs in a fresh process (issue 31).

A Flower ClientApp is a fresh process per message: the join round is the first to read the
node's data table, the later rounds load it from the node-local ``context.state``. This
script provisions 3 parties, writes one party's CSV, then in a fresh Python process per run
(as Flower starts one per message) imports the ClientApp module and times
``client_app._party`` twice: the join round's load (keys, table read, state) and a later
round's (the table from the state). CPU seconds (``time.process_time``) next to wall, and
whether pandas got imported.

    .venv/bin/python benchmarks/fhauc_node_load.py --rows 1000 --runs 3
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

CHILD = """
import sys, time
from pathlib import Path
from flwr.app import Context, RecordDict
import privfl.federation.flower.client_app as ca
root = Path(sys.argv[1])
ctx = Context(run_id=1, node_id=1, state=RecordDict(), run_config={}, node_config={
    "keys-dir": str(root / "keys" / "p1"), "data-file": str(root / "p1.csv")})
for name in ("join round", "later round"):
    t0, c0 = time.perf_counter(), time.process_time()
    ca._party(ctx)
    print(f"  {name}: load {time.process_time() - c0:.3f} s CPU, "
          f"{time.perf_counter() - t0:.3f} s wall; pandas imported: {'pandas' in sys.modules}")
"""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1000, help="rows in the party's CSV")
    ap.add_argument("--runs", type=int, default=3, help="fresh processes")
    args = ap.parse_args()
    import pandas as pd

    from privfl.evaluation.fhauc.policy import Policy, Security
    from privfl.federation.provisioning import provision

    with tempfile.TemporaryDirectory() as d:
        root = Path(d)
        rng = np.random.default_rng(0)
        y = rng.integers(0, 2, args.rows)
        s = np.clip(0.3 * y + 0.7 * rng.random(args.rows), 0, 1)
        pd.DataFrame({"score": s, "label": y}).to_csv(root / "p1.csv", index=False)
        policy = Policy(security=Security.SEMI_HONEST, max_samples_per_party=max(args.rows, 2))
        provision(["p1", "p2", "p3"], root / "keys", policy)
        for k in range(args.runs):
            load = ", ".join(f"{v:.2f}" for v in os.getloadavg())
            print(f"run {k + 1}, {args.rows} rows (load average {load}):", flush=True)
            subprocess.run([sys.executable, "-c", CHILD, str(root)], check=True)


if __name__ == "__main__":
    main()
