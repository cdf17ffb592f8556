"""Where the joint layout's extra error comes from (issue 27): one malicious execution's
aggregation step by step, T and F in two ciphertexts (folded) or one (joint).

Real 2-party joint key on the insecure ``fhauc-test`` ring, with OpenFHE's decryption noise
flooding switched off for this diagnostic only (``SetDecryptionNoiseMode`` is patched before
any context exists; OpenFHE's multiparty decryption still adds its fixed 2^20 smudging, about
1.7e-10 per slot here), so the errors of intermediate ciphertexts are visible. The parties'
vectors are the real ones (masks, multipliers, splits and permutation of
:mod:`privfl.evaluation.fhauc.malicious` on synthetic counts); the aggregator's steps are
those of :meth:`privfl.evaluation.fhauc.Aggregator.aggregate` on
:class:`~privfl.evaluation.fhauc.threshold.ops.ThresholdCiphertext`. Prints per layout the rms
error of the summed T and F (F rotated by W in the joint layout), of the slot products, the
numerator's error at the decoded slot and its rms over the slots, the denominator's, the
decoded ``Y``'s error (a difference of two slots), and ``2^-53 sum_m ||v_m||^2``.

    OMP_NUM_THREADS=1 nice -n 5 .venv/bin/python benchmarks/threshold_joint_decomposition.py
"""

from __future__ import annotations

import os

os.environ.setdefault("OMP_NUM_THREADS", "1")  # before OpenFHE loads

import secrets

import numpy as np
import openfhe

openfhe.CCParamsCKKSRNS.SetDecryptionNoiseMode = lambda self, mode: None  # diagnostic only

from privfl.crypto.threshold import parameter_set  # noqa: E402
from privfl.evaluation.fhauc import malicious  # noqa: E402
from privfl.evaluation.fhauc.layout import Layout  # noqa: E402
from privfl.evaluation.fhauc.threshold.ops import ThresholdCiphertext  # noqa: E402
from privfl.runner import InProcessRunner  # noqa: E402
from privfl.threshold import make_roles, run_joint_decryption, run_key_generation  # noqa: E402

PARTIES, ROWS, POINTS, SPLITS = 2, 1000, 100, 4


def counts(rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, int, int]:
    """One party's numerator vectors (TP^n + TP^{n-1}, FP^n - FP^{n-1}) and totals."""
    y = rng.random(ROWS) < 0.3
    s = np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1)
    edges = np.linspace(0, 1, POINTS + 1)[1:-1]
    tp = np.concatenate([[0], [np.sum(s[y] >= e) for e in edges][::-1], [y.sum()]])
    fp = np.concatenate([[0], [np.sum(s[~y] >= e) for e in edges][::-1], [(~y).sum()]])
    t = (tp[1:POINTS] + tp[: POINTS - 1]).astype(np.int64)
    f = (fp[1:POINTS] - fp[: POINTS - 1]).astype(np.int64)
    return t, f, int(y.sum()), int((~y).sum())


def rms(v: np.ndarray) -> float:
    return float(np.sqrt(np.mean(v**2)))


def main() -> None:
    params = parameter_set("fhauc-test")
    slots = params.batch_size
    rng = np.random.default_rng(1)  # benchmark data only, not secret
    sizes = malicious.Sizes.for_session(PARTIES, POINTS, SPLITS, ROWS, 0)
    key = secrets.token_bytes(32)
    print(f"load average {os.getloadavg()}; {PARTIES} parties x {ROWS} rows, N = {POINTS}")
    for joint in (False, True):
        layout = Layout.for_terms(SPLITS * POINTS, slots, joint)
        server, parties = make_roles(params, PARTIES)
        run_key_generation(server, parties, InProcessRunner())

        def dec(ct: ThresholdCiphertext, parties: list = parties) -> np.ndarray:
            return run_joint_decryption(parties[0], parties, ct.ct, InProcessRunner(), slots)

        tvs, fvs = [], []
        for i in range(PARTIES):
            t, f, pos, neg = counts(rng)
            rnd = malicious.derive(key, 0, i, sizes)
            tv, fv, dt, df = malicious.masked_positions(t, f, pos, neg, rnd)
            tperm, fperm = malicious.split_and_permute(tv, fv, rnd, sizes)
            tc, fc, _ = layout.pack(tperm, fperm, dt, df)
            tvs.append(tc[0])
            fvs.append(fc[0] if fc else tc[0])
        w = layout.window
        big_t = ThresholdCiphertext(parties[0].encrypt(tvs[0], 0))
        for p, v in zip(parties[1:], tvs[1:], strict=True):
            big_t = big_t + ThresholdCiphertext(p.encrypt(v, 0))
        tsum = sum(tvs)
        if joint:
            big_f, fsum = big_t.rotate(w), np.roll(tsum, -w)
        else:
            big_f = ThresholdCiphertext(parties[0].encrypt(fvs[0], 0))
            for p, v in zip(parties[1:], fvs[1:], strict=True):
                big_f = big_f + ThresholdCiphertext(p.encrypt(v, 0))
            fsum = sum(fvs)
        e_t, e_f = dec(big_t) - tsum, dec(big_f) - fsum
        prod, pv = big_t * big_f, tsum * fsum
        e_prod = dec(prod) - pv
        num = prod.window_sum(w)
        nv = sum(np.roll(pv, -i) for i in range(w))
        e_num = dec(num) - nv
        den = big_t * big_f.rotate(w // 2)
        e_den = dec(den) - tsum * np.roll(fsum, -w // 2)
        ds = layout.denominator_slot
        y_err = (e_num[ds] + e_den[ds]) - (e_num[ds + 1] + e_den[ds + 1])
        base = 2.0**-53 * sum(float(np.sum(v**2)) for v in tvs)
        if not joint:
            base += 2.0**-53 * sum(float(np.sum(v**2)) for v in fvs)
        print(
            f"{'joint ' if joint else 'folded'}: rms error T {rms(e_t):.2e} F {rms(e_f):.2e}  "
            f"products {rms(e_prod):.2e}  numerator at slot {ds + 1} {e_num[ds + 1]:.2e} "
            f"(rms over slots {rms(e_num):.2e})  denominator at slot {ds} {e_den[ds]:.2e}  "
            f"Y {y_err:.2e}  2^-53 sum ||v_m||^2 {base:.2e}",
            flush=True,
        )


if __name__ == "__main__":
    main()
