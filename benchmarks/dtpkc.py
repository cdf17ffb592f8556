"""DT-PKC timings for issue #6: median of 20 runs per operation at |N| = 1024, 2048, 3072.

    .venv/bin/python benchmarks/dtpkc.py [--bits 1024,2048,3072] [--repeats 20] [--json OUT]

Reference: RevFRF's Java implementation needed ~0.13 s per secure comparison at |N| = 1024.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable

from privfl.crypto import dtpkc


def median_time(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run(bits: int, repeats: int) -> dict:
    start = time.perf_counter()
    kgc = dtpkc.KeyGenerationCenter(bits=bits)
    keygen = time.perf_counter() - start
    sk_cs, pk_cs = kgc.new_key_pair()
    sk_u, pk_u = kgc.new_key_pair()
    sk_a, pk_a = kgc.new_key_pair()
    lam1, lam2 = kgc.strong_key_shares()
    cs, cc = dtpkc.CenterServer(sk_cs, pk_cs, lam1), dtpkc.ComputationProvider(lam2)
    dtpkc.encrypt(pk_a, 1)  # build the fixed-base tables once (amortised in real use)
    dtpkc.encrypt(pk_u, 1)
    dtpkc.encrypt(pk_cs, 1)
    dtpkc.encrypt(dtpkc.joint_public_key(pk_cs, pk_u), 1)
    c = dtpkc.encrypt(pk_a, 123456789)
    cu = dtpkc.encrypt(pk_u, 987654321)
    joint = dtpkc.encrypt(dtpkc.joint_public_key(pk_u, pk_cs), 5)
    t = dtpkc.partial_decrypt_strong1(lam1, c)
    row = {
        "bits": bits,
        "keygen_s": keygen,
        "key_pair_s": median_time(kgc.new_key_pair, repeats),
        "encrypt_s": median_time(lambda: dtpkc.encrypt(pk_a, 42), repeats),
        "weak_decrypt_s": median_time(lambda: dtpkc.decrypt(sk_a, c), repeats),
        "psdec1_s": median_time(lambda: dtpkc.partial_decrypt_strong1(lam1, c), repeats),
        "psdec2_s": median_time(lambda: dtpkc.partial_decrypt_strong2(lam2, c, t), repeats),
        "joint_partial_decrypt_s": median_time(
            lambda: cs.finish_decrypt(dtpkc.joint_partial_decrypt(sk_u, joint)), repeats
        ),
        "hoadd_s": median_time(lambda: dtpkc.secure_add(cs, cc, c, cu, pk_cs), repeats),
        "holt_s": median_time(
            lambda: dtpkc.secure_less_than(cs, cc, c, cu, holder_public_key=pk_u), repeats
        ),
        "ciphertext_bytes": len(c.to_bytes()),
    }
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bits", default="1024,2048,3072")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--json")
    args = ap.parse_args()
    rows = []
    cols = [
        "keygen_s",
        "encrypt_s",
        "weak_decrypt_s",
        "psdec1_s",
        "psdec2_s",
        "joint_partial_decrypt_s",
        "hoadd_s",
        "holt_s",
    ]
    print(f"{'|N|':>5} " + " ".join(f"{c[:-2]:>12}" for c in cols) + f" {'ct bytes':>9}")
    for bits in (int(b) for b in args.bits.split(",")):
        row = run(bits, args.repeats)
        rows.append(row)
        print(
            f"{bits:>5} "
            + " ".join(f"{row[c] * 1e3:>10.2f}ms" for c in cols)
            + f" {row['ciphertext_bytes']:>9}",
            flush=True,
        )
    for row in rows:
        if row["bits"] == 1024:
            print(
                f"\nHoLT at 1024 bits: {row['holt_s']:.4f} s = {0.13 / row['holt_s']:.1f}x faster "
                "than RevFRF's 0.13 s per secure comparison"
            )
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(rows, fh, indent=2)


if __name__ == "__main__":
    main()
