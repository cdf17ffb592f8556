"""How close honest malicious threshold AUC replies come to the lead's shape check (issue 27).

The lead decodes every slot the plaintext holds (``ring / 2``: on the default set its whole
batch of 8,192 slots; a sparse batch repeats) and refuses a reply whose copies of a sparse
batch differ, or whose slots
stray from the honest shape, by more than the plan's tolerance
(:func:`privfl.evaluation.fhauc.shape.reply_shape_ok`, ``SHAPE_SIGMAS`` model standard
deviations), or whose imaginary parts (decoded by a twin context decoding COMPLEX) stray
from zero by more. For each setting this runs ``--sessions`` honest sessions of
:func:`privfl.federated_auc` (``keys="threshold"``, ``security="malicious"``, every other
option at its default, the default parameter set) and prints, over every reply, the largest
deviation from the honest shape, the largest difference between the copies and the largest
imaginary part, each as a fraction of the tolerance (1.0 would be a refused honest session),
the error against the binned reference and the load average.

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python benchmarks/threshold_reply_shape.py \
        [--settings 2x1000,3x300,20x200,100x100] [--thresholds 100] [--sessions 2]

``--reveal curve`` does the same for the malicious curve (``privfl.metrics.roc_curve``, T and
F in one ciphertext, the executions side by side:
:func:`privfl.evaluation.fhauc.shape.curve_reply_shape_ok`): ``shape/tol`` is then the
largest of the padding's and the unused lanes' distance from zero and the rotated reply's
distance from the first one rotated, and ``|err|`` the largest error of the curve.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before OpenFHE loads

import argparse
import time

import numpy as np

import privfl
import privfl.metrics
from _noise_harness import synthetic
from privfl.evaluation.fhauc import shape
from privfl.evaluation.fhauc.threshold import reveal

SEEN: list[tuple[float, float, float]] = []


def measuring_check(raw, layout, used, tolerance) -> bool:
    """The lead's check, recording the reply's margins: the largest distance of a used
    lane's slot (in the copies' mean) from its numerator (or numerator plus denominator) or
    of an empty lane's from zero, and the largest difference between the copies, each over
    the tolerance."""
    decoded = np.asarray(raw)
    copies = np.real(decoded).reshape(-1, layout.slots)
    rows = copies.mean(axis=0).reshape(-1, layout.lanes)
    ds, worst = layout.denominator_slot, 0.0
    for lane in range(layout.lanes):
        col = rows[:, lane]
        if lane >= used:
            worst = max(worst, float(np.abs(col).max()))
            continue
        num, both = col[ds + 1], col[ds]
        worst = max(worst, float(np.minimum(np.abs(col - num), np.abs(col - both)).max()))
    spread = float(np.abs(copies - copies[0]).max())
    imaginary = float(np.abs(np.imag(decoded)).max())
    SEEN.append((worst / tolerance, spread / tolerance, imaginary / tolerance))
    return shape.reply_shape_ok(raw, layout, used, tolerance)


def measuring_curve_check(raw, layout, used, tolerance) -> bool:
    """The lead's curve check (:func:`shape.curve_reply_shape_ok`), recording the reply's
    margins over the tolerance: the padding's and unused lanes' largest distance from zero
    and the rotated reply's from the first rotated (the larger of the two), the copies'
    largest difference and the largest imaginary part."""
    decoded = [np.asarray(r) for r in raw]
    copies = [np.real(d).reshape(-1, layout.slots) for d in decoded]
    summed, rotated = (c.mean(axis=0) for c in copies)
    keep = np.zeros(layout.slots, dtype=bool)
    for lane in range(used):
        lo = lane * layout.region
        keep[lo : lo + layout.terms] = True
        keep[lo + layout.f_rotation : lo + layout.f_rotation + layout.terms] = True
    padding = float(np.abs(summed[~keep]).max()) if (~keep).any() else 0.0
    moved = float(np.abs(rotated - np.roll(summed, -layout.f_rotation)).max())
    spread = max(float(np.abs(c - c[0]).max()) for c in copies)
    imaginary = max(float(np.abs(np.imag(d)).max()) for d in decoded)
    SEEN.append((max(padding, moved) / tolerance, spread / tolerance, imaginary / tolerance))
    return shape.curve_reply_shape_ok(raw, layout, used, tolerance)


def run_once(data: list, n: int, curve: bool) -> float:
    """One honest session; its largest error against the binned reference."""
    if not curve:
        res = privfl.federated_auc(data, n, keys="threshold", security="malicious")
        return abs(res.auc - privfl.binned_auc(data, n))
    roc = privfl.metrics.roc_curve(data, n, keys="threshold", security="malicious")
    ref = privfl.metrics.binned_reference(data, n)
    return max(
        float(np.max(np.abs(roc.tpr - ref.tp / ref.tp[-1]))),
        float(np.max(np.abs(roc.fpr - ref.fp / ref.fp[-1]))),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--settings", default="2x1000,3x300,20x200,100x100")
    ap.add_argument("--thresholds", type=int, default=100)
    ap.add_argument("--sessions", type=int, default=2)
    ap.add_argument("--reveal", default="auc", choices=("auc", "curve"))
    args = ap.parse_args()
    # the lead's module looks the checks up there
    reveal.reply_shape_ok = measuring_check
    reveal.curve_reply_shape_ok = measuring_curve_check
    print(
        f"{'setting':>9} {'N':>5} {'session':>7} {'shape/tol':>9} {'copies/tol':>10} "
        f"{'imag/tol':>8} {'|err|':>8} {'wall s':>6} {'load':>15}"
    )
    for setting in args.settings.split(","):
        parties, rows = (int(v) for v in setting.split("x"))
        for k in range(args.sessions):
            data = synthetic(parties, rows, np.random.default_rng(1000 * parties + k))
            SEEN.clear()
            start = time.perf_counter()
            err = run_once(data, args.thresholds, args.reveal == "curve")
            wall = time.perf_counter() - start
            worst, spread, imaginary = (max(row[i] for row in SEEN) for i in range(3))
            load = "/".join(f"{v:.2f}" for v in os.getloadavg())
            print(
                f"{setting:>9} {args.thresholds:>5} {k + 1:>7} {worst:>9.3f} {spread:>10.3f} "
                f"{imaginary:>8.3f} {err:>8.1e} {wall:>6.1f} {load:>15}",
                flush=True,
            )


if __name__ == "__main__":
    main()
