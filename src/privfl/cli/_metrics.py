"""The ``curve``/``metrics`` parts of ``privfl auc``: running the reveal, the
table rows, the JSON fields and the ROC/PR figure."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
from rich.table import Table

from privfl.errors import InputError
from privfl.evaluation.curves import ThresholdMetrics
from privfl.evaluation.statistics import interior_thresholds, points_including

METRIC_ROWS = (
    ("accuracy", "accuracy"),
    ("precision", "precision"),
    ("recall / TPR", "recall"),
    ("FPR", "fpr"),
    ("F1", "f1"),
    ("balanced accuracy", "balanced_accuracy"),
    ("MCC", "mcc"),
)


def check_options(
    reveal: str,
    plot: Path | None,
    metrics_at: float | None,
    thresholds: int,
    score_range: tuple[float, float],
) -> None:
    """Refuse option combinations that cannot work, or that would make the parties learn
    more than ``--reveal`` says, before any long work: ``--metrics-at`` is read from the
    revealed curve or is the metrics reveal itself, never a second session."""
    if reveal not in ("auc", "curve", "metrics"):
        raise InputError(f"--reveal must be 'auc', 'curve' or 'metrics', got {reveal!r}")
    if plot is not None and reveal != "curve":
        raise InputError("--plot draws the ROC and PR curves: it needs --reveal curve")
    if reveal == "metrics" and metrics_at is None:
        raise InputError("--reveal metrics needs --metrics-at THRESHOLD")
    if metrics_at is None or reveal == "metrics":
        return
    if reveal == "auc":
        raise InputError(
            "--metrics-at would reveal the metrics at that threshold as well, more than "
            "--reveal auc (the AUC only): use --reveal metrics --metrics-at T"
        )
    points = interior_thresholds(thresholds, score_range)
    if not np.any(points == metrics_at):  # exactly (see ROCCurve.metrics_at)
        fit = points_including(metrics_at, thresholds, score_range)
        hint = f"--thresholds {fit} includes it" if fit else "pass --thresholds so that it is one"
        raise InputError(
            f"--metrics-at {metrics_at:g} is not one of the curve's {thresholds} decision "
            f"points, and another session there would reveal more than the curve: {hint}, "
            "or use --reveal metrics"
        )


def run_curve(data: list[tuple[Any, Any]], thresholds: int, options: dict[str, Any]) -> Any:
    import privfl.metrics as pm

    return pm.roc_curve(data, thresholds, **options)


def run_metrics(
    data: list[tuple[Any, Any]], threshold: float, curve: Any, options: dict[str, Any]
) -> tuple[ThresholdMetrics, str]:
    """Metrics at ``threshold``: read from the revealed curve (one of its decision points,
    :func:`check_options`), or, without a curve, a ``reveal="metrics"`` session there."""
    import privfl.metrics as pm

    if curve is not None:
        return curve.metrics_at(threshold), "curve"
    return pm.threshold_metrics(data, threshold, **options).metrics, "metrics"


def curve_json(curve: Any, compare: dict[str, float] | None) -> dict[str, Any]:
    out: dict[str, Any] = curve.to_dict()
    precision, recall, pr_thresholds = curve.pr
    out["pr_precision"] = precision
    out["pr_recall"] = recall
    out["pr_thresholds"] = pr_thresholds
    if compare is not None:
        out["compare"] = compare
    return out


def compare_curve(
    data: list[tuple[Any, Any]], thresholds: int, curve: Any, rng: Any
) -> dict[str, float]:
    """Errors of the revealed AUC and AP against the plaintext binned values and
    scikit-learn's exact ones."""
    import privfl.metrics as pm
    from privfl.evaluation import curves

    ref = pm.binned_reference(data, thresholds, score_range=rng)
    exact = pm.exact_scores(data, score_range=rng)
    auc, ap = curve.auc, curve.average_precision
    b_auc, b_ap = curves.binned_auc(ref.tp, ref.fp), curves.average_precision(ref.tp, ref.fp)
    return {
        "binned_auc": b_auc,
        "sklearn_auc": exact["auc"],
        "abs_error_vs_binned": abs(auc - b_auc),
        "abs_error_vs_sklearn": abs(auc - exact["auc"]),
        "binned_average_precision": b_ap,
        "sklearn_average_precision": exact["average_precision"],
        "ap_abs_error_vs_binned": abs(ap - b_ap),
        "ap_abs_error_vs_sklearn": abs(ap - exact["average_precision"]),
    }


def add_curve_rows(table: Table, curve: Any, compare: dict[str, float] | None) -> None:
    table.add_row("FHAUC AUC (from the curve)", f"{curve.auc:.8f}")
    table.add_row("average precision (step-wise)", f"{curve.average_precision:.8f}")
    table.add_row("prevalence", f"{curve.curve.prevalence:.6f}")
    if compare is not None:
        table.add_row("scikit-learn exact AUC", f"{compare['sklearn_auc']:.8f}")
        table.add_row("scikit-learn exact AP", f"{compare['sklearn_average_precision']:.8f}")
        for label, key in (("AUC", "abs_error_vs"), ("AP", "ap_abs_error_vs")):
            errors = f"{compare[key + '_binned']:.1e} / {compare[key + '_sklearn']:.1e}"
            table.add_row(f"|{label} - binned| / |{label} - exact|", errors)
    run = curve.run
    if run.get("verified"):
        table.add_row("verified (executions agree on the curve)", "True")
        table.add_row("log2 P(deviation > 1e-6 accepted)", f"{run['guarantee_log2']:.1f}")
    if run.get("precision") is not None:
        table.add_row("precision bound (normalised counts)", f"{run['precision']:.1e}")
    table.add_row("aggregator time", f"{run['timings']['aggregator']:.3f} s")
    table.add_row("upload per party", f"{run['bytes']['party_upload'] / 1e3:.1f} KB")


def add_metric_rows(table: Table, m: ThresholdMetrics, source: str) -> None:
    table.add_section()
    table.add_row(f"metrics at score >= {m.threshold:g} (from the {source} reveal)", "")
    for label, name in METRIC_ROWS:
        value = getattr(m, name)
        table.add_row(
            f"  {label}", f"{value:.6f}" + (" (undefined)" if name in m.undefined else "")
        )


def plot_curves(curve: Any, path: Path, title: str) -> None:
    """ROC and precision-recall curves side by side (matplotlib, Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fpr, tpr, _ = curve
    precision, recall, _ = curve.pr
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 4.5))
    ax1.plot(fpr, tpr, lw=1.5, label=f"AUC = {curve.auc:.4f}")
    ax1.plot([0, 1], [0, 1], ls=":", c="grey")
    ax1.set(xlabel="false-positive rate", ylabel="true-positive rate", title="ROC")
    ax1.legend(loc="lower right")
    ax2.step(recall, precision, where="post", lw=1.5,
             label=f"AP = {curve.average_precision:.4f}")  # fmt: skip
    ax2.axhline(curve.curve.prevalence, ls=":", c="grey", label="prevalence")
    ax2.set(xlabel="recall", ylabel="precision", title="precision-recall", ylim=(0, 1.02))
    ax2.legend(loc="lower left")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
