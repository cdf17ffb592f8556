"""Threshold-CKKS microbenchmarks in the layout of SmartCryptNN's Table IV (issue 16).

    PYTHONPATH=src .venv/bin/python benchmarks/threshold.py [--parties 3] [--set training]
        [--rotations 23] [--json OUT]

Three parties and the server simulated in one process (privfl's InProcessRunner passes the
real message bytes); the "training" parameter set (ring 2^15, depth 11, 59-bit scale forced by
noise flooding, FLEXIBLEAUTO, SLACK). Times are computation only, summed over all roles of a
step (the slowest party for steps the parties run in parallel); MB are per party (sent +
received). "at 1 Gbps" adds what the paper's network (1 Gbps, 10 ms per message) would cost
for those bytes, for comparison with the paper's totals, which include communication.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from privfl.crypto.threshold import Ciphertext, parameter_set
from privfl.runner import InProcessRunner
from privfl.threshold import (
    make_roles,
    run_interactive_bootstrap,
    run_joint_decryption,
    run_key_generation,
)

MB = 1e6
PAPER = {  # SmartCryptNN Table IV (3 parties): seconds, MB
    "interactive bootstrap": (51.2, 22.8),
    "joint decryption": (35.0, 15.0),
    "sigmoid degree 13": (11.05, None),
    "23 rotation keys": (None, 1296.0),
}


def network_seconds(nbytes: float, messages: int) -> float:
    """Transfer time at 1 Gbps plus 10 ms latency per message (the paper's setting)."""
    return nbytes * 8 / 1e9 + 0.010 * messages


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    out = fn()
    return out, time.perf_counter() - start


def rotation_steps(count: int) -> tuple[int, ...]:
    """``count`` steps: +-1, +-2, +-4, ... (replication by -R*2^k, block sums by +2^k)."""
    steps: list[int] = []
    k = 0
    while len(steps) < count:
        steps += [1 << k, -(1 << k)]
        k += 1
    return tuple(sorted(steps[:count]))


def replicate(ct: Ciphertext, block: int, copies: int) -> Ciphertext:
    """Slots [0, block) copied into ``copies`` consecutive blocks (zeros elsewhere)."""
    for k in range(int(math.log2(copies))):
        ct = ct + ct.rotate(-(block << k))
    return ct


def vector_matrix(x: Ciphertext, w: Ciphertext, rows: int, cols: int) -> Ciphertext:
    """Encrypted ``x (rows) @ W (rows x cols)`` with W column-packed (``W[i, j]`` at slot
    ``j * rows + i``): replicate x, one ciphertext product, rotate-and-sum inside each block;
    ``y_j`` ends in slot ``j * rows``."""
    prod = replicate(x, rows, cols) * w
    for k in range(int(math.log2(rows))):
        prod = prod + prod.rotate(1 << k)
    return prod


def protocol_row(
    name: str,
    runner: InProcessRunner,
    steps: tuple[str, str, str],
    channels: tuple[str, str],
    error: float,
) -> dict[str, Any]:
    """One request/shares/finish round: the owner's two steps plus the slowest party (the
    parties work in parallel); per-party bytes: one request in, one share out."""
    first, parallel, last = steps
    return {
        "operation": name,
        "seconds": runner.total_seconds(first)
        + runner.max_seconds(parallel)
        + runner.total_seconds(last),
        "mb": sum(runner.max_bytes(ch) for ch in channels) / MB,
        "messages": 2,
        "max_error": error,
        "paper": PAPER[name.split(" (")[0]],
    }


def run(set_name: str, parties: int, rotations: int) -> list[dict[str, Any]]:
    params = dataclasses.replace(
        parameter_set(set_name), rotation_steps=rotation_steps(rotations), name="bench"
    )
    rows: list[dict[str, Any]] = []
    (server, roles), ctx_s = timed(lambda: make_roles(params, parties))
    rows.append({"operation": "context + layouts (once per process)", "seconds": ctx_s})

    kg = InProcessRunner()
    run_key_generation(server, roles, kg, evaluating_parties=True)
    auto_vectors = len(server.context.automorphism_shape.b_index)  # type: ignore[union-attr]
    all_b = (
        auto_vectors
        + len(server.context.public_key_shape.b_index)
        + len(server.context.switch_key_shape.b_index)
    )
    share = kg.max_bytes("keygen_share")
    rot_share = share * auto_vectors / all_b
    rows += [
        {
            "operation": "keygen round 1 (pk, relin pass 1, rotations)",
            "seconds": kg.max_seconds("party_keygen_share")
            + kg.total_seconds("server_keygen_combine"),
            "mb": (share + kg.max_bytes("keygen_joint")) / MB,
            "messages": 2,
        },
        {
            "operation": "keygen round 2 (relinearisation key)",
            "seconds": kg.max_seconds("party_keygen_mult_share")
            + kg.total_seconds("server_keygen_mult_combine"),
            "mb": kg.max_bytes("keygen_mult_share") / MB,
            "messages": 1,
        },
        {
            "operation": "evaluation keys to an evaluating party (*)",
            "seconds": kg.max_seconds("party_install_keys"),
            "mb": kg.max_bytes("eval_keys") / MB,
            "messages": 1,
        },
        {
            "operation": f"{rotations} rotation keys (upload + download)",
            "seconds": None,
            "mb": 2 * rot_share / MB,
            "messages": 2,
            "paper": PAPER["23 rotation keys"] if rotations == 23 else None,
        },
    ]

    gen = np.random.default_rng(0)  # not secret: benchmark data
    slots = params.batch_size
    x = gen.uniform(-1, 1, slots)
    ct = server.encrypt(x)

    dec = InProcessRunner()
    got = run_joint_decryption(roles[0], roles, ct, dec, slots)
    rows.append(
        protocol_row(
            "joint decryption",
            dec,
            ("party_decrypt_request", "party_decryption_share", "party_decrypt_fuse"),
            ("decrypt_request", "decrypt_share"),
            float(np.max(np.abs(got - x))),
        )
    )

    deep = ct
    while deep.levels_used < params.bootstrap_max_level:
        deep = deep * 1.0
    boot = InProcessRunner()
    fresh = run_interactive_bootstrap(roles[0], roles, deep, boot)
    back = run_joint_decryption(roles[0], roles, fresh, InProcessRunner(), slots)
    rows.append(
        protocol_row(
            f"interactive bootstrap (level {deep.levels_used} -> 0)",
            boot,
            ("owner_boot_request", "party_bootstrap_share", "owner_boot_finish"),
            ("boot_request", "boot_share"),
            float(np.max(np.abs(back - x))),
        )
    )

    u = server.encrypt(10 * x)
    sig, sig_s = timed(lambda: u.logistic(-10.0, 10.0, 13))
    plain = 1 / (1 + np.exp(-10 * x))
    got = run_joint_decryption(roles[0], roles, sig, InProcessRunner(), slots)
    rows.append(
        {
            "operation": "sigmoid degree 13 on [-10, 10] (EvalLogistic)",
            "seconds": sig_s,
            "max_error": float(np.max(np.abs(got - plain))),
            "levels": sig.levels_used,
            "paper": PAPER["sigmoid degree 13"],
        }
    )

    for r, c in ((64, 32), (32, 16)):
        if r * c > slots:
            continue
        xv, w = gen.uniform(-1, 1, r), gen.uniform(-1, 1, (r, c))
        packed = np.zeros(slots)
        packed[: r * c] = w.T.ravel()
        xc, wc = server.encrypt(xv), server.encrypt(packed)
        y, y_s = timed(lambda xc=xc, wc=wc, r=r, c=c: vector_matrix(xc, wc, r, c))
        got = run_joint_decryption(roles[0], roles, y, InProcessRunner(), r * c)[::r]
        rows.append(
            {
                "operation": f"{r}x{c} encrypted vector-matrix product",
                "seconds": y_s,
                "max_error": float(np.max(np.abs(got - xv @ w))),
                "levels": y.levels_used,
            }
        )
    return rows


def show(rows: list[dict[str, Any]]) -> None:
    head = f"{'operation':<50}{'ours s':>9}{'ours MB':>10}{'at 1Gbps s':>12}"
    head += f"{'paper s':>9}{'paper MB':>10}"
    print(head)
    print("-" * len(head))
    for row in rows:
        mb, sec = row.get("mb"), row.get("seconds")
        paper = row.get("paper") or (None, None)
        total = None
        if mb is not None:
            total = (sec or 0.0) + network_seconds(mb * MB, row.get("messages", 1))

        def fmt(v: float | None, width: int, digits: int = 2) -> str:
            return f"{v:{width}.{digits}f}" if v is not None else f"{'-':>{width}}"

        print(
            f"{row['operation']:<50}{fmt(sec, 9)}{fmt(mb, 10)}{fmt(total, 12)}"
            f"{fmt(paper[0], 9)}{fmt(paper[1], 10, 1)}"
        )
        extra = {k: row[k] for k in ("max_error", "levels") if k in row}
        if extra:
            print(f"{'':<4}{extra}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", default="training")
    ap.add_argument("--parties", type=int, default=3)
    ap.add_argument("--rotations", type=int, default=23)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    params = parameter_set(args.set)
    print(
        f"threshold CKKS, set {args.set!r}, {args.parties} parties: depth "
        f"{params.multiplicative_depth}, batch {params.batch_size}, flooding sigma "
        f"2^{params.flooding_std_bits(args.parties):.1f}, {params.max_decryptions} decryptions, "
        f"slot error sd 2^{params.decryption_error_bits(args.parties):.1f}"
    )
    rows = run(args.set, args.parties, args.rotations)
    show(rows)
    print(
        "(*) simulated in one process, the party finds the server's keys already installed in "
        "OpenFHE's process-global store, so only the transfer is real"
    )
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2) + "\n")


if __name__ == "__main__":
    main()
