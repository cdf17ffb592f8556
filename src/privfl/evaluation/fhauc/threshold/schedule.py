"""Thin aliases kept for callers written against the former threshold schedule: FHAUC has
one step sequence, :func:`privfl.evaluation.fhauc.schedule.run_session`, whose key rounds and
decryption the key backend contributes (:mod:`privfl.evaluation.fhauc.rounds`); with threshold
keys its steps are ``join -> keygen -> keycheck -> upload -> decrypt -> fuse -> result``
(``keycheck`` without ``keygen`` when the aggregator announces a kept key set, :mod:`.keyset`).
"""

from __future__ import annotations

from privfl.evaluation.fhauc.schedule import party_step, run_session
from privfl.evaluation.fhauc.steps import THRESHOLD_STEPS

__all__ = ["STEPS", "run_threshold_session", "threshold_party_step"]

STEPS = THRESHOLD_STEPS
run_threshold_session = run_session  # the one schedule; its report names the lead
threshold_party_step = party_step  # the one step handler
