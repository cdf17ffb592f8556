"""The CS's notice that a revoked participant's nodes are regrown (RevFRF, FRF-Revoc): the
one case in which a participant accepts a second split of a node.

Node ids are paths (:func:`.provenance.children`), and a participant accepts one split per
node: a second split receipt for a node it has seen split is refused, so a CS cannot have
two *other* participants each split one node and ask a victim for a threshold under each
(two equations in the victim's min and max there). A revocation regrows every subtree under
the revoked participant's nodes under the same ids, so every remaining participant must
forget what it saw there, and only there. The CS shows it, in one ``reopen`` message:

* the revoked participant's own signed revocation request (its Ed25519 key pinned at
  provisioning, the session signed in), and
* that participant's own split receipts of the nodes whose subtrees are regrown.

The participant reopens the nodes below those splits once per revoked participant, and
refuses that participant's receipts from then on. A deviating CS can therefore reopen only
subtrees of nodes a revoked participant really split, once: per revocation, every node
below the revoked participant's nodes can be split once more (what regrowing needs).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from privfl.errors import ProtocolError, UnknownPartyError
from privfl.forest.messages import CS, RevocationRequest, SessionConfig, seal, unseal
from privfl.forest.provenance import SplitReceipt
from privfl.messages import Writer


@dataclass(frozen=True)
class ReopenNotice:
    """CS -> every remaining participant (``reopen``): the revoked participant's signed
    revocation request (its bytes, as it sent them) and its receipts of the regrown nodes."""

    STEP: ClassVar[str] = "reopen"
    request: bytes
    receipts: tuple[SplitReceipt, ...]

    def to_bytes(self, config: SessionConfig) -> bytes:
        w = Writer().bytes_(self.request).u32(len(self.receipts))
        for receipt in self.receipts:
            receipt.write(w)
        return seal(self.STEP, config, CS, w)

    @classmethod
    def from_bytes(cls, data: bytes, config: SessionConfig) -> ReopenNotice:
        r = unseal(data, cls.STEP, config, CS)
        request = r.bytes_(1024)
        receipts = tuple(
            SplitReceipt.read(r) for _ in range(r.count(config.max_internal_nodes, "receipts"))
        )
        r.end()
        return cls(request, receipts)

    def check(
        self, config: SessionConfig, peers: Mapping[str, Ed25519PublicKey]
    ) -> tuple[str, list[tuple[int, int]]]:
        """The revoked participant and the (tree, node) of its regrown splits, after checking
        its signature on the request (this session) and on every receipt; typed errors."""
        request = RevocationRequest.from_bytes(self.request, config)
        key = peers.get(request.participant)
        if key is None:
            raise UnknownPartyError(f"a revocation of {request.participant!r}, not a participant")
        request.verify(key, config)
        tops = []
        for receipt in self.receipts:
            receipt.verify(peers, config.session)
            if receipt.signer != request.participant:
                raise ProtocolError(f"a receipt of {receipt.signer!r} in {request.participant!r}'s")
            tops.append((receipt.tree, receipt.node))
        return request.participant, tops


def reopened(config: SessionConfig, sender: str, count: int) -> bytes:
    """A participant's acknowledgement (``reopened``): how many subtrees it reopened."""
    return seal("reopened", config, sender, Writer().u32(count))


def check_reopened(data: bytes, config: SessionConfig, sender: str, count: int) -> None:
    r = unseal(data, "reopened", config, sender)
    got = r.u32()
    r.end()
    if got != count:
        raise ProtocolError(f"{sender} reopened {got} subtrees, not {count}")
