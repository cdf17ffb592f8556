"""CPU that a fresh ``flwr-clientapp`` process spends importing, before it handles its message.

Flower 1.41 starts one ``flwr-clientapp`` process per message; it imports Flower's ClientApp
runtime (``flwr.supernode.cli.flwr_clientapp``), then the app's module. Each figure is the
median over ``--repeat`` fresh interpreters of ``time.process_time()`` around the import
(user + system CPU of that process): Flower's runtime alone, then each privfl ClientApp module
on top of it (what privfl adds to every message before its handler runs).

    python benchmarks/clientapp_import.py --repeat 5
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
from pathlib import Path

RUNTIME = "flwr.supernode.cli.flwr_clientapp"
APPS = {
    "FHAUC party": "privfl.federation.flower.client_app",
    "training relay": "privfl.federation.flower.train_client",
    "RevFRF node": "privfl.federation.flower.revfrf_client",
    "private AUC in training (example)": "trainauc.client_app",
}
EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "flower-train-private-auc"
PROBE = """
import sys, time
t = time.process_time()
import {runtime}
runtime = time.process_time() - t
t = time.process_time()
{app}
print(runtime, time.process_time() - t)
"""


def measure(module: str | None) -> tuple[float, float]:
    """(CPU s of Flower's runtime import, CPU s of ``module`` on top) in a fresh process."""
    code = PROBE.format(runtime=RUNTIME, app=f"import {module}" if module else "pass")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (env.get("PYTHONPATH"), str(EXAMPLE)) if p)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    return float(out[0]), float(out[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    base = [measure(None)[0] for _ in range(args.repeat)]
    print(f"Flower's ClientApp runtime ({RUNTIME}): {statistics.median(base):.3f} CPU s")
    for label, module in APPS.items():
        extra = [measure(module)[1] for _ in range(args.repeat)]
        print(f"+ {label} ({module}): {statistics.median(extra):.3f} CPU s")
    print(f"load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
