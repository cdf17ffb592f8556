"""Where OpenFHE's CKKS decoder refuses a threshold-FHAUC reply (issue 27: the derivation of
``fhauc.threshold.ops.capacity_bits``, docs/security/fhauc.md "Why a reply decodes").

On the FHAUC chain (scale 2^59, compressed to the two towers of joint decryption) under a
throwaway single key (the encoder and decoder are the joint key's): per row, the largest
error against the exact values, OpenFHE's error estimate (``GetLogError``, ``round(log2(std
sqrt(2n) sqrt 2))`` of the imaginary part, or "refused": "approximation error is too high")
and, for FHAUC-shaped replies, the derived per-slot imaginary error ``s = rho sqrt(2 sum_i
(a_i b_i)^2)`` (``rho = 2^-49.7``) next to the decoder's limit ``2^-5 sqrt(2n)``.

    nice .venv/bin/python benchmarks/threshold_decode_capacity.py [--set fhauc-test|fhauc]

Rows: ``fresh 2^m``: a fresh vector uniform in ``[-2^m, 2^m]``; ``shares 2^s x F 2^f``: 400
slots of additive shares (3 of 4 uniform up to ``2^s``, the fourth making each position's sum
below 100) times F values up to ``2^f`` repeated 4 times, multiplied and summed over every
slot by rotations: the reply is small, the slot products are not.
"""

from __future__ import annotations

import argparse
import math
import os

import numpy as np

from privfl.crypto.threshold import ThresholdContext, parameter_set

RHO_BITS = -49.7


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--set", default="fhauc-test")
    args = ap.parse_args()
    params = parameter_set(args.set)
    ctx = ThresholdContext.for_parameters(params, 2)
    cc, n = ctx.cc, params.batch_size
    keys = cc.KeyGen()
    cc.EvalMultKeyGen(keys.secretKey)
    cc.EvalAtIndexKeyGen(keys.secretKey, [1 << i for i in range(int(math.log2(n)))])
    rng = np.random.default_rng(1)  # not secret: benchmark data
    limit = -5 + 0.5 * math.log2(2 * n)
    load = "/".join(f"{x:.2f}" for x in os.getloadavg())
    print(
        f"set {args.set}: ring 2^{int(math.log2(ctx.ring))}, {n} slots; decoder limit on the "
        f"per-slot imaginary error 2^{limit:.1f}; load {load}"
    )

    def encrypt(v: np.ndarray) -> object:
        return cc.Encrypt(keys.publicKey, cc.MakeCKKSPackedPlaintext([float(x) for x in v]))

    def decode(ct: object, want: np.ndarray) -> str:
        try:
            pt = cc.Decrypt(cc.Compress(ct, 2), keys.secretKey)
        except RuntimeError:
            return "refused"
        pt.SetLength(n)
        err = float(np.max(np.abs(np.array(pt.GetRealPackedValue()) - want)))
        bits = math.log2(max(err, 2.0**-60))
        return f"decoded, max |err| 2^{bits:.1f}, logError {pt.GetLogError():.0f}"

    for m in (30, 40, 44, 48, 50, 52):
        want = rng.uniform(-1, 1, n) * 2.0**m
        print(f"fresh 2^{m}: {decode(encrypt(want), want)}", flush=True)
    for share_bits, f_bits in (
        (20, 20),
        (24, 20),
        (28, 16),
        (28, 20),
        (30, 16),
        (30, 20),
        (32, 20),
    ):
        used, splits = 400, 4
        shares = rng.uniform(-1, 1, (used // splits, splits)) * 2.0**share_bits
        shares[:, -1] = rng.uniform(0, 100, used // splits) - shares[:, :-1].sum(axis=1)
        a, b = np.zeros(n), np.zeros(n)
        a[:used] = shares.ravel()
        b[:used] = np.repeat(rng.uniform(0, 1, used // splits) * 2.0**f_bits, splits)
        ct = cc.EvalMult(encrypt(a), encrypt(b))
        step = 1
        while step < n:
            ct = cc.EvalAdd(ct, cc.EvalRotate(ct, step))
            step *= 2
        s = RHO_BITS + 0.5 * math.log2(2 * float(np.sum((a * b) ** 2)))
        x = float(a @ b)
        print(
            f"shares 2^{share_bits} x F 2^{f_bits}: reply 2^{math.log2(abs(x)):.1f}, derived "
            f"s 2^{s:.1f}: {decode(ct, np.full(n, x))}",
            flush=True,
        )


if __name__ == "__main__":
    main()
