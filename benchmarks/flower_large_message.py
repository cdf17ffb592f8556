"""Whether a real Flower deployment carries privfl's largest honest message (issue 27).

The threshold FHAUC upload step is bounded by ``MAX_UPLOAD_BYTES`` (192 MiB; the plan caps the
executions so that an honest upload fits: 27 executions x 7 ciphertexts of 1 MiB at 4,096
thresholds and 4 splits, at most 189 MiB; on 4,096 slots, 17 x 11 measured 183.8 MB in one
process), and honest uploads of 80 MB were
measured (``benchmarks/fhauc_acceptance.py --random``); the deployment tests use small N.
This starts a SuperLink and one SuperNode on loopback (``LocalFederation``, as ``privfl
flower local`` does), and runs a two-function app through privfl's own round code
(:func:`privfl.federation.flower.rounds.exchange` and :mod:`~privfl.federation.flower.payload`):
the ServerApp sends ``--mb`` MB of random bytes to the node, the ClientApp checks their
SHA-256 and answers with as many bytes of its own, whose SHA-256 the ServerApp checks. It
prints the outcome, the wall time of the run and the resident memory of the Flower
processes at their peak (``VmHWM``).

    .venv/bin/python benchmarks/flower_large_message.py [--mb 160]
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

APP = """
import hashlib, os
from flwr.app import Context, Message
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid, ServerApp
from privfl.federation.flower.payload import pack, unpack
from privfl.federation.flower.rounds import exchange

client = ClientApp()
server = ServerApp()


@client.query("large")
def large(message: Message, context: Context) -> Message:
    (blob,), meta = unpack(message.content, "the ServerApp")
    ok = hashlib.sha256(blob).hexdigest() == meta["sha256"]
    back = os.urandom(len(blob))
    return Message(pack([back], status="ok" if ok else "error", reason="" if ok else
                        "sha256 differs", sha256=hashlib.sha256(back).hexdigest()),
                   reply_to=message)


@server.main()
def main(grid: Grid, context: Context) -> None:
    size = int(context.run_config["megabytes"]) * 10**6
    nodes = list(grid.get_node_ids())
    blob = os.urandom(size)
    replies = exchange(grid, "large", {nodes[0]: pack([blob], sha256=hashlib.sha256(blob)
                                                      .hexdigest())}, {}, timeout=600.0)
    (back,), meta = replies[nodes[0]]
    assert hashlib.sha256(back).hexdigest() == meta["sha256"], "the reply's sha256 differs"
    print(f"LARGE-MESSAGE-OK {len(blob)} bytes each way", flush=True)
"""

PYPROJECT = """[build-system]
requires = ["hatchling"]
build-backend = "hatchling.build"

[project]
name = "largemessage"
version = "1.0.0"

[tool.hatch.build.targets.wheel]
packages = ["."]

[tool.flwr.app]
publisher = "privfl"

[tool.flwr.app.components]
serverapp = "largeapp:server"
clientapp = "largeapp:client"

[tool.flwr.app.config]
megabytes = 1
"""


def peak_rss_mb(pids: list[int]) -> dict[int, float]:
    out = {}
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmHWM:"):
                    out[pid] = int(line.split()[1]) / 1024
        except OSError:
            pass
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mb", type=int, default=160, help="megabytes each way (default 160)")
    args = ap.parse_args()
    if not 1 <= args.mb <= 1000:
        ap.error("--mb: between 1 and 1000")
    from privfl.federation.flower.local import LocalFederation

    print(f"load average {os.getloadavg()}", flush=True)
    with tempfile.TemporaryDirectory(dir="/tmp") as d:
        root = Path(d)
        (root / "app").mkdir()
        (root / "app" / "pyproject.toml").write_text(PYPROJECT)
        (root / "app" / "largeapp.py").write_text(APP)
        with LocalFederation(root) as fed:
            fed.start_superlink()
            fed.start_supernode("node", {})
            fed.wait_for_nodes(1)
            start = time.perf_counter()
            outcome = fed.run(root / "app", {"megabytes": args.mb}, timeout=900)
            wall = time.perf_counter() - start
            peaks = peak_rss_mb([p.pid for p in fed.procs.values()])
        ok = outcome.ok and "LARGE-MESSAGE-OK" in outcome.log
        print(f"{args.mb} MB each way through a real SuperLink and SuperNode: "
              f"{'carried' if ok else 'FAILED'} ({outcome.status}), run {wall:.1f} s wall; "
              f"peak resident MB of the SuperLink and SuperNode processes "
              f"{sorted(round(v) for v in peaks.values())}", flush=True)  # fmt: skip
        if not ok:
            print(outcome.log[-3000:])
            raise SystemExit(1)


if __name__ == "__main__":
    main()
