"""Honest-session acceptance of the malicious FHAUC variant with default settings (issue 27).

For each setting (keys, reveal, parties x rows per party, decision points N, positive
rate), runs ``--sessions`` honest sessions, each on freshly drawn synthetic data and with
fresh session randomness, through :func:`privfl.federated_auc` (``reveal=auc``) or
:func:`privfl.metrics.roc_curve` (``reveal=curve``) with every option at its default, and
prints how many were accepted and why the others were refused (the error class and one
message), the largest deviation of the accepted AUC (curve reveal: the curve's AUC) from the
binned reference, and (AUC reveal) the executions the sizing chose. Settings ``{keys}-{reveal}-
...`` are the corners of issue 27's range (2 x 100 rows at N = 3, 2 x 10^6 rows, 1,000 x 100
rows, N = 4,096, a guarantee of 2^-20, and the real Adult test scores: split over 8 parties,
or resampled to 8 x 57,000 rows, the size of the issue's click-data sessions, 456,000 rows,
which the project does not hold).

    OMP_NUM_THREADS=1 nice -n 10 .venv/bin/python benchmarks/fhauc_acceptance.py \
        [--sessions 1000] [--settings single-auc-3x2000,...] [--fast-threshold]

``--random K`` instead draws K honest sessions at random over the range (keys, reveal, 2 to
64 parties and 100 to 10^6 rows per party log-uniformly with at most 4 x 10^6 rows in all,
N = 3 to 4,096 log-uniformly, 5 to 95 % positives, the guarantee 2^-8 or, one draw in five,
2^-20), with every other option at its default, and counts the sessions accepted, those
refused at join naming a setting (the join check's ``InsufficientPrecisionError`` or
``WeakGuaranteeError``, "refused before upload: ...": allowed by the issue) and the other
refusals (counted against the stated rate of 1 in 1,000); one line per refusal names its
draw.

``--fast-threshold`` runs threshold keys on the insecure ``fhauc-test`` ring (2^12) instead
of the default ``fhauc`` set (ring 2^14); the acceptance logic is the same, only the noise
figures differ.
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before OpenFHE loads

import argparse
import time
from collections import Counter
from dataclasses import dataclass

import numpy as np

import privfl
import privfl.metrics as pm
from privfl.errors import InputError, InsufficientPrecisionError, ProtocolError
from privfl.evaluation.fhauc.threshold import ops as threshold_ops


@dataclass(frozen=True)
class Setting:
    name: str
    keys: str
    reveal: str
    parties: int
    rows: int
    n_points: int
    rate: float
    bits: float = 8.0  # the guarantee each party asks: 2^-bits
    data: str = "synthetic"  # or "adult": Adult test scores split over the parties (rows
    # ignored), or "adult-boot": rows per party resampled from those real scores


def corners() -> list[Setting]:
    """The corners of issue 27's range, both keys and both malicious reveals."""
    out = []
    for keys in ("single", "threshold"):
        for reveal in ("auc", "curve"):
            k = f"{keys}-{reveal}"
            out += [
                Setting(f"{k}-2x100-N3", keys, reveal, 2, 100, 3, 0.5),
                Setting(f"{k}-2x1000000", keys, reveal, 2, 10**6, 100, 0.3),
                Setting(f"{k}-1000x100", keys, reveal, 1000, 100, 100, 0.3),
                Setting(f"{k}-3x2000-N4096", keys, reveal, 3, 2000, 4096, 0.3),
                Setting(f"{k}-3x2000-g20", keys, reveal, 3, 2000, 100, 0.3, 20.0),
                Setting(f"{k}-adult-8", keys, reveal, 8, 0, 100, 0.0, 8.0, "adult"),
                Setting(f"{k}-adult-8x57000", keys, reveal, 8, 57_000, 100, 0.0, 8.0, "adult-boot"),
            ]
    return out


SETTINGS = {
    s.name: s
    for s in [
        *corners(),
        Setting("single-auc-3x2000", "single", "auc", 3, 2000, 100, 0.3),
        Setting("single-auc-8x800", "single", "auc", 8, 800, 100, 0.3),
        Setting("single-auc-2x100-N50", "single", "auc", 2, 100, 50, 0.5),
        # from 64 parties the malicious upload is one ciphertext per execution (joint layout)
        Setting("single-auc-64x100", "single", "auc", 64, 100, 100, 0.3),
        Setting("single-curve-3x2000", "single", "curve", 3, 2000, 100, 0.3),
        Setting("threshold-auc-3x2000", "threshold", "auc", 3, 2000, 100, 0.3),
        Setting("threshold-auc-8x800", "threshold", "auc", 8, 800, 100, 0.3),
        # issue 27's large-party bug: the smallest sizes that were refused after decryption
        Setting("threshold-curve-2x9000", "threshold", "curve", 2, 9000, 100, 0.3),
        Setting("threshold-curve-2x20000", "threshold", "curve", 2, 20_000, 100, 0.3),
        Setting("threshold-curve-2x131072", "threshold", "curve", 2, 131_072, 100, 0.3),
        Setting("threshold-auc-2x800000", "threshold", "auc", 2, 800_000, 100, 0.3),
    ]
}


def synthetic(parties: int, rows: int, rate: float, rng: np.random.Generator) -> list:
    out = []
    for _ in range(parties):
        y = (rng.random(rows) < rate).astype(np.int8)
        out.append((np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1), y))
    return out


ADULT: list[tuple[np.ndarray, np.ndarray]] = []


def adult(setting: Setting, rng: np.random.Generator) -> list:
    """Real Adult test scores (16,281 rows): split over the parties in a fresh random order,
    or (``adult-boot``) ``rows`` per party resampled with replacement."""
    if not ADULT:
        from privfl.datasets import adult_scores

        ADULT.append(adult_scores())
    scores, labels = ADULT[0]
    if setting.data == "adult":
        order = rng.permutation(scores.size)
        return [(scores[i], labels[i]) for i in np.array_split(order, setting.parties)]
    picks = [rng.integers(0, scores.size, setting.rows) for _ in range(setting.parties)]
    return [(scores[i], labels[i]) for i in picks]


def run(setting: Setting, sessions: int, seed: int) -> None:
    rng = np.random.default_rng(seed)  # benchmark data only, not secret
    outcomes: Counter[str] = Counter()
    worst, executions = 0.0, Counter[int]()
    reasons: dict[str, str] = {}
    cpu = time.process_time()
    start = time.perf_counter()
    for _ in range(sessions):
        if setting.data == "synthetic":
            data = synthetic(setting.parties, setting.rows, setting.rate, rng)
        else:
            data = adult(setting, rng)
        options = {"security": "malicious", "keys": setting.keys}
        options["min_guarantee_bits"] = setting.bits
        try:
            if setting.reveal == "auc":
                res = privfl.federated_auc(data, setting.n_points, **options)
                value, executions[res.executions] = res.auc, executions[res.executions] + 1
            else:
                curve = pm.roc_curve(data, setting.n_points, **options)
                if curve.run["verified"] is not True:
                    raise ProtocolError("the curve was not verified")
                value = curve.auc
            worst = max(worst, abs(value - privfl.binned_auc(data, setting.n_points)))
            outcomes["accepted"] += 1
        except (ProtocolError, InputError) as exc:
            outcomes[type(exc).__name__] += 1
            reasons[type(exc).__name__] = str(exc)[:160]
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    refused = sessions - outcomes["accepted"]
    print(
        f"{setting.name:24s} sessions {sessions:5d}  accepted {outcomes['accepted']:5d}  "
        f"refused {refused:4d} {dict((k, v) for k, v in outcomes.items() if k != 'accepted')}  "
        f"max |auc - binned| {worst:.1e}  executions {dict(sorted(executions.items()))}  "
        f"{seconds / sessions:.2f} s/session (cpu {cpu / sessions:.2f})  "
        f"load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    for name, reason in reasons.items():
        print(f"    {name}: {reason}", flush=True)


RANDOM_LOG = "random draw"
# how every party's join check (single and threshold keys, AUC and curve) words its refusal;
# the InsufficientPrecisionError and WeakGuaranteeError after decryption do not start so
AT_JOIN = "refused before upload"


def count_other_refusal(counts: Counter[str], k: int, setting: Setting, exc: Exception) -> None:
    """Count and print a refusal that is not the join check's (any other error, at any step,
    counts against the stated rate)."""
    counts["refused after join"] += 1
    print(f"    {RANDOM_LOG} {k}: {setting.name} REFUSED AFTER JOIN "
          f"({type(exc).__name__}): {str(exc)[:200]}", flush=True)  # fmt: skip


def draw(rng: np.random.Generator) -> tuple[Setting, int]:
    """One random honest setting of the range (see the module's docstring) and a data seed."""
    parties = round(float(np.exp(rng.uniform(np.log(2), np.log(64)))))
    rows = round(float(np.exp(rng.uniform(np.log(100), np.log(10**6)))))
    rows = min(rows, 4_000_000 // parties)
    n_points = round(float(np.exp(rng.uniform(np.log(3), np.log(4096)))))
    keys = str(rng.choice(["single", "threshold"]))
    reveal = str(rng.choice(["auc", "curve"]))
    bits = 20.0 if rng.random() < 0.2 else 8.0
    rate = float(rng.uniform(0.05, 0.95))
    name = f"{keys}-{reveal}-{parties}x{rows}-N{n_points}-r{rate:.2f}-g{bits:g}"
    seed = int(rng.integers(2**32))
    return Setting(name, keys, reveal, parties, rows, n_points, rate, bits), seed


def run_random(sessions: int, seed: int) -> None:
    """``sessions`` random honest sessions; refusals at join (naming a setting) are counted
    apart from refusals after it."""
    rng = np.random.default_rng(seed)  # benchmark draws only, not secret
    counts: Counter[str] = Counter()
    worst, cpu, start = 0.0, time.process_time(), time.perf_counter()
    for k in range(1, sessions + 1):
        setting, data_seed = draw(rng)
        data = synthetic(setting.parties, setting.rows, setting.rate,
                         np.random.default_rng(data_seed))  # fmt: skip
        if sum(int(y.sum()) for _, y in data) in (0, setting.parties * setting.rows):
            counts["one class only (not a session)"] += 1
            continue
        options = {"security": "malicious", "keys": setting.keys,
                   "min_guarantee_bits": setting.bits}  # fmt: skip
        try:
            if setting.reveal == "auc":
                value = privfl.federated_auc(data, setting.n_points, **options).auc
            else:
                curve = pm.roc_curve(data, setting.n_points, **options)
                if curve.run["verified"] is not True:
                    raise ProtocolError("the curve was not verified")
                value = curve.auc
            worst = max(worst, abs(value - privfl.binned_auc(data, setting.n_points)))
            counts["accepted"] += 1
        except InsufficientPrecisionError as exc:
            if not str(exc).startswith(AT_JOIN):  # the same errors exist after decryption
                count_other_refusal(counts, k, setting, exc)
                continue
            counts["refused at join"] += 1
            print(f"    {RANDOM_LOG} {k}: {setting.name} refused at join: {str(exc)[:200]}",
                  flush=True)  # fmt: skip
        except (ProtocolError, InputError) as exc:
            count_other_refusal(counts, k, setting, exc)
        if k % 50 == 0 or k == sessions:
            print(
                f"random sessions {k:5d}  {dict(sorted(counts.items()))}  max |auc - binned| "
                f"{worst:.1e}  {(time.perf_counter() - start) / k:.2f} s/session (cpu "
                f"{(time.process_time() - cpu) / k:.2f})  load {os.getloadavg()[0]:.1f}",
                flush=True,
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=1000)
    ap.add_argument("--settings", default=",".join(SETTINGS))
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--fast-threshold", action="store_true")
    ap.add_argument("--random", type=int, default=0, metavar="K",
                    help="draw K random honest sessions over the range instead")  # fmt: skip
    args = ap.parse_args()
    if args.fast_threshold:
        threshold_ops.FHAUC_PARAMETER_SET = "fhauc-test"
    print(f"load average {os.getloadavg()} (2 cores shared)")
    if args.random:
        run_random(args.random, args.seed)
        return
    for name in args.settings.split(","):
        run(SETTINGS[name], args.sessions, args.seed)


if __name__ == "__main__":
    main()
