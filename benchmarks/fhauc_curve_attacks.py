"""Detection rates of deviating aggregators in the ``curve`` reveal, over many seeds: the
measured counterpart of the per-coordinate guarantee argued in
:mod:`privfl.evaluation.fhauc.curve` (as ``benchmarks/fhauc_attacks.py`` does for the AUC).

    .venv/bin/python benchmarks/fhauc_curve_attacks.py [--seeds 50] [--json OUT]
    .venv/bin/python benchmarks/fhauc_curve_attacks.py --keys threshold [--seeds 10]

``--keys threshold`` runs the same attacks with threshold keys (OpenFHE's ``"fhauc"`` set,
in process through ``privfl.metrics.roc_curve``, whose in-process run derives ``min_pairs``
from the data): the three executions then sit side by side in one ciphertext group (the
lanes layout of :class:`privfl.evaluation.fhauc.layout.CurveLayout`), and ``CycleLanes``
shows every execution another's reply. ``SwapExecutions`` rewrites the single-key result
message and is left out. Detected there means the session output no curve (a party refused
with a typed error).

Each seed provisions a fresh deployment (3 parties x 1000 samples, N = 50, S = 4,
malicious, a tight size bound and min_pairs = 10^6, default K = 3 executions) and runs one
session per attack with a fresh aggregator:

* every tamper of ``curve_tamper.CURVE_TAMPERS`` at its own size (dropping, duplicating,
  swapping or replaying uploads; FP doubled; T and F swapped; a share moved by 10^3;
  executions swapped; the T sum rotated);
* ``ScaleFalsePositivesEverywhere`` (F ciphertexts x (1 + eps), T x 1, every execution) and
  ``AddToOneSlotEverywhere`` (slot 0 of T + eps·c·total, every execution, the total given
  as an oracle) for eps = 1e-7 .. 1e-3, and 1e-9, 1e-11 to find where detection stops.

An attack is detected when every party refuses (typed error) and none outputs a curve. For
accepted runs the largest error of any revealed coordinate against the plaintext binned
curve is printed (the honest sessions' error for comparison).
"""

from __future__ import annotations

import argparse
import json
import os
import time

import numpy as np

import privfl.metrics as pm
from privfl.crypto import keywrap
from privfl.errors import PrivflError
from privfl.evaluation import fhauc
from privfl.evaluation.fhauc import curve_tamper, roles
from privfl.evaluation.fhauc.reveal import Reveal

N, S, M, SIZE = 50, 4, 3, 1000
EPSILONS = (1e-11, 1e-9, 1e-7, 1e-6, 1e-5, 1e-4, 1e-3)


def data(seed: int) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)  # not secret: benchmark data
    out = []
    for _ in range(M):
        y = rng.integers(0, 2, SIZE).astype(np.int8)
        out.append((np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1), y))
    return out


class Site:
    """A hand-wired deployment of M parties sharing one provisioning (curve consent)."""

    def __init__(self, seed: int) -> None:
        self.names = [f"p{i}" for i in range(M)]
        ids = {n: keywrap.IdentityKey() for n in self.names}
        roster = {n: k.public_bytes for n, k in ids.items()}
        policy = fhauc.Policy(fhauc.Security.MALICIOUS, max_samples_per_party=1024,
                              max_points=N, max_splits=S, min_pairs=10**6)  # fmt: skip
        self.public, bundles = fhauc.KeyHolder("p0", ids["p0"], roster).provision(policy)
        self.data = data(seed)
        ref = pm.binned_reference(self.data, N)
        self.reference = np.concatenate([ref.tp, ref.fp])
        self.parties = []
        for n, (s, y) in zip(self.names, self.data, strict=True):
            p = roles.make_party("single", n, ids[n], roster, "p0", s, y, reveal=Reveal.CURVE)
            p.receive_bundle(bundles[n])
            self.parties.append(p)

    def run(self, agg: fhauc.Aggregator) -> tuple[bool, float]:
        """(detected, largest coordinate error of an accepted curve)."""
        agg.receive_setup(self.public)
        config = agg.start_session(self.names, N, security="malicious", splits=S,
                                   reveal="curve")  # fmt: skip
        start = agg.collect_joins({p.name: p.join(config) for p in self.parties})
        result = agg.handle_uploads({p.name: p.upload(start) for p in self.parties})
        errors, refused = [], 0
        for p in self.parties:
            try:
                c = p.finish(result).outcome.curve
            except PrivflError:
                refused += 1
                continue
            assert c is not None
            errors.append(float(np.max(np.abs(np.concatenate([c.tp, c.fp]) - self.reference))))
        return refused == len(self.parties), max(errors, default=0.0)


def run_threshold(
    parties: list[tuple[np.ndarray, np.ndarray]], agg: fhauc.Aggregator
) -> tuple[bool, float]:
    """(detected, largest coordinate error of an accepted curve) with threshold keys."""
    try:
        res = pm.roc_curve(
            parties, N, keys="threshold", security="malicious", splits=S, aggregator=agg
        )
    except PrivflError:
        return True, 0.0
    ref = pm.binned_reference(parties, N)
    got = np.concatenate([res.curve.tp, res.curve.fp])
    return False, float(np.max(np.abs(got - np.concatenate([ref.tp, ref.fp]))))


def attacks(keys: str = "single") -> dict[str, object]:
    out: dict[str, object] = {"honest": fhauc.Aggregator}
    fixed = [c for c in curve_tamper.CURVE_TAMPERS if c not in curve_tamper.EPSILON_TAMPERS]
    if keys == "threshold":  # it rewrites the single-key Result message
        fixed = [c for c in fixed if c is not curve_tamper.SwapExecutions]
    out |= {c.__name__: c for c in fixed}
    for cls in curve_tamper.EPSILON_TAMPERS:
        for eps in EPSILONS:
            out[f"{cls.__name__} eps={eps:g}"] = (cls, eps)
    return out


def build(spec: object) -> fhauc.Aggregator:
    if isinstance(spec, tuple):
        cls, eps = spec
        agg = cls(eps)
        if isinstance(agg, curve_tamper.AddToOneSlotEverywhere):
            agg.total = float(M * SIZE)
        return agg
    return spec()  # type: ignore[operator, no-any-return]


def report(
    specs: dict[str, object],
    caught: dict[str, int],
    worst: dict[str, float],
    seeds: int,
    seconds: float,
) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    for name in specs:
        out[name] = {"detected": caught[name], "seeds": seeds, "worst_accepted_error": worst[name]}
        print(
            f"{name:<42} detected {caught[name]:>3}/{seeds}; worst accepted "
            f"max|curve - binned| {worst[name]:.1e}",
            flush=True,
        )
    print(
        f"N={N} S={S} M={M} x {SIZE} samples, K=3 executions, {seeds} seeds; {seconds:.0f} s; "
        f"load average {'/'.join(f'{x:.2f}' for x in os.getloadavg())}",
        flush=True,
    )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, default=50)
    ap.add_argument("--every", type=int, default=10, help="print the table every k seeds")
    ap.add_argument("--json")
    ap.add_argument("--keys", default="single", choices=("single", "threshold"))
    args = ap.parse_args()
    specs = attacks(args.keys)
    caught = dict.fromkeys(specs, 0)
    worst = dict.fromkeys(specs, 0.0)
    start = time.perf_counter()
    out: dict[str, dict[str, float]] = {}
    for seed in range(args.seeds):
        site = Site(seed) if args.keys == "single" else None
        for name, spec in specs.items():
            if site is None:
                detected, error = run_threshold(data(seed), build(spec))
            else:
                detected, error = site.run(build(spec))
            caught[name] += detected
            worst[name] = max(worst[name], 0.0 if detected else error)
        if (seed + 1) % args.every == 0 or seed + 1 == args.seeds:
            out = report(specs, caught, worst, seed + 1, time.perf_counter() - start)
            if args.json:
                with open(args.json, "w") as fh:
                    json.dump(out, fh, indent=2)
                    fh.write("\n")  # a JSON file ends with a newline


if __name__ == "__main__":
    main()
