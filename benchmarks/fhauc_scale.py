"""A whole in-process FHAUC session as the number of parties grows (issue 30).

Per number of parties ``M`` (N = 100, 100 samples per party, single key, semi-honest by
default): the wall and CPU time of one ``privfl.federated_auc`` call (setup, every party's
join/upload/finish checks, the aggregator), the aggregator's own wall time and its CPU time
in ``handle_uploads`` (verifying, loading and combining the uploads, its upload workers'
CPU included), its own process's CPU time in its timed steps (``own cpu``: what the parties
wait for while the workers run on other cores; load inflates it less than the wall time),
the largest party upload, and the AUC's distance to the plaintext binned AUC. The
load average is printed with every row; with ``--repeats R`` the times are medians of R runs.

    nice -n 5 .venv/bin/python benchmarks/fhauc_scale.py \
        [--parties 100,300,1000] [--security semi-honest] [--repeats 3] \
        [--compare /work/main/src,/work/wt-x/src]

``--profile M`` prints where the aggregator's CPU goes in ``handle_uploads`` at ``M`` parties
(cProfile with CPU time); ``--rotation-noise`` the key-switching noise a rotation adds, next
to a fresh encryption's (the joint layout rotates the summed ciphertext once).

``--load`` times SEAL's load of one upload ciphertext from a memory file made per load and
from the one reused per thread (:func:`privfl.crypto.seal_io.load`), and writing an upload
into a helper's memory file, fresh or kept from an earlier session.

``--rescale`` measures the idea of rotating the product after a rescale (two RNS limbs
instead of three): a rotation's cost on each, and the AUC's error with and without it.

``--crossover`` times ``handle_uploads`` on the same uploads in process and with 2 upload
workers (the size from which the workers pay); ``--transfer M`` the cost of moving ``M``
uploads to a worker through a pipe and through shared memory.

``--compare`` runs the same rows with each listed source tree first on ``PYTHONPATH``
(one subprocess per tree and row, trees alternating row by row so that both see the same
load): a before/after side by side in one run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

import privfl
from privfl.evaluation import fhauc


def synthetic(parties: int, size: int, seed: int = 0) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)  # not secret: benchmark data
    out = []
    for _ in range(parties):
        y = rng.integers(0, 2, size).astype(np.int8)
        out.append((np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1), y))
    return out


class TimedAggregator(fhauc.Aggregator):
    """The honest aggregator, recording the CPU seconds of each ``handle_uploads`` (with its
    upload workers') and this process's CPU seconds in the timed steps (``own_cpu``: what
    the parties wait for when the workers run on other cores; load inflates it less than
    the wall time)."""

    def __init__(self, workers: int | None = None) -> None:
        super().__init__(workers) if workers else super().__init__()
        self.upload_cpu: list[float] = []
        self.own_cpu = 0.0

    def start_session(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        c0 = time.process_time()
        try:
            return super().start_session(*args, **kwargs)
        finally:
            self.own_cpu += time.process_time() - c0

    def collect_joins(self, joins):  # type: ignore[no-untyped-def]
        c0 = time.process_time()
        try:
            return super().collect_joins(joins)
        finally:
            self.own_cpu += time.process_time() - c0

    def handle_uploads(self, uploads):  # type: ignore[no-untyped-def]
        c0 = time.process_time()
        try:
            return super().handle_uploads(uploads)
        finally:
            own = time.process_time() - c0
            self.own_cpu += own
            # the upload workers' CPU too, where the tree has them
            self.upload_cpu.append(own + getattr(self, "worker_cpu", 0.0))


HEADER = (
    f"{'parties':>7} {'wall s':>8} {'cpu s':>8} {'agg s':>7} {'agg cpu s':>9} {'own cpu':>7} "
    f"{'upload KB':>9} {'|err|':>8}  load avg (1/5/15)"
)


def row(m: int, security: str, repeats: int) -> str:
    data = synthetic(m, 100)
    ref = privfl.binned_auc(data, 100)
    walls, cpus, aggs, agg_cpus, own_cpus, errs, upload = [], [], [], [], [], [], 0
    for _ in range(repeats):
        agg = TimedAggregator()
        w0, c0 = time.perf_counter(), time.process_time()
        res = privfl.federated_auc(data, 100, security=security, aggregator=agg)
        walls.append(time.perf_counter() - w0)
        cpus.append(time.process_time() - c0)
        aggs.append(res.timings["aggregator"])
        agg_cpus.append(sum(agg.upload_cpu))
        own_cpus.append(agg.own_cpu)
        errs.append(abs(res.auc - ref))
        upload = res.bytes["party_upload"]
    load = "/".join(f"{x:.2f}" for x in os.getloadavg())
    med = statistics.median
    return (
        f"{m:>7} {med(walls):>8.2f} {med(cpus):>8.2f} {med(aggs):>7.3f} {med(agg_cpus):>9.3f} "
        f"{med(own_cpus):>7.3f} "
        f"{upload / 1e3:>9.1f} {max(errs):>8.1e}  {load}"
    )


def profile(m: int, security: str) -> None:
    import cProfile
    import pstats

    class Profiled(TimedAggregator):
        def handle_uploads(self, uploads):  # type: ignore[no-untyped-def]
            prof = cProfile.Profile(time.process_time)
            try:
                return prof.runcall(super().handle_uploads, uploads)
            finally:
                pstats.Stats(prof).sort_stats("tottime").print_stats(12)

    privfl.federated_auc(synthetic(m, 100), 100, security=security, aggregator=Profiled())


def rotation_noise(samples: int = 10, scale_bits: float | None = None) -> None:
    """Fresh and rotation noise at the default scale, or at ``2^scale_bits`` (the malicious
    variant encrypts at ``2^(58-V)``); values span the scale's headroom either way."""
    from privfl.crypto.ckks import CKKSContext

    ctx = CKKSContext.generate(rotation_steps=[512])
    public = CKKSContext.deserialize(ctx.serialize_public())
    rng = np.random.default_rng(1)  # not secret: benchmark data
    fresh, added = [], []
    bits = ctx.params.scale_bits if scale_bits is None else scale_bits
    span = 1e4 if scale_bits is None else 2.0 ** (57 - scale_bits)
    print(f"scale 2^{bits:g}, values uniform in +-{span:.3g}")
    for _ in range(samples):
        v = rng.uniform(-span, span, ctx.params.slots)
        data = ctx.encrypt(v, scale_bits).to_bytes()
        e0 = ctx.decrypt(ctx.ciphertext_from_bytes(data)) - v
        rotated = public.ciphertext_from_bytes(data).rotate(512).to_bytes()
        e1 = ctx.decrypt(ctx.ciphertext_from_bytes(rotated)) - np.roll(v, -512)
        fresh.append(e0)
        added.append(e1 - np.roll(e0, -512))
    f, a = np.concatenate(fresh), np.concatenate(added)
    print(f"fresh encryption error per slot: std {f.std():.3e}, max {np.abs(f).max():.3e}")
    print(f"added by one rotation:           std {a.std():.3e}, max {np.abs(a).max():.3e}")
    print(f"ratio of the stds: {a.std() / f.std():.1f}")


def load_file(loads: int = 400, rounds: int = 5) -> None:
    """SEAL loads of one fresh upload ciphertext (184 KB) from a memory file created, filled
    and closed per load (privfl before) and from one reused per thread (now), alternating
    in rounds: CPU ms per load, medians over the rounds."""
    import tenseal.sealapi as seal

    from privfl.crypto import seal_io
    from privfl.crypto.ckks import CKKSContext

    ctx = CKKSContext.generate()
    public = CKKSContext.deserialize(ctx.serialize_public())
    data = ctx.encrypt(np.ones(ctx.params.slots)).to_bytes()
    sc = public.seal_context

    def fresh_file() -> None:
        fd = os.memfd_create("privfl-seal")
        try:
            os.write(fd, data)
            seal.Ciphertext().load(sc, f"/proc/self/fd/{fd}")
        finally:
            os.close(fd)

    def reused_file() -> None:
        seal_io.load(seal.Ciphertext, sc, data, "ciphertext")

    times: dict[str, list[float]] = {"fresh file per load": [], "reused file": []}
    for _ in range(rounds):
        for name, fn in (("fresh file per load", fresh_file), ("reused file", reused_file)):
            c0 = time.process_time()
            for _ in range(loads):
                fn()
            times[name].append((time.process_time() - c0) / loads * 1e3)
    for name, ms in times.items():
        print(f"{name:>20}: {statistics.median(ms):.3f} CPU ms per load ({len(data)} bytes)")
    # a helper's memory file: writing an upload into fresh pages or into pages kept
    written: dict[str, list[float]] = {"fresh pages": [], "kept pages": []}
    for _ in range(rounds):
        for name in written:
            fd = os.memfd_create("privfl-uploads")
            if name == "kept pages":
                for k in range(loads):
                    os.pwrite(fd, data, k * len(data))
            c0 = time.process_time()
            for k in range(loads):
                os.pwrite(fd, data, k * len(data))
            written[name].append((time.process_time() - c0) / loads * 1e3)
            os.close(fd)
    for name, ms in written.items():
        print(f"upload into a memory file, {name}: {statistics.median(ms):.3f} CPU ms each")
    print("load average " + "/".join(f"{x:.2f}" for x in os.getloadavg()))


class Rescaling(fhauc.Aggregator):
    """The honest semi-honest aggregator, except that it rescales each product (divides it
    by the last prime) before relinearising it, so that the rotate-and-sum runs on two RNS
    limbs instead of three: the idea ``--rescale`` measures (privfl does not do it)."""

    def aggregate(self, uploads):  # type: ignore[no-untyped-def]
        import tenseal.sealapi as seal

        from privfl.crypto.ckks import Ciphertext
        from privfl.evaluation.fhauc.aggregator import random_multiplier
        from privfl.evaluation.fhauc.uploads import Reply, summed_vectors

        def product(a, b):  # type: ignore[no-untyped-def]
            ev, out, low = a.context.evaluator, seal.Ciphertext(), seal.Ciphertext()
            ev.multiply(a.seal, b.seal, out)
            ev.rescale_to_next(out, low)
            ev.relinearize_inplace(low, a.context.relin_keys)
            return Ciphertext(a.context, low)

        cfg, layout = self.session_config, self.layout
        t, f = summed_vectors(uploads, layout)
        num = product(t[0], f[0]).window_sum(layout.window)
        den = product(t[0], f[0].rotate(layout.window // 2))
        c = random_multiplier(*self.multiplier_range)
        return Reply(cfg.session, num * c, den * c, self.execution, self.name)


def rescale(repeats: int = 3) -> None:
    """A rotation on three and on two RNS limbs (CPU ms), and the worst |AUC - binned AUC|
    of the honest aggregator and of :class:`Rescaling` over ``repeats`` data sets per size."""
    import tenseal.sealapi as seal

    from privfl.crypto.ckks import Ciphertext, CKKSContext

    ctx = CKKSContext.generate(rotation_steps=[4])
    public = CKKSContext.deserialize(ctx.serialize_public())
    x = public.ciphertext_from_bytes(ctx.encrypt(np.ones(ctx.params.slots)).to_bytes())
    full = x * x
    low = seal.Ciphertext()
    public.evaluator.rescale_to_next(full.seal, low)
    for name, ct in (("3 limbs", full), ("2 limbs", Ciphertext(public, low))):
        c0 = time.process_time()
        for _ in range(50):
            ct.rotate(4)
        print(f"rotation on {name}: {(time.process_time() - c0) / 50 * 1e3:.2f} CPU ms")
    rng = np.random.default_rng(7)  # not secret: benchmark data
    print(f"{'parties':>7} {'samples':>7} {'|err| privfl':>12} {'|err| rescaled':>14}")
    for m, size in ((2, 5), (2, 10), (3, 20), (10, 10), (50, 40), (100, 100)):
        errs: dict[str, list[float]] = {"privfl": [], "rescaled": []}
        for _ in range(repeats):
            data = [
                (np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1), y)
                for y in (rng.integers(0, 2, size) for _ in range(m))
            ]
            ref = privfl.binned_auc(data, 100)
            for name, agg in (("privfl", fhauc.Aggregator(1)), ("rescaled", Rescaling(1))):
                errs[name].append(abs(privfl.federated_auc(data, 100, aggregator=agg).auc - ref))
        print(f"{m:>7} {size:>7} {max(errs['privfl']):>12.1e} {max(errs['rescaled']):>14.1e}")
    print("load average " + "/".join(f"{x:.2f}" for x in os.getloadavg()))


class Replaying(TimedAggregator):
    """Handles the same uploads ``repeats`` times with each worker count: wall seconds, this
    process's CPU seconds and the helpers' CPU seconds of each run."""

    def __init__(self, counts: list[int], repeats: int) -> None:
        super().__init__()
        self.counts, self.repeats = counts, repeats
        self.runs: dict[int, list[tuple[float, float, float]]] = {w: [] for w in counts}

    def handle_uploads(self, uploads):  # type: ignore[no-untyped-def]
        for _ in range(self.repeats):
            for w in self.counts:
                self.workers = w
                t0, c0 = time.perf_counter(), time.process_time()
                out = super().handle_uploads(uploads)
                wall, cpu = time.perf_counter() - t0, time.process_time() - c0
                self.runs[w].append((wall, cpu, self.worker_cpu))
        return out


def crossover(parties: list[int], security: str, repeats: int) -> None:
    """handle_uploads in process (1) and with 2 workers (this process and one helper), on the
    same uploads: wall, and CPU of this process / of the helper. On a loaded machine the wall
    mostly measures the wait for a core; max(this CPU, helper CPU) is what two idle cores
    would need."""
    from privfl.evaluation.fhauc import aggregator

    aggregator.MIN_PARALLEL_CIPHERTEXTS = 1  # type: ignore[attr-defined]  # both ways at every size
    print(f"handle_uploads, medians of {repeats}, security = {security}")
    print(
        f"{'parties':>7} {'1: wall s':>9} {'cpu s':>7} {'2: wall s':>9} {'own cpu':>8} "
        f"{'helper cpu':>10}  load avg (1/5/15)"
    )
    for m in parties:
        agg = Replaying([1, 2], repeats)
        privfl.federated_auc(synthetic(m, 100), 100, security=security, aggregator=agg)
        med = {w: [statistics.median(x) for x in zip(*v)] for w, v in agg.runs.items()}
        load = "/".join(f"{x:.2f}" for x in os.getloadavg())
        print(
            f"{m:>7} {med[1][0]:>9.4f} {med[1][1]:>7.4f} {med[2][0]:>9.4f} {med[2][1]:>8.4f} "
            f"{med[2][2]:>10.4f}  {load}",
            flush=True,
        )


def transfer(parties: int, size: int = 183_800, repeats: int = 3) -> None:
    """CPU and wall of moving ``parties`` uploads to a worker: a pipe vs shared memory."""
    import multiprocessing as mp
    from multiprocessing import shared_memory

    blobs = [os.urandom(size) for _ in range(parties)]
    ctx = mp.get_context("forkserver")
    for how in ("pipe", "shared memory"):
        walls, cpus = [], []
        for _ in range(repeats):
            mine, theirs = ctx.Pipe()
            proc = ctx.Process(target=_sink, args=(theirs, how, parties))
            proc.start()
            mine.recv_bytes()  # the worker is up
            w0, c0 = time.perf_counter(), time.process_time()
            if how == "pipe":
                for b in blobs:
                    mine.send_bytes(b)
            else:
                shm = shared_memory.SharedMemory(create=True, size=size * parties)
                for i, b in enumerate(blobs):
                    shm.buf[i * size : (i + 1) * size] = b
                mine.send_bytes(shm.name.encode())
            worker_cpu = float(mine.recv_bytes())
            walls.append(time.perf_counter() - w0)
            cpus.append(time.process_time() - c0 + worker_cpu)
            if how != "pipe":
                shm.close()
                shm.unlink()
            proc.join()
        print(
            f"{how:>13}: {parties} x {size / 1e3:.1f} KB, wall {statistics.median(walls):.4f} s,"
            f" CPU both sides {statistics.median(cpus):.4f} s, load "
            + "/".join(f"{x:.2f}" for x in os.getloadavg())
        )


def _sink(conn, how, parties):  # type: ignore[no-untyped-def]
    from multiprocessing import shared_memory

    conn.send_bytes(b"up")
    c0 = time.process_time()
    if how == "pipe":
        got = [conn.recv_bytes() for _ in range(parties)]
    else:
        shm = shared_memory.SharedMemory(name=conn.recv_bytes().decode())
        size = shm.size // parties
        got = [bytes(shm.buf[i * size : (i + 1) * size]) for i in range(parties)]
        shm.close()
    conn.send_bytes(str(time.process_time() - c0).encode())
    del got


def compare(trees: list[str], parties: list[int], security: str, repeats: int) -> None:
    print(f"side by side, N = 100, security = {security}, medians of {repeats}")
    print(f"{'tree':<24} {HEADER}")
    for m in parties:
        for tree in trees:
            env = dict(os.environ, PYTHONPATH=tree)
            out = subprocess.run(
                [sys.executable, __file__, "--row", str(m), "--security", security,
                 "--repeats", str(repeats)],
                env=env, check=True, capture_output=True, text=True,
            ).stdout  # fmt: skip
            print(f"{tree[-24:]:<24} {out.strip()}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--parties", default="100,300,1000")
    ap.add_argument("--security", default="semi-honest")
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--compare", help="comma-separated source trees to run side by side")
    ap.add_argument("--profile", type=int, help="profile the aggregator at this many parties")
    ap.add_argument("--rotation-noise", action="store_true")
    ap.add_argument("--scale-bits", help="comma-separated scales for --rotation-noise")
    ap.add_argument("--crossover", action="store_true", help="1 vs 2 upload workers")
    ap.add_argument("--transfer", type=int, help="pipe vs shared memory for this many uploads")
    ap.add_argument("--load", action="store_true", help="SEAL loads: fresh vs reused file")
    ap.add_argument("--rescale", action="store_true", help="rotations on fewer limbs: cost, error")
    ap.add_argument("--row", type=int, help=argparse.SUPPRESS)  # one row, for --compare
    args = ap.parse_args()
    if args.load:
        load_file()
        return
    if args.rescale:
        rescale()
        return
    if args.profile:
        profile(args.profile, args.security)
        return
    if args.rotation_noise:
        scales = [float(b) for b in args.scale_bits.split(",")] if args.scale_bits else [None]
        for bits in scales:
            rotation_noise(scale_bits=bits)
        return
    parties = [int(p) for p in args.parties.split(",")]
    if args.crossover:
        crossover(parties, args.security, args.repeats)
        return
    if args.transfer:
        transfer(args.transfer)
        return
    if args.row is not None:
        print(row(args.row, args.security, args.repeats))
        return
    if args.compare:
        compare(args.compare.split(","), parties, args.security, args.repeats)
        return
    print(f"privfl from {os.path.dirname(privfl.__file__)}; N = 100, security = {args.security}")
    print(HEADER)
    for m in parties:
        print(row(m, args.security, args.repeats), flush=True)


if __name__ == "__main__":
    main()
