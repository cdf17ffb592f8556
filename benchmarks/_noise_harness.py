"""What the noise harnesses (``threshold_product_noise.py``, ``single_key_product_noise.py``,
``threshold_curve_noise.py``) share: their synthetic data and the recording of the
aggregator's multipliers ``c``, which each harness needs to compute the exact values it
compares the decoded ones with (benchmark only: it patches the library's module globals)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

import privfl
from privfl.evaluation.fhauc import aggregator as agg_module
from privfl.evaluation.fhauc import malicious
from privfl.evaluation.fhauc.threshold import ops as threshold_ops


def synthetic(parties: int, rows: int, rng: np.random.Generator) -> list:
    """``parties`` parties of ``rows`` rows, 30 % positives, positives scored 0.2 higher."""
    out = []
    for _ in range(parties):
        y = (rng.random(rows) < 0.3).astype(np.int8)
        out.append((np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1), y))
    return out


class MultiplierRecorder:
    """Records every multiplier the aggregator draws (``cs``) while installed; a harness's
    recorder adds its own decoded-value patch on top."""

    def __init__(self) -> None:
        self.cs: list[int] = []
        self._random = agg_module.random_multiplier

    def record_multipliers(self) -> None:
        def random_multiplier(lo: float, hi: float) -> int:
            c = self._random(lo, hi)
            self.cs.append(c)
            return c

        agg_module.random_multiplier = random_multiplier

    def restore_multipliers(self) -> None:
        agg_module.random_multiplier = self._random


def execution_errors(
    data: list, points: int, decoded: Sequence[tuple[float, float]], cs: Sequence[int],
    key: bytes, index: int, sizes: Any,
) -> list[tuple[float, float]]:  # fmt: skip
    """Per execution, the errors of the decoded ``X/c`` and ``Y/c`` against their exact
    values from the counts, the multipliers ``c`` and the execution's secret randomness
    (:func:`privfl.evaluation.fhauc.malicious.derive`)."""
    p = sum(int(y.sum()) for _, y in data)
    n = sum(int(y.size) for _, y in data) - p
    auc = privfl.binned_auc(data, points)
    out = []
    for e, ((x, y), c) in enumerate(zip(decoded, cs, strict=True)):
        rnd = malicious.derive(key, e, index, sizes)
        out.append((
            abs(x / c - (rnd.r0 * 2.0 * p * n * auc + rnd.r1 * p * n)),
            abs(y / c - rnd.r2 * p * n),
        ))  # fmt: skip
    return out


def execution_multipliers(cs: Sequence[int], executions: int, lanes: int) -> list[int]:
    """Each execution's ``c``: the aggregator draws one per ciphertext group, and with
    ``lanes`` executions side by side a group's executions share it (the last groups' draws
    in ``cs`` are this session's)."""
    groups = -(-executions // lanes)
    drawn = list(cs[-groups:])
    return [drawn[e // lanes] for e in range(executions)]


def choose_ring(default_ring: bool) -> None:
    """Threshold keys on the default ``fhauc`` set, or (the harnesses' default) the insecure
    ``fhauc-test`` ring 2^12 for speed; prints which, with the load."""
    if not default_ring:
        threshold_ops.FHAUC_PARAMETER_SET = "fhauc-test"
    print(
        f"ring {'fhauc (2^14)' if default_ring else 'fhauc-test (2^12)'}  "
        f"load average {os.getloadavg()} (2 cores shared)",
        flush=True,
    )
