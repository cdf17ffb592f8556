"""Shared setup of the threshold-CKKS tests (no tests here).

OpenFHE tests must not skip silently where OpenFHE is meant to be installed: when
``../shared/wheels`` exists (next to the repository, as in CI) a missing ``openfhe`` fails
the run; only with neither OpenFHE nor the wheel folder do these tests skip.
"""

import importlib
from pathlib import Path

import pytest

WHEELS = Path(__file__).resolve().parents[1].parent / "shared" / "wheels"


def require_openfhe_for_tests():
    """The ``openfhe`` module; fail (wheel folder present) or skip (absent) without it."""
    try:
        return importlib.import_module("openfhe")
    except ImportError:
        if WHEELS.is_dir():
            pytest.fail(
                f"OpenFHE is not installed although {WHEELS} exists: run `make install`",
                pytrace=False,
            )
        pytest.skip(
            "OpenFHE is not installed and there is no ../shared/wheels", allow_module_level=True
        )
