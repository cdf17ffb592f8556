"""Threshold FHAUC's rotate-and-sum before and after the integer multiplier (issue 30).

On the ``"fhauc"`` chain (ring 2^14, depth 3, 59-bit scale, HYBRID key switching, the set's
batch: 4096 slots when the results were taken, 8192 now;
a single OpenFHE key pair, no flooding, to see the circuit's own error): ``P = x·y`` for two
fresh ciphertexts, then either the eager order (rotate-and-sum over ``W = 256`` on the
unrescaled product, then ``c`` by doubling additions) or privfl's (``c`` first, rescale, then
the rotations on one tower fewer). Prints the largest slot error of ``X/c`` against the
plaintext for each order, and the process CPU time of one rotation on three and on two towers.

    nice -n 10 .venv/bin/python benchmarks/threshold_window_order.py [--trials 3]
"""

from __future__ import annotations

import argparse
import math
import os
import time
from typing import Any

import numpy as np

from privfl.crypto.threshold.params import FIRST_MOD_BITS, SCALING_MOD_BITS
from privfl.crypto.threshold.threads import import_openfhe

SLOTS, WINDOW = 4096, 256


def context(fhe: Any) -> Any:
    p = fhe.CCParamsCKKSRNS()
    p.SetSecretKeyDist(fhe.UNIFORM_TERNARY)
    p.SetSecurityLevel(fhe.HEStd_128_classic)
    p.SetScalingModSize(SCALING_MOD_BITS)
    p.SetFirstModSize(FIRST_MOD_BITS)
    p.SetScalingTechnique(fhe.FLEXIBLEAUTO)
    p.SetMultiplicativeDepth(3)
    p.SetNumLargeDigits(2)
    p.SetKeySwitchTechnique(fhe.HYBRID)
    p.SetBatchSize(SLOTS)
    cc = fhe.GenCryptoContext(p)
    for feature in (fhe.PKE, fhe.KEYSWITCH, fhe.LEVELEDSHE, fhe.ADVANCEDSHE):
        cc.Enable(feature)
    return cc


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=3)
    args = ap.parse_args()
    fhe = import_openfhe()
    cc = context(fhe)
    kp = cc.KeyGen()
    cc.EvalMultKeyGen(kp.secretKey)
    cc.EvalRotateKeyGen(kp.secretKey, [1 << k for k in range(12)])
    gen = np.random.default_rng(1)  # not secret: benchmark data

    def enc(v: np.ndarray) -> Any:
        return cc.Encrypt(kp.publicKey, cc.MakeCKKSPackedPlaintext(list(v), 1, 1))

    def times(ct: Any, k: int) -> Any:  # k·ct by doubling additions (no level)
        out, base = None, ct
        while k:
            if k & 1:
                out = base if out is None else cc.EvalAdd(out, base)
            k >>= 1
            if k:
                base = cc.EvalAdd(base, base)
        return out

    def window_sum(ct: Any) -> Any:
        step = 1
        while step < WINDOW:
            ct = cc.EvalAdd(ct, cc.EvalRotate(ct, step))
            step *= 2
        return ct

    def decrypt(ct: Any) -> np.ndarray:
        pt = cc.Decrypt(ct, kp.secretKey)
        pt.SetLength(SLOTS)
        return np.array(pt.GetRealPackedValue())

    def rotation_cpu(ct: Any, n: int = 10) -> float:
        cc.EvalRotate(ct, 1)
        c0 = time.process_time()
        for _ in range(n):
            cc.EvalRotate(ct, 1)
        return (time.process_time() - c0) / n

    xv, yv = gen.uniform(0, 2**-10, SLOTS), gen.uniform(0, 2**-10, SLOTS)
    ref = sum(np.roll(xv * yv, -i) for i in range(WINDOW))
    print(f"ring {cc.GetRingDimension()}, W = {WINDOW}; load {os.getloadavg()}")
    for _ in range(args.trials):
        p = cc.EvalMult(enc(xv), enc(yv))
        c = int(gen.integers(2**20, 2**40))
        eager = cc.Compress(times(window_sum(p), c), 2)
        deferred = window_sum(cc.Compress(times(p, c), 2))
        errors = [float(np.max(np.abs(decrypt(r) / c - ref))) for r in (eager, deferred)]
        print(
            f"c = 2^{math.log2(c):.1f}: largest |error| of X/c, eager 2^{math.log2(errors[0]):.1f}"
            f", multiplier first 2^{math.log2(errors[1]):.1f}"
        )
    p = cc.EvalMult(enc(xv), enc(yv))
    three, two = rotation_cpu(p), rotation_cpu(cc.Compress(p, 2))
    print(f"one rotation, CPU: {1e3 * three:.2f} ms on three towers, {1e3 * two:.2f} ms on two")
    print(f"load {os.getloadavg()}")


if __name__ == "__main__":
    main()
