"""FHAUC on Flower's simulation engine with 100 virtual parties (issue #5 figures).

Starts a simulation-mode SuperLink on a free loopback port (runtime dependency installation
disabled: the app runs in this environment), provisions keys for party-0..party-(K-1), writes
a scored dataset, runs `flwr run examples/flower-fhauc` with K virtual SuperNodes, and prints
the wall time, the aggregator time and the per-party bytes the ServerApp reports, and checks
every party's AUC against the in-process protocol.

    .venv/bin/python benchmarks/flower_fhauc.py [--parties 100] [--security semi-honest]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

import privfl
from privfl.datasets import deal
from privfl.evaluation.fhauc.policy import DEFAULT_MAX_SAMPLES_PER_PARTY, Policy, Security
from privfl.federation.flower.launch import free_port
from privfl.federation.provisioning import provision

BIN = Path(sys.executable).parent
APP = Path(__file__).resolve().parents[1] / "examples" / "flower-fhauc"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parties", type=int, default=100)
    ap.add_argument("--samples", type=int, default=20000)
    ap.add_argument("--security", default="semi-honest")
    ap.add_argument(
        "--max-samples-per-party",
        type=int,
        default=None,
        help="public bound (default: the largest partition rounded up to 2^k)",
    )
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="privfl-flower-sim-"))
    home = root / "flwr-home"
    home.mkdir()
    port = free_port()
    names = [f"party-{k}" for k in range(args.parties)]
    bound = args.max_samples_per_party or 1 << (-(-args.samples // args.parties) - 1).bit_length()
    malicious = args.security == "malicious"
    policy = Policy(
        Security.parse(args.security),
        max_samples_per_party=bound if malicious else DEFAULT_MAX_SAMPLES_PER_PARTY,
        max_points=100,
        max_splits=4 if malicious else 1,
    )
    provision(names, root / "keys", policy)
    rng = np.random.default_rng(0)  # not secret: benchmark data
    y = rng.integers(0, 2, args.samples)
    s = np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1)
    pd.DataFrame({"score": s, "label": y}).to_csv(root / "scores.csv", index=False)
    (home / "config.toml").write_text(
        f'[superlink]\ndefault = "sim"\n\n[superlink.sim]\naddress = "127.0.0.1:{port}"\n'
        f"insecure = true\noptions.num-supernodes = {args.parties}\n"
    )
    env = dict(os.environ, FLWR_HOME=str(home), PATH=f"{BIN}:{os.environ['PATH']}")
    env.pop("VIRTUAL_ENV", None)
    link = subprocess.Popen(
        [
            str(BIN / "flower-superlink"),
            "--insecure",
            "--simulation",
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--disable-runtime-dependency-installation",
        ],
        env=env,
        stdout=open(root / "superlink.log", "w"),  # noqa: SIM115 - lives as long as the process
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            with socket.socket() as sock:
                if sock.connect_ex(("127.0.0.1", port)) == 0:
                    break
            time.sleep(0.2)
        cfg = (
            f"aggregator-keys='{root / 'keys' / 'aggregator'}' sim-keys-root='{root / 'keys'}' "
            f"sim-data-file='{root / 'scores.csv'}' output-dir='{root / 'out'}' "
            f"security='{args.security}' timeout=600.0"
        )
        start = time.perf_counter()
        run = subprocess.run(
            [str(BIN / "flwr"), "run", str(APP), "sim", "--run-config", cfg, "--stream"],
            env=env,
            capture_output=True,
            text=True,
            timeout=1800,
            cwd=root,
        )
        wall = time.perf_counter() - start
    finally:
        os.killpg(link.pid, signal.SIGKILL)
    out = run.stdout + run.stderr
    done = re.search(r"fhauc: done: .*", out)
    print(done.group(0) if done else out[-3000:])
    for line in out.splitlines():
        if "failed" in line:
            print(line)
            break
    results = [json.loads(f.read_text()) for f in (root / "out").glob("*.json")]
    parts = deal(s, y, args.parties, seed=0)
    ref = privfl.binned_auc(parts, 100)
    errs = [abs(r["auc"] - ref) for r in results]
    print(
        f"simulation: {args.parties} virtual parties ({args.security}), {args.samples} samples; "
        f"flwr run wall time {wall:.1f} s; {len(results)} parties wrote an AUC; "
        f"max |AUC - binned| = {max(errs) if errs else float('nan'):.2e}"
    )
    print(f"work dir: {root}")


if __name__ == "__main__":
    main()
