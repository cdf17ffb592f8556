import os

import numpy as np
import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "privfl",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=bool(os.environ.get("CI")),
)
settings.load_profile("privfl")


def make_parties(rng, count, size, positive_rate=0.5, separation=0.2):
    """Synthetic (scores in [0,1], labels) per party."""
    out = []
    for _ in range(count):
        y = (rng.random(size) < positive_rate).astype(np.int8)
        s = np.clip(rng.normal(0.4 + separation * y, 0.2), 0.0, 1.0)
        out.append((s, y))
    return out


@pytest.fixture
def rng():
    return np.random.default_rng(1234)
