"""FHAUC's key backends: what the aggregator may do with a session's keys.

The aggregator runs one computation (:meth:`~privfl.evaluation.fhauc.Aggregator.aggregate`)
whatever the keys are. What differs between single keys (TenSEAL, the key holder's public
context) and threshold keys (OpenFHE, a joint key no party holds alone) sits behind
:class:`KeyBackend`, which the aggregator is composed with:

* the slot count, the session's slot layout and the rotations its evaluation keys support
  (checked before a session is announced, so a session the keys cannot run is refused
  before any work);
* the multiplier ``c``: its public log2 range and the form in which it is applied (an integer
  at scale 1, or ``c / 2^j`` at one level, :meth:`KeyBackend.session_multiplier`);
* public-key encryption (an honest aggregator never needs it; a deviating one may encrypt
  anything, which the tamper suite does).

The ciphertext operations (``+``, ``-``, ``*`` by a ciphertext or an integer, ``rotate``,
``window_sum``, ``scale_by``) are those of :class:`HECiphertext`, which SEAL's
:class:`~privfl.crypto.ckks.Ciphertext` and OpenFHE's
:class:`~privfl.evaluation.fhauc.threshold.ops.ThresholdCiphertext` both implement. No
backend can decrypt: the single-key backend refuses a private context, the threshold one
never holds a key share.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy.typing as npt

from privfl.crypto.ckks import CKKSContext
from privfl.errors import ProtocolError
from privfl.evaluation.fhauc import curve
from privfl.evaluation.fhauc.ciphertext import HECiphertext
from privfl.evaluation.fhauc.layout import Layout
from privfl.evaluation.fhauc.messages import SessionConfig
from privfl.evaluation.fhauc.policy import Policy
from privfl.evaluation.fhauc.reveal import Reveal
from privfl.evaluation.fhauc.variant import variant_for

__all__ = ["HECiphertext", "KeyBackend", "SingleKey"]


class KeyBackend(Protocol):
    """The aggregator's public view of a session's keys (see the module docstring)."""

    @property
    def keys(self) -> str:
        """``"single"`` or ``"threshold"``."""
        ...

    @property
    def slots(self) -> int:
        """Slots per ciphertext."""
        ...

    def layout(self, config: SessionConfig, policy: Policy) -> Layout:
        """Where the session's values sit in the slots (checked against
        :meth:`missing_rotations` before the session is announced)."""
        ...

    def missing_rotations(self, steps: Sequence[int]) -> list[int]:
        """The rotations of ``steps`` the evaluation keys cannot perform."""
        ...

    def session_multiplier(
        self, config: SessionConfig, policy: Policy
    ) -> tuple[tuple[float, float], int]:
        """``((lo, hi), j)``: ``c`` is drawn log-uniform in ``[2^lo, 2^hi)`` and applied as
        ``c / 2^j`` (``j = 0``: an integer at scale 1). Raises
        :class:`~privfl.errors.InputError` when the keys cannot run this session."""
        ...

    def encrypt(self, values: npt.ArrayLike, scale_bits: float | None = None) -> HECiphertext:
        """A fresh encryption of ``values`` under the session's public key."""
        ...


class SingleKey:
    """Single-key backend: the key holder's public TenSEAL context (no secret key)."""

    keys = "single"

    def __init__(self, context: CKKSContext) -> None:
        if context.is_private:
            raise ProtocolError("the aggregator must never receive a secret key")
        self.context = context

    @property
    def slots(self) -> int:
        return self.context.params.slots

    def layout(self, config: SessionConfig, policy: Policy) -> Layout:
        """T and F in one ciphertext (half the upload) when the rotation keys allow it."""
        return curve.layout_for(config, self.slots, True, self.context.rotation_steps)

    def missing_rotations(self, steps: Sequence[int]) -> list[int]:
        return sorted(set(steps) - set(self.context.rotation_steps))

    def session_multiplier(
        self, config: SessionConfig, policy: Policy
    ) -> tuple[tuple[float, float], int]:
        params = self.context.params
        if config.reveal is Reveal.AUC:
            return variant_for(config.security).multiplier_range(params, config, policy), 0
        return curve.multiplier_range(params, config, policy), 0

    def encrypt(self, values: npt.ArrayLike, scale_bits: float | None = None) -> HECiphertext:
        return self.context.encrypt(values, scale_bits)
