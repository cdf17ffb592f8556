"""Measured error of a single-key malicious AUC reply against its noise model (issue 27).

The threshold model lacked a coherent product error of the joint layout (T and F in one
ciphertext, F = rot(sum, W): about ``2^-53 M S N B^2`` on ``X/c``, OpenFHE's double-precision
encoding; benchmarks/threshold_product_noise.py). SEAL's encoder (TenSEAL) also works in
doubles: does the single-key joint layout (from ``JOINT_MIN_PARTIES = 64`` parties on) carry
it, and does :meth:`privfl.evaluation.fhauc.malicious.Sizes.sigma_products` bound it?

For each setting (parties x rows per party x N decision points) and layout (``separate``: T and
F in two ciphertexts; ``joint``: one ciphertext, F = rot(sum, W) at the aggregator; ``plan``:
the default rule, :func:`~privfl.evaluation.fhauc.malicious.joint_allowed`), runs
``--sessions`` honest sessions of :func:`privfl.federated_auc` with ``security="malicious"``,
single keys and every other option at its default, and for every execution compares what the
parties decode with the exact values, which this harness (not any role) computes from the
plaintext counts, the execution's multipliers and the aggregator's ``c``:

    X/c = r0 * 2 P N AUC_binned + r1 P N,      Y/c = r2 P N

It prints the largest and RMS of ``|error| / sigma`` for ``X/c`` and ``Y/c`` (``sigma`` from
``Sizes.sigma_products`` of the layout used, with ``NOISE_CONSTANT = 2``), the largest
``|error|`` also in units of the coherent scale ``2^-53 M S N B^2`` (``B = 2^(mask_bits+3)``),
the largest spread of the executions over the tolerance and the refusals. A model that bounds
the error has ``max |error| / sigma`` well below 1 (the tolerance is 10 sigma on a
difference of two executions).

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python benchmarks/single_key_product_noise.py \
        [--settings 64x100x100,2x1000x100] [--sessions 4] [--layouts separate,joint,plan]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import math
import time
from collections import Counter

import numpy as np

import privfl
from _noise_harness import MultiplierRecorder, execution_errors, synthetic
from privfl.errors import InputError, ProtocolError
from privfl.evaluation.fhauc import malicious
from privfl.evaluation.fhauc import variant as variant_module

LAYOUTS = {"separate": False, "joint": True, "plan": None}


class Recorder(MultiplierRecorder):
    """Records the aggregator's multipliers and what one party decodes (benchmark only)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[list[tuple[float, float]], object]] = []
        self.spread_over_tol = 0.0
        self._recover = variant_module.Malicious.recover
        self._allowed = malicious.joint_allowed

    def install(self, joint: bool | None) -> None:
        rec = self

        def recover(variant, decoded, counts, view):  # type: ignore[no-untyped-def]
            out = rec._recover(variant, decoded, counts, view)
            if not rec.seen:
                rec.seen.append((list(decoded), view))
                rec.spread_over_tol = out.spread / out.tolerance
            return out

        self.record_multipliers()
        variant_module.Malicious.recover = recover  # type: ignore[method-assign]
        if joint is not None:
            malicious.joint_allowed = lambda parties: joint

    def uninstall(self) -> None:
        self.restore_multipliers()
        variant_module.Malicious.recover = self._recover  # type: ignore[method-assign]
        malicious.joint_allowed = self._allowed


def run(parties: int, rows: int, points: int, layout: str, sessions: int, seed: int) -> None:
    rng = np.random.default_rng(seed)  # benchmark data only, not secret
    outcomes: Counter[str] = Counter()
    ratios_x: list[float] = []
    ratios_y: list[float] = []
    worst_x = worst_y = base = spread_over_tol = 0.0
    executions: Counter[int] = Counter()
    rotated = None
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(sessions):
        data = synthetic(parties, rows, rng)
        rec = Recorder()
        rec.install(LAYOUTS[layout])
        try:
            privfl.federated_auc(data, points, security="malicious")
            outcomes["accepted"] += 1
            spread_over_tol = max(spread_over_tol, rec.spread_over_tol)
        except (ProtocolError, InputError) as exc:
            outcomes[type(exc).__name__] += 1
        finally:
            if rec.seen:  # sizes as the parties computed them (with the forced rule)
                decoded, view = rec.seen[0]
                sizes = variant_module.Malicious.sizes(view.config, view.policy)  # type: ignore[attr-defined]
            rec.uninstall()
        if not rec.seen:
            continue
        rotated = sizes.rotated
        sigma_x, sigma_y = sizes.sigma_products()
        cs = rec.cs[-len(decoded) :]
        key, index = view.key, view.index  # type: ignore[attr-defined]
        for err_x, err_y in execution_errors(data, points, decoded, cs, key, index, sizes):
            ratios_x.append(err_x / sigma_x)
            ratios_y.append(err_y / sigma_y)
            worst_x, worst_y = max(worst_x, err_x), max(worst_y, err_y)
        b = 2.0 ** (sizes.mask_bits + 3)
        base = 2.0**-53 * parties * sizes.slots_used * b * b
        executions[len(decoded)] += 1
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    refused = {k: v for k, v in outcomes.items() if k != "accepted"}

    def stats(r: list[float]) -> str:
        if not r:
            return "n/a"
        return f"max {max(r):6.3f} rms {math.sqrt(np.mean(np.square(r))):6.3f}"

    print(
        f"{parties}x{rows}xN={points} {layout:8s} rotated {rotated}  sessions {sessions}  "
        f"accepted {outcomes['accepted']} refused {refused}  "
        f"|err X/c|/sigma_x {stats(ratios_x)}  |err Y/c|/sigma_y {stats(ratios_y)}  "
        f"max |err| X/c {worst_x:.1e} ({worst_x / max(base, 1e-300):.3f} coherent scale) "
        f"Y/c {worst_y:.1e} ({worst_y / max(base, 1e-300):.3f})  "
        f"max spread/tol {spread_over_tol:.3f}  executions {dict(sorted(executions.items()))}  "
        f"{wall / sessions:.1f} s/session (cpu {cpu / sessions:.1f})  "
        f"load {os.getloadavg()[0]:.1f}",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--settings", default="64x100x100,2x1000x100")
    ap.add_argument("--sessions", type=int, default=4)
    ap.add_argument("--layouts", default="separate,joint,plan")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    print(f"single keys (TenSEAL)  load average {os.getloadavg()} (2 cores shared)", flush=True)
    for setting in args.settings.split(","):
        parties, rows, points = (int(v) for v in setting.split("x"))
        for layout in args.layouts.split(","):
            run(parties, rows, points, layout, args.sessions, args.seed)


if __name__ == "__main__":
    main()
