"""Where the FHAUC aggregator's time goes, single key next to threshold keys (issue 27).

One session per (security, reveal, keys) at ``--parties`` parties, N = 100 (metrics: t = 0.5),
100 samples per party. For the aggregator's timed steps only (the ``"aggregator"`` key of the
in-process runner: what ``benchmarks/fhauc_threshold.py --table`` reports; never the key
rounds), it prints the process CPU time per step and a breakdown by phase from ``cProfile``
(process CPU time of the functions each phase is made of, so the phases add up to the profiled
total; the single-key aggregator's upload helper processes are not in it):

    nice -n 5 .venv/bin/python benchmarks/fhauc_threshold_profile.py --parties 100 \
        [--combos malicious:curve,malicious:metrics,malicious:auc] [--top 12]

Phases: ``parse`` (message decoding, signature checks, the upload's coefficient checks),
``row sums`` (adding uploads on their coefficient rows), ``openfhe load`` (building OpenFHE
ciphertexts from rows), ``he ops`` (OpenFHE additions, products, rotations, rescales),
``requests`` (compressing replies and serialising decryption requests), ``shares`` (decoding
and summing the parties' decryption shares for the lead), ``other``.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import time
from collections import defaultdict

import numpy as np

import privfl
import privfl.metrics as pm
from fhauc_scale import synthetic  # the same benchmark data as the scale figures
from privfl.runner import InProcessRunner

PROFILE = cProfile.Profile(time.process_time)  # CPU seconds: what the work costs
STEP_CPU: dict[str, float] = defaultdict(float)

PHASES = {  # phase: substrings of "file:function" (first match wins, in this order)
    "shares": ("DecryptionShare", "lead_decryption", "MultipartyDecrypt", "_sum_shares"),
    "requests": ("request_decryption", "DecryptionRequest", "Compress", "compress"),
    "openfhe load": ("wire.py:load", "context.py:load", "Deserialize", "ciphertext_layout"),
    "row sums": ("add_mod",),
    "parse": (
        "from_bytes",
        "verify",
        "check_rows",
        "Reader",
        "messages.py",
        "frombuffer",
        "wire.py",
        "_fresh",
    ),
    "he ops": (
        "EvalAdd",
        "EvalMult",
        "EvalRotate",
        "EvalAtIndex",
        "Rescale",
        "ModReduce",
        "ciphertext.py",
        "ops.py",
        "openfhe",
    ),
}


def patch_runner() -> None:
    plain = InProcessRunner.run

    def run(self, key, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
        if key != "aggregator":
            return plain(self, key, fn, *args, **kwargs)
        c0 = time.process_time()
        PROFILE.enable()
        try:
            return plain(self, key, fn, *args, **kwargs)
        finally:
            PROFILE.disable()
            STEP_CPU[getattr(fn, "__name__", "?")] += time.process_time() - c0

    InProcessRunner.run = run  # type: ignore[method-assign]


def one(data: list[tuple[np.ndarray, np.ndarray]], security: str, reveal: str, keys: str) -> None:
    kw = {"keys": keys, "security": security}
    if reveal == "auc":
        privfl.federated_auc(data, 100, **kw)
    elif reveal == "curve":
        pm.roc_curve(data, 100, **kw)
    else:
        pm.threshold_metrics(data, 0.5, **kw)


def phase_of(key: tuple[str, int, str]) -> str:
    name = f"{os.path.basename(key[0])}:{key[2]}"
    for phase, needles in PHASES.items():
        if any(n in name for n in needles):
            return phase
    return "other"


def breakdown(top: int) -> None:
    stats = pstats.Stats(PROFILE)
    raw = stats.stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in raw.values())
    phases: dict[str, float] = defaultdict(float)
    for key, (_cc, _nc, tt, _ct, _callers) in raw.items():
        phases[phase_of(key)] += tt
    print(f"    profiled total {total:.3f} s; by phase (own time):")
    for phase, t in sorted(phases.items(), key=lambda x: -x[1]):
        print(f"      {phase:>13} {t:7.3f} s {100 * t / max(total, 1e-12):5.1f} %")
    print(f"    top {top} functions by own time:")
    rows = sorted(raw.items(), key=lambda kv: -kv[1][2])[:top]
    for key, (_cc, nc, tt, ct, _callers) in rows:
        name = f"{os.path.basename(key[0])}:{key[1]}:{key[2]}"
        print(f"      {tt:7.3f} s own {ct:7.3f} s cum {nc:>7} calls  {name}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parties", type=int, default=100)
    ap.add_argument("--combos", default="malicious:curve,malicious:metrics,malicious:auc")
    ap.add_argument("--top", type=int, default=12)
    args = ap.parse_args()
    patch_runner()
    data = synthetic(args.parties, 100)
    for combo in args.combos.split(","):
        security, reveal = combo.split(":")
        for keys in ("single", "threshold"):
            PROFILE.clear()  # type: ignore[attr-defined]
            STEP_CPU.clear()
            t0 = time.perf_counter()
            one(data, security, reveal, keys)
            wall = time.perf_counter() - t0
            load = "/".join(f"{x:.2f}" for x in os.getloadavg())
            steps = ", ".join(f"{k} {v:.3f}" for k, v in STEP_CPU.items())
            print(
                f"{args.parties} parties, {security} {reveal}, {keys} keys: aggregator CPU "
                f"{sum(STEP_CPU.values()):.3f} s ({steps}); run wall {wall:.1f} s; load {load}",
                flush=True,
            )
            breakdown(args.top)


if __name__ == "__main__":
    main()
