"""Threshold CKKS roles and their in-process drivers: the protocol layer above the primitives
of :mod:`privfl.crypto.threshold` (which keeps parameters, contexts, ciphertexts, messages and
wire formats only).

* :mod:`~privfl.threshold.party`: :class:`ThresholdParty`, which holds one key share, counts
  its decryptions against the flooding budget and answers only well-formed requests;
* :mod:`~privfl.threshold.server`: :class:`ThresholdServer`, which adds public contributions
  into the joint keys, evaluates and relays decryptions, and holds no share;
* :mod:`~privfl.threshold.rows`: the coefficient-row arithmetic both roles share;
* :mod:`~privfl.threshold.drivers`: :func:`make_roles` and the ``run_*`` drivers.

Both :mod:`privfl.evaluation` (threshold FHAUC) and :mod:`privfl.training` (SmartCryptNN)
import this package; it imports only :mod:`privfl.crypto` and the core modules, so neither
protocol depends on the other and ``crypto/`` holds no role.
"""

from __future__ import annotations

from privfl.threshold.drivers import (
    make_roles,
    run_interactive_bootstrap,
    run_joint_decryption,
    run_key_generation,
    run_masked_decryption,
)
from privfl.threshold.party import DecryptionBudgetExhaustedError, ThresholdParty
from privfl.threshold.server import ThresholdServer

__all__ = [
    "DecryptionBudgetExhaustedError",
    "ThresholdParty",
    "ThresholdServer",
    "make_roles",
    "run_interactive_bootstrap",
    "run_joint_decryption",
    "run_key_generation",
    "run_masked_decryption",
]
