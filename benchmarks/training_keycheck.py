"""What the joint-key check (issue 28) adds to the setup of encrypted training: 3 parties,
MLP 64-30-20-10, the last layer encrypted (the paper setting).

    PYTHONPATH=src nice .venv/bin/python benchmarks/training_keycheck.py [--parameters test]

With ``--parameters test`` the whole setup runs in process (real threshold keys, the setup
steps of a deployment) and the script prints, per node, the wall and CPU seconds of its
``setup-joint`` step (parse the joint key, sketch its own contribution, sign) and of the
node's verification (decode and verify the three signed checks, check the sums), the bytes
of one signed key check and of the server's relay to one node, and the whole setup's bytes
for comparison. With ``--parameters secure`` the key generation itself is not run (minutes
and GB on the secure ring): the same sketch and verification run on random rows of the
secure ring's joint-key shape (their cost does not depend on the values).
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import argparse
import time
from collections.abc import Callable, Mapping

import numpy as np

from privfl.crypto.identity import IdentityKey
from privfl.crypto.threshold import JointPublicKeys, ThresholdContext
from privfl.crypto.threshold.keycheck import joint_rows, own_sketch, row_moduli, verify_sketches
from privfl.runner import InProcessRunner
from privfl.training.config import secret_layout
from privfl.training.params import training_parameters
from privfl.training.schedule import InProcessTransport
from privfl.training.setup import NodeHost, party_names, run_setup
from privfl.training.setup_messages import KeyCheck, KeyChecks
from privfl.training.twin import Schedule

SCHEDULE = Schedule((64, 30, 20, 10), 1, 1, 1, 10, 1.0, 7)
PARTIES = 3


class Recorder:
    """The server's transport, keeping the key checks and the relay (to time a node's check)."""

    def __init__(self, inner: InProcessTransport) -> None:
        self.inner = inner
        self.kept: dict[str, Mapping[str, bytes]] = {}

    def exchange(self, step: str, messages: Mapping[str, bytes]) -> dict[str, bytes]:
        got = self.inner.exchange(step, messages)
        self.kept[step] = got
        return got


def _timed(fn: Callable[[], object]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    fn()
    return time.perf_counter() - wall, time.process_time() - cpu


def full_setup() -> None:
    layout = secret_layout(SCHEDULE)
    ctx = ThresholdContext.for_parameters(training_parameters(layout, "test"), PARTIES)
    names = party_names(PARTIES)
    ids = [IdentityKey() for _ in names]
    pinned = {n: i.public_bytes for n, i in zip(names, ids, strict=True)}
    rng = np.random.default_rng(0)
    hosts = [
        NodeHost(n, rng.integers(0, 2, (30, 64)).astype(float), rng.integers(0, 10, 30), i,
                 pinned, None, ctx, "test")
        for n, i in zip(names, ids, strict=True)
    ]  # fmt: skip
    runner = InProcessRunner()
    rec = Recorder(InProcessTransport(hosts, runner))
    wall = time.perf_counter()
    run_setup(rec, PARTIES, SCHEDULE, "test", context=ctx)
    wall = time.perf_counter() - wall
    session, checks = hosts[0].crypto.session, rec.kept["setup-joint"]
    relay = KeyChecks(session, tuple(checks[n] for n in names)).to_bytes()
    joint = JointPublicKeys.from_bytes(hosts[0]._joint_bytes, ctx, session)

    def verify() -> None:
        items = KeyChecks.from_bytes(relay, session).items
        got = [KeyCheck.from_bytes(c, session, pinned) for c in items]
        pairs = [(c.sender, c.sketch) for c in got]
        verify_sketches(ctx, session, names, pairs, joint, hosts[0]._joint_bytes)

    v_wall, v_cpu = _timed(verify)
    total = sum(sum(v) for v in runner.sizes.values())
    print(f"joint-key check, test ring, {PARTIES} parties, 64-30-20-10, last layer encrypted")
    for n in names:
        w, c = runner.seconds[f"{n}:setup-joint"][0], runner.cpu[f"{n}:setup-joint"][0]
        print(f"  {n} setup-joint step (sketch + sign): wall {w:.3f} s, cpu {c:.3f} s")
    print(f"  a node's verification (3 signatures + sums): wall {v_wall:.3f} s, cpu {v_cpu:.3f} s")
    one = len(checks[names[0]])
    extra = PARTIES * (one + len(relay))
    print(f"  bytes: one signed key check {one} B, the relay to one node {len(relay)} B; "
          f"{PARTIES} nodes in all {extra} B of a {total / 1e6:.1f} MB setup")  # fmt: skip
    print(f"  whole setup: wall {wall:.1f} s; {len(rec.kept)} steps")


def secure_arithmetic() -> None:
    layout = secret_layout(SCHEDULE)
    ctx = ThresholdContext.for_parameters(training_parameters(layout, "secure"), PARTIES)
    moduli = row_moduli(ctx)
    rng = np.random.default_rng(0)
    session, names = bytes(16), party_names(PARTIES)
    own = [np.stack([rng.integers(0, int(q), ctx.ring, dtype=np.uint64) for q in moduli])
           for _ in names]  # fmt: skip
    total = np.stack([sum(o[i] for o in own) % q for i, q in enumerate(moduli)])
    cut = len(ctx.public_key_shape.b_index)
    joint = JointPublicKeys(session, "server", total[:cut].tobytes(), total[cut:].tobytes())
    joint_bytes = joint.to_bytes()
    if not np.array_equal(joint_rows(ctx, joint.public_key, joint.switch_key), total):
        raise SystemExit("row layout mismatch")
    s_wall, s_cpu = _timed(lambda: own_sketch(ctx, session, own[0], joint_bytes))
    sketches = [
        (n, own_sketch(ctx, session, o, joint_bytes)) for n, o in zip(names, own, strict=True)
    ]
    v_wall, v_cpu = _timed(
        lambda: verify_sketches(ctx, session, names, sketches, joint, joint_bytes)
    )
    signer = IdentityKey()
    check = KeyCheck(session, names[0], sketches[0][1]).seal(signer)
    back = KeyCheck.from_bytes(check, session, {names[0]: signer.public_bytes})
    if back.sketch != sketches[0][1]:  # the decoder's row bound covers the secure ring
        raise SystemExit("a secure-ring key check does not decode")
    bits = ctx.ring.bit_length() - 1
    print(f"joint-key check arithmetic, secure ring 2^{bits}, {len(moduli)} rows")
    print(f"  one node's sketch: wall {s_wall:.3f} s, cpu {s_cpu:.3f} s")
    print(f"  verification (sums, without signatures): wall {v_wall:.3f} s, cpu {v_cpu:.3f} s")
    print(f"  one signed key check {len(check)} B")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--parameters", choices=("test", "secure"), default="test")
    args = ap.parse_args()
    (full_setup if args.parameters == "test" else secure_arithmetic)()
    print(f"  load average {', '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
