"""Threshold FHAUC next to single-key FHAUC (issue 16), N = 100, 100 samples per party.

Per number of parties and key mode, one run each in the same process: the aggregator's time
for the session (``agg s``: checking and parsing the uploads, the unchanged aggregation,
building the decryption requests; threshold: plus summing the decryption shares and relaying
the reveal), its key-generation time (threshold only: both rounds and the key checks; the
joint keys are generated in every session), each
party's traffic beyond setup (up + down: join, upload, decryption and result messages; the
lead party's separately), and setup traffic per party (threshold: the key-generation rounds,
the key checks and the relinearisation share; single key: the wrapped key bundle).
``agg cpu`` is the aggregator's CPU time for the same steps as ``agg s`` (what its work
costs whatever else runs on the machine): its process's, plus with single keys what its upload
helper processes spent on the session's uploads (as the pool measures it, ``worker_cpu``);
each threshold row's ratio line gives both.

    nice -n 10 .venv/bin/python benchmarks/fhauc_threshold.py \
        [--parties 15,100,1000] [--security semi-honest] [--busy 1] [--sessions 1]
    nice -n 10 .venv/bin/python benchmarks/fhauc_threshold.py --parties 100 \
        --reveal curve,metrics [--security malicious]

``--reuse S`` runs S threshold sessions with one key set (issue 27, item 4): session 1
generates it, the next ones reuse it (no key generation) while the parties' decryption budget
lasts: per session the aggregator's session and key-generation wall and CPU time, each
party's total traffic (setup + session, up + down; the largest party), the decryption shares
each party has spent and the error against the binned reference.

    nice -n 10 .venv/bin/python benchmarks/fhauc_threshold.py --parties 100 --reuse 2 \
        [--security malicious] [--reveal curve|metrics]

``--table`` prints every combination keys x security x reveal (12 rows per party count, one
session each) with the threshold / single-key aggregator ratio per pair (issue 27's reach: at
most 2x):

    nice -n 10 .venv/bin/python benchmarks/fhauc_threshold.py --table --parties 100

``--reveal curve,metrics`` measures those reveals instead (``privfl.metrics.roc_curve`` at
N = 100, ``threshold_metrics`` at t = 0.5), single key next to threshold keys: the
aggregator's wall and CPU time, the upload per party, the setup traffic per party
(threshold: the key rounds; single key: the wrapped key bundle), the largest error against
the binned plaintext reference, wall and process CPU time of the whole run.

No OpenMP variable needs to be set: privfl chooses OpenFHE's threading itself
(:mod:`privfl.crypto.threshold.threads`; the line ``OpenMP:`` says what it chose). ``--busy K``
runs K competing CPU-bound processes during the measurement (what a user's busy machine looks
like); ``--sessions S`` runs S threshold sessions per row (the first one in a process pays
the one-off costs), each reported against the single-key aggregator.

All parties run in this one process, one after the other (the aggregator adds each key share
as it arrives, so it never holds ``M`` of them); ``peak GB`` is the process's peak resident
memory so far (all roles of every row up to this one).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import resource
import time
from typing import Any

import numpy as np

import privfl
import privfl.evaluation.fhauc.reveal
import privfl.metrics as pm
from privfl.crypto.threshold import ThresholdContext, parameter_set

AGG_CPU = [0.0]  # the aggregator's process CPU seconds in the current run (rows())


def count_aggregator_cpu() -> None:
    """Make every in-process runner add its aggregator steps' process CPU time to
    :data:`AGG_CPU` (the AUC result reports wall time only): CPU time is what the
    aggregator's work costs whatever else runs on the machine."""
    from privfl.runner import InProcessRunner

    plain = InProcessRunner.run

    def run(self, key, fn, *args, **kwargs):  # type: ignore[no-untyped-def]
        c0 = time.process_time()
        try:
            return plain(self, key, fn, *args, **kwargs)
        finally:
            if key == "aggregator":
                AGG_CPU[0] += time.process_time() - c0
                if getattr(fn, "__name__", "") == "handle_uploads":
                    # the single-key aggregator's upload helper processes, as the pool
                    # measured them for this step's jobs (0 without helpers)
                    AGG_CPU[0] += getattr(getattr(fn, "__self__", None), "worker_cpu", 0.0)

    InProcessRunner.run = run  # type: ignore[method-assign]


def spin() -> None:
    while True:  # a competing CPU-bound process
        pass


def synthetic(parties: int, size: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)  # not secret: benchmark data
    out = []
    for _ in range(parties):
        y = rng.integers(0, 2, size).astype(np.int8)
        out.append((np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1), y))
    return out


def peak_gb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB on Linux


def mb(x: float) -> str:
    return f"{x / 1e6:.2f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parties", default="15,100,1000")
    ap.add_argument("--security", default="semi-honest")
    ap.add_argument("--busy", type=int, default=0, help="competing CPU-bound processes")
    ap.add_argument("--sessions", type=int, default=1, help="threshold sessions per row")
    ap.add_argument("--reveal", default="auc", help="auc, or a list of curve,metrics")
    ap.add_argument("--reuse", type=int, default=0, help="sessions on one kept key set")
    ap.add_argument("--table", action="store_true", help="all 12 keys x security x reveal")
    ap.add_argument("--table-security", default="semi-honest,malicious", help="--table rows")
    args = ap.parse_args()
    if args.table:
        table_rows(args)
        return
    if args.reuse:
        reuse_rows(args)
        return
    busy = [multiprocessing.Process(target=spin, daemon=True) for _ in range(args.busy)]
    for b in busy:
        b.start()
    try:
        if args.reveal == "auc":
            rows(args)
        else:
            reveal_rows(args)
    finally:
        for b in busy:
            b.terminate()


def load() -> str:
    return "/".join(f"{x:.2f}" for x in os.getloadavg())


def rows(args: argparse.Namespace) -> None:
    counts = [int(p) for p in args.parties.split(",")]
    n_points = 100
    print(
        f"FHAUC, N = {n_points}, 100 samples per party, security = {args.security}; "
        "threshold: OpenFHE 'fhauc' set (ring 2^14, 128-bit), single key: SEAL ring 8192; "
        f"{args.busy} competing CPU-bound process(es); OMP_NUM_THREADS="
        f"{os.environ.get('OMP_NUM_THREADS', 'unset')}, OMP_WAIT_POLICY="
        f"{os.environ.get('OMP_WAIT_POLICY', 'unset')} in the environment"
    )
    count_aggregator_cpu()
    print(
        f"{'parties':>7} {'keys':>9} {'agg s':>7} {'agg cpu':>7} {'agg keygen s':>12} "
        f"{'party s':>8} "
        f"{'upload MB':>9} {'party MB':>8} {'lead MB':>7} {'setup MB/party':>14} "
        f"{'|err| binned':>12} {'wall s':>7} {'peak GB':>7}"
    )
    for m in counts:
        data = synthetic(m, 100)
        ref = privfl.binned_auc(data, n_points)
        t0, AGG_CPU[0] = time.perf_counter(), 0.0
        single = privfl.federated_auc(data, n_points, security=args.security)
        wall, single_cpu = time.perf_counter() - t0, AGG_CPU[0]
        traffic = single.bytes["party_upload"] + single.bytes["aggregator_reply"]
        print(
            f"{m:>7} {'single':>9} {single.timings['aggregator']:>7.2f} {single_cpu:>7.3f} "
            f"{'-':>12} "
            f"{single.timings['party_encrypt'] + single.timings['party_decrypt']:>8.2f} "
            f"{mb(single.bytes['party_upload']):>9} {mb(traffic):>8} {'-':>7} "
            f"{mb(single.bytes['setup_key_bundle']):>14} {abs(single.auc - ref):>12.1e} "
            f"{wall:>7.1f} {peak_gb():>7.1f}",
            flush=True,
        )
        t0 = time.perf_counter()
        ThresholdContext.for_parameters(parameter_set("fhauc"), m)
        context_s = time.perf_counter() - t0
        for session in range(args.sessions):
            t0, AGG_CPU[0] = time.perf_counter(), 0.0
            res = privfl.federated_auc(data, n_points, keys="threshold", security=args.security)
            wall, session_cpu = time.perf_counter() - t0, AGG_CPU[0]
            b, t = res.bytes, res.timings
            session_s = t["aggregator"]
            print(
                f"{m:>7} {'threshold':>9} {session_s:>7.2f} {session_cpu:>7.3f} "
                f"{t['aggregator_keygen']:>12.2f} "
                f"{t['party_total'] + t['party_decrypt']:>8.2f} {mb(b['party_upload']):>9} "
                f"{mb(b['party_session_traffic']):>8} {mb(b['lead_session_traffic']):>7} "
                f"{mb(b['party_setup_traffic']):>14} {abs(res.auc - ref):>12.1e} {wall:>7.1f} "
                f"{peak_gb():>7.1f}",
                flush=True,
            )
            ratio = session_s / max(single.timings["aggregator"], 1e-9)
            cpu_ratio = session_cpu / max(single_cpu, 1e-9)
            print(
                f"{'':>7} {'':>9} session {session + 1}: aggregator threshold / single key: "
                f"{ratio:.1f}x wall, {cpu_ratio:.1f}x CPU; OpenFHE context for {m} parties "
                f"(once per process, not in the row): {context_s:.1f} s; load {load()}",
                flush=True,
            )
    print(f"OpenMP: {threading_choice()}")


def reuse_rows(args: argparse.Namespace) -> None:
    """Sessions on one key set (module docstring, ``--reuse``)."""
    from privfl.evaluation.fhauc.policy import Security
    from privfl.evaluation.fhauc.reveal import Reveal
    from privfl.evaluation.fhauc.schedule import SessionRequest, run_session
    from privfl.evaluation.fhauc.sizing import in_process_policy
    from privfl.evaluation.statistics import interior_thresholds
    from privfl.evaluation.threshold_federated import ThresholdTransport, run_in_process
    from privfl.runner import InProcessRunner

    n_points, mode = 100, Security.parse(args.security)
    reveal = Reveal(args.reveal)
    # the metrics reveal runs at the one threshold 0.5 (N = 3), as privfl.threshold_metrics
    points: int | np.ndarray = np.array([0.5]) if reveal is Reveal.METRICS else n_points
    print(
        f"FHAUC, threshold keys reused across sessions: N = {n_points}, 100 samples per "
        f"party, security = {mode.value}, reveal = {reveal.value} (metrics: t = 0.5); "
        "OpenFHE 'fhauc' set (ring 2^14, 128-bit)"
    )
    print(
        f"{'parties':>7} {'session':>7} {'keygen':>6} {'agg s':>7} {'agg cpu s':>9} "
        f"{'agg keygen s':>12} {'agg keygen cpu s':>16} {'party MB':>8} {'shares used':>11} "
        f"{'|err|':>8} {'wall s':>7} {'load':>14}"
    )
    for m in [int(p) for p in args.parties.split(",")]:
        data = synthetic(m, 100)
        interior = interior_thresholds(points, (0.0, 1.0))
        positives = float(sum(int(y.sum()) for _, y in data))
        policy = in_process_policy(
            mode, "threshold", reveal, interior, 4, [100] * m, positives,
            100.0 * m - positives, max_samples=None, min_pairs=None, executions=None,
            required_accuracy=1e-6, min_guarantee_bits=8.0,
        )  # fmt: skip
        names = tuple(f"party-{i}" for i in range(m))
        request = SessionRequest(names, interior, (0.0, 1.0), mode, 4, reveal)
        t0 = time.perf_counter()
        first = run_in_process(data, request, policy)
        wall = time.perf_counter() - t0
        agg, parties = first.aggregator, list(first.transport.parties.values())
        runner, transport, results = first.runner, first.transport, first.results
        for session in range(1, args.reuse + 1):
            if session > 1:
                runner = InProcessRunner()
                transport = ThresholdTransport(parties, runner)
                t0 = time.perf_counter()
                run_session(agg, transport, request, runner.run)
                wall = time.perf_counter() - t0
                results = tuple(transport.results[n] for n in names)
            cpu = runner.cpu
            traffic = max(
                t.get("setup", 0) + t.get("session", 0) for t in transport.traffic.values()
            )
            used = max(
                p.keys.key_set.keys.decryption_shares_made for p in parties if p.keys.key_set
            )
            err = max(reuse_error(data, points, r) for r in results)
            keygen = "yes" if "party_keygen" in runner.seconds else "no"
            print(
                f"{m:>7} {session:>7} {keygen:>6} {runner.total_seconds('aggregator'):>7.2f} "
                f"{sum(cpu.get('aggregator', [])):>9.2f} "
                f"{runner.total_seconds('aggregator_keygen'):>12.2f} "
                f"{sum(cpu.get('aggregator_keygen', [])):>16.2f} {mb(traffic):>8} "
                f"{used:>11} {err:>8.1e} {wall:>7.1f} {load():>14}",
                flush=True,
            )
            print(f"{'':>7} {'':>7} bytes per party and step (largest):", where_bytes_go(runner))


def reuse_error(data: list[tuple[np.ndarray, np.ndarray]], points: Any, result: Any) -> float:
    """Largest error of one party's result against the binned plaintext reference: the AUC, or
    every point of the revealed (normalised) curve."""
    curve = result.outcome.curve
    if curve is None:
        return abs(float(result.auc) - float(privfl.binned_auc(data, points)))
    ref = pm.binned_reference(data, points)
    return max(
        float(np.max(np.abs(curve.tp / curve.tp[-1] - ref.tp / ref.tp[-1]))),
        float(np.max(np.abs(curve.fp / curve.fp[-1] - ref.fp / ref.fp[-1]))),
    )


def where_bytes_go(runner: object) -> str:
    """The largest message a party received (``down``) and sent (``up``) at each step, from
    the runner's byte counts per channel: where a session's traffic per party goes."""
    sizes: dict[str, list[int]] = getattr(runner, "sizes", {})
    parts = []
    for channel, seen in sorted(sizes.items()):
        for prefix, arrow in (("to_party_", "down"), ("from_party_", "up")):
            if channel.startswith(prefix) and seen:
                parts.append(f"{channel[len(prefix) :]} {arrow} {max(seen)}")
    return "; ".join(parts)


def reveal_once(
    data: list[tuple[np.ndarray, np.ndarray]], reveal: str, keys: str, security: str
) -> tuple[dict[str, float], dict[str, float], float]:
    """(timings, bytes, largest |error| against the binned reference) of one session."""
    kw = {"keys": keys, "security": security}
    if reveal == "curve":
        res = pm.roc_curve(data, 100, **kw)
        ref = pm.binned_reference(data, 100)
        err = max(
            float(np.max(np.abs(res.fpr - ref.fp / ref.fp[-1]))),
            float(np.max(np.abs(res.tpr - ref.tp / ref.tp[-1]))),
        )
        return res.run["timings"], res.run["bytes"], err
    met = pm.threshold_metrics(data, 0.5, **kw)
    one = pm.binned_reference(data, np.array([0.5]))
    err = max(abs(met.recall - one.tp[1] / one.tp[-1]), abs(met.fpr - one.fp[1] / one.fp[-1]))
    return met.run["timings"], met.run["bytes"], err


def reveal_rows(args: argparse.Namespace) -> None:
    counts = [int(p) for p in args.parties.split(",")]
    print(
        f"FHAUC reveals, N = 100 (metrics: t = 0.5), 100 samples per party, security = "
        f"{args.security}; threshold: OpenFHE 'fhauc' set (ring 2^14, 128-bit), single key: "
        "SEAL ring 8192"
    )
    print(
        f"{'parties':>7} {'reveal':>7} {'keys':>9} {'agg s':>7} {'agg cpu s':>9} {'upload MB':>9} "
        f"{'setup MB/party':>14} {'max |err|':>9} {'wall s':>7} {'cpu s':>7} {'load':>14}"
    )
    for m in counts:
        data = synthetic(m, 100)
        for reveal in args.reveal.split(","):
            agg: dict[str, float] = {}
            for keys in ("single", "threshold"):
                t0, c0 = time.perf_counter(), time.process_time()
                timings, sizes, err = reveal_once(data, reveal, keys, args.security)
                wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                agg[keys] = timings["aggregator_cpu"]
                print(
                    f"{m:>7} {reveal:>7} {keys:>9} {timings['aggregator']:>7.2f} "
                    f"{timings['aggregator_cpu']:>9.2f} "
                    f"{mb(sizes['party_upload']):>9} {mb(sizes['party_setup_traffic']):>14} "
                    f"{err:>9.1e} {wall:>7.1f} {cpu:>7.1f} {load():>14}",
                    flush=True,
                )
            ratio = agg["threshold"] / max(agg["single"], 1e-9)
            print(f"{'':>7} {reveal:>7} aggregator CPU threshold / single key: {ratio:.1f}x")


def one_combination(
    data: list[tuple[np.ndarray, np.ndarray]], security: str, reveal: str, keys: str
) -> tuple[dict[str, float], dict[str, float], float]:
    """(timings, bytes, largest |error| against the binned reference) of one session."""
    if reveal != "auc":
        return reveal_once(data, reveal, keys, security)
    res = privfl.federated_auc(data, 100, keys=keys, security=security)
    err = abs(res.auc - privfl.binned_auc(data, 100))
    return dict(res.timings.items()), dict(res.bytes.items()), err


def table_rows(args: argparse.Namespace) -> None:
    """``--table``: the 12 combinations keys x security x reveal at each ``--parties`` count,
    N = 100 (metrics: t = 0.5), 100 samples per party, one session each: the aggregator's
    wall time (and CPU time where the run reports it), each party's upload and download
    (session traffic minus the upload; single key: the reply), its setup traffic (threshold:
    the key rounds; single key: the wrapped key bundle), and threshold / single-key
    aggregator time per (security, reveal) against the reach of 2x. One unprinted session
    per key mode runs first (what a process pays once is in no row)."""
    print(
        "FHAUC per combination, N = 100 (metrics: t = 0.5), 100 samples per party; threshold: "
        "OpenFHE 'fhauc' set (ring 2^14, 128-bit), single key: SEAL ring 8192"
    )
    print(
        f"{'parties':>7} {'security':>11} {'reveal':>7} {'keys':>9} {'agg s':>7} "
        f"{'agg cpu s':>9} {'up MB':>7} {'down MB':>7} {'setup MB':>8} {'max |err|':>9} "
        f"{'wall s':>7} {'load':>14}"
    )
    count_aggregator_cpu()
    for m in [int(p) for p in args.parties.split(",")]:
        data = synthetic(m, 100)
        # not printed: one session per key mode first, so that no row pays what a process
        # pays once (the single-key upload helpers' start, OpenFHE's tables)
        for keys in ("single", "threshold"):
            one_combination(data, "semi-honest", "auc", keys)
        for security in args.table_security.split(","):
            for reveal in ("auc", "curve", "metrics"):
                agg: dict[str, float] = {}
                agg_cpu: dict[str, float] = {}
                for keys in ("single", "threshold"):
                    t0, AGG_CPU[0] = time.perf_counter(), 0.0
                    timings, sizes, err = one_combination(data, security, reveal, keys)
                    wall = time.perf_counter() - t0
                    up = sizes["party_upload"]
                    session = sizes.get("party_session_traffic", 0)
                    down = session - up if session else sizes["aggregator_reply"]
                    setup = sizes.get("party_setup_traffic", 0) or sizes.get("setup_key_bundle", 0)
                    cpu = AGG_CPU[0]  # the aggregator's steps, its upload helpers' jobs too
                    agg[keys], agg_cpu[keys] = timings["aggregator"], cpu
                    print(
                        f"{m:>7} {security:>11} {reveal:>7} {keys:>9} "
                        f"{timings['aggregator']:>7.2f} "
                        f"{cpu:>9.2f} {mb(up):>7} {mb(down):>7} "
                        f"{mb(setup):>8} {err:>9.1e} {wall:>7.1f} {load():>14}",
                        flush=True,
                    )
                ratio = agg["threshold"] / max(agg["single"], 1e-9)
                cpu_ratio = agg_cpu["threshold"] / max(agg_cpu["single"], 1e-9)
                verdict = "within" if ratio <= 2 else "ABOVE"
                print(
                    f"{'':>7} {security:>11} {reveal:>7} aggregator threshold / single key: "
                    f"{ratio:.1f}x wall ({verdict} the reach of 2x), {cpu_ratio:.1f}x CPU "
                    "(the aggregator's steps, with the upload helpers' jobs)",
                    flush=True,
                )


def threading_choice() -> str:
    try:
        from privfl.crypto.threshold import threads as threshold_threads
    except ImportError:  # a checkout before issue 30 (a "before" run): OpenMP's defaults
        return "OpenMP's own defaults (privfl before issue 30 chose nothing)"
    c = threshold_threads.choice()
    if c is None:
        return "openfhe not loaded"
    return f"{c.threads} thread(s), wait policy {c.wait_policy}, chosen by {c.chosen_by}"


if __name__ == "__main__":
    main()
