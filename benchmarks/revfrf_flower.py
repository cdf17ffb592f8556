"""RevFRF over a real Flower deployment (loopback) against the in-process runner, and PSI.

* deployment: a SuperLink, one SuperNode per participant (Adult's 14 columns split over 3
  participants), one for the CC, and ``flwr run examples/flower-revfrf`` with
  ``steps=train,test``: PSI of the ids (the CS's 5,000 training ids, every participant
  holding them in its own shuffled order), growth of 10 trees of depth 10, then FRF-Test of
  one row (plaintext comparisons and HoLT at every node). Reported: rounds, wall seconds,
  the CS's own seconds (wall minus waiting for rounds), the nodes' own seconds per role,
  protocol bytes per channel (Flower's own framing not counted);
* in process: the same roles on the same aligned rows with :class:`privfl.forest.RevFRF`
  (seconds per role and bytes per channel from the runner);
* construction per 100 internal nodes is the forest's figure scaled by 100 / nodes (over
  Flower the time is set by the number of rounds, 2 per level, not by the node count);
* PSI (:mod:`privfl.forest.psi`, in process): CS + 3 participants with 10^4 and 10^5 ids each
  (90% common), seconds per role and bytes.

    nice .venv/bin/python benchmarks/revfrf_flower.py [--bits 2048] [--psi 10000,100000]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

import numpy as np

from _revfrf_adult import APP, run_config, start_nodes, write_files
from privfl.federation.flower.local import LocalFederation
from privfl.forest import RevFRF, schedule
from privfl.forest.psi import PsiComparer, PsiConfig, PsiParty
from privfl.messages import new_session_id
from privfl.runner import InProcessRunner

NAMES = ("p1", "p2", "p3")


def psi_figures(n: int) -> dict:
    rng = np.random.default_rng(n)
    config = PsiConfig(new_session_id(), ("CS", *NAMES), "CC")
    parties = {}
    common = int(0.9 * n)
    for name in config.parties:
        ids = [f"id{i}" for i in range(common)] + [f"{name}-{i}" for i in range(n - common)]
        parties[name] = PsiParty(name, [ids[i] for i in rng.permutation(n)], config)
    runner = InProcessRunner()
    start = time.perf_counter()
    rows = schedule.align(runner, parties, PsiComparer(config))
    wall = time.perf_counter() - start
    return {
        "ids_per_party": n, "common": int(rows["CS"].size), "wall_s": wall,
        "cs_s": runner.total_seconds("cs_psi"),
        "participant_s_each": runner.total_seconds("participant_psi") / len(NAMES),
        "cc_s": runner.total_seconds("cc_psi"),
        "mb": sum(sum(v) for v in runner.sizes.values()) / 1e6,
    }  # fmt: skip


def deployment(root: Path, bits: int, trees: int, depth: int) -> dict:
    data = write_files(root, NAMES, 5000, bits, trees, depth)
    with LocalFederation(root) as fed:
        start_nodes(fed, root, NAMES)
        started = time.perf_counter()
        outcome = fed.run(APP, run_config(root, "train,test"), timeout=6 * 3600)
        wall = time.perf_counter() - started
    found = list((root / "out" / "CS").glob("*-summary.json"))
    if not found:
        raise RuntimeError("the deployment wrote no result:\n" + outcome.log[-4000:])
    summary = json.loads(found[0].read_text())
    summary["flwr_run_wall_s"] = wall
    summary.update(data)
    return summary


def in_process(summary: dict, bits: int, trees: int, depth: int) -> dict:
    x, y, cols = summary["x"], summary["y"], summary["cols"]
    index = {f"a{i:05d}": i for i in range(len(x))}
    rows = np.array([index[i] for i in summary["aligned_ids"]])
    parts = {n: x[rows][:, c] for n, c in zip(NAMES, cols, strict=True)}
    model = RevFRF(n_trees=trees, max_depth=depth, key_bits=bits, seed=0,
                   allow_insecure_key_bits=bits < 2048)  # fmt: skip
    start = time.perf_counter()
    model.fit(parts, y[rows])
    fit_wall = time.perf_counter() - start
    fit_s = {k: sum(v) for k, v in model.runner.seconds.items()}
    fit_b = {k: sum(v) for k, v in model.runner.sizes.items() if "kgc" not in k}
    model.runner.seconds.clear()
    model.runner.sizes.clear()
    start = time.perf_counter()
    model.predict({n: summary["xt"][:, c] for n, c in zip(NAMES, cols, strict=True)})
    return {
        "fit_wall_s": fit_wall, "fit_seconds": fit_s, "fit_bytes": fit_b,
        "nodes": model.report().internal_nodes,
        "predict_wall_s": time.perf_counter() - start,
        "predict_seconds": {k: sum(v) for k, v in model.runner.seconds.items()},
        "predict_bytes": {k: sum(v) for k, v in model.runner.sizes.items()},
    }  # fmt: skip


def listing(values: dict, scale: float = 1.0, digits: int = 1) -> str:
    return ", ".join(f"{k} {v / scale:.{digits}f}" for k, v in sorted(values.items()))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--bits", type=int, default=2048)
    ap.add_argument("--trees", type=int, default=10)
    ap.add_argument("--depth", type=int, default=10)
    ap.add_argument("--psi", default="10000,100000")
    ap.add_argument("--skip-deployment", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()
    result: dict = {"psi": [psi_figures(int(n)) for n in args.psi.split(",") if n]}
    for p in result["psi"]:
        print(
            f"PSI, CS + 3 participants, {p['ids_per_party']} ids each ({p['common']} common): "
            f"{p['wall_s']:.1f} s wall in one process (CS {p['cs_s']:.1f} s, each participant "
            f"{p['participant_s_each']:.1f} s, CC {p['cc_s']:.2f} s), {p['mb']:.1f} MB"
        )
    if args.skip_deployment:
        return
    with tempfile.TemporaryDirectory() as tmp:
        s = deployment(Path(tmp), args.bits, args.trees, args.depth)
    ref = in_process(s, args.bits, args.trees, args.depth)
    nodes = s["summary"]["internal_nodes"]
    train, test = s["rounds"]["train"], s["rounds"]["test"]
    print(
        f"|N|={args.bits}, Adult 5,000 rows, 14 columns over 3 participants, {args.trees} trees "
        f"of depth {args.depth}; flwr run {s['flwr_run_wall_s']:.0f} s in all"
    )
    print(
        f"  deployment: PSI + construction of {nodes} nodes in {train} rounds, "
        f"{s['seconds']['train']:.1f} s ({100 * s['seconds']['train'] / nodes:.1f} s per 100 "
        f"nodes); secure + plain prediction of one row in {test} rounds, "
        f"{s['seconds']['test']:.1f} s"
    )
    cs_own = sum(s["seconds"].values()) - s["wait_seconds"]
    print(
        f"  deployment, seconds over both steps: CS own {cs_own:.1f}, waiting for rounds "
        f"{s['wait_seconds']:.1f}; nodes' own (incl. rebuilding per message): "
        + listing(s["node_seconds"])
    )
    print("  deployment, protocol MB per channel (both steps): " + listing(s["bytes"], 1e6, 2))
    per100 = 100 * ref["fit_wall_s"] / ref["nodes"]
    print(
        f"  in process (same aligned rows, its own forest: {ref['nodes']} nodes): construction "
        f"{ref['fit_wall_s']:.1f} s ({per100:.1f} s per 100 nodes); seconds "
        + listing(ref["fit_seconds"])
        + "; MB "
        + listing(ref["fit_bytes"], 1e6, 2)
    )
    print(
        f"  in process, secure prediction of one row: {ref['predict_wall_s']:.1f} s; seconds "
        + listing(ref["predict_seconds"])
        + "; MB "
        + listing(ref["predict_bytes"], 1e6, 2)
    )
    if args.json:
        for k in ("x", "y", "xt", "aligned_ids"):
            s.pop(k, None)
        Path(args.json).write_text(json.dumps({**result, "deployment": s, "in_process": ref},
                                              indent=2, default=str))  # fmt: skip


if __name__ == "__main__":
    main()
