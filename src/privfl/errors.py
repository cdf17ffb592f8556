"""Typed errors raised by privfl.

Input problems are :class:`InputError` (a :class:`ValueError`), so callers and the CLI can
tell "fix your data" apart from "the protocol run failed" (:class:`ProtocolError`).
"""

from __future__ import annotations


class PrivflError(Exception):
    """Base class of every error privfl raises on purpose."""


class InputError(PrivflError, ValueError):
    """The caller's input is invalid; the message says what to fix."""


class ProtocolError(PrivflError):
    """A protocol message or run is invalid (wrong session, wrong step, corrupted bytes...)."""


class MalformedMessageError(ProtocolError):
    """The bytes are not a well-formed message (truncated, corrupted, wrong encoding)."""


class WrongProtocolError(ProtocolError):
    """The message belongs to another protocol or protocol version."""


class WrongSessionError(ProtocolError):
    """The message belongs to another session (stale or replayed)."""


class UnexpectedStepError(ProtocolError):
    """The message is for another protocol step than the one being run."""


class UnknownPartyError(ProtocolError):
    """The sender or recipient is not in the pinned roster, or its key does not match."""


class DecryptionNotPermittedError(ProtocolError):
    """The key material held by this role cannot decrypt (by design)."""


class VerificationError(ProtocolError):
    """The parties' verification of the aggregator's result failed: output nothing."""


class InsufficientPrecisionError(InputError):
    """The verified result cannot be guaranteed to the required accuracy with the declared
    sizes (the malicious variant's masks are too wide for this data): declare a tighter
    ``max_samples_per_party``."""


class WeakGuaranteeError(InsufficientPrecisionError):
    """The parties' verification could not rule out, with the provisioned confidence, that
    the aggregator moved the AUC by more than the required accuracy: output nothing. Add
    executions, or provision a lower bound on the global positives x negatives (min_pairs)."""
