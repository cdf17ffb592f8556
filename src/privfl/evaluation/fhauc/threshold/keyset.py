"""Threshold key sets kept across FHAUC sessions, within their decryption budget.

A key set is what the key rounds of one session produce: every party's own key share (never
sent), the joint public key, and the aggregator's joint evaluation keys. Its noise flooding
is sized for ``max_decryptions`` decryption shares per party (:class:`~privfl.crypto.
threshold.ThresholdParameters`); a session spends ``groups x requests_per_execution`` of
them at every party (:attr:`~.plan.Plan.requests`: a ciphertext group is one execution, or
``lanes`` of them in the lanes layout; the lead's fusion counts like a share).

Reuse: the aggregator announces a kept key set by its id in the session config
(``SessionConfig.key_set``; bound by the config's digest, so every party sees the same). A
party joins such a session only if it holds that key set, for exactly the session's parties
in the same order, and its *own* count of the shares it made leaves enough budget for the
session's plan; otherwise it refuses at the join, before any upload, and names the fix
(announce a session that generates a fresh key set: re-key). The count is the party's, never
the aggregator's. A reuse session skips key generation and the key check: its ``keycheck``
step only reveals the lead secret (:mod:`.plan`); the joint key was checked by every
party when it was generated.

Steering the lead by abandoning sessions: in a reuse session the lead is fixed at the key-check
relay, one cheap round after the join and before any upload, key generation or decryption
share (the lead is :func:`~.transcript.lead_index` of the parties' lead secrets, each
committed to in its join nonce, so the aggregator cannot *choose* it, but it sees it before it
has spent anything). An aggregator could abandon and restart until a party it colludes with is
lead. So each party counts, per kept key set, the sessions on that set it abandoned after it
revealed its lead secret (:attr:`KeySet.abandoned`, node-local, never reset until the set is
replaced) and refuses to join a session on the set once the count reaches
:data:`ABANDON_LIMIT` (``ProtocolError`` at the join, before any upload, naming the cause and
the fix: re-key). Sessions abandoned before the party revealed its secret are not counted: the
aggregator learnt nothing of the lead from them. The refusal depends on the party's own record
of public events only (the aggregator knows which sessions it abandoned).

What remains: over the life of a key set the aggregator sees at most ``ABANDON_LIMIT`` leads
it can discard (with ``c`` colluding parties among ``M``, it gets one of them as lead of some
completed session with probability at most ``1 - (1 - c/M)^(ABANDON_LIMIT + 1)`` per key set,
against ``c/M`` with no abandon); honest failures after the key check (a node crashing at the
decrypt step) count the same, so a deployment that fails twice on a set re-keys; and an
aggregator willing to pay a full key generation per try can still re-key and abandon fresh
sessions, where the lead is fixed after the key rounds and every party records the abandoned
session (:attr:`~..party.Party.abandoned`).

What reuse changes for each role: the aggregator links the sessions that share a key set
(it chose them); a party learns nothing new (the key set's shares and joint key are what it
already held). Every session still has its own transcript, session key, masks and lead.
Kept by the role objects in process; in a deployment that runs every step in a fresh process
(Flower) each role stores its key set in its own storage between sessions: a party in its
node-local state (:func:`export_key_set`: its share, its count, the joint public key; never
sent), the aggregator in a file of its own (:func:`export_server_key_set`: public material and
its count of the shares spent). Both are read back with bounded reads and rebuilt for the
parameter set in force; a stored set made under another parameter set, or under other
parameters of the same name (:func:`stored_set_name`: a release that changed the decryption
budget), is dropped (the next session generates a fresh one).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from privfl import threshold as tr
from privfl.crypto import threshold as th
from privfl.errors import MalformedMessageError, ProtocolError
from privfl.evaluation.fhauc.messages import AGGREGATOR, SessionConfig
from privfl.messages import Reader, Writer

__all__ = [
    "ABANDON_LIMIT",
    "KeySet",
    "ServerKeySet",
    "check_reuse",
    "export_key_set",
    "export_server_key_set",
    "import_key_set",
    "import_server_key_set",
]

MAX_KEY_FIELD = 1 << 27
MAX_PARTIES = 1 << 16
ABANDON_LIMIT = 2
"""Policy: the sessions on one kept key set a party lets the aggregator abandon after the
party revealed its lead secret; at this count it refuses every further session on the set
until the parties re-key (see the module docstring)."""
_REVEALED = frozenset({"keycheck", "uploaded", "decrypted"})  # stages after the lead secret


@dataclass
class KeySet:
    """A party's kept key set: its id (the threshold session id it was generated under,
    public), the parties in key order, and the :class:`~privfl.threshold.
    ThresholdParty` holding this party's share, the joint public key and its count of the
    decryption shares it made (node-local; never sent)."""

    key_id: bytes
    parties: tuple[str, ...]
    keys: tr.ThresholdParty
    abandoned: int = 0  # sessions on this set abandoned after this party revealed r_i

    @property
    def remaining(self) -> int:
        """Decryption shares this party may still make under the key set."""
        budget = self.keys.context.params.max_decryptions
        return max(0, budget - self.keys.decryption_shares_made)


def note_abandoned(key_set: KeySet | None, config: SessionConfig, stage: str) -> None:
    """A party abandons the session ``config`` at ``stage``: count it against the kept key set
    when the session ran on that set and the party had revealed its lead secret."""
    if key_set is not None and config.key_set == key_set.key_id and stage in _REVEALED:
        key_set.abandoned += 1


def check_reuse(key_set: KeySet | None, config: SessionConfig, need: int) -> tr.ThresholdParty:
    """A party, at the join of a session announcing ``config.key_set``: the kept key share
    to use, or :class:`ProtocolError` before any upload when the party does not hold that key
    set for these parties, when ``need`` more decryption shares would exceed its budget, or
    (at the join: ``need > 0``) when :data:`ABANDON_LIMIT` sessions on the set were abandoned.
    The conditions depend on public values and the party's own count only."""
    if key_set is None or key_set.key_id != config.key_set:
        raise ProtocolError(
            "the session reuses a key set this party does not hold: announce a session that "
            "generates a fresh key set"
        )
    if key_set.parties != config.parties:
        raise ProtocolError("the session's parties differ from the reused key set's parties")
    if need and key_set.abandoned >= ABANDON_LIMIT:  # at the join (need 0: a later step)
        raise ProtocolError(
            f"{key_set.abandoned} sessions on the reused key set were abandoned after the lead "
            f"was drawn (limit {ABANDON_LIMIT}: an aggregator may be steering the lead): re-key "
            "(announce a session that generates a fresh key set)"
        )
    if need > key_set.remaining:
        raise ProtocolError(
            f"the session needs {need} decryption shares and the reused key set allows "
            f"{key_set.remaining} more (budget {key_set.keys.context.params.max_decryptions}): "
            "re-key (announce a session that generates a fresh key set)"
        )
    return key_set.keys


@dataclass
class ServerKeySet:
    """The aggregator's kept key set: its id, the parties in key order, the
    :class:`~privfl.threshold.ThresholdServer` holding the joint public and evaluation
    keys (no share), and the decryption shares each party spent under it, as the aggregator
    counts them (to announce reuse only when the parties will accept it; each party keeps its
    own count)."""

    key_id: bytes
    parties: tuple[str, ...]
    server: tr.ThresholdServer
    used: int = 0

    def fits(self, parties: tuple[str, ...], need: int, params: th.ThresholdParameters) -> bool:
        """Whether a session of ``parties`` spending ``need`` shares can reuse this set."""
        same = self.server.context.params == params and self.parties == parties
        return same and self.used + need <= params.max_decryptions


FLOODING_MODEL = b"privfl flooding v1: s=30, t + log2 sqrt(M) + 1 + log2 sqrt(tau)|"


def stored_set_name(params: th.ThresholdParameters) -> str:
    """The parameter set a stored key set was made under, as its header names it: the set's
    name and a digest of every parameter, so a set kept under other parameters of the same
    name (an upgrade that doubled the decryption budget, sized its flooding noise for it and
    would have let a spent set make 16 more shares) is not reused: the next session re-keys.
    :data:`FLOODING_MODEL` names how the parameters size the flooding noise: a release that
    changes that formula (``ThresholdParameters.noise_estimate_bits``) must change it too."""
    digest = hashlib.sha256(FLOODING_MODEL + repr(params).encode()).hexdigest()[:16]
    return f"{params.name}#{digest}"


def _write_header(
    w: Writer, key_id: bytes, parties: tuple[str, ...], params: th.ThresholdParameters
) -> Writer:
    return w.bytes_(key_id).list_([p.encode() for p in parties]).str_(stored_set_name(params))


def _read_header(
    r: Reader, params: th.ThresholdParameters
) -> tuple[bytes, tuple[str, ...], th.ThresholdContext] | None:
    key_id = r.bytes_(64)
    raw = r.list_(MAX_PARTIES)
    name = r.str_(64)
    try:
        parties = tuple(p.decode() for p in raw)
    except UnicodeDecodeError:
        raise MalformedMessageError("stored key set: a party name is not UTF-8") from None
    if not key_id or not parties or len(set(parties)) != len(parties):
        raise MalformedMessageError("stored key set: no id or malformed parties")
    if name != stored_set_name(params):
        return None  # kept under other parameters: re-key
    return key_id, parties, th.ThresholdContext.for_parameters(params, len(parties))


def export_key_set(key_set: KeySet) -> bytes:
    """A party's key set for its **own node-local storage** (it holds the party's key share):
    id, parties, parameter set, the share with its count and the joint public key, and its
    count of abandoned sessions on the set."""
    keys = key_set.keys
    w = _write_header(Writer(), key_set.key_id, key_set.parties, keys.context.params)
    w.bytes_(keys.export_local_state())  # share, count, joint public key
    return w.u32(key_set.abandoned).getvalue()


def import_key_set(data: bytes, name: str, params: th.ThresholdParameters) -> KeySet | None:
    """Party ``name``'s key set from :func:`export_key_set` (this node's own bytes), or None
    when it was kept under another parameter set than ``params``."""
    r = Reader(data, "stored key set")
    header = _read_header(r, params)
    local, abandoned = r.bytes_(MAX_KEY_FIELD), r.u32()
    r.end()
    if header is None:
        return None
    key_id, parties, ctx = header
    if name not in parties:
        raise MalformedMessageError(f"stored key set: {name!r} is not one of its parties")
    keys = tr.ThresholdParty(name, parties.index(name), ctx, key_id)
    keys.import_local_state(local)
    return KeySet(key_id, parties, keys, abandoned)


def export_server_key_set(key_set: ServerKeySet) -> bytes:
    """The aggregator's key set for its own storage: public material (the joint public key and
    evaluation keys), its count of the decryption shares each party spent and its last
    request id."""
    server = key_set.server
    if server.joint_evaluation_keys is None:
        raise ProtocolError("the key set has no evaluation keys yet")
    w = _write_header(Writer(), key_set.key_id, key_set.parties, server.context.params)
    w.u64(key_set.used).u64(server.last_request_id).bytes_(server.public_key_rows)
    return w.bytes_(server.joint_evaluation_keys.to_bytes()).getvalue()


def import_server_key_set(data: bytes, params: th.ThresholdParameters) -> ServerKeySet | None:
    """The aggregator's key set from :func:`export_server_key_set`, installed in a fresh
    :class:`~privfl.threshold.ThresholdServer` (None: kept under another parameter set)."""
    r = Reader(data, "stored aggregator key set")
    header = _read_header(r, params)
    used, last_id = r.u64(), r.u64()
    rows, keys = r.bytes_(MAX_KEY_FIELD), r.bytes_(MAX_KEY_FIELD)
    r.end()
    if header is None:
        return None
    key_id, parties, ctx = header
    server = tr.ThresholdServer(AGGREGATOR, ctx, key_id)
    server.reuse_keys(rows, th.EvaluationKeys.from_bytes(keys, ctx, key_id), last_id)
    return ServerKeySet(key_id, parties, server, used)
