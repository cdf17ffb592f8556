"""Fresh, config-bound session randomness that the aggregator can neither choose nor repeat.

Why: with long-lived keys, randomness derived from the shared
seed and an aggregator-chosen session id lets the aggregator replay an old session (every
party re-derives the same masks, so old replies verify), and a config that is not bound into
the randomness lets it give parties different thresholds. Here:

1. on a config, every party draws a fresh 32-byte nonce (``secrets``) and answers with a
   :class:`~privfl.evaluation.fhauc.messages.Join` signed with its pinned key, naming the
   config by its SHA-256 digest;
2. the aggregator relays all joins (:class:`~privfl.evaluation.fhauc.messages.Start`); each
   party checks (:func:`check_start`) that the config is the one it joined, that every
   listed party joined exactly once with a valid signature over the same config digest, and
   that its *own* nonce is there;
3. the transcript hash binds the protocol version, the whole config (session id, parties,
   thresholds, score range, mode, splits), the party's provisioned policy (size bound, hiding
   and multiplier bits, executions, limits) and every nonce in party order; the session key is
   ``HKDF-SHA256(shared seed, transcript)`` and every mask, multiplier, split bit and
   permutation of the malicious variant is derived from it.

So an honest party's randomness is fresh in every session even if the aggregator repeats a
session id (its own nonce is new), replies and uploads from any other session were computed
under other randomness and fail verification, and two parties that saw different configs,
policies or nonce sets derive unrelated keys (their masks no longer cancel): verification
fails. A config difference is also caught before any upload, because every party signs the
digest of the config it saw. This is chosen over "parties persist and refuse used ids"
because it needs no durable state that a party could lose, and it also defeats replays
across deployments that share keys. Parties still refuse steps out of order (a state machine
in :class:`~privfl.evaluation.fhauc.party.Party`).
"""

from __future__ import annotations

import functools
import hashlib
import secrets
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from privfl.crypto import prng
from privfl.errors import ProtocolError, UnknownPartyError
from privfl.evaluation.fhauc.messages import NONCE_BYTES, VERSION, Join, SessionConfig
from privfl.evaluation.fhauc.policy import Policy
from privfl.messages import Writer

TRANSCRIPT_LABEL = f"privfl/fhauc/v{VERSION}/transcript"
JOINS_MEMO_LABEL = f"privfl/fhauc/v{VERSION}/checked-joins".encode()


def new_nonce() -> bytes:
    """A party's fresh contribution to one session."""
    return secrets.token_bytes(NONCE_BYTES)


def parse_config(data: bytes) -> SessionConfig:
    """:meth:`SessionConfig.from_bytes`, remembered per process for the exact bytes (a party
    re-reads its session's config at every step; ``M`` in-process parties read the same one).
    A config is immutable (its thresholds array is read-only), so sharing it is safe; a
    failed parse raises every time and is never remembered."""
    if type(data) is bytes:
        return _parse_config(data)
    return SessionConfig.from_bytes(data)  # other buffers (or hostile types): not remembered


@functools.lru_cache(maxsize=16)
def _parse_config(data: bytes) -> SessionConfig:
    return SessionConfig.from_bytes(data)


def transcript_hash(config: SessionConfig, policy: Policy, joins: Sequence[Join]) -> bytes:
    """SHA-256 over the version label, the config digest, the policy's public part and the
    nonces in the config's party order (computable by the aggregator too: it contains no
    secret)."""
    by_party = {j.sender: j.nonce for j in joins}
    w = Writer().str_(TRANSCRIPT_LABEL).bytes_(config.digest)
    w.bytes_(policy.public().to_bytes())
    for p in config.parties:
        w.str_(p).bytes_(by_party[p])
    return hashlib.sha256(w.getvalue()).digest()


def session_key(seed: bytes, transcript: bytes) -> bytes:
    """The 256-bit key every party derives for this session (needs the shared seed)."""
    return HKDF(
        algorithm=hashes.SHA256(),
        length=prng.SEED_BYTES,
        salt=b"privfl-fhauc-session-v2",
        info=transcript,
    ).derive(seed)


@dataclass(frozen=True)
class CheckedStart:
    """What :func:`check_start` established: the joins in party order and the transcript."""

    joins: tuple[Join, ...]
    transcript: bytes


JOINS_MEMO_SIZE = 8  # join lists whose check is remembered per process (a few MB at most)
_joins_memo: OrderedDict[bytes, tuple[Join, ...]] = OrderedDict()
_joins_lock = threading.Lock()


def check_joins(
    config: SessionConfig, joins: Sequence[bytes], roster: Mapping[str, bytes]
) -> tuple[Join, ...]:
    """Verify every join (signature, session, config digest) and that each party of the
    config joined exactly once; returns them in the config's party order.

    O(M) with a small constant: the config digest is computed once and each signature
    verified once. The check is a pure function of public bytes (the config, the relayed
    joins and the roster's keys for the config's parties), so a successful one is
    remembered per process under the SHA-256 of exactly those inputs: when the ``M``
    parties of an in-process simulation check the same relayed list, the signatures are
    verified once in all, and each further party only hashes the list. Any differing byte
    (another join, nonce, config or pinned key) is a different entry and is checked in
    full; a failed check is never remembered."""
    digest = config.digest  # once: it re-encodes the whole party list
    if not all(type(data) is bytes for data in joins):
        return _check_joins(config, digest, joins, roster)  # typed errors, never remembered
    key = _joins_key(digest, config.parties, joins, roster)
    with _joins_lock:
        known = _joins_memo.get(key)
    if known is not None:
        return known
    checked = _check_joins(config, digest, joins, roster)
    with _joins_lock:
        _joins_memo[key] = checked
        while len(_joins_memo) > JOINS_MEMO_SIZE:
            _joins_memo.popitem(last=False)
    return checked


def _joins_key(
    digest: bytes, parties: Sequence[str], joins: Sequence[bytes], roster: Mapping[str, bytes]
) -> bytes:
    """SHA-256 of everything :func:`_check_joins` reads (length-prefixed, unambiguous)."""
    h = hashlib.sha256(JOINS_MEMO_LABEL)
    h.update(digest)
    for p in parties:
        pinned = roster.get(p)
        h.update(b"\x00" if pinned is None else b"\x01" + len(pinned).to_bytes(4, "big") + pinned)
    h.update(len(joins).to_bytes(4, "big"))
    for data in joins:
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h.digest()


def _check_joins(
    config: SessionConfig, digest: bytes, joins: Sequence[bytes], roster: Mapping[str, bytes]
) -> tuple[Join, ...]:
    parsed: dict[str, Join] = {}
    members = frozenset(config.parties)
    for data in joins:
        join = Join.from_bytes(data, config.session, roster)
        if join.sender not in members:
            raise UnknownPartyError(f"{join.sender!r} joined but is not a party of this session")
        if join.sender in parsed:
            raise ProtocolError(f"{join.sender!r} joined twice")
        if join.config_digest != digest:
            raise ProtocolError(
                f"{join.sender!r} joined a different configuration than this one: the "
                "aggregator announced different configs to different parties"
            )
        parsed[join.sender] = join
    missing = [p for p in config.parties if p not in parsed]
    if missing:
        raise ProtocolError(f"no join from {missing}")
    return tuple(parsed[p] for p in config.parties)


def check_start(
    config: SessionConfig,
    policy: Policy,
    joins: Sequence[bytes],
    roster: Mapping[str, bytes],
    me: str,
    my_nonce: bytes,
) -> CheckedStart:
    """A party's checks of the relayed joins before it uploads anything."""
    if me not in config.parties:
        raise UnknownPartyError(f"party {me!r} is not part of this session")
    checked = check_joins(config, joins, roster)
    mine = checked[config.parties.index(me)]
    if mine.nonce != my_nonce:
        raise ProtocolError(
            "the relayed join for this party is not the one it sent in this session "
            "(a replayed or substituted join)"
        )
    return CheckedStart(checked, transcript_hash(config, policy, checked))
