"""The accuracy and leakage study comparing FHAUC with DPAUC (FHAUC's Tables 1 and 2).

``accuracy_study``: for each global test size, sample that many scored examples, deal them to
the parties (:func:`privfl.datasets.deal`: IID at random, or non-IID contiguous score blocks,
DPAUC's definition), and compare scikit-learn's exact AUC, FHAUC's AUC (one run: it is
deterministic) and DPAUC's mean and standard deviation over ``runs`` for every epsilon, both
mechanisms and both post-processings (the faithful one and the DPAUC authors'; each run's
releases are post-processed both ways, so the two columns are paired).

``leakage_study``: the server's count-inference attack on one party's DPAUC_Lap release, mean
and standard deviation over ``runs`` of the error (in samples) of its estimates of the party's
total, positive and negative counts.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from privfl._typing import FloatArray, Int8Array
from privfl.datasets import deal
from privfl.errors import InputError
from privfl.evaluation import dpauc as dp
from privfl.evaluation.federated import federated_auc
from privfl.evaluation.reference import binned_auc, exact_auc
from privfl.evaluation.statistics import interior_thresholds, party_counts

log = logging.getLogger(__name__)


def _derived_seed(*parts: Any) -> int:
    """A reproducible 32-bit seed from the parts (``hash()`` is salted per process)."""
    return int.from_bytes(hashlib.sha256(repr(parts).encode()).digest()[:4], "big")


Advance = Callable[[int], None]


@dataclass(frozen=True)
class Sample:
    """The scored examples of one study size and how they were drawn."""

    scores: FloatArray
    labels: Int8Array
    with_replacement: bool


def draw_sample(scores: FloatArray, labels: Int8Array, size: int, seed: int) -> Sample:
    """``size`` examples: without replacement when the data has that many, else resampled
    with replacement (the study reports which)."""
    rng = np.random.default_rng(seed)  # not secret: which examples form the test set
    replace = size > scores.size
    for _ in range(100):
        idx = rng.choice(scores.size, size=size, replace=replace)
        y = labels[idx]
        if 0 < y.sum() < y.size:
            return Sample(scores[idx], y, replace)
    raise InputError(f"could not draw {size} examples containing both classes")


def variant_key(mechanism: str, epsilon: float, postprocess: str = "none") -> str:
    """The column name of one DPAUC setting: ``"laplace eps=1"``, ``"laplace eps=1
    dpauc-authors"``..."""
    key = f"{mechanism} eps={epsilon:g}"
    return key if postprocess == "none" else f"{key} {postprocess}"


@dataclass(frozen=True)
class DPStats:
    """DPAUC's AUC over the runs of one setting: mean, standard deviation and mean absolute
    error against the exact AUC over the finite runs; how many runs were not finite and how
    many left [0, 1] (noise dominates)."""

    mean: float
    std: float
    mean_abs_error: float
    non_finite_runs: int
    outside_unit_runs: int
    runs: int

    @classmethod
    def of(cls, aucs: Sequence[float], exact: float) -> DPStats:
        arr = np.asarray(aucs, dtype=np.float64)
        fin = arr[np.isfinite(arr)]
        nan = float("nan")
        return cls(
            float(fin.mean()) if fin.size else nan,
            float(fin.std()) if fin.size else nan,
            float(np.abs(fin - exact).mean()) if fin.size else nan,
            int(arr.size - fin.size),
            int(np.sum((fin < 0.0) | (fin > 1.0))),
            int(arr.size),
        )

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass(frozen=True)
class AccuracyRow:
    """One (size, N) row of Table 1: the references and every DPAUC setting's statistics."""

    size: int
    thresholds: int
    sklearn: float
    binned: float
    fhauc: float
    dpauc: dict[str, DPStats] = field(default_factory=dict)  # variant_key -> stats
    with_replacement: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "thresholds": self.thresholds,
            "sklearn": self.sklearn,
            "binned": self.binned,
            "fhauc": self.fhauc,
            "fhauc_abs_error": abs(self.fhauc - self.sklearn),
            "dpauc": {k: v.to_dict() for k, v in self.dpauc.items()},
            "sample": "resampled with replacement"
            if self.with_replacement
            else "without replacement",
        }


def accuracy_study(
    scores: FloatArray,
    labels: Int8Array,
    sizes: Sequence[int],
    thresholds: Sequence[int],
    epsilons: Sequence[float],
    parties: int = 15,
    runs: int = 100,
    iid: bool = True,
    seed: int = 0,
    mechanisms: Sequence[str] = dp.MECHANISMS,
    progress: Advance | None = None,
    *,
    calibration: str = "total-budget",
    postprocessing: Sequence[str] = dp.POSTPROCESSING,
) -> list[AccuracyRow]:
    """Table 1: rows size x N; sklearn, FHAUC and DPAUC statistics per epsilon, mechanism and
    post-processing (:func:`variant_key`), with the Laplace noise of ``calibration``."""
    rows = []
    for size in sizes:
        sample = draw_sample(scores, labels, size, seed + size)
        data = deal(sample.scores, sample.labels, parties, seed, iid=iid)
        exact = exact_auc(data)
        for n in thresholds:
            fh = federated_auc(data, n)
            interior = interior_thresholds(n)
            counts = [party_counts(s, y, interior) for s, y in data]
            stats: dict[str, DPStats] = {}
            for mech in mechanisms:
                for eps in epsilons:
                    noise = dp.NoiseSource(seed=_derived_seed(seed, size, n, mech, float(eps)))
                    aucs: dict[str, list[float]] = {pp: [] for pp in postprocessing}
                    for _ in range(runs):
                        res = dp.run_dpauc(
                            data, interior, float(eps), mech, noise, counts,
                            calibration=calibration,
                        )  # fmt: skip
                        for pp in postprocessing:
                            aucs[pp].append(dp.aggregate(res.noisy_counts, pp)[0])
                        if progress:
                            progress(1)
                    for pp, values in aucs.items():
                        stats[variant_key(mech, eps, pp)] = DPStats.of(values, exact)
            rows.append(
                AccuracyRow(
                    size, n, exact, binned_auc(data, n), fh.auc, stats, sample.with_replacement
                )
            )
    return rows


@dataclass(frozen=True)
class LeakageRow:
    """One (epsilon, N) row of Table 2: mean and std of the attack's |error| in samples."""

    epsilon: float
    thresholds: int
    total: tuple[float, float]
    positives: tuple[float, float]
    negatives: tuple[float, float]

    def to_dict(self) -> dict[str, Any]:
        return {
            "epsilon": self.epsilon,
            "thresholds": self.thresholds,
            "total_error": {"mean": self.total[0], "std": self.total[1]},
            "positives_error": {"mean": self.positives[0], "std": self.positives[1]},
            "negatives_error": {"mean": self.negatives[0], "std": self.negatives[1]},
        }


def leakage_study(
    party_scores: FloatArray,
    party_labels: Int8Array,
    epsilons: Sequence[float] = (1, 2, 4, 8),
    thresholds: Sequence[int] = (25, 50, 100),
    runs: int = 100,
    seed: int = 0,
    progress: Advance | None = None,
    *,
    calibration: str = "total-budget",
) -> list[LeakageRow]:
    """Table 2: error of the count-inference attack on one party's DPAUC_Lap release."""
    pos_true = int(party_labels.sum())
    neg_true = int(party_labels.size - pos_true)
    rows = []
    for eps in epsilons:
        for n in thresholds:
            counts = party_counts(party_scores, party_labels, interior_thresholds(n))
            noise = dp.NoiseSource(seed=_derived_seed(seed, "leak", float(eps), n))
            errs = []
            for _ in range(runs):
                rel = dp.laplace_release(counts, float(eps), noise, calibration)
                pos, neg = dp.infer_party_counts(rel)
                errs.append(
                    (abs(pos + neg - pos_true - neg_true), abs(pos - pos_true), abs(neg - neg_true))
                )
                if progress:
                    progress(1)
            e = np.asarray(errs)
            rows.append(
                LeakageRow(
                    float(eps),
                    n,
                    (float(e[:, 0].mean()), float(e[:, 0].std())),
                    (float(e[:, 1].mean()), float(e[:, 1].std())),
                    (float(e[:, 2].mean()), float(e[:, 2].std())),
                )
            )
    return rows


def plot_errors(rows: Sequence[AccuracyRow], path: str) -> None:
    """|AUC - exact| against the test size (log-log), one panel per N: FHAUC in black,
    each DPAUC mechanism/epsilon in its own colour (mean absolute error over the runs)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ns = sorted({r.thresholds for r in rows})
    fig, axes = plt.subplots(1, len(ns), figsize=(4.2 * len(ns), 4), sharey=True, squeeze=False)
    for ax, n in zip(axes[0], ns, strict=True):
        sub = sorted((r for r in rows if r.thresholds == n), key=lambda r: r.size)
        sizes = [r.size for r in sub]
        ax.plot(
            sizes,
            [max(abs(r.fhauc - r.sklearn), 1e-12) for r in sub],
            "o-",
            color="black",
            lw=2,
            label="FHAUC",
        )
        for key in sub[0].dpauc:
            style = "x--" if key.startswith("laplace") else "s:"
            if key.endswith("dpauc-authors"):
                style = "d-."
            ax.plot(sizes, [r.dpauc[key].mean_abs_error for r in sub], style, label=f"DPAUC {key}")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("global test size")
        ax.set_title(f"N = {n}")
        ax.grid(alpha=0.3)
    axes[0][0].set_ylabel("|AUC - exact AUC|")
    axes[0][-1].legend(fontsize=7)
    fig.suptitle("FHAUC vs DPAUC: error against scikit-learn's exact AUC")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
