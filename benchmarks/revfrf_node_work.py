"""A RevFRF node's own work per round, without Flower: the deployment's CS
(:class:`privfl.federation.revfrf_deploy.CenterDeployment`) drives nodes rebuilt for every
batch from their key folders, files and saved state (as a Flower ClientApp is: a fresh
process per message, so the per-process caches of :mod:`privfl.crypto.dtpkc` are cleared
before every batch), on Adult rows split over 3 participants + CC + a requester.

Printed: per kind of round (growth: the PSI, the node requests and split uploads; query),
the slowest node's seconds per round (mean / median: what ``benchmarks/flower_rounds.py``
calls ``load + work``) and every role's total; with ``--predict N`` the batched secure
prediction of N held-out rows through the same nodes (rows/s); with ``--profile`` the
participants' top functions (cProfile, cumulative).

    nice .venv/bin/python benchmarks/revfrf_node_work.py --rows 5000 --bits 2048 \
        --trees 10 --depth 10 --predict 100
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import pandas as pd

from _revfrf_adult import write_files
from privfl.crypto import dtpkc

try:
    from privfl.crypto import fixed_base
except ImportError:  # privfl before crypto/fixed_base.py
    fixed_base = None  # type: ignore[assignment]
from privfl.federation.revfrf_deploy import CenterDeployment, drive
from privfl.federation.revfrf_keys import load_node
from privfl.federation.revfrf_node import Node, NodeFiles
from privfl.forest.jobs import Batch
from privfl.forest.messages import CC, CS

NAMES = ("p1", "p2", "p3")
ASKER = "asker"


def load() -> str:
    return "load average " + ", ".join(f"{v:.2f}" for v in os.getloadavg())


class FreshNodes:
    """Every batch to a node rebuilt from its folder and state, per-process caches cleared."""

    def __init__(self, root: Path, profile: cProfile.Profile | None) -> None:
        self.root, self.profile = root, profile
        self.states: dict[str, dict[str, bytes]] = {n: {} for n in (*NAMES, CC, ASKER)}
        self.kind = "growth"
        self.slowest: dict[str, list[float]] = defaultdict(list)
        self.slowest_cpu: dict[str, list[float]] = defaultdict(list)
        self.totals: dict[str, float] = defaultdict(float)
        self.cpu: dict[str, float] = defaultdict(float)

    def node(self, name: str) -> Node:
        role = "cc" if name == CC else "requester" if name == ASKER else "participant"
        out = str(self.root / "out" / name)
        files = NodeFiles(output_dir=out)
        if role == "participant":
            files = NodeFiles(str(self.root / f"{name}.csv"), None, "id", out)
        if role == "requester":
            files = NodeFiles(str(self.root / f"{ASKER}.csv"), None, "id", out)
        return Node(role, load_node(self.root / "keys" / name, role), files, self.states[name])

    def __call__(self, batch: Batch) -> tuple[bytes, ...]:
        by_node: dict[str, list[int]] = defaultdict(list)
        for i, out in enumerate(batch):
            by_node[out.to].append(i)
        replies: list[bytes] = [b""] * len(batch)
        worst = worst_cpu = 0.0
        for name, idx in by_node.items():
            tables = getattr(dtpkc, "_table", None) or fixed_base.table  # (before: in dtpkc)
            tables.cache_clear()  # a fresh ClientApp process per message
            dtpkc._BASE_USES.clear()
            participant = name in NAMES
            if self.profile is not None and participant:
                self.profile.enable()
            start, cpu = time.perf_counter(), time.process_time()
            got = self.node(name).handle_all([batch[i].data for i in idx])
            seconds = time.perf_counter() - start
            cpu = time.process_time() - cpu
            self.cpu[name] += cpu
            worst_cpu = max(worst_cpu, cpu)
            if self.profile is not None and participant:
                self.profile.disable()
            for i, reply in zip(idx, got, strict=True):
                replies[i] = reply
            self.totals[name] += seconds
            worst = max(worst, seconds)
        self.slowest[self.kind].append(worst)
        self.slowest_cpu[self.kind].append(worst_cpu)
        return tuple(replies)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--bits", type=int, default=2048)
    ap.add_argument("--trees", type=int, default=3)
    ap.add_argument("--depth", type=int, default=4)
    ap.add_argument("--predict", type=int, default=0, help="held-out rows predicted (batched)")
    ap.add_argument("--profile", action="store_true")
    args = ap.parse_args()
    print(f"{sys.version.split()[0]}; {load()} at start; PRIVFL_DTPKC_THREADS="
          f"{os.environ.get('PRIVFL_DTPKC_THREADS', '(unset)')}")  # fmt: skip
    profile = cProfile.Profile(time.process_time) if args.profile else None
    with tempfile.TemporaryDirectory(prefix="privfl-node-work-") as tmp:
        root = Path(tmp)
        write_files(
            root, NAMES, args.rows, args.bits, args.trees, args.depth, ASKER, max(args.predict, 1)
        )
        labels = pd.read_csv(root / "labels.csv")
        dep = CenterDeployment(
            load_node(root / "keys" / CS, "cs"), labels["id"].tolist(), labels["label"].to_numpy()
        )
        nodes = FreshNodes(root, profile)
        start = time.perf_counter()
        drive(dep.align(test=False), nodes)
        drive(dep.fit(), nodes)
        grow = time.perf_counter() - start
        n_nodes = dep.summary()["internal_nodes"]
        print(f"growth: {args.trees} trees of depth {args.depth}, Adult {args.rows} rows, "
              f"|N|={args.bits}: {len(nodes.slowest['growth'])} rounds, "
              f"{n_nodes} internal nodes, {grow:.1f} s wall; {load()}")  # fmt: skip
        if args.predict:
            nodes.kind = "query"
            start = time.perf_counter()
            values = drive(dep.query(ASKER), nodes)
            wall = time.perf_counter() - start
            rate = len(values) / wall
            print(f"query: {len(values)} rows in {len(nodes.slowest['query'])} rounds, "
                  f"{wall:.1f} s wall: {rate:.3f} rows/s (no Flower); {load()}")  # fmt: skip
    for kind, xs in nodes.slowest.items():
        cpu = nodes.slowest_cpu[kind]
        print(f"  {kind:>7} x{len(xs):<3} slowest node per round (mean / median s): wall "
              f"{statistics.fmean(xs):.3f} / {statistics.median(xs):.3f}, CPU "
              f"{statistics.fmean(cpu):.3f} / {statistics.median(cpu):.3f}")  # fmt: skip
    print("  nodes' own totals (wall / CPU s): " + ", ".join(
        f"{n} {nodes.totals[n]:.1f}/{nodes.cpu[n]:.1f}" for n in nodes.totals
    ))  # fmt: skip
    if profile is not None:
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(30)
        print(text.getvalue())


if __name__ == "__main__":
    main()
