"""What the noise harnesses (``threshold_product_noise.py``, ``single_key_product_noise.py``,
``threshold_curve_noise.py``) share: their synthetic data and the recording of the
aggregator's multipliers ``c``, which each harness needs to compute the exact values it
compares the decoded ones with (benchmark only: it patches the library's module globals)."""

from __future__ import annotations

import numpy as np

from privfl.evaluation.fhauc import aggregator as agg_module


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
