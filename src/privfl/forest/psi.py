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

**Against a deviating relay.** Every message is signed by its sender
(Ed25519, keys pinned in :class:`PsiConfig`, bound to the session and the step,
:mod:`.psi_messages`), so the CS, which relays everything, cannot pass off a list as another
party's. Each origin signs its list's size at the start and every holder refuses a list of
another length; every party keys each other party's list exactly once, only from that
list's predecessor in the ring (:class:`RepeatedStageError` otherwise). Before, a CS with
three or more parties had the others key a dictionary of candidate ids as extra passes and
matched it against a list it finalised itself: every party's whole id set. Now the only
lists the parties key are the origins' own, once; a CS can still choose its *own* list (a
dictionary), which yields what PSI outputs by design: the ids every party holds.

**Assumptions.** Semi-honest participants; the comparer (CC) does not collude with the CS or a
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

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey

from privfl.errors import InputError, MalformedMessageError, ProtocolError
from privfl.forest.psi_messages import (
    ATTEMPT,
    CODEC,
    TAG,
    Positions,
    PsiConfig,
    PsiList,
    RepeatedStageError,
    SealedFinal,
    SizeAnnouncement,
)
from privfl.messages import Reader, Writer

__all__ = [
    "CODEC", "TAG", "Positions", "PsiComparer", "PsiConfig", "PsiList", "PsiParty",
    "RepeatedStageError", "SealedFinal", "SizeAnnouncement", "hash_id",
]  # fmt: skip
MAX_ID_BYTES = 256


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


# ------------------------------------------------------------------------ roles
class PsiParty:
    """One holder of ids (the CS or a participant): its scalar, its secret order, its
    signing key, and the lists it has keyed (each origin's list once, ever)."""

    def __init__(
        self, name: str, ids: Sequence[object], config: PsiConfig, identity: Ed25519PrivateKey,
        secret: bytes | None = None,
    ) -> None:  # fmt: skip
        """``identity``: the party's provisioned Ed25519 key (``config.keys[name]``);
        ``secret``: what :meth:`secret_state` saved (a node that rebuilds the party per
        message); by default a fresh scalar and a fresh secret order."""
        self.name, self.config, self._identity = name, config, identity
        config.index(name)
        if identity.public_key() != config.keys[name]:
            raise InputError(f"{name}: the signing key is not the one the PSI pinned")
        items = list(ids)
        if not items or len(items) > config.max_ids:
            raise InputError(f"{name}: between 1 and {config.max_ids} ids, got {len(items)}")
        self._keyed: set[str] = set()
        self._items, self._hashed = items, list[bytes]()  # hashed once needed (:meth:`start`)
        if secret is None:
            self._hash()  # a fresh party checks its ids at once
            self._key = X25519PrivateKey.generate()
            self._order = [int(i) for i in _permutation(len(items))]  # list position -> row
            attempt = secrets.token_bytes(ATTEMPT)  # this scalar's attempt (see Positions)
        else:
            r = Reader(secret, f"{name}'s PSI state")
            raw, order = r.bytes_(32), r.bytes_(4 * len(items))
            attempt = r.bytes_(ATTEMPT)
            self._keyed = {r.str_(256) for _ in range(r.count(len(config.parties), "keyed"))}
            r.end()
            perm = np.frombuffer(order, dtype=">u4").astype(np.int64)
            sizes_ok = len(raw) == 32 and len(attempt) == ATTEMPT
            if not sizes_ok or not np.array_equal(np.sort(perm), np.arange(len(items))):
                raise MalformedMessageError(f"{name}'s PSI state does not fit its {len(items)} ids")
            self._key = X25519PrivateKey.from_private_bytes(raw)
            self._order = [int(i) for i in perm]
        self._size = SizeAnnouncement.sign(identity, config, name, len(items), attempt)
        self.rows: np.ndarray | None = None  # the output: own rows of the intersection

    def secret_state(self) -> bytes:
        """The scalar, the secret order and the lists keyed so far (keep them private: they
        unmask the lists)."""
        order = np.asarray(self._order, dtype=">u4").tobytes()
        w = Writer().bytes_(self._key.private_bytes_raw()).bytes_(order)
        w.bytes_(self._size.attempt).u32(len(self._keyed))
        for origin in sorted(self._keyed):
            w.str_(origin)
        return w.getvalue()

    def _hash(self) -> list[bytes]:
        """u(x) of its ids in its secret order (refusing duplicates); a party rebuilt from
        its state to key another party's list or to finish never needs them."""
        if not self._hashed:
            hashed = [hash_id(self.config.session, x) for x in self._items]
            if len(set(hashed)) != len(hashed):
                raise InputError(f"{self.name}: the id column has duplicates")
            self._hashed = hashed
        return self._hashed

    def start(self) -> bytes:
        """Step 1: its own ids under its own scalar, in its secret order, and its size."""
        hashed = self._hash()
        values = tuple(_tag(hashed[row], self._key) for row in self._order)
        return PsiList(self.name, 1, values, self._size).to_bytes(
            self.config, self.name, self._identity
        )

    def pass_on(self, data: bytes, comparer_key: bytes) -> bytes:
        """Step 2: apply its scalar to another party's list, signed by its predecessor and
        as long as its origin announced, once per origin; seal it if the list is done."""
        got = PsiList.from_bytes(data, self.config)
        if got.origin == self.name or self.config.holder(got.origin, got.stage) != self.name:
            raise ProtocolError(f"{self.name} is not the next holder of {got.origin}'s list")
        if got.origin in self._keyed:
            raise RepeatedStageError(f"{self.name} already keyed {got.origin}'s list")
        self._keyed.add(got.origin)
        values = tuple(_tag(v, self._key) for v in got.values)
        if got.stage + 1 == len(self.config.parties):
            final = SealedFinal.seal(self.config, got.size, values, comparer_key)
            return final.to_bytes(self.config, self.name, self._identity)
        out = PsiList(got.origin, got.stage + 1, values, got.size)
        return out.to_bytes(self.config, self.name, self._identity)

    def finish(self, data: bytes) -> np.ndarray:
        """Step 4: its rows of the intersection, in the agreed order."""
        got = Positions.from_bytes(
            data, self.config, self.name, len(self._order), self._size.attempt
        )
        self.rows = np.asarray([self._order[p] for p in got.positions], dtype=np.int64)
        return self.rows


class PsiComparer:
    """The comparer (CC in RevFRF): its sealing key and its signing key; it holds no ids and
    no PSI scalar."""

    def __init__(
        self, config: PsiConfig, identity: Ed25519PrivateKey,
        key: X25519PrivateKey | None = None,
    ) -> None:  # fmt: skip
        if identity.public_key() != config.keys[config.comparer]:
            raise InputError("the comparer's signing key is not the one the PSI pinned")
        self.config, self._identity = config, identity
        self._key = key or X25519PrivateKey.generate()

    @property
    def public_key(self) -> bytes:
        return self._key.public_key().public_bytes_raw()

    def compare(self, finals: dict[str, bytes]) -> dict[str, bytes]:
        """Step 3: ``psi-final`` per origin (keyed by the sender) -> ``psi-result`` per party."""
        lists: dict[str, tuple[bytes, ...]] = {}
        attempts: dict[str, bytes] = {}
        for sender, data in finals.items():
            final = SealedFinal.from_bytes(data, self.config, sender)
            if final.origin in lists:
                raise ProtocolError(f"two final lists of {final.origin!r}")
            lists[final.origin] = final.open(self.config, self._key)
            attempts[final.origin] = final.size.attempt
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
            p: Positions(p, attempts[p], tuple(index[p][t] for t in common)).to_bytes(
                self.config, self._identity
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
