"""Deviating aggregators for robustness tests; moved to :mod:`privfl.evaluation.fhauc.tamper`
(this name stays for existing code)."""

from privfl.evaluation.fhauc.tamper import *  # noqa: F403
from privfl.evaluation.fhauc.tamper import __all__  # noqa: F401
