"""Typed per-session timings and traffic of an in-process FHAUC run, with the same fields in
every mode (a field that does not apply to a mode is 0: e.g. key generation with single
keys, which happens once at provisioning and is reported as ``setup``).

Both read like the dicts they replace (``res.timings["aggregator"]``) and serialise with
``dict(...)``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass


class _Fields(Mapping[str, float]):
    """Read-only mapping view of a dataclass's fields."""

    def __getitem__(self, key: str) -> float:
        if key not in self._names():
            raise KeyError(key)
        value: float = getattr(self, key)
        return value

    def __iter__(self) -> Iterator[str]:
        return iter(self._names())

    def __len__(self) -> int:
        return len(self._names())

    def _names(self) -> tuple[str, ...]:
        return tuple(vars(self))


@dataclass(frozen=True)
class Timings(_Fields):
    """Seconds. ``party_encrypt``: slowest party's upload step; ``aggregator``: all its
    session steps; ``party_decrypt``: slowest party's result steps (threshold: its decryption
    share or fusion, and the reveal); ``setup``: provisioning; ``party_keygen`` and
    ``aggregator_keygen``: the session's key rounds (threshold keys); ``party_total``: the
    slowest party's key rounds plus upload."""

    party_encrypt: float
    aggregator: float
    party_decrypt: float
    setup: float
    party_keygen: float = 0.0
    aggregator_keygen: float = 0.0
    party_total: float = 0.0


@dataclass(frozen=True)
class Traffic(_Fields):
    """Bytes. ``party_upload``: the largest party upload; ``aggregator_reply``: the reply per
    party (threshold: the decryption request); ``setup_public_context`` /
    ``setup_key_bundle``: single-key provisioning (the aggregator's public context, one
    party's wrapped bundle); ``party_setup_traffic``: per-party key material (single keys:
    the bundle; threshold: the session's key rounds); ``party_session_traffic`` /
    ``lead_session_traffic``: a party's and the threshold lead's traffic beyond setup;
    ``lead_request`` / ``reveal``: the threshold lead's fusion request and reveal."""

    party_upload: int
    aggregator_reply: int
    setup_public_context: int = 0
    setup_key_bundle: int = 0
    party_setup_traffic: int = 0
    party_session_traffic: int = 0
    lead_session_traffic: int = 0
    lead_request: int = 0
    reveal: int = 0
