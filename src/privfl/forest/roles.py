"""RevFRF roles: participants (feature owners), the center server CS (labels, trees) and the
key generation center; CC is :class:`privfl.crypto.dtpkc.ComputationProvider`.

Messages between roles are bytes (``privfl.messages`` framing, protocol ``revfrf``):

* ``node-request`` CS -> participant: tree/node ids, the node's sample-selection vector μ as a
  bitmask over the n aligned samples, the participant's selected local features, ϱ and ς.
* ``proposals`` participant -> CS: for every candidate split, one bit per sample *of the node*
  (0 = left, x < s; 1 = right). Samples outside the node are the zeros of μ, which CS sent,
  so carrying them would add nothing; the candidate's threshold stays with the participant.
* ``split-request`` / ``split-upload``: CS names the winning candidate; the participant
  records the split and returns ``HoEnc(pk_u, fixed_point(s))``.
* ``partial-decrypt`` (prediction): CS sends the HoLT result under ``h_CS · h_u``; the
  provider strips its key (ParHDec1) and CS finishes (ParHDec2).
* ``revocation``: a participant's Ed25519-signed request to leave.
"""

from __future__ import annotations

import math
import secrets
import time
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from privfl.crypto import dtpkc
from privfl.errors import InputError, MalformedMessageError, ProtocolError, UnknownPartyError
from privfl.messages import SESSION_ID_BYTES, Header, Reader, Writer, decode_message, encode_message

PROTOCOL = "revfrf"
VERSION = 1
FRACTION_BITS = dtpkc.DEFAULT_FRACTION_BITS


def encode(step: str, sender: str, payload: bytes, session: bytes) -> bytes:
    return encode_message(Header(PROTOCOL, VERSION, step, session, sender), payload)


def decode(data: bytes, step: str, session: bytes) -> tuple[str, Reader]:
    header, payload = decode_message(
        data, protocol=PROTOCOL, version=VERSION, step=step, session=session
    )
    return header.sender, Reader(payload, f"revfrf {step}")


def pack_mask(mask: npt.NDArray[np.bool_]) -> bytes:
    return np.packbits(mask.astype(np.uint8)).tobytes()


def unpack_mask(data: bytes, n: int) -> npt.NDArray[np.bool_]:
    bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8))
    if bits.size < n:
        raise MalformedMessageError("bitmask shorter than the number of samples")
    return bits[:n].astype(bool)


@dataclass(frozen=True)
class RevocationRequest:
    """A participant's signed request to be revoked."""

    participant: str
    nonce: bytes
    timestamp: float
    signature: bytes

    def signed_bytes(self) -> bytes:
        return Writer().str_(self.participant).bytes_(self.nonce).f64(self.timestamp).getvalue()

    def to_bytes(self, session: bytes) -> bytes:
        w = Writer().str_(self.participant).bytes_(self.nonce).f64(self.timestamp)
        return encode("revocation", self.participant, w.bytes_(self.signature).getvalue(), session)

    @classmethod
    def from_bytes(cls, data: bytes, session: bytes) -> RevocationRequest:
        _, r = decode(data, "revocation", session)
        out = cls(r.str_(), r.bytes_(), r.f64(), r.bytes_())
        r.end()
        return out


class Participant:
    """Owns some feature columns of the aligned samples and a DT-PKC weak key.

    Learns the node sample sets CS sends (which samples reach a node), never labels or other
    participants' values; keeps its split thresholds to itself."""

    def __init__(
        self,
        name: str,
        columns: npt.NDArray[np.float64],
        sk: dtpkc.SecretKey,
        signing_key: Ed25519PrivateKey,
        rho: int = 32,
        candidates: int = 8,
    ) -> None:
        if columns.ndim != 2:
            raise InputError(f"{name}: feature matrix must be 2-D")
        if not np.all(np.isfinite(columns)):
            raise InputError(f"{name}: features must be finite (no NaN or inf)")
        self.name, self.columns, self.sk = name, columns.astype(np.float64), sk
        self.signing_key = signing_key
        self.rho, self.candidates = rho, candidates
        self._pending: dict[tuple[int, int], list[tuple[int, float]]] = {}
        self.splits: dict[tuple[int, int], tuple[int, float]] = {}  # (tree, node) -> (col, s)
        self.seen_labels = False  # never set: asserted by tests
        self.trusted_requesters: set[str] | None = None
        self._rng = np.random.default_rng(secrets.randbits(64))  # not secret: sample draws

    # -- tree growth --------------------------------------------------------------------
    def handle_node_request(self, data: bytes, session: bytes) -> bytes:
        """FOS-Find on the participant's side: candidate splits for the selected features."""
        _, r = decode(data, "node-request", session)
        tree_id, node_id = r.u32(), r.u32()
        members = np.flatnonzero(unpack_mask(r.bytes_(), self.columns.shape[0]))
        cols = [r.u32() for _ in range(r.u32())]
        rho, count = r.u32(), r.u32()
        r.end()
        if any(c >= self.columns.shape[1] for c in cols):
            raise MalformedMessageError(f"{self.name}: request names a feature it does not own")
        w = Writer().u32(tree_id).u32(node_id)
        proposals = []
        for c in cols:
            values = self.columns[members, c]
            probe = values[self._rng.choice(values.size, size=min(rho, values.size), replace=False)]
            lo, hi = float(probe.min()), float(probe.max())
            if hi <= lo:
                continue
            for k in range(1, count + 1):
                s = lo + (hi - lo) * k / (count + 1)
                proposals.append((c, s, pack_mask(values >= s)))
        self._pending[(tree_id, node_id)] = [(c, s) for c, s, _ in proposals]
        w.u32(len(proposals))
        for i, (c, _, mask) in enumerate(proposals):
            w.u32(i).u32(c).bytes_(mask)
        return encode("proposals", self.name, w.getvalue(), session)

    def handle_split_request(self, data: bytes, session: bytes) -> bytes:
        """Record the winning split and upload it encrypted under the participant's key."""
        _, r = decode(data, "split-request", session)
        tree_id, node_id, index = r.u32(), r.u32(), r.u32()
        r.end()
        pending = self._pending.pop((tree_id, node_id), None)
        if pending is None or index >= len(pending):
            raise ProtocolError(f"{self.name}: no such candidate split")
        col, s = pending[index]
        self.splits[(tree_id, node_id)] = (col, s)
        enc = dtpkc.encrypt(self.sk.public, dtpkc.to_fixed_point(s, FRACTION_BITS, self.sk.params))
        return encode("split-upload", self.name, enc.to_bytes(), session)

    def forget(self, tree_id: int, node_ids: list[int]) -> None:
        for nid in node_ids:
            self.splits.pop((tree_id, nid), None)
            self._pending.pop((tree_id, nid), None)

    # -- prediction ---------------------------------------------------------------------
    def compare_plain(
        self, tree_id: int, node_id: int, rows: npt.NDArray[np.float64]
    ) -> npt.NDArray[np.bool_]:
        """Plaintext evaluation of one of its nodes on its own columns: x < s."""
        col, s = self.splits[(tree_id, node_id)]
        return np.asarray(rows[:, col] < s)

    def encrypt_value(self, value: float) -> dtpkc.Ciphertext:
        """FRF-Test: the provider's local test value, encrypted under its own key."""
        return dtpkc.encrypt(
            self.sk.public, dtpkc.to_fixed_point(value, FRACTION_BITS, self.sk.params)
        )

    def partial_decrypt(self, data: bytes, session: bytes, requester: str) -> bytes:
        """ParHDec1 of a comparison result under h_CS · h_u (may refuse unknown requesters)."""
        _, r = decode(data, "partial-decrypt", session)
        ct = dtpkc.Ciphertext.from_bytes(self.sk.params, r.bytes_())
        r.end()
        if self.trusted_requesters is not None and requester not in self.trusted_requesters:
            raise UnknownPartyError(f"{self.name} refuses to help {requester!r}")
        part = dtpkc.joint_partial_decrypt(self.sk, ct)
        return encode(
            "partial-decrypted", self.name, Writer().bytes_(part.to_bytes()).getvalue(), session
        )

    # -- revocation ---------------------------------------------------------------------
    def revocation_request(self, session: bytes) -> bytes:
        nonce = secrets.token_bytes(16)
        now = time.time()
        unsigned = RevocationRequest(self.name, nonce, now, b"")
        sig = self.signing_key.sign(unsigned.signed_bytes())
        return RevocationRequest(self.name, nonce, now, sig).to_bytes(session)


def verify_revocation(data: bytes, session: bytes, keys: dict[str, Ed25519PublicKey]) -> str:
    """CS's check of a revocation request; returns the participant's name."""
    req = RevocationRequest.from_bytes(data, session)
    key = keys.get(req.participant)
    if key is None:
        raise UnknownPartyError(f"revocation request from unknown participant {req.participant!r}")
    try:
        key.verify(req.signature, req.signed_bytes())
    except InvalidSignature as exc:
        raise UnknownPartyError(
            f"revocation request for {req.participant!r} has an invalid signature"
        ) from exc
    return req.participant


def new_session() -> bytes:
    return secrets.token_bytes(SESSION_ID_BYTES)


def ceil_sqrt(n: int) -> int:
    return max(1, math.ceil(math.sqrt(n)))
