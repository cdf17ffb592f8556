"""Private alignment of sample ids: multi-party Diffie-Hellman PSI over X25519.

The CS (labels) and the participants (columns) each hold ids of their own rows; the forest
needs the rows of the ids *every* one of them holds, in one order all agree on. This module
computes that intersection so that no party learns an id outside it.

**Construction (commutative X25519, a ring of passes, a non-holding comparer).**
Party ``i`` of ``n`` draws a fresh X25519 scalar ``k_i`` per session. An id ``x`` becomes
the 32-byte string ``u(x) = SHA-256("privfl-psi-v1" | session | x)``, read as a Montgomery
u-coordinate. X25519 scalar multiplication commutes: ``X25519(a, X25519(b, u)) =
X25519(b, X25519(a, u))`` (both are the u-coordinate of ``[clamp(a)·clamp(b)]P``), so
``T(x) = X25519(k_1, ... X25519(k_n, u(x)))`` does not depend on the order of the keys.

1. ``psi-start`` (party ``i``, local): ``X25519(k_i, u(x))`` for its ids, in a secret random
   order (``secrets``), which it keeps.
2. ``psi-pass`` (n - 1 rounds): the list of party ``o`` travels the ring ``o+1, o+2, ...``;
   each holder applies its own scalar, keeping the order. The holder that applies the last
   scalar (party ``o-1``) never sees its own list fully keyed, so it cannot compare; it seals
   the list for the comparer (ephemeral X25519 + HKDF-SHA256 + AES-256-GCM to the
   comparer's provisioned key; the associated data binds session, origin and purpose), so a
   relay (the CS, who forwards every message over Flower) sees only ciphertext.
3. ``psi-compare`` (the comparer, here the computation provider CC, which holds no ids):
   intersects the ``n`` fully keyed lists and answers each party with the *positions in
   its own list* of the common tags, sorted by tag (an order unrelated to the ids).
4. Each party maps those positions through its secret order to its own rows: every party
   now has its rows of the intersection in the same order; the CS has its labels aligned.

**What each role learns.** A party: its rows of the intersection (the output) and the sizes
of the other parties' lists (they pass through it); every tag it sees carries at least one
scalar it does not know. The comparer: the set sizes and the sizes of the intersections of
any subset of the parties (it sees every fully keyed list, labelled by owner), never an id:
it holds no scalar. The CS as a relay: the sizes, and position lists into shuffled lists.

**Assumptions.** Semi-honest parties; the comparer (CC) does not collude with the CS or a
participant (RevFRF assumes CS and CC do not collude anyway); SHA-256 as a random oracle
onto u-coordinates. Mapping an id to a u-coordinate by hashing is *not* an Elligator/
hash-to-curve map: about half the hashed u lie on the quadratic twist of Curve25519. That
is harmless here: X25519 is defined on every u, the twist of Curve25519 also has a
large prime-order subgroup (order 2^2 · q', q' ≈ 2^253, the "twist security" Curve25519 was
designed for), clamped scalars are multiples of the cofactor 8, and nobody knows the discrete
log of a hashed point (it is not a known multiple of the base point), so the tags are
pseudorandom under the decisional Diffie-Hellman assumption on the curve and on its twist. A
u that lands on a low-order point (probability about 2^-250) is refused. Ids are compared by
their UTF-8 text (``5`` and ``"5"`` are the same id).
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from privfl.errors import InputError, MalformedMessageError, ProtocolError, UnknownPartyError
from privfl.messages import Codec, Reader, Writer

CODEC = Codec("psi", 1)
TAG = 32
MAX_ID_BYTES = 256
MAX_PARTIES = 64


@dataclass(frozen=True)
class PsiConfig:
    """What every party agreed: the session, the ring of parties (its order is the order of
    the passes), the comparer and the largest id list any party may send."""

    session: bytes
    parties: tuple[str, ...]
    comparer: str
    max_ids: int = 1 << 22

    def __post_init__(self) -> None:
        if not 2 <= len(self.parties) <= MAX_PARTIES or len(set(self.parties)) != len(self.parties):
            raise InputError("PSI needs 2 to 64 distinct parties")
        if self.comparer in self.parties:
            raise InputError("the PSI comparer must hold no ids (it is not a party)")

    def index(self, name: str) -> int:
        if name not in self.parties:
            raise UnknownPartyError(f"{name!r} is not a PSI party")
        return self.parties.index(name)

    def holder(self, origin: str, stage: int) -> str:
        """The party that applies the ``stage + 1``-th scalar to ``origin``'s list."""
        return self.parties[(self.index(origin) + stage) % len(self.parties)]


def _tag(u: bytes, key: X25519PrivateKey) -> bytes:
    try:
        return key.exchange(X25519PublicKey.from_public_bytes(u))
    except ValueError:  # a low-order point: the shared value would be zero
        raise ProtocolError("a PSI value is a low-order point") from None


def hash_id(session: bytes, item: object) -> bytes:
    """u(x): SHA-256 of the domain, the session and the id's UTF-8 text."""
    text = str(item).encode("utf-8")
    if not text or len(text) > MAX_ID_BYTES:
        raise InputError(f"an id must be 1..{MAX_ID_BYTES} bytes of text, got {item!r}")
    w = Writer().str_("privfl-psi-v1").bytes_(session).bytes_(text)
    return hashlib.sha256(w.getvalue()).digest()


# ------------------------------------------------------------------------ messages
@dataclass(frozen=True)
class PsiList:
    """``psi-start`` / ``psi-pass``: ``origin``'s list after ``stage`` scalars, in the
    origin's secret order."""

    origin: str
    stage: int
    values: tuple[bytes, ...]

    def to_bytes(self, config: PsiConfig, sender: str) -> bytes:
        step = "psi-start" if self.stage == 1 else "psi-pass"
        w = Writer().str_(self.origin).u32(self.stage).u32(len(self.values))
        w.bytes_(b"".join(self.values))
        return CODEC.encode(step, config.session, sender, w.getvalue())

    @classmethod
    def from_bytes(cls, data: bytes, config: PsiConfig) -> PsiList:
        """A list from the party that keyed it last (the origin itself after one key)."""
        header, r = CODEC.decode(data, None, config.session)
        origin, stage = r.str_(256), r.u32()
        config.index(origin)
        if not 1 <= stage < len(config.parties):
            raise MalformedMessageError(f"a PSI list after {stage} of {len(config.parties)} keys")
        if header.step != ("psi-start" if stage == 1 else "psi-pass"):
            raise MalformedMessageError(f"a '{header.step}' message carrying a list")
        if header.sender != config.holder(origin, stage - 1):
            raise UnknownPartyError(f"{header.sender!r} cannot send {origin}'s list at {stage}")
        count = r.count(config.max_ids, "ids")
        raw = r.bytes_(count * TAG)
        r.end()
        if len(raw) != count * TAG:
            raise MalformedMessageError(f"{count} PSI values need {count * TAG} bytes")
        return cls(origin, stage, tuple(raw[i : i + TAG] for i in range(0, len(raw), TAG)))


def _seal_key(shared: bytes, aad: bytes) -> bytes:
    hkdf = HKDF(algorithm=hashes.SHA256(), length=32, salt=b"privfl-psi-seal-v1", info=aad)
    return hkdf.derive(shared)


def _aad(config: PsiConfig, origin: str, eph: bytes) -> bytes:
    w = Writer().str_("psi-final").bytes_(config.session).str_(config.comparer).str_(origin)
    return w.bytes_(eph).getvalue()


@dataclass(frozen=True)
class SealedFinal:
    """``psi-final``: ``origin``'s fully keyed list, sealed for the comparer alone."""

    origin: str
    ephemeral: bytes
    nonce: bytes
    ciphertext: bytes

    @classmethod
    def seal(
        cls, config: PsiConfig, origin: str, values: Sequence[bytes], to: bytes
    ) -> SealedFinal:
        eph = X25519PrivateKey.generate()
        eph_pub = eph.public_key().public_bytes_raw()
        aad = _aad(config, origin, eph_pub)
        key = _seal_key(eph.exchange(X25519PublicKey.from_public_bytes(to)), aad)
        nonce = secrets.token_bytes(12)
        body = AESGCM(key).encrypt(nonce, b"".join(values), aad)
        return cls(origin, eph_pub, nonce, body)

    def open(self, config: PsiConfig, key: X25519PrivateKey) -> tuple[bytes, ...]:
        aad = _aad(config, self.origin, self.ephemeral)
        shared = key.exchange(X25519PublicKey.from_public_bytes(self.ephemeral))
        try:
            raw = AESGCM(_seal_key(shared, aad)).decrypt(self.nonce, self.ciphertext, aad)
        except InvalidTag:
            raise MalformedMessageError(f"{self.origin}'s sealed PSI list does not open") from None
        if len(raw) % TAG or len(raw) // TAG > config.max_ids:
            raise MalformedMessageError("a sealed PSI list of a bad length")
        return tuple(raw[i : i + TAG] for i in range(0, len(raw), TAG))

    def to_bytes(self, config: PsiConfig, sender: str) -> bytes:
        w = Writer().str_(self.origin).bytes_(self.ephemeral).bytes_(self.nonce)
        return CODEC.encode(
            "psi-final", config.session, sender, w.bytes_(self.ciphertext).getvalue()
        )

    @classmethod
    def from_bytes(cls, data: bytes, config: PsiConfig, sender: str) -> SealedFinal:
        header, r = CODEC.decode(data, "psi-final", config.session)
        origin = r.str_(256)
        if header.sender != sender or config.holder(origin, len(config.parties) - 1) != sender:
            raise UnknownPartyError(f"{header.sender!r} cannot seal {origin!r}'s final list")
        eph, nonce = r.bytes_(32), r.bytes_(12)
        body = r.bytes_(config.max_ids * TAG + 16)
        r.end()
        if len(eph) != 32 or len(nonce) != 12:
            raise MalformedMessageError("a sealed PSI list with a bad key or nonce")
        return cls(origin, eph, nonce, body)


@dataclass(frozen=True)
class Positions:
    """``psi-result`` (comparer -> one party): positions in that party's list of the
    common tags, in the agreed (tag-sorted) order."""

    party: str
    positions: tuple[int, ...]

    def to_bytes(self, config: PsiConfig, sender: str) -> bytes:
        w = Writer().str_(self.party).u32(len(self.positions))
        w.bytes_(np.asarray(self.positions, dtype=">u4").tobytes())
        return CODEC.encode("psi-result", config.session, sender, w.getvalue())

    @classmethod
    def from_bytes(cls, data: bytes, config: PsiConfig, party: str, n_own: int) -> Positions:
        header, r = CODEC.decode(data, "psi-result", config.session)
        if header.sender != config.comparer:
            raise UnknownPartyError(f"a psi-result from {header.sender!r}")
        if r.str_(256) != party:
            raise UnknownPartyError(f"a psi-result for another party than {party!r}")
        count = r.count(n_own, "common ids")
        raw = r.bytes_(4 * count)
        r.end()
        if len(raw) != 4 * count:
            raise MalformedMessageError(f"{count} positions need {4 * count} bytes")
        pos = np.frombuffer(raw, dtype=">u4").astype(np.int64)
        if pos.size and (pos.max() >= n_own or np.unique(pos).size != pos.size):
            raise MalformedMessageError("psi-result positions repeat or exceed the list")
        return cls(party, tuple(int(p) for p in pos))


# ------------------------------------------------------------------------ roles
class PsiParty:
    """One holder of ids (the CS or a participant): its scalar and its secret order."""

    def __init__(
        self, name: str, ids: Sequence[object], config: PsiConfig, secret: bytes | None = None
    ) -> None:
        """``secret``: what :meth:`secret_state` saved (a node that rebuilds the party per
        message); by default a fresh scalar and a fresh secret order."""
        self.name, self.config = name, config
        config.index(name)
        items = list(ids)
        if not items or len(items) > config.max_ids:
            raise InputError(f"{name}: between 1 and {config.max_ids} ids, got {len(items)}")
        hashed = [hash_id(config.session, x) for x in items]
        if len(set(hashed)) != len(hashed):
            raise InputError(f"{name}: the id column has duplicates")
        if secret is None:
            self._key = X25519PrivateKey.generate()
            self._order = [int(i) for i in _permutation(len(items))]  # list position -> row
        else:
            r = Reader(secret, f"{name}'s PSI state")
            raw, order = r.bytes_(32), r.bytes_(4 * len(items))
            r.end()
            perm = np.frombuffer(order, dtype=">u4").astype(np.int64)
            if len(raw) != 32 or not np.array_equal(np.sort(perm), np.arange(len(items))):
                raise MalformedMessageError(f"{name}'s PSI state does not fit its {len(items)} ids")
            self._key = X25519PrivateKey.from_private_bytes(raw)
            self._order = [int(i) for i in perm]
        self._hashed = [hashed[row] for row in self._order]
        self.rows: np.ndarray | None = None  # the output: own rows of the intersection

    def secret_state(self) -> bytes:
        """The scalar and the secret order (keep them private: they unmask the lists)."""
        order = np.asarray(self._order, dtype=">u4").tobytes()
        return Writer().bytes_(self._key.private_bytes_raw()).bytes_(order).getvalue()

    def start(self) -> bytes:
        """Step 1: its own ids under its own scalar, in its secret order."""
        values = tuple(_tag(u, self._key) for u in self._hashed)
        return PsiList(self.name, 1, values).to_bytes(self.config, self.name)

    def pass_on(self, data: bytes, comparer_key: bytes) -> bytes:
        """Step 2: apply its scalar to another party's list; seal it if the list is done."""
        got = PsiList.from_bytes(data, self.config)
        if got.origin == self.name or self.config.holder(got.origin, got.stage) != self.name:
            raise ProtocolError(f"{self.name} is not the next holder of {got.origin}'s list")
        values = tuple(_tag(v, self._key) for v in got.values)
        if got.stage + 1 == len(self.config.parties):
            final = SealedFinal.seal(self.config, got.origin, values, comparer_key)
            return final.to_bytes(self.config, self.name)
        return PsiList(got.origin, got.stage + 1, values).to_bytes(self.config, self.name)

    def finish(self, data: bytes) -> np.ndarray:
        """Step 4: its rows of the intersection, in the agreed order."""
        got = Positions.from_bytes(data, self.config, self.name, len(self._order))
        self.rows = np.asarray([self._order[p] for p in got.positions], dtype=np.int64)
        return self.rows


class PsiComparer:
    """The comparer (CC in RevFRF): its sealing key; it holds no ids and no PSI scalar."""

    def __init__(self, config: PsiConfig, key: X25519PrivateKey | None = None) -> None:
        self.config = config
        self._key = key or X25519PrivateKey.generate()

    @property
    def public_key(self) -> bytes:
        return self._key.public_key().public_bytes_raw()

    def compare(self, finals: dict[str, bytes]) -> dict[str, bytes]:
        """Step 3: ``psi-final`` per origin (keyed by the sender) -> ``psi-result`` per party."""
        lists: dict[str, tuple[bytes, ...]] = {}
        for sender, data in finals.items():
            final = SealedFinal.from_bytes(data, self.config, sender)
            if final.origin in lists:
                raise ProtocolError(f"two final lists of {final.origin!r}")
            lists[final.origin] = final.open(self.config, self._key)
        missing = [p for p in self.config.parties if p not in lists]
        if missing:
            raise ProtocolError(f"no final PSI list of {missing}")
        index: dict[str, dict[bytes, int]] = {}
        for origin, values in lists.items():
            index[origin] = {v: i for i, v in enumerate(values)}
            if len(index[origin]) != len(values):
                raise ProtocolError(f"{origin}'s final PSI list repeats a value")
        common = sorted(set.intersection(*(set(d) for d in index.values())))
        return {
            p: Positions(p, tuple(index[p][t] for t in common)).to_bytes(
                self.config, self.config.comparer
            )
            for p in self.config.parties
        }


def _permutation(n: int) -> np.ndarray:
    """A uniformly random permutation from ``secrets`` (Fisher-Yates)."""
    out = np.arange(n)
    for i in range(n - 1, 0, -1):
        j = secrets.randbelow(i + 1)
        out[i], out[j] = out[j], out[i]
    return out
