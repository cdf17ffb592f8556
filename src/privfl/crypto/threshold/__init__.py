"""Threshold CKKS primitives on OpenFHE: parameters, context, ciphertexts, typed messages and
the bounded wire format of N-out-of-N keys with no dealer, joint decryption with noise flooding
and interactive bootstrapping. Optional: needs the ``[threshold]`` extra (OpenFHE); without it
every entry point raises :class:`~privfl.errors.InputError` naming the extra.

Modules: :mod:`~privfl.crypto.threshold.params` (named parameter sets, flooding budget),
:mod:`~privfl.crypto.threshold.context` (OpenFHE context, layouts, CRPs),
:mod:`~privfl.crypto.threshold.wire` (bounded transport of OpenFHE objects),
:mod:`~privfl.crypto.threshold.messages` (typed messages) and
:mod:`~privfl.crypto.threshold.ciphertext` (ciphertexts, requests); this module re-exports
them. The *roles* that hold key shares and answer requests (``ThresholdParty``,
``ThresholdServer``) and the in-process drivers (``make_roles``, ``run_*``) are protocol code
and live in :mod:`privfl.threshold`, which evaluation and training both import.

Deserialisation safety: see :mod:`~privfl.crypto.threshold.wire`. OpenFHE never parses a
peer's bytes, so no crafted message reaches an OpenFHE deserialiser; the fuzz tests found no
crash (``tests/test_threshold_fuzz.py``).
"""

from __future__ import annotations

from privfl.crypto.threshold.ciphertext import (
    Ciphertext,
    CiphertextHolder,
    JointDecryptionError,
)
from privfl.crypto.threshold.context import (
    LevelBudgetError,
    ThresholdContext,
    estimate_noise_bits,
    ring_dimension,
)
from privfl.crypto.threshold.messages import (
    BootstrapRequest,
    BootstrapShare,
    CiphertextMessage,
    DecryptionRequest,
    DecryptionShare,
    EvaluationKeys,
    JointPublicKeys,
    KeyGenShare,
    LeadDecryption,
    MaskedDecryption,
    MultKeyShare,
)
from privfl.crypto.threshold.params import (
    PARAMETER_SETS,
    ThresholdParameters,
    parameter_set,
    require_openfhe,
)

__all__ = [
    "PARAMETER_SETS",
    "BootstrapRequest",
    "BootstrapShare",
    "Ciphertext",
    "CiphertextHolder",
    "CiphertextMessage",
    "DecryptionRequest",
    "DecryptionShare",
    "EvaluationKeys",
    "JointDecryptionError",
    "JointPublicKeys",
    "KeyGenShare",
    "LeadDecryption",
    "LevelBudgetError",
    "MaskedDecryption",
    "MultKeyShare",
    "ThresholdContext",
    "ThresholdParameters",
    "estimate_noise_bits",
    "parameter_set",
    "require_openfhe",
    "ring_dimension",
]
