"""Encrypted training deployed over Flower (issue 28, item 3), on this machine.

    PYTHONPATH=src nice .venv/bin/python benchmarks/training_flower.py state [--secure]
    PYTHONPATH=src nice .venv/bin/python benchmarks/training_flower.py epoch [--parameters test]

``state``: what a node would reload per Flower message if its state lived on disk (a fresh
ClientApp process per message): the threshold context, the joint evaluation keys (deserialised
and installed into OpenFHE), the key share, the data; against what the long-lived party
process costs per message instead (one relay over the node's Unix socket). Paper layout
(64-30-20-10, the last layer encrypted, batch 10), 3 parties; ``--secure``: the secure ring
2^15 (needs several GB of memory), default the test ring. Neither counts the party's steps in
flight (Python generators between two joint steps), which cannot be saved at all without
rewriting the party.

``epoch``: the paper setting (3 parties, digits 8x8, 30 rows each, 64-30-20-10, batch 10, last
layer encrypted) through ``privfl flower train`` (real SuperLink, SuperNodes, party
processes): wall time of the epoch, Flower rounds per epoch, and the per-round phases each
node reported (ClientApp process start, relay, party work, Flower's own wait).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import json
import re
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

LAYERS = (64, 30, 20, 10)
ROUND = re.compile(r"privfl round (\S+) (\{.*\})")


def load() -> str:
    return "load average " + ", ".join(f"{v:.2f}" for v in os.getloadavg())


def state(args: argparse.Namespace) -> dict[str, Any]:
    from privfl.crypto.threshold import EvaluationKeys, ThresholdContext
    from privfl.federation.flower.train_party import PartyProcess
    from privfl.federation.flower.train_wire import ask
    from privfl.threshold import ThresholdParty, make_roles
    from privfl.training.config import secret_layout
    from privfl.training.params import training_parameters
    from privfl.training.twin import Schedule

    kind = "secure" if args.secure else "test"
    layout = secret_layout(Schedule(LAYERS, 1, 1, 1, 10, 5.0, 0))
    assert layout is not None
    params = training_parameters(layout, kind)
    t0, cpu0 = time.perf_counter(), time.process_time()
    ThresholdContext.for_parameters(params, 3)  # the first in this process, as in a fresh one
    context_s, context_cpu = time.perf_counter() - t0, time.process_time() - cpu0
    server, parties = make_roles(params, 3)
    joint = server.combine_keygen_shares([p.keygen_share() for p in parties])
    keys = server.combine_mult_shares([p.keygen_mult_share(joint) for p in parties]).to_bytes()
    share = parties[0].export_local_state()
    session = parties[0].session
    out: dict[str, Any] = {"ring": kind, "eval_keys_MB": len(keys) / 1e6,
                           "key_share_MB": len(share) / 1e6}  # fmt: skip
    t1, c0 = time.perf_counter(), time.process_time()
    ctx = ThresholdContext.for_parameters(params, 3)
    t0 = t1 - context_s
    fresh = ThresholdParty("party-0", 0, ctx, session)
    fresh.import_local_state(share)
    t2 = time.perf_counter()
    fresh.receive_evaluation_keys(EvaluationKeys.from_bytes(keys, ctx, session))
    t3, c3 = time.perf_counter(), time.process_time()
    out.update(context_s=t1 - t0, key_share_s=t2 - t1, eval_keys_s=t3 - t2,
               on_disk_total_s=t3 - t0, on_disk_total_cpu_s=c3 - c0 + context_cpu,
               context_cpu_s=context_cpu)  # fmt: skip
    with tempfile.TemporaryDirectory(dir="/tmp") as d:
        proc = PartyProcess(Path(d), "party-0")
        thread = threading.Thread(target=proc.serve, args=(30.0,), daemon=True)
        thread.start()
        while not proc.socket_path.exists():
            time.sleep(0.01)
        times = []
        for _ in range(50):
            t = time.perf_counter()
            ask(proc.socket_path, "ping", b"x" * 1000, 10.0)  # refused at once: the round trip
            times.append(time.perf_counter() - t)
        ask(proc.socket_path, "close", b"", 10.0)  # no session: refused, the process goes on
    out["relay_round_trip_ms"] = 1000 * statistics.median(times)
    out["load"] = load()
    print(f"node state per message ({kind} ring, 64-30-20-10, batch 10, 3 parties):")
    print(
        f"  on disk, reloaded by each ClientApp process: context {out['context_s']:.2f} s "
        f"({out['context_cpu_s']:.2f} s CPU) + "
        f"key share {out['key_share_s']:.2f} s + evaluation keys "
        f"({out['eval_keys_MB']:.0f} MB) {out['eval_keys_s']:.2f} s = "
        f"{out['on_disk_total_s']:.2f} s ({out['on_disk_total_cpu_s']:.2f} s CPU)"
    )
    print(
        f"  long-lived party process: relay round trip {out['relay_round_trip_ms']:.2f} ms "
        "(median of 50)"
    )
    print(f"  {out['load']}")
    return out


def epoch(args: argparse.Namespace) -> dict[str, Any]:
    from privfl.federation.flower.train_local import run_train_local
    from privfl.training.data import federated_digits

    data = federated_digits(3, 30, args.seed, "digits8x8")
    rows = []
    for k, (x, y) in enumerate(data.parties):
        for xi, yi in zip(x, y, strict=True):
            rows.append({"party": f"p{k}", **{f"x{j}": v for j, v in enumerate(xi)}, "y": yi})
    with tempfile.TemporaryDirectory(dir="/tmp") as d:
        root = Path(d)
        pd.DataFrame(rows).to_csv(root / "digits.csv", index=False)
        t0 = time.perf_counter()
        res = run_train_local(
            root / "digits.csv", "party", "y", layers=LAYERS, encrypted_layers=1,
            epochs=args.epochs, batch_size=10, learning_rate=args.lr, parameters=args.parameters,
            workdir=root / "w", timeout=args.timeout,
        )  # fmt: skip
        wall = time.perf_counter() - t0
        log = (root / "w" / "run.log").read_text()
    s = res.server
    per_round = [json.loads(m.group(2)) for m in ROUND.finditer(log)]
    train_steps = ("train", "relay", "upload")
    rounds_per_epoch = sum(v for k, v in s["exchanges"].items() if k in train_steps) / args.epochs
    all_per_epoch = sum(s["exchanges"].values()) / args.epochs
    out = {
        "parameters": args.parameters, "epochs": args.epochs,
        "seconds_per_epoch": [h["seconds"] for h in s["history"]],
        "accuracy": [h["accuracy"] for h in s["history"]],
        "setup_seconds": s["setup_seconds"], "setup_rounds": s["setup_rounds"],
        "flower_rounds": s["flower_rounds"], "training_rounds_per_epoch": rounds_per_epoch,
        "rounds_per_epoch_with_evaluation": all_per_epoch, "exchanges": s["exchanges"],
        "command_wall_s": wall, "load": load(),
    }  # fmt: skip
    for phase in ("wall", "start", "load", "work", "flower"):
        values = [r[phase] for r in per_round if phase in r]
        if values:
            out[f"round_{phase}_median_s"] = statistics.median(values)
    print(
        f"paper setting over Flower ({args.parameters} ring): 3 parties x 30 rows, "
        f"64-30-20-10, batch 10, last layer encrypted, {args.epochs} epoch(s)"
    )
    print(f"  seconds per epoch (server, train + evaluation): {out['seconds_per_epoch']}")
    print(
        f"  Flower rounds per epoch: {rounds_per_epoch:g} training "
        f"({all_per_epoch:g} with the evaluation); setup {s['setup_rounds']} rounds, "
        f"{s['setup_seconds']:.1f} s; {s['flower_rounds']} rounds in all"
    )
    print("  per round, median: " + ", ".join(
        f"{p} {out[f'round_{p}_median_s']:.2f} s" for p in ("wall", "start", "load", "work",
                                                             "flower")
        if f"round_{p}_median_s" in out))  # fmt: skip
    print(f"  accuracy on the parties' rows: {out['accuracy']}; whole command {wall:.0f} s")
    print(f"  {out['load']}")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    sub = ap.add_subparsers(dest="mode", required=True)
    st = sub.add_parser("state")
    st.add_argument("--secure", action="store_true")
    ep = sub.add_parser("epoch")
    ep.add_argument("--parameters", default="test", choices=("test", "secure"))
    ep.add_argument("--epochs", type=int, default=1)
    ep.add_argument("--lr", type=float, default=5.0)
    ep.add_argument("--seed", type=int, default=0)
    ep.add_argument("--timeout", type=float, default=7200.0)
    for p in (st, ep):
        p.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()
    out = state(args) if args.mode == "state" else epoch(args)
    if args.json is not None:
        args.json.write_text(json.dumps(out, indent=2) + "\n")


if __name__ == "__main__":
    np.seterr(all="ignore")
    main()
