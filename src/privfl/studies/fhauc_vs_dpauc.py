"""The accuracy and leakage study comparing FHAUC with DPAUC (FHAUC's Tables 1 and 2).

``accuracy_study``: for each global test size, sample that many scored examples, deal them to
the parties (IID: at random; non-IID: contiguous blocks after sorting by score, DPAUC's
definition), and compare scikit-learn's exact AUC, FHAUC's AUC (one run: it is
deterministic) and DPAUC's mean and standard deviation over ``runs`` for every epsilon and
both mechanisms.

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
import numpy.typing as npt

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


Progress = Callable[[int], None]


@dataclass
class Sample:
    """The scored examples of one study size and how they were drawn."""

    scores: npt.NDArray[np.float64]
    labels: npt.NDArray[np.int8]
    with_replacement: bool


def draw_sample(
    scores: npt.NDArray[np.float64], labels: npt.NDArray[np.int8], size: int, seed: int
) -> Sample:
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


@dataclass
class AccuracyRow:
    size: int
    thresholds: int
    sklearn: float
    binned: float
    fhauc: float
    dpauc: dict[str, dict[str, float]] = field(default_factory=dict)  # "laplace eps=1" -> stats
    with_replacement: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "size": self.size,
            "thresholds": self.thresholds,
            "sklearn": self.sklearn,
            "binned": self.binned,
            "fhauc": self.fhauc,
            "fhauc_abs_error": abs(self.fhauc - self.sklearn),
            "dpauc": self.dpauc,
            "sample": "resampled with replacement"
            if self.with_replacement
            else "without replacement",
        }


def accuracy_study(
    scores: npt.NDArray[np.float64],
    labels: npt.NDArray[np.int8],
    sizes: Sequence[int],
    thresholds: Sequence[int],
    epsilons: Sequence[float],
    parties: int = 15,
    runs: int = 100,
    iid: bool = True,
    seed: int = 0,
    mechanisms: Sequence[str] = dp.MECHANISMS,
    progress: Progress | None = None,
) -> list[AccuracyRow]:
    """Table 1: rows size x N; sklearn, FHAUC and DPAUC mean/std per epsilon and mechanism."""
    rows = []
    for size in sizes:
        sample = draw_sample(scores, labels, size, seed + size)
        data = deal(sample.scores, sample.labels, parties, seed, iid=iid)
        exact = exact_auc(data)
        for n in thresholds:
            fh = federated_auc(data, n)
            row = AccuracyRow(
                size, n, exact, binned_auc(data, n), fh.auc, {}, sample.with_replacement
            )
            interior = interior_thresholds(n)
            counts = [party_counts(s, y, interior) for s, y in data]
            for mech in mechanisms:
                for eps in epsilons:
                    noise = dp.NoiseSource(seed=_derived_seed(seed, size, n, mech, float(eps)))
                    aucs = []
                    for _ in range(runs):
                        res = dp.run_dpauc(data, interior, float(eps), mech, noise, counts)
                        aucs.append(res.auc)
                        if progress:
                            progress(1)
                    arr = np.asarray(aucs)
                    finite = arr[np.isfinite(arr)]
                    row.dpauc[f"{mech} eps={eps:g}"] = {
                        "mean": float(finite.mean()) if finite.size else float("nan"),
                        "std": float(finite.std()) if finite.size else float("nan"),
                        "mean_abs_error": float(np.abs(finite - exact).mean())
                        if finite.size
                        else float("nan"),
                        "non_finite_runs": int(arr.size - finite.size),
                    }
            rows.append(row)
    return rows


@dataclass
class LeakageRow:
    epsilon: float
    thresholds: int
    total: tuple[float, float]  # mean, std of |error| in samples
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
    party_scores: npt.NDArray[np.float64],
    party_labels: npt.NDArray[np.int8],
    epsilons: Sequence[float] = (1, 2, 4, 8),
    thresholds: Sequence[int] = (25, 50, 100),
    runs: int = 100,
    seed: int = 0,
    progress: Progress | None = None,
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
                rel = dp.laplace_release(counts, float(eps), noise)
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
            ax.plot(
                sizes, [r.dpauc[key]["mean_abs_error"] for r in sub], style, label=f"DPAUC {key}"
            )
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
