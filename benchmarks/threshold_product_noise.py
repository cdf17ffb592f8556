"""Measured error of a malicious threshold AUC reply against the noise model (issue 27).

For each setting (parties x rows per party, N = 100 decision points) and each layout
(``folded``: T and F in two ciphertexts; ``joint``: one ciphertext, F = rot(sum, W) at the
aggregator; ``lanes``: two ciphertexts holding the executions side by side,
:mod:`privfl.evaluation.fhauc.layout`), runs ``--sessions`` honest sessions of
:func:`privfl.federated_auc` with ``security="malicious", keys="threshold"`` and every other
option at its default, and for
every execution compares what the parties decode with the exact values, which this harness
(not any role) computes from the plaintext counts, the execution's multipliers and the
aggregator's ``c``:

    X/c = r0 * 2 P N AUC_binned + r1 P N,      Y/c = r2 P N

It prints, per setting and layout, the largest ``|error|`` of ``X/c`` and ``Y/c`` (also in
units of the joint layout's coherent error scale ``2^-53 M S N B^2``,
:func:`privfl.evaluation.fhauc.threshold.noise.coherent_error`), the largest and the RMS of
``|error| / sigma`` for
``X/c`` and ``Y/c`` (``sigma`` from :func:`privfl.evaluation.fhauc.threshold.noise.sigma_products`,
which already includes the factor ``NOISE_CONSTANT = 2``), the largest spread of the
recovered AUCs over the tolerance, and how many sessions were refused and why. A model that
bounds the error has ``max |error| / sigma`` well below ``TOLERANCE_SIGMAS / 2 = 5`` (the
tolerance is 10 sigma on a difference of two executions).

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python benchmarks/threshold_product_noise.py \
        [--settings 2x1000,3x2000,8x800,64x100] [--sessions 6] [--layouts folded,joint,plan]
        [--default-ring]

``--layouts`` forces each layout (``folded``, ``joint``, ``lanes``) at every party count (the
plan's ``threshold.plan.session_layout`` is patched for the run only) or leaves the choice to
the plan (``plan``: lanes where four fit, else
:func:`privfl.evaluation.fhauc.threshold.plan.joint_pays`); the executions are
sized from the data as :func:`privfl.federated_auc` does, with the model of the used layout.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before OpenFHE loads

import argparse
import dataclasses
import math
import time
from collections import Counter

import numpy as np

import privfl
from _noise_harness import (
    MultiplierRecorder,
    choose_ring,
    execution_errors,
    execution_multipliers,
    synthetic,
)
from privfl.crypto.threshold.params import PARAMETER_SETS
from privfl.errors import InputError, ProtocolError
from privfl.evaluation.fhauc.threshold import noise
from privfl.evaluation.fhauc.threshold import plan as plan_module

N_POINTS = 100
LAYOUTS: dict[str, str | None] = {
    "folded": "folded", "joint": "joint", "lanes": "lanes", "jlanes": "jlanes", "plan": None
}  # fmt: skip
LAYOUT_NAMES = {v: k.ljust(6) for k, v in LAYOUTS.items()}


class Recorder(MultiplierRecorder):
    """Records the aggregator's multipliers and what one party decodes (benchmark only)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[list[tuple[float, float]], object, object]] = []
        self.lanes = 1  # the last plan's lanes
        self._recover = plan_module.ThresholdMalicious.recover
        self._layout = plan_module.session_layout
        self._plan = plan_module.plan

    def install(self, layout: str | None) -> None:
        rec = self

        def recover(variant, decoded, counts, view):  # type: ignore[no-untyped-def]
            rec.seen.append((list(decoded), view, variant))
            return rec._recover(variant, decoded, counts, view)

        def session_layout(params, parties, terms, joint=False, lanes=False):  # type: ignore[no-untyped-def]
            return rec._layout(
                params,
                parties,
                terms,
                joint=layout in ("joint", "jlanes"),
                lanes=layout in ("lanes", "jlanes"),
            )

        def plan(config, policy):  # type: ignore[no-untyped-def]
            out = rec._plan(config, policy)
            rec.lanes = out.layout.lanes
            return out

        self.record_multipliers()
        plan_module.ThresholdMalicious.recover = recover
        plan_module.plan = plan
        if layout is not None:
            plan_module.session_layout = session_layout

    def uninstall(self) -> None:
        self.restore_multipliers()
        plan_module.ThresholdMalicious.recover = self._recover
        plan_module.session_layout = self._layout
        plan_module.plan = self._plan


def run(
    parties: int, rows: int, joint: str | None, sessions: int, seed: int, points: int = N_POINTS
) -> None:
    rng = np.random.default_rng(seed)  # benchmark data only, not secret
    outcomes: Counter[str] = Counter()
    layouts: Counter[str] = Counter()
    ratios_x: list[float] = []
    ratios_y: list[float] = []
    worst_x = worst_y = 0.0
    base = 0.0
    spread_over_tol = 0.0
    executions: Counter[int] = Counter()
    cpu, wall = time.process_time(), time.perf_counter()
    for _ in range(sessions):
        data = synthetic(parties, rows, rng)
        rec = Recorder()
        rec.install(joint)
        try:
            res = privfl.federated_auc(data, points, security="malicious", keys="threshold")
            outcomes["accepted"] += 1
            executions[res.executions] += 1
            spread_over_tol = max(spread_over_tol, res.spread / res.tolerance)  # type: ignore[attr-defined]
        except (ProtocolError, InputError) as exc:
            outcomes[type(exc).__name__] += 1
        finally:
            rec.uninstall()
        if not rec.seen:
            continue
        decoded, view, variant = rec.seen[0]
        joint_used = variant.joint  # type: ignore[attr-defined]
        if rec.lanes > 1:
            used = "jlanes" if joint_used else "lanes"
        else:
            used = "joint" if joint_used else "folded"
        layouts[used] += 1
        config, policy = view.config, view.policy  # type: ignore[attr-defined]
        sizes = variant.sizes(config, policy)  # type: ignore[attr-defined]
        sigma_x, sigma_y = variant.sigma_products(sizes)  # type: ignore[attr-defined]
        cs = execution_multipliers(rec.cs, len(decoded), rec.lanes)
        key, index = view.key, view.index  # type: ignore[attr-defined]
        for err_x, err_y in execution_errors(data, points, decoded, cs, key, index, sizes):
            ratios_x.append(err_x / sigma_x)
            ratios_y.append(err_y / sigma_y)
            worst_x, worst_y = max(worst_x, err_x), max(worst_y, err_y)
        # the joint layout's coherent error in units of 2^-53 M S N B^2 (noise.coherent_error
        # without its constant)
        base = noise.coherent_error(sizes) / noise.COHERENT_CONSTANT
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    refused = {k: v for k, v in outcomes.items() if k != "accepted"}

    def stats(r: list[float]) -> str:
        if not r:
            return "n/a"
        return f"max {max(r):6.2f} rms {math.sqrt(np.mean(np.square(r))):6.2f}"

    print(
        f"{parties}x{rows:<7d} N={points:<4d} {LAYOUT_NAMES[joint]}  sessions {sessions:3d}  "
        f"layouts used {dict(layouts)}  "
        f"accepted {outcomes['accepted']:3d} refused {refused}  "
        f"|err X/c|/sigma_x {stats(ratios_x)}  |err Y/c|/sigma_y {stats(ratios_y)}  "
        f"max |err| X/c {worst_x:.1e} ({worst_x / max(base, 1e-300):.2f} base) "
        f"Y/c {worst_y:.1e} ({worst_y / max(base, 1e-300):.2f} base)  "
        f"max spread/tol {spread_over_tol:.2f}  executions {dict(sorted(executions.items()))}  "
        f"{wall / sessions:.1f} s/session (cpu {cpu / sessions:.1f})  "
        f"load {os.getloadavg()[0]:.1f}",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--settings", default="2x1000,3x2000,8x800,64x100")
    ap.add_argument("--sessions", type=int, default=6)
    ap.add_argument("--layouts", default="folded,joint,plan")
    ap.add_argument("--default-ring", action="store_true")
    ap.add_argument(
        "--batch", type=int, default=0, help="the fhauc set's batch (slots) for this run only"
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--points", type=int, default=N_POINTS, help="N, the decision points")
    args = ap.parse_args()
    choose_ring(args.default_ring)
    if args.batch:
        name = plan_module.fhauc_parameters().name
        PARAMETER_SETS[name] = dataclasses.replace(PARAMETER_SETS[name], batch_size=args.batch)
        print(f"{name} batch {args.batch}", flush=True)
    for setting in args.settings.split(","):
        parties, rows = (int(v) for v in setting.split("x"))
        for layout in args.layouts.split(","):
            run(parties, rows, LAYOUTS[layout], args.sessions, args.seed, args.points)


if __name__ == "__main__":
    main()
