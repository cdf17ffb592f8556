"""Measured error of a malicious threshold curve reply against its noise model (issue 27).

For each setting (parties x rows per party x N decision points) runs ``--sessions`` honest
sessions of :func:`privfl.metrics.roc_curve` with ``security="malicious", keys="threshold"``
and every other option at its default (T and F in one upload ciphertext when they fit,
:class:`~privfl.evaluation.fhauc.layout.CurveLayout`), and for every execution compares what
the parties decode with the exact values, which this harness (not any role) computes from the
plaintext counts, the execution's multipliers and the aggregator's ``c``: position ``p`` of
the joined, unpermuted reply is ``c r_p V_p`` (``V``: the global TP then FP counts at the
N-1 points; the zero-sum masks cancel). It prints, per setting:

* the largest and the RMS of ``|error of joined_p / c| / slot_sigma`` (``slot_sigma``:
  :func:`privfl.evaluation.fhauc.threshold.curve.slot_sigma`, the per-position std the
  verification uses; the tolerance is ``TOLERANCE_SIGMAS = 10`` of the normalised sigma on
  a difference of executions, so a bounded model has the largest ratio well below 5);
* the largest ``|error|`` in count units, and in units of the encoding error scale
  ``sqrt(S M) 2^-51 B`` (``B = 2^(mask_bits+3)``, threshold.noise.encoding_error) and of the
  decoding term ``sqrt(S) M 2^(V-50)`` the model holds;
* ``|error of u| / sigma_u`` for the normalised coordinates (``sigma_u``:
  :func:`privfl.evaluation.fhauc.curve.sigma_normalised` at the session's real total), the
  largest spread of the executions over the tolerance, and the refusals.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python benchmarks/threshold_curve_noise.py \
        [--settings 2x1000x100,3x2000x3,8x800x4096] [--sessions 4] [--default-ring]
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before OpenFHE loads

import argparse
import math
import time
from collections import Counter

import numpy as np

import privfl
from _noise_harness import MultiplierRecorder, choose_ring, execution_multipliers, synthetic
from privfl.errors import InputError, ProtocolError
from privfl.evaluation.fhauc import curve as curve_module
from privfl.evaluation.fhauc.threshold import curve as threshold_curve
from privfl.evaluation.fhauc.threshold import noise
from privfl.evaluation.fhauc.threshold.plan import plan as threshold_plan
from privfl.evaluation.statistics import interior_thresholds, party_counts


class Recorder(MultiplierRecorder):
    """Records the aggregator's multipliers and what one party decodes (benchmark only)."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[list, object, float | None]] = []
        self.spread_over_tol = 0.0
        self._recover = curve_module.recover

    def install(self) -> None:
        rec = self

        def recover(decoded, own_total, view, slot_sigma=None):  # type: ignore[no-untyped-def]
            out = rec._recover(decoded, own_total, view, slot_sigma)
            if not rec.seen:
                rec.seen.append((list(decoded), view, slot_sigma))
                rec.spread_over_tol = out.spread / out.tolerance
            return out

        self.record_multipliers()
        curve_module.recover = recover

    def uninstall(self) -> None:
        self.restore_multipliers()
        curve_module.recover = self._recover


def run(parties: int, rows: int, points: int, sessions: int, seed: int) -> None:
    rng = np.random.default_rng(seed)  # benchmark data only, not secret
    outcomes: Counter[str] = Counter()
    ratios: list[float] = []
    norm_ratios: list[float] = []
    worst = worst_enc = worst_dec = spread_over_tol = 0.0
    executions: Counter[int] = Counter()
    joint = None
    cpu, wall = time.process_time(), time.perf_counter()
    interior = interior_thresholds(points)
    for _ in range(sessions):
        data = synthetic(parties, rows, rng)
        rec = Recorder()
        rec.install()
        try:
            privfl.metrics.roc_curve(data, points, security="malicious", keys="threshold")
            outcomes["accepted"] += 1
            spread_over_tol = max(spread_over_tol, rec.spread_over_tol)
        except (ProtocolError, InputError) as exc:
            outcomes[type(exc).__name__] += 1
        finally:
            rec.uninstall()
        if not rec.seen:
            continue
        decoded, view, slot_sigma = rec.seen[0]
        config, policy = view.config, view.policy  # type: ignore[attr-defined]
        sz = curve_module.sizes(config, policy)
        counts = [party_counts(s, y, interior) for s, y in data]
        tp = sum(c.tp for c in counts).astype(np.float64)
        fp = sum(c.fp for c in counts).astype(np.float64)
        v = np.concatenate([tp[1:], fp[1:]])
        total = tp[-1] + fp[-1]
        sigma_u = curve_module.sigma_normalised(config, policy, float(total), slot_sigma)
        enc = math.sqrt(sz.splits * parties) * noise.encoding_error(sz)
        dec = math.sqrt(sz.splits) * 2.0 ** (
            threshold_curve.value_bits(config, policy) - threshold_curve.DECODE_RELATIVE_BITS
        )
        lanes = threshold_plan(config, policy).layout.lanes  # executions side by side share c
        cs = execution_multipliers(rec.cs, len(decoded), lanes)
        for e, ((t_slots, f_slots), c) in enumerate(zip(decoded, cs, strict=True)):
            rnd = curve_module.derive(view.key, e, view.index, sz)  # type: ignore[attr-defined]
            joined = curve_module.unpermute_and_join(
                np.concatenate([t_slots, f_slots]), sz.splits, rnd.perm
            )
            err = joined / c - rnd.r * v
            ratios.extend(np.abs(err) / slot_sigma)
            worst = max(worst, float(np.max(np.abs(err))))
            u = joined / rnd.r
            u = u / (u[points - 2] + u[-1])
            exact_u = v / total
            norm_ratios.append(float(np.max(np.abs(u - exact_u))) / sigma_u)
        worst_enc, worst_dec = worst / enc, worst / dec
        executions[len(decoded)] += 1
        joint = threshold_curve_layout_joint(config, policy)
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    refused = {k: v for k, v in outcomes.items() if k != "accepted"}
    r = np.asarray(ratios)
    stats = f"max {r.max():6.3f} rms {math.sqrt(np.mean(r**2)):6.3f}" if r.size else "n/a"
    nr = f"{max(norm_ratios):6.3f}" if norm_ratios else "n/a"
    print(
        f"{parties}x{rows}xN={points}  joint {joint}  sessions {sessions}  "
        f"accepted {outcomes['accepted']} refused {refused}  "
        f"|err|/slot_sigma {stats}  max |err| {worst:.2e} count units "
        f"({worst_enc:.3f} x encoding sqrt(SM)2^-51 B, {worst_dec:.3f} x decode term)  "
        f"max |err u|/sigma_u {nr}  max spread/tol {spread_over_tol:.3f}  "
        f"executions {dict(sorted(executions.items()))}  "
        f"{wall / sessions:.1f} s/session (cpu {cpu / sessions:.1f})  "
        f"load {os.getloadavg()[0]:.1f}",
        flush=True,
    )


def threshold_curve_layout_joint(config: object, policy: object) -> bool:
    from privfl.evaluation.fhauc.threshold.plan import plan

    layout = plan(config, policy).layout  # type: ignore[arg-type]
    return bool(getattr(layout, "joint", False))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--settings", default="2x1000x100,3x2000x3,8x800x4096")
    ap.add_argument("--sessions", type=int, default=4)
    ap.add_argument("--default-ring", action="store_true")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    choose_ring(args.default_ring)
    for setting in args.settings.split(","):
        parties, rows, points = (int(v) for v in setting.split("x"))
        run(parties, rows, points, args.sessions, args.seed)


if __name__ == "__main__":
    main()
