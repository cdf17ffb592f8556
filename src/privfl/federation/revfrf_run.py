"""A fresh session id per RevFRF deployment run: provisioning fixes the roster, each run
draws its own session.

**Threat.** With the session id fixed at provisioning, every message of one run was valid
in the next: a deviating CS could replay a participant's signed revocation request (within
its 5-minute window), a requester's signed query, a PSI message or a CC-signed comparison
result to a node whose single-use state is new in the new run (a Flower node's state lives
for one run).

**The run id.** Every role that keeps single-use state contributes randomness, so no role
can be handed an id of an earlier run:

1. CS -> the CC and every participant (``run-nonce``, under the provisioning id): each
   node draws 32 fresh bytes from :mod:`secrets`, keeps them, and answers with them. A node
   that already has a run refuses (a run is started once per node state).
2. CS draws its own 32 bytes, and announces (``run-start``) its nonce and every node's,
   Ed25519-signed with its pinned key (:class:`RunStart`). A participant or the CC accepts
   only if the signature verifies under the CS's key in ``session.json`` and *its own*
   pending nonce is listed under its name; the nonce is then spent. The run id is
   ``SHA-256(provisioning id, CS's nonce, every (name, nonce))``, 16 bytes.
3. A requester contributes no nonce: it checks the CS's signature when the run-start
   reaches it (before its queries), keeps the run id and refuses a run-start of any other
   id in the same node state; a query it signs for another run's id is opened by no CC of
   this run, and it signs one query batch per run (:mod:`.revfrf_node`).

From then on every message of every codec (forest, PSI, node control) carries the run id
and is refused under any other id (:class:`~privfl.errors.WrongSessionError`). A node's id
contains its own fresh nonce, so a message recorded in an earlier run never matches; a
CS that gives two nodes different announcements only stops the run (they disagree on the
id), which is denial of service, out of scope.
"""

from __future__ import annotations

import hashlib
import secrets
from collections.abc import Mapping, MutableMapping
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from privfl.errors import MalformedMessageError, ProtocolError, UnknownPartyError
from privfl.messages import SESSION_ID_BYTES, Reader, Writer

NONCE_BYTES = 32
MAX_NODES = 4096
PENDING, RUN = "run-nonce", "run"  # a node's state keys


def run_id(provisioning: bytes, cs_nonce: bytes, nonces: Mapping[str, bytes]) -> bytes:
    """The run's session id: SHA-256 over the provisioning id and every contribution."""
    w = Writer().str_("privfl revfrf run").bytes_(provisioning).bytes_(cs_nonce)
    for name in sorted(nonces):
        w.str_(name).bytes_(nonces[name])
    return hashlib.sha256(w.getvalue()).digest()[:SESSION_ID_BYTES]


@dataclass(frozen=True)
class RunStart:
    """CS -> every node (``run-start``): the CS's nonce, every contributing node's nonce,
    and the CS's Ed25519 signature over them and the provisioning id."""

    cs_nonce: bytes
    nonces: tuple[tuple[str, bytes], ...]
    signature: bytes = b""

    def signed_bytes(self, provisioning: bytes) -> bytes:
        w = Writer().str_("privfl revfrf run-start").bytes_(provisioning).bytes_(self.cs_nonce)
        for name, nonce in self.nonces:
            w.str_(name).bytes_(nonce)
        return w.getvalue()

    @classmethod
    def sign(
        cls, key: Ed25519PrivateKey, provisioning: bytes, nonces: Mapping[str, bytes]
    ) -> RunStart:
        """Run by the CS: its fresh nonce and the nodes' nonces, signed."""
        unsigned = cls(secrets.token_bytes(NONCE_BYTES), tuple(sorted(nonces.items())))
        signature = key.sign(unsigned.signed_bytes(provisioning))
        return cls(unsigned.cs_nonce, unsigned.nonces, signature)

    def verify(self, key: Ed25519PublicKey, provisioning: bytes) -> None:
        try:
            key.verify(self.signature, self.signed_bytes(provisioning))
        except InvalidSignature:
            raise UnknownPartyError("a run-start not signed by the CS") from None

    def run_id(self, provisioning: bytes) -> bytes:
        return run_id(provisioning, self.cs_nonce, dict(self.nonces))

    def write(self, w: Writer) -> Writer:
        w.bytes_(self.cs_nonce).u32(len(self.nonces))
        for name, nonce in self.nonces:
            w.str_(name).bytes_(nonce)
        return w.bytes_(self.signature)

    @classmethod
    def read(cls, r: Reader) -> RunStart:
        cs_nonce = r.bytes_(NONCE_BYTES)
        nonces = tuple(
            (r.str_(256), r.bytes_(NONCE_BYTES)) for _ in range(r.count(MAX_NODES, "nodes"))
        )
        signature = r.bytes_(64)
        short = any(len(n) != NONCE_BYTES for _, n in nonces) or len(cs_nonce) != NONCE_BYTES
        if short or len(signature) != 64:
            raise MalformedMessageError("a run-start with a short nonce or signature")
        if len({name for name, _ in nonces}) != len(nonces):
            raise MalformedMessageError("a run-start names a node twice")
        return cls(cs_nonce, nonces, signature)


def draw_nonce(state: MutableMapping[str, bytes]) -> bytes:
    """``run-nonce`` (a participant or the CC): a fresh contribution, kept until the
    run-start; refused once this node state has a run."""
    if RUN in state:
        raise ProtocolError("this node already started its run")
    nonce = secrets.token_bytes(NONCE_BYTES)
    state[PENDING] = nonce
    return nonce


def accept(
    state: MutableMapping[str, bytes], start: RunStart, name: str, cs_key: Ed25519PublicKey,
    provisioning: bytes, contributes: bool,
) -> bytes:  # fmt: skip
    """``run-start``: check the CS's signature and (a contributing node) that this node's own
    pending nonce is in it, spend the nonce and keep the run id; returns the run id."""
    start.verify(cs_key, provisioning)
    if contributes:
        pending = state.get(PENDING)
        if RUN in state or pending is None:
            raise ProtocolError("a run-start without a pending run-nonce of this node")
        if dict(start.nonces).get(name) != pending:
            raise ProtocolError(f"the run-start does not carry {name}'s own fresh nonce")
        del state[PENDING]
    run = start.run_id(provisioning)
    if state.get(RUN, run) != run:  # a requester: the run it signs for is fixed once
        raise ProtocolError("this node already follows another run")
    state[RUN] = run
    return run
