"""Named parameter sets for threshold CKKS (OpenFHE) and the decryption-noise-flooding budget.

Every set turns on OpenFHE's ``NOISE_FLOODING_DECRYPT`` mode (IND-CPA^D security of CKKS
decryption, Li-Micciancio-Schultz-Sorrell, CRYPTO 2022): each decryption share carries a
discrete Gaussian of standard deviation

    sigma = sqrt(12 * tau) * 2^(s/2) * t

where ``t`` bounds the error of the ciphertext being decrypted (coefficient units), ``tau`` is
the number of decryptions an adversary may see under one key and ``s`` the statistical security.

What OpenFHE 1.5.1 (NATIVEINT 64) imposes, and how privfl deals with it
-----------------------------------------------------------------------
* The flooding mode forces ``scalingModSize = 59`` and ``firstModSize = 60`` whatever is asked
  (the flooding noise must fit below the scale with precision to spare), so every set has a
  59-bit scale. Joint decryption compresses a ciphertext to two towers (60 + 59 bits), which
  hold ``|x| < 2^57``; the encryption helpers refuse ``|x| >= 2^56``.
* OpenFHE refuses ``SetStatisticalSecurity`` (other than 30) and ``SetNumAdversarialQueries``
  (other than 1) for CKKS ("allowed for NOISE_FLOODING_MULTIPARTY only", a mode CKKS refuses).
  Its sigma is therefore ``sqrt(12) * 2^15 * 2^e`` for the noise estimate ``e`` it is given.
  privfl passes ``e = t + log2(sqrt(tau))``, which yields exactly the formula above with
  ``s = 30`` and ``tau`` = :attr:`ThresholdParameters.max_decryptions`.
* ``t`` is measured single-key (OpenFHE's ``EXEC_NOISE_ESTIMATION`` procedure: run the
  computation under a throwaway key, read the error off the imaginary parts; see
  :func:`privfl.crypto.threshold.context.estimate_noise_bits`). The joint key of ``M`` parties
  is a sum of ``M`` ternary secrets and ``M`` error terms, so ciphertext errors grow by about
  ``sqrt(M)``; privfl adds ``log2(sqrt(M)) + 1`` bits to the measured value.
* Two hard limits: OpenFHE refuses ``log2(sigma) > 56`` at context creation, and its decoder
  refuses a fused result whose error exceeds ``2^54`` (``sqrt(M) * sigma`` after ``M`` shares).
  :meth:`ThresholdParameters.check` raises :class:`~privfl.errors.InputError` before either.

Decryption budget
-----------------
Each party's role object counts the decryption shares it produces and refuses share number
``tau + 1`` (:class:`DecryptionBudgetExhaustedError`): beyond it the statistical security
bound no longer holds for that key; generate fresh keys. Interactive bootstrapping reveals
nothing (its shares are masked uniformly) and does not count.

Named sets (:data:`PARAMETER_SETS`, :func:`parameter_set`)
---------------------------------------------------------
* ``"training"`` (SmartCryptNN, design note): ring 2^15, depth 11, FLEXIBLEAUTO, SLACK
  interactive-bootstrapping compression, HYBRID key switching with 6 digits (4 digits need ring
  2^16 once the scale is 59 bits), 128-bit classical security, 2^14 slots.
  ``tau = 2^14`` decryptions per key set (the paper's 300 epochs need about 10^4 per party),
  ``t = 2^12``: OpenFHE's estimate is 2^8.9 for a fresh ciphertext, 2^6.6 after a product,
  2^6.9 after a degree-13 sigmoid and its derivative (values up to 8 in magnitude), so 3 bits
  of margin. For 3 parties: sigma = 2^37.6, slot error standard deviation 2^-13.1 (1.1e-4).
* ``"fhauc"``: one ciphertext product, a rotate-and-sum and a plaintext multiplier: depth 3,
  ring 2^14 (the smallest OpenFHE allows at 128 bits for this chain), 2 digits, sum keys over
  all 8192 slots of the ring (4096 until issue 27's lanes needed the room: a malicious AUC
  of 100 parties at N = 100 puts its 3 executions, T and F, in one upload ciphertext; a
  full batch also leaves no plaintext coefficient undecoded); ``tau = 32`` decryptions per
  key set (a key set is reused across sessions while its budget lasts; 16 refused the
  largest curve at 2^-20, N = 4,096 at 4 splits, when a reply ciphertext held 4096 slots:
  8 reply ciphertexts an execution, 3 executions; 0.5 % of honest sessions drawn over
  issue 27's range; each doubling costs 0.5 bit of decryption precision, and 64 refused
  the AUC of 1,000 x 100 rows at N = 4,096, 10 % positives and 2^-8, whose executions the
  upload bound capped at 21 on 4096 slots),
  ``t = 2^16`` (OpenFHE's estimate for the FHAUC circuit with values below 1: at most
  2^13.4 on 4096 slots, 2^9.5 to 2^12.3 in three runs on 8192;
  ``tests/test_threshold.py`` checks it stays a bit below). Slot error standard deviation
  2^-14.1 for 3 parties, 2^-11.4 for 20 (half a bit more than on 4096 slots); the mean of
  the 8192 equal slots of a rotate-and-summed result has 7 bits less.
* ``"test"``: ring 2^12 with ``HEStd_NotSet`` (insecure: only for fast tests), depth 6.
* ``"fhauc-test"``: the ``"fhauc"`` chain on ring 2^12 (``HEStd_NotSet``, insecure, 2048
  slots): only for fast tests of threshold FHAUC.

Precision is what IND-CPA^D costs: ``s/2 + log2(sqrt(12 tau))`` bits (23.8 for the training
set) on top of the ciphertext's own error, plus ``log2(sqrt(M))`` for ``M`` shares.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import ModuleType

from privfl.crypto.threshold.threads import import_openfhe
from privfl.errors import InputError

__all__ = [
    "FIRST_MOD_BITS",
    "PARAMETER_SETS",
    "SCALING_MOD_BITS",
    "STATISTICAL_SECURITY_BITS",
    "ThresholdParameters",
    "parameter_set",
    "require_openfhe",
]

SCALING_MOD_BITS = 59
FIRST_MOD_BITS = 60
STATISTICAL_SECURITY_BITS = 30
# OpenFHE: log2(sigma) = s/2 + log2(sqrt(12)) + noise estimate
_LOG2_SIGMA_OFFSET = STATISTICAL_SECURITY_BITS / 2 + 0.5 * math.log2(12)
_MAX_LOG2_SIGMA = 56.0  # refused by GenCryptoContext above this (scalingModSize - 3)
_MAX_LOG2_DECODED_ERROR = 54.0  # refused by the CKKS decoder above this (scale bits - 5)
DECRYPTION_TOWERS = 2  # towers kept by Compress before joint decryption: |x| < 2^57
_INSTALL_HINT = (
    "threshold CKKS needs OpenFHE: pip install 'privfl[threshold]' "
    "(Python 3.11: build the OpenFHE wheel first, see docs/getting-started.md)"
)


def require_openfhe() -> ModuleType:
    """The ``openfhe`` module, or :class:`InputError` naming the ``[threshold]`` extra. The
    first import runs with privfl's OpenMP choice (:mod:`~privfl.crypto.threshold.threads`)."""
    try:
        return import_openfhe()
    except ImportError as exc:
        raise InputError(_INSTALL_HINT) from exc


@dataclass(frozen=True)
class ThresholdParameters:
    """One threshold-CKKS configuration: ring, modulus chain, keys and flooding budget.

    ``ring_dimension = 0`` lets OpenFHE choose the smallest ring that gives 128-bit classical
    security for the modulus chain; ``insecure_ring_for_tests`` forces a ring below that
    (``HEStd_NotSet``) and is only meant for fast tests.
    """

    name: str
    multiplicative_depth: int
    batch_size: int
    num_large_digits: int
    circuit_noise_bits: float
    max_decryptions: int
    ring_dimension: int = 0
    insecure_ring_for_tests: bool = False
    sum_keys: bool = False
    rotation_steps: tuple[int, ...] = field(default=())

    def __post_init__(self) -> None:
        if not 2 <= self.multiplicative_depth <= 30:
            raise InputError("multiplicative_depth must be in 2..30")
        if self.batch_size < 1 or self.batch_size & (self.batch_size - 1):
            raise InputError("batch_size must be a power of two")
        if self.ring_dimension and (
            self.ring_dimension < 1024 or self.ring_dimension & (self.ring_dimension - 1)
        ):
            raise InputError("ring_dimension must be a power of two >= 1024 (or 0: automatic)")
        if self.ring_dimension and 2 * self.batch_size > self.ring_dimension:
            raise InputError("batch_size can be at most ring_dimension / 2")
        if self.insecure_ring_for_tests and not self.ring_dimension:
            raise InputError("an insecure test ring needs an explicit ring_dimension")
        if not 1 <= self.num_large_digits <= self.multiplicative_depth + 1:
            raise InputError("num_large_digits must be in 1..depth+1")
        if not 0 < self.circuit_noise_bits < 40:
            raise InputError("circuit_noise_bits must be in (0, 40)")
        if not 1 <= self.max_decryptions <= 2**40:
            raise InputError("max_decryptions must be in 1..2^40")
        if any(s == 0 or abs(s) >= self.batch_size for s in self.rotation_steps):
            raise InputError("rotation steps must be nonzero and smaller than batch_size")

    # ------------------------------------------------------------------ flooding budget
    def noise_estimate_bits(self, parties: int) -> float:
        """The estimate handed to OpenFHE: measured circuit noise, plus ``log2(sqrt(M)) + 1``
        for the joint key of ``M`` parties, plus ``log2(sqrt(tau))`` for the decryption budget."""
        _check_parties(parties)
        return (
            self.circuit_noise_bits
            + 0.5 * math.log2(parties)
            + 1.0
            + 0.5 * math.log2(self.max_decryptions)
        )

    def flooding_std_bits(self, parties: int) -> float:
        """``log2(sigma)`` of the Gaussian each party adds to its decryption share."""
        return _LOG2_SIGMA_OFFSET + self.noise_estimate_bits(parties)

    def decryption_error_bits(self, parties: int) -> float:
        """``log2`` of the standard deviation of one jointly decrypted slot (value units): the
        ``M`` flooding terms add up to ``sqrt(M) * sigma`` per coefficient, decoding ``B``
        packed reals spreads that with a factor ``sqrt(2B)``, and the scale divides by
        ``2^59``. (Measured on the test set within 0.1 bit for 2, 3 and 8 parties.) The mean
        of all ``B`` slots of a rotate-and-summed ciphertext has ``sqrt(2B)`` less."""
        return (
            self.flooding_std_bits(parties)
            + 0.5 * math.log2(parties)
            + 0.5 * math.log2(2 * self.batch_size)
            - SCALING_MOD_BITS
        )

    def decryption_error_bound(self, parties: int) -> float:
        """Six standard deviations of a jointly decrypted slot's error (absolute)."""
        return float(6.0 * 2.0 ** self.decryption_error_bits(parties))

    def check(self, parties: int) -> None:
        """Raise :class:`InputError` when OpenFHE would refuse this set for ``parties``."""
        sigma = self.flooding_std_bits(parties)
        if sigma > _MAX_LOG2_SIGMA:
            raise InputError(
                f"parameter set {self.name!r}: flooding noise 2^{sigma:.1f} exceeds OpenFHE's "
                f"limit 2^{_MAX_LOG2_SIGMA:.0f}; lower max_decryptions or circuit_noise_bits"
            )
        fused = sigma + 0.5 * math.log2(parties)
        if fused > _MAX_LOG2_DECODED_ERROR:
            raise InputError(
                f"parameter set {self.name!r}: {parties} decryption shares add noise "
                f"2^{fused:.1f}, above the decoder's limit 2^{_MAX_LOG2_DECODED_ERROR:.0f}; "
                "lower max_decryptions or use fewer parties"
            )

    # ------------------------------------------------------------------ levels
    @property
    def bootstrap_max_level(self) -> int:
        """The deepest level (levels consumed) a ciphertext may have and still be refreshed by
        interactive bootstrapping: SLACK compression keeps 4 towers (1 for the message, 3 for
        the masks) plus one dropped by the scale adjustment."""
        return self.multiplicative_depth - 4

    @property
    def decrypt_max_level(self) -> int:
        """The deepest level a ciphertext may have and still be jointly decrypted: it must keep
        :data:`DECRYPTION_TOWERS` towers for its value and the flooding noise."""
        return self.multiplicative_depth + 1 - DECRYPTION_TOWERS


def _check_parties(parties: int) -> None:
    if not 1 <= parties <= 100_000:
        raise InputError("the number of parties must be in 1..100000")


PARAMETER_SETS: dict[str, ThresholdParameters] = {
    # name: depth, batch, digits, circuit noise bits, decryptions (see the module doc)
    "training": ThresholdParameters("training", 11, 1 << 14, 6, 12.0, 1 << 14),
    "fhauc": ThresholdParameters("fhauc", 3, 1 << 13, 2, 16.0, 32, sum_keys=True),
    # FHAUC's chain on an insecure ring 2^12 (2048 slots): fast tests of threshold FHAUC only
    "fhauc-test": ThresholdParameters("fhauc-test", 3, 1 << 11, 2, 16.0, 32, 1 << 12, True, True),
    "test": ThresholdParameters(
        "test", 6, 1 << 5, 3, 16.0, 1 << 10, 1 << 12, True, True, (1, -1, 4)
    ),
}


def parameter_set(name: str) -> ThresholdParameters:
    """A named set (``"training"``, ``"fhauc"``, ``"test"``); :class:`InputError` otherwise."""
    try:
        return PARAMETER_SETS[name]
    except KeyError:
        raise InputError(
            f"unknown threshold parameter set {name!r}; choose one of {sorted(PARAMETER_SETS)}"
        ) from None
