"""What one round of a deployed protocol costs, over real Flower processes on loopback.

For each deployment (a SuperLink, one SuperNode per node, ``flwr run``), from the nodes'
own clock readings and the ServerApp's per-round log line (:mod:`privfl.federation.flower.
rounds`):

* ``wall``      push of the round's messages to the last reply, seen by the ServerApp;
* ``start``     the ClientApp process's age when the handler began (process start, Python and
                Flower imports, loading the app): Flower's fresh process per message;
* ``load``      privfl's node-state load (keys, data, session state) inside the handler;
* ``work``      the protocol step itself;
* ``flower``    ``wall`` minus the slowest node's ``start + load + work``: the SuperNode's idle
                poll (3 s, fixed in Flower 1.41), the SuperExec's task poll, transfers;
* bytes out (ServerApp -> nodes) and in (protocol bytes inside the records).

Deployments: FHAUC with single keys and with threshold keys (3 parties), one round of FedAvg
with the private AUC (``private-eval``: examples/flower-train-private-auc, 3 clients), RevFRF (3
participants + CC + a requester; PSI and growth, then a secure prediction of one row). The
ServerApp's own session wall time and the ``flwr run`` wall time are printed too. Defaults are
small and quick; the issue's RevFRF figure is

    nice .venv/bin/python benchmarks/flower_rounds.py --only revfrf --rows 5000 --bits 2048 \
        --trees 10 --depth 10

Before the per-round log existed (privfl <= the commit that added this script) only the
totals are printed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pandas as pd

from _revfrf_adult import APP as REVFRF_APP
from _revfrf_adult import run_config, start_nodes, write_files
from privfl.evaluation.fhauc.policy import Policy, Security
from privfl.federation.flower.local import LocalFederation
from privfl.federation.flower.quickstart import APP_PYPROJECT
from privfl.federation.provisioning import provision

REPO = Path(__file__).resolve().parents[1]
TRAIN_APP = REPO / "examples" / "flower-train-private-auc"
PARTIES = ("p1", "p2", "p3")
ROUND_LINE = re.compile(r"privfl round (\S+) (\{.*\})")


def load() -> str:
    return "load average " + ", ".join(f"{v:.2f}" for v in os.getloadavg())


def rounds_of(log: str) -> list[dict]:
    """The per-round records the ServerApp logged (empty before they existed)."""
    out = []
    for line in log.splitlines():
        found = ROUND_LINE.search(line)
        if found:
            out.append({"kind": found.group(1), **json.loads(found.group(2))})
    return out


def breakdown(name: str, rounds: list[dict]) -> None:
    """Print the mean and median per-round phases, per kind of round and over all."""
    if not rounds:
        print(f"  {name}: no per-round records in the log (privfl before the round log)")
        return
    kinds: dict[str, list[dict]] = {}
    for r in rounds:
        kinds.setdefault(r["kind"], []).append(r)
    kinds["all rounds"] = rounds
    for kind, rs in kinds.items():

        def med(key: str, rs: list[dict] = rs) -> float:
            return statistics.median(float(r.get(key, 0.0)) for r in rs)

        def mean(key: str, rs: list[dict] = rs) -> float:
            return statistics.fmean(float(r.get(key, 0.0)) for r in rs)

        print(
            f"  {name} {kind:>16} x{len(rs):<3} per round (mean / median s): "
            f"wall {mean('wall'):.2f}/{med('wall'):.2f}, flower {mean('flower'):.2f}/"
            f"{med('flower'):.2f}, start {mean('start'):.2f}/{med('start'):.2f}, "
            f"load {mean('load'):.3f}/{med('load'):.3f}, work {mean('work'):.3f}/"
            f"{med('work'):.3f}; bytes out {mean('out'):.0f}, in {mean('in'):.0f}"
        )


def by_step(rounds: list[dict], counts: dict[str, int]) -> None:
    """RevFRF: the batch rounds of each step (in order: train = PSI and growth, then query),
    then their breakdown."""
    batches = [r for r in rounds if r["kind"] == "revfrf_batch"]
    start = 0
    for step, n in counts.items():
        for r in batches[start : start + n]:
            r["kind"] = f"{step} batch"
        start += n


def fhauc(root: Path, keys: str, rows: int) -> dict:
    rng = np.random.default_rng(0)
    data = root / "data"
    data.mkdir(parents=True)
    for name in PARTIES:
        y = rng.integers(0, 2, rows)
        s = np.clip(0.3 * y + 0.7 * rng.random(rows), 0, 1)
        pd.DataFrame({"score": s, "label": y}).to_csv(data / f"{name}.csv", index=False)
    policy = Policy(security=Security.SEMI_HONEST)
    if keys == "threshold":
        policy = Policy(security=Security.SEMI_HONEST, max_samples_per_party=1 << rows.bit_length())
    provision(list(PARTIES), root / "keys", policy, keys=keys)
    (root / "app").mkdir()
    (root / "app" / "pyproject.toml").write_text(APP_PYPROJECT)
    with LocalFederation(root) as fed:
        fed.start_superlink()
        for name in PARTIES:
            fed.start_supernode(name, {
                "keys-dir": str(root / "keys" / name), "data-file": str(data / f"{name}.csv"),
                "output-dir": str(root / "results" / name), "report-timings": True,
            })  # fmt: skip
        fed.wait_for_nodes(len(PARTIES))
        started = time.perf_counter()
        outcome = fed.run(root / "app", {
            "aggregator-keys": str(root / "keys" / "aggregator"), "keys": keys,
        }, timeout=900)  # fmt: skip
        wall = time.perf_counter() - started
    if not outcome.ok:
        raise RuntimeError(f"FHAUC run failed: {outcome.status}\n{outcome.log[-3000:]}")
    found = re.search(r"wall ([0-9.]+) s", outcome.log)
    return {
        "flwr_run_s": wall, "session_s": float(found.group(1)) if found else None,
        "rounds": rounds_of(outcome.log),
    }  # fmt: skip


def revfrf(root: Path, rows: int, bits: int, trees: int, depth: int, predict: int) -> dict:
    write_files(root, PARTIES, rows, bits, trees, depth, requester="asker", predict=predict)
    with LocalFederation(root) as fed:
        start_nodes(fed, root, PARTIES, requester="asker")
        started = time.perf_counter()
        outcome = fed.run(REVFRF_APP, run_config(root, "train,query", "asker"), timeout=6 * 3600)
        wall = time.perf_counter() - started
    if not outcome.ok:
        raise RuntimeError(f"RevFRF run failed: {outcome.status}\n{outcome.log[-3000:]}")
    summary = json.loads(next((root / "out" / "CS").glob("*-summary.json")).read_text())
    return {"flwr_run_s": wall, "summary": summary, "rounds": rounds_of(outcome.log)}


def private_eval(root: Path, clients: int, rows: int) -> dict:
    """FedAvg with the private AUC every round (examples/flower-train-private-auc), 1 round."""
    parties = [f"site-{k + 1}" for k in range(clients)]
    provision(parties, root / "keys")
    with LocalFederation(root) as fed:
        fed.start_superlink()
        for k, p in enumerate(parties):
            fed.start_supernode(p, {
                "keys-dir": str(root / "keys" / p), "partition-id": k, "num-partitions": clients,
                "output-dir": str(root / "out" / p), "report-timings": True,
            })  # fmt: skip
        fed.wait_for_nodes(clients)
        started = time.perf_counter()
        outcome = fed.run(TRAIN_APP, {
            "aggregator-keys": str(root / "keys" / "aggregator"), "num-server-rounds": 1,
            "max-rows": rows, "output-dir": str(root / "server"),
        }, timeout=1800)  # fmt: skip
        wall = time.perf_counter() - started
    if not outcome.ok:
        raise RuntimeError(f"training run failed: {outcome.status}\n{outcome.log[-3000:]}")
    history = json.loads(next((root / "server").glob("history-*.json")).read_text())
    return {"flwr_run_s": wall, "history": history, "rounds": rounds_of(outcome.log)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", default="fhauc-single,fhauc-threshold,private-eval,revfrf")
    ap.add_argument("--fhauc-rows", type=int, default=1000, help="rows per FHAUC party")
    ap.add_argument("--rows", type=int, default=500, help="RevFRF: Adult training rows")
    ap.add_argument("--bits", type=int, default=1024, help="RevFRF: DT-PKC modulus bits")
    ap.add_argument("--trees", type=int, default=2)
    ap.add_argument("--depth", type=int, default=3)
    ap.add_argument("--predict", type=int, default=1, help="RevFRF: rows the requester asks")
    ap.add_argument("--json", help="write every figure to this file")
    args = ap.parse_args()
    print(f"{sys.version.split()[0]}; {load()} at start")
    results: dict = {}
    for which in [w.strip() for w in args.only.split(",") if w.strip()]:
        with tempfile.TemporaryDirectory(prefix="privfl-rounds-") as tmp:
            if which.startswith("fhauc-"):
                keys = which.removeprefix("fhauc-")
                res = fhauc(Path(tmp), keys, args.fhauc_rows)
                print(
                    f"FHAUC, {keys} keys, 3 parties x {args.fhauc_rows} rows, semi-honest, N=100: "
                    f"session {res['session_s']} s (ServerApp, after the nodes are up), "
                    f"flwr run {res['flwr_run_s']:.1f} s, {len(res['rounds'])} rounds; {load()}"
                )
            elif which == "revfrf":
                res = revfrf(Path(tmp), args.rows, args.bits, args.trees, args.depth, args.predict)
                s = res["summary"]
                own = sum(s["seconds"].values()) - s["wait_seconds"]
                rate = args.predict / s["seconds"]["query"]
                print(
                    f"RevFRF, Adult {args.rows} rows over 3 participants + CC + requester, "
                    f"|N|={args.bits}, {args.trees} trees of depth {args.depth}: flwr run "
                    f"{res['flwr_run_s']:.1f} s; rounds {s['rounds']}; seconds "
                    + ", ".join(f"{k} {v:.1f}" for k, v in s["seconds"].items())
                    + f"; CS own {own:.1f} s, waiting for rounds {s['wait_seconds']:.1f} s; "
                    "nodes' own "
                    + ", ".join(f"{k} {v:.1f}" for k, v in s["node_seconds"].items())
                    + f"; {s['summary'].get('internal_nodes')} tree nodes; {args.predict} rows "
                    f"predicted in one batch: {rate:.3f} rows/s (query step); {load()}"
                )
                by_step(res["rounds"], s["rounds"])
            elif which == "private-eval":
                res = private_eval(Path(tmp), 3, args.fhauc_rows)
                evals = [f"{r['seconds']:.1f} s ({r['status']})" for r in res["history"]["rounds"]]
                print(
                    f"FedAvg + private AUC, 3 clients x {args.fhauc_rows} rows, 1 round: flwr run "
                    f"{res['flwr_run_s']:.1f} s; evaluation {', '.join(evals)}; {load()}"
                )
            else:
                raise SystemExit(f"unknown deployment {which!r}")
            breakdown(which, res["rounds"])
            results[which] = res
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()
