"""A party's desk for joint steps: it signs its own requests, decides whether to answer
another party's, seals its shares for the requester, and opens the shares sealed for it.

Run by every party; holds the party's long-term identity key (X25519 + Ed25519) and uses its
threshold key share through :class:`~privfl.threshold.ThresholdParty`.

**Answering is a decision** (:meth:`ShareDesk.answer`). A share is made only if, in order:
the request is signed by a party of the roster other than this one (the server is not in it:
its own requests, and any request it altered, fail here); its ticket is one the public plan
allows that party, with that kind of share (:func:`~.tickets.check_ticket`); a reveal or a
prediction carries every party's signed consent naming the requester; the ticket was never
answered for that requester before; the threshold request inside is well formed, names the
same requester and carries a request id from that requester's range
(:data:`~privfl.threshold.party.REQUEST_ID_SHIFT`) never answered before (two
bootstrapping answers under one id share the CRP element ``a``: their difference would be a
decryption share of a ciphertext of the requesters' choice). Every condition depends on
public facts and on the message only, never on a secret. A refused request makes no share at
all (nothing is computed, the flooding budget is not touched) and raises
:class:`~privfl.errors.DecryptionNotPermittedError` (or
:class:`~privfl.errors.UnknownPartyError` for a bad signature).

The desk's once-only records are part of the node's local state
(:meth:`ShareDesk.export_local_state`).

**Open: which ciphertext is decrypted.** The desk decides *who* may ask, *what for* and *how
often*; it cannot decide whether the ``c1`` a party signed under a legitimate boundary or
boot ticket belongs to the scheduled value. The batch owner computes ``e_T`` (and the
ciphertexts it bootstraps) alone from its own plaintext rows, so no other role can recompute
it. A deviating owner that signs ``c1 = C`` (a large constant; the test uses ``C + r``, ``r``
small) receives, summed with its own share, ``s C + E`` (``E`` the flooding noise, about
2^40, far below ``C``) and rounds out the joint secret key ``s`` from one ticket
(``tests/test_training_attacks.py``,
``test_open_one_crafted_c1_under_a_valid_ticket_yields_the_joint_key``). The options
weighed (``docs/security/training.md`` gives the figures):

(i) the server computes the boundary steps from ciphertexts everyone can recompute and the
answering parties check the hash of what they decrypt: the owner would then send its inputs
``x, y`` encrypted, and a malformed input ciphertext (``(0, C)`` as ``Enc(y)``) puts ``-C s``
into the decrypted ``e_T`` (the owner knows ``x`` and the scale of ``W x``, so it still rounds
out ``s``). It closes the attack only with a proof that each input is a well-formed
encryption, which OpenFHE does not offer; not built. (ii) a cheap "looks uniform" test on
``c1`` stops ``c1 = C`` but not ``c1 = C + r`` (``r`` small and random: every NTT value is
uniform-looking, ``r s`` stays far below ``C``) nor ``c1 = C u + r`` with ``C`` near ``Q k /
p`` (uniform-looking coefficients too); telling a weak ``c1`` from a random one is itself a
lattice problem. A check that only stops the families a test tries would be a false sense of
security; not built. (iii) limiting the damage: a party receives no ciphertext under the joint
key in full except the global encrypted layer (other parties' requests carry ``c1`` only, their
updates go to the server alone; tested by
``test_a_party_never_receives_a_ciphertext_but_the_global_layer``). A party that recovers the
key therefore decrypts the global layer, which its legitimate outputs on rows of its choice
reveal anyway, unless the server colludes with it (then every party's encrypted update).

The server holds no identity in the roster: it cannot make or alter a request, and every
share it relays is sealed for the requester, so it cannot run this attack alone.

The earlier re-randomisation of ``c1`` with a hash-derived encryption of zero was removed: a
decryption of ``ct + Enc(0)`` is a decryption of ``ct``, so no re-randomisation that keeps
decryption correct hides what the requester formed alone.
"""

from __future__ import annotations

from collections.abc import Sequence

from privfl.crypto.identity import IdentityKey, verify_signed
from privfl.crypto.keywrap import WrappedSecret, unwrap, wrap
from privfl.crypto.threshold import (
    BootstrapRequest,
    BootstrapShare,
    DecryptionRequest,
    DecryptionShare,
)
from privfl.errors import DecryptionNotPermittedError, ProtocolError, UnknownPartyError
from privfl.messages import Reader, Writer
from privfl.threshold import ThresholdParty
from privfl.threshold.party import REQUEST_ID_SHIFT
from privfl.training.joint import (
    CONSENT_DOMAIN,
    REQUEST_DOMAIN,
    SHARE_DOMAIN,
    Consent,
    SealedShare,
    SignedRequest,
)
from privfl.training.sumcheck import COMMIT_DOMAIN, SUMCHECK_DOMAIN
from privfl.training.tickets import Purpose, Ticket, TrainingPlan, check_ticket

__all__ = ["ShareDesk"]

Share = BootstrapShare | DecryptionShare


def _wrap_purpose(ticket: Ticket) -> str:
    return f"smartcryptnn-share:{ticket.label()}"


class ShareDesk:
    """One party's joint-step desk (see the module doc)."""

    def __init__(self, identity: IdentityKey, plan: TrainingPlan, crypto: ThresholdParty) -> None:
        self.name = crypto.name
        self.session = crypto.session
        self.plan = plan
        self.crypto = crypto
        self._identity = identity
        if plan.pinned.get(self.name) != identity.public_bytes:
            raise UnknownPartyError(f"{self.name}'s identity is not the one the plan pins")
        self._tickets: set[tuple[str, str]] = set()
        self._ids: set[int] = set()
        self.refused = 0

    # ------------------------------------------------------------------ node-local state
    def export_local_state(self) -> bytes:
        """This party's key share and budget (:meth:`ThresholdParty.export_local_state`) and
        the desk's once-only records (tickets and request ids answered, refusals), for the
        node's **own local storage** only: a node restarted from these bytes refuses what it
        answered before. Never a message."""
        w = Writer().bytes_(self.crypto.export_local_state()).u32(self.refused)
        w.u32(len(self._tickets))
        for who, label in sorted(self._tickets):
            w.str_(who).str_(label)
        w.u32(len(self._ids))
        for rid in sorted(self._ids):
            w.u64(rid)
        return w.getvalue()

    def import_local_state(self, data: bytes) -> None:
        """Restore what :meth:`export_local_state` wrote (this node's own bytes)."""
        if self._tickets or self._ids or self.crypto.has_share:
            raise ProtocolError(f"{self.name}'s desk already has a state")
        r = Reader(data, "share desk local state")
        keys, refused = r.bytes_(1 << 27), r.u32()
        count = r.count(1 << 24, "answered tickets")
        tickets = {(r.str_(), r.str_()) for _ in range(count)}
        ids = {r.u64() for _ in range(r.count(1 << 24, "answered request ids"))}
        r.end()
        self.crypto.import_local_state(keys)
        self._tickets, self._ids, self.refused = tickets, ids, refused

    # ------------------------------------------------------------------ own requests
    def consent(self, recipient: str, purpose: Purpose, limit: int) -> Consent:
        """This party's signed agreement that ``recipient`` may ask ``limit`` reveal or
        prediction steps (the caller's decision: e.g. ``reveal=True`` on this node)."""
        if purpose not in (Purpose.REVEAL, Purpose.PREDICT):
            raise DecryptionNotPermittedError("consent is only given for reveal or predict")
        self.plan.index_of(recipient)
        unsigned = Consent(self.session, self.name, recipient, purpose, limit, bytes(64))
        sig = self._identity.sign(CONSENT_DOMAIN, unsigned.signed_part())
        return Consent(self.session, self.name, recipient, purpose, limit, sig)

    def endorse(self, domain: str, data: bytes) -> bytes:
        """This party's signature on its own commitment or sketch of the aggregate check
        (:mod:`~.sumcheck`); no other domain (never a request, share or consent)."""
        if domain not in (COMMIT_DOMAIN, SUMCHECK_DOMAIN):
            raise ProtocolError(f"the desk signs no {domain!r}")
        return self._identity.sign(domain, data)

    def sign(
        self, ticket: Ticket, kind: str, request: bytes, consents: Sequence[Consent] = ()
    ) -> SignedRequest:
        """This party's request for ``ticket`` (the threshold request's bytes), signed."""
        unsigned = SignedRequest(
            self.session, self.name, ticket, kind, request, tuple(consents), bytes(64)
        )
        sig = self._identity.sign(REQUEST_DOMAIN, unsigned.signed_part())
        return SignedRequest(self.session, self.name, ticket, kind, request, tuple(consents), sig)

    def open(
        self, ticket: Ticket, request_id: int, kind: str, sealed: Sequence[SealedShare]
    ) -> list[Share]:
        """The other parties' shares for this party's pending request: one from each, each
        signed by its sender, sealed for this party, for this ticket and request id."""
        others = [n for n in self.plan.names if n != self.name]
        if sorted(s.sender for s in sealed) != sorted(others):
            raise ProtocolError(f"{self.name} needs exactly one share from each of {others}")
        shares: list[Share] = []
        for s in sealed:
            verify_signed(self.plan.pinned, s.sender, s.signature, SHARE_DOMAIN, s.signed_part())
            if s.recipient != self.name or s.ticket != ticket or s.request_id != request_id:
                raise ProtocolError(f"{s.sender}'s share answers another request")
            raw = unwrap(
                WrappedSecret.from_bytes(s.sealed),
                recipient=self.name,
                recipient_key=self._identity,
                roster=self.plan.pinned,
                expected_sender=s.sender,
                purpose=_wrap_purpose(ticket),
            )
            share_type = BootstrapShare if kind == "boot" else DecryptionShare
            share = share_type.from_bytes(raw, self.crypto.context, self.session)
            if share.sender != s.sender or share.request_id != request_id:
                raise ProtocolError(f"{s.sender}'s sealed share names another request")
            shares.append(share)
        return shares

    # ------------------------------------------------------------------ answering
    def answer(self, message: SignedRequest) -> SealedShare:
        """This party's share for another party's request, sealed for it, or a refusal
        (see the module doc for the checks, in order)."""
        try:
            return self._answer(message)
        except ProtocolError:
            self.refused += 1
            raise

    def _answer(self, message: SignedRequest) -> SealedShare:
        requester, ticket, kind = message.sender, message.ticket, message.kind
        if requester == self.name:
            raise DecryptionNotPermittedError(f"{self.name} does not answer its own request")
        pinned = self.plan.pinned
        verify_signed(pinned, requester, message.signature, REQUEST_DOMAIN, message.signed_part())
        check_ticket(self.plan, requester, ticket, kind)
        if ticket.purpose in (Purpose.REVEAL, Purpose.PREDICT):
            self._check_consents(message)
        if (requester, ticket.label()) in self._tickets:
            raise DecryptionNotPermittedError(f"{requester}'s {ticket.label()} was answered")
        ctx = self.crypto.context
        request: BootstrapRequest | DecryptionRequest
        if kind == "boot":
            request = BootstrapRequest.from_bytes(message.request, ctx, self.session)
        else:
            request = DecryptionRequest.from_bytes(message.request, ctx, self.session)
        if request.sender != requester:
            raise DecryptionNotPermittedError("the request inside names another requester")
        rid = request.request_id
        if rid >> REQUEST_ID_SHIFT != self.plan.index_of(requester) + 1:
            raise DecryptionNotPermittedError(f"request id {rid} is not in {requester}'s range")
        if rid in self._ids:
            raise DecryptionNotPermittedError(f"request id {rid} was answered")
        self._tickets.add((requester, ticket.label()))
        self._ids.add(rid)
        share: Share
        if isinstance(request, BootstrapRequest):
            share = self.crypto.bootstrap_share(request)
        else:
            share = self.crypto.decryption_share(request)
        wrapped = wrap(
            share.to_bytes(),
            sender=self.name,
            sender_key=self._identity,
            recipient=requester,
            recipient_public=pinned[requester],
            purpose=_wrap_purpose(ticket),
        )
        unsigned = SealedShare(
            self.session, self.name, requester, ticket, request.request_id,
            wrapped.to_bytes(), bytes(64),
        )  # fmt: skip
        sig = self._identity.sign(SHARE_DOMAIN, unsigned.signed_part())
        return SealedShare(
            self.session, self.name, requester, ticket, request.request_id,
            unsigned.sealed, sig,
        )  # fmt: skip

    def _check_consents(self, message: SignedRequest) -> None:
        """Every party of the plan (the requester and this one included) signed a consent
        naming the requester, this purpose and a limit above the ticket's index."""
        seen = set()
        for c in message.consents:
            verify_signed(self.plan.pinned, c.sender, c.signature, CONSENT_DOMAIN, c.signed_part())
            if c.recipient != message.sender or c.purpose is not message.ticket.purpose:
                raise DecryptionNotPermittedError(f"{c.sender}'s consent is for another request")
            if not message.ticket.index < c.limit:
                raise DecryptionNotPermittedError(f"{c.sender} consented to fewer steps")
            seen.add(c.sender)
        missing = sorted(set(self.plan.names) - seen)
        if missing:
            raise DecryptionNotPermittedError(
                f"{message.ticket.purpose.value} needs every party's consent; missing {missing}"
            )
