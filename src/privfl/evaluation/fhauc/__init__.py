"""FHAUC: federated ROC-AUC under CKKS (docs/architecture.md §4), against a semi-honest or a
malicious aggregator.

One file per piece: :mod:`~.layout` (slots), :mod:`~.messages` (wire format),
:mod:`~.policy` (provisioned limits, security modes), :mod:`~.session` (fresh config-bound
session keys), :mod:`~.malicious` (the masking arithmetic and its bounds), :mod:`~.variant`
(what differs between the modes), the roles :mod:`~.key_holder`, :mod:`~.party`,
:mod:`~.aggregator`, the step sequence :mod:`~.schedule` and deviating aggregators for
robustness tests, :mod:`~.tamper`.
"""

from privfl.evaluation.fhauc.aggregator import Aggregator
from privfl.evaluation.fhauc.key_holder import KeyHolder
from privfl.evaluation.fhauc.layout import Layout
from privfl.evaluation.fhauc.messages import Join, KeyBundle, PublicSetup, SessionConfig, Start
from privfl.evaluation.fhauc.party import Party, PartyResult
from privfl.evaluation.fhauc.policy import DEFAULT_MAX_SAMPLES_PER_PARTY, Policy, Security
from privfl.evaluation.fhauc.schedule import SessionReport, SessionRequest, party_step, run_session
from privfl.evaluation.fhauc.uploads import PartyUpload, Reply, Result, Upload

__all__ = [
    "DEFAULT_MAX_SAMPLES_PER_PARTY",
    "Aggregator",
    "Join",
    "KeyBundle",
    "KeyHolder",
    "Layout",
    "Party",
    "PartyResult",
    "PartyUpload",
    "Policy",
    "PublicSetup",
    "Reply",
    "Result",
    "Security",
    "SessionConfig",
    "SessionReport",
    "SessionRequest",
    "Start",
    "Upload",
    "party_step",
    "run_session",
]
