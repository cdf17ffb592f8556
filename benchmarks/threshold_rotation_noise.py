"""Key-switching noise of one rotation under OpenFHE's threshold-CKKS parameters (issue 27).

The threshold malicious AUC puts T and F in one ciphertext (the joint layout,
:mod:`privfl.evaluation.fhauc.layout`): the aggregator rotates the parties' sum by the window
``W`` once, which adds key-switching noise to F. This prints OpenFHE's own error estimate
(``EXEC_NOISE_ESTIMATION``: ``log2`` of the error read off the imaginary parts, coefficient
units, :func:`privfl.crypto.threshold.context.estimate_noise_bits`) of a fresh public-key
encryption and of the same ciphertext rotated by ``W = 1024``, for the ``"fhauc"`` set
(ring 2^14) and the test set ``"fhauc-test"`` (ring 2^12), at level 0 (the malicious upload
level), under a single throwaway key. The joint key of ``M`` parties multiplies both by about
``sqrt(M)`` (the fresh error through the summed public-key error and secret, the key-switching
error through the summed key-switching keys), so the ratio is the one of
threshold mode. :data:`privfl.evaluation.fhauc.threshold.noise.ROTATION_NOISE` is the bound the
verification's noise model uses.

    OMP_NUM_THREADS=1 nice -n 5 .venv/bin/python benchmarks/threshold_rotation_noise.py [--runs 20]
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from privfl.crypto.threshold import parameter_set
from privfl.crypto.threshold.context import estimate_noise_bits
from privfl.evaluation.fhauc.threshold.noise import ROTATION_NOISE


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--window", type=int, default=1024)
    args = ap.parse_args()
    rng = np.random.default_rng(0)  # test values, not secret
    print(f"load {'/'.join(f'{x:.2f}' for x in os.getloadavg())}; {args.runs} runs per row")
    for name in ("fhauc", "fhauc-test"):
        params = parameter_set(name)
        fresh, rotated = [], []
        for _ in range(args.runs):
            x = [float(v) for v in rng.uniform(-1, 1, params.batch_size)]

            def fresh_ct(cc, enc, x=x):  # type: ignore[no-untyped-def]
                return enc(x)

            def rotated_ct(cc, enc, x=x):  # type: ignore[no-untyped-def]
                return cc.EvalRotate(enc(x), args.window)

            fresh.append(estimate_noise_bits(params, fresh_ct))
            rotated.append(estimate_noise_bits(params, rotated_ct))
        f, r = np.array(fresh), np.array(rotated)
        # the rotation's own noise in units of the fresh error, from the mean squared errors:
        # err(rotated)^2 = err(fresh)^2 (1 + rho^2)
        ratio = float(np.mean(4.0**r) / np.mean(4.0**f))
        rho = float(np.sqrt(max(0.0, ratio - 1.0)))
        print(
            f"{name:10s} level 0: fresh 2^{f.mean():.2f} (sd {f.std():.2f}), rotated by "
            f"{args.window} 2^{r.mean():.2f} (sd {r.std():.2f}); rotation noise "
            f"~{rho:.2f} x fresh (model bound {ROTATION_NOISE:g})",
            flush=True,
        )


if __name__ == "__main__":
    main()
