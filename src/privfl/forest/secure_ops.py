"""HoAdd and HoLT between the center server (CS) and the computation provider (CC), as
message steps, and the key holder's partial decryption of a comparison result.

CS's half of each protocol is a generator (:data:`~privfl.forest.messages.Job`) that yields
its requests to CC and receives the replies, and the runner times every role's own step.
CC's half (:func:`cc_hoadd`, :func:`cc_holt`, :func:`cc_refresh`) and the holder's
(:func:`holder_partial_decrypt`) are functions of their own keys;
:class:`~privfl.forest.computation_provider.ComputationProvider` and
:class:`~privfl.forest.participant.Participant` call them.

**Why the CC is no decryption oracle for the CS (and what the CS can still learn).**

1. CC re-encrypts only to the joint keys ``h_CS · h_u`` of the holders the KGC registered
   with it at setup (participants), named in the request; never to ``h_CS`` alone, never to
   a key the CS supplies. So every ciphertext CC produces needs ``θ_u`` and ``θ_CS`` together.
2. HoLT needs no inner HoAdd (the RevFRF paper's targets ``pk_CS``, with which the CS could
   weak-decrypt ``2x+1-2y``): the CS blinds each input under its own key with a common
   mask β and factor r, and the CC strong-decrypts both and subtracts. The CS holds no
   ciphertext of the difference at all, and saves two strong partial decryptions per
   comparison.
3. CC returns a HoLT result as ``Enc(u')`` of a *bit* it computed itself, Ed25519-signed over
   the session, the operation, the holder, the ticket and the ciphertext. A holder runs
   ParHDec1 only on such a signed result addressed to it whose ticket its budget pays (see
   below), so the CS can obtain ``θ_u``'s help only for one bit, which the blinding coin
   ``c`` (kept by the CS) maps to ``[x < y]``. The other
   deviation from the issue's HoLT: CS applies the coin *after* ParHDec1
   (``u = [u' == c]``) instead of homomorphically before it, so what the holder strips is
   exactly what CC signed.
4. CC answers *every* well-formed HoLT request the same way. A blinded difference
   ``l = ±r(2x+1-2y)`` with ``l = 0`` or ``|l| >= 2^(sigma+ell+2)`` (inputs beyond 2^ell, or
   a CS that sent ``[[k·x]]`` and ``[[0]]`` for a value it wants to probe) gets ``Enc(u')``
   of a *fresh random bit*, built and signed exactly like an in-range answer (same work,
   same length), plus a signed :class:`HoLTAlarm` in the CC's audit log for the KGC
   (:attr:`alarms` of the provider). The alarm is signed and serialised on both branches;
   the out-of-range branch only appends it to a list in memory (nanoseconds). Writing the
   log (a ``logging`` warning, the deployment node's state and audit file) happens between
   answers, after each batch, whether or not it holds an alarm (the provider's
   :meth:`audit`, the node's flush), so neither the work nor the I/O of one answer depends
   on the branch. A refusal here was a decryption oracle: from "refused / not refused" on
   ``[[k·x]]`` a CS binary-searched ``|x|`` of any ciphertext the CC strong-decrypts, with
   no participant involved.

**What the CS learns from one CC answer**: a fresh DT-PKC ciphertext under ``h_CS · h_u``
and a signature, whose distribution does not depend on ``l`` (semantic security of DT-PKC
under a key the CS cannot open alone): nothing. To read ``u'`` the CS needs the holder's
ParHDec1 (one per comparison). An honest comparison is always in range (the encoders
refuse ``|m| >= 2^ell``), so the random branch never changes an honest result; a wrapped
residue with a small rational structure (x ≈ N/2 or k·N/3) may still land in range and
give a wrong bit, which only a participant encrypting its own input by hand can cause.

**The holder's ParHDec1 is a budget, not a service.** CC signs each result together with
a :class:`Ticket` (query id, tree, node) the CS names; the holder strips θ_u only for a
requester-query ticket, only if it provides the split of that node and has never paid that
(query, tree, node) before (:class:`DecryptionBudget`, kept by the holder). A ticket is
signed by the CC only for a query its requester signed, opened once, at most once per
(query, tree, node) and ``max_depth`` times per (query, tree) (:mod:`.query_auth`), and
the holder pays at most ``max_queries`` distinct ids per session (public, default
:data:`~.budget.MAX_QUERIES`). All refusal conditions are public.

**FRF-Test uses no HoLT (issue 26).** A ticket cannot bind *what* is compared: the CC sees
only blinded operands, so a holder's signature on its own ciphertexts would not tie them
to the blinded pair the CC decrypts without a zero-knowledge proof of the blinding. Test
tickets (one per test value a holder uploaded) were therefore a bounded oracle: up to
(test rows × the holder's split nodes) comparison bits *of the CS's choice* per holder
per evaluation round (49 tickets opened a split value). But in FRF-Test the split's
provider holds both operands (its own test value and its own threshold): HoLT hid nothing
from it, and the CS learns the branch bit either way. So the provider compares in the
clear (``plain-compare``, :func:`.plain.leaves`) and sends only the bits of the rows at
its nodes; it uploads no test value and pays no test ticket: a deviating CS that asks for
test values gets a refusal (an unknown step), and a ticket of any other kind than a
requester's query is never paid. Following the protocol, the CS learns the honest output:
per row, the branch at each node on its path. Deviating: a provider answers a row at a
node only where it splits in the tree, for rows the parent's provider's signed bits route
there, once per round (:mod:`.branch`, which bounds what is left).

What a deviating CS can still get: the CS chooses what it compares (the holder cannot see
inside the blinded HoLT), so each payable requester-query ticket is one comparison bit *of
the CS's choice* between ciphertexts under keys the CC strong-decrypts: per signed query
at most ``n_trees * max_depth`` bits, as many as honest prediction of that query uses; a
CS cannot mint a query id (an id no requester signed gets no answer). With a colluding
requester, ``max_queries * n_trees * max_depth`` chosen bits per requester per session
(~40 open a 40-bit value). CS and CC are assumed not to collude (together they hold the
strong key).
"""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import ClassVar

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from privfl.crypto import dtpkc
from privfl.errors import MalformedMessageError, ProtocolError, UnknownPartyError
from privfl.forest.alarm import HoLTAlarm as HoLTAlarm
from privfl.forest.budget import NO_TICKET
from privfl.forest.budget import DecryptionBudget as DecryptionBudget
from privfl.forest.budget import Ticket as Ticket
from privfl.forest.messages import (
    CC,
    CS,
    Job,
    Outgoing,
    SessionConfig,
    expect_ids,
    seal,
    unseal,
)
from privfl.messages import Reader, Writer

LOG = logging.getLogger(__name__)


def _op(r: Reader, want: int, what: str) -> None:
    expect_ids((r.u64(),), (want,), what)


@dataclass(frozen=True)
class BlindedRequest:
    """CS -> CC: blinded ciphertexts, their PSDec1 shares and the holder whose joint key the
    answer goes under: ``hoadd-request`` (X, Y) or ``holt-request`` (A, B: l = A - B)."""

    COUNTS: ClassVar[dict[str, int]] = {"hoadd-request": 2, "holt-request": 2}
    step: str
    op: int
    holder: str
    values: tuple[dtpkc.Ciphertext, ...]
    shares: tuple[dtpkc.Mpz, ...]
    ticket: Ticket = NO_TICKET

    def to_bytes(self, config: SessionConfig) -> bytes:
        w = self.ticket.write(Writer().u64(self.op).str_(self.holder))
        for value, share in zip(self.values, self.shares, strict=True):
            value.write(w).uint(int(share))
        return seal(self.step, config, CS, w)

    @classmethod
    def from_bytes(
        cls, data: bytes, step: str, config: SessionConfig, params: dtpkc.PublicParams
    ) -> BlindedRequest:
        r = unseal(data, step, config, CS)
        op, holder, ticket = r.u64(), r.str_(256), Ticket.read(r)
        values, shares = [], []
        for _ in range(cls.COUNTS[step]):
            values.append(dtpkc.Ciphertext.read(r, params))
            shares.append(params.read_unit(r, "a PSDec1 share"))
        r.end()
        return cls(step, op, holder, tuple(values), tuple(shares), ticket)


@dataclass(frozen=True)
class Reply:
    """A ciphertext answering operation ``op``: ``hoadd-response`` (CC -> CS, under the
    holder's joint key) or ``partial-decrypted`` (holder -> CS, under h_CS)."""

    op: int
    value: dtpkc.Ciphertext

    def to_bytes(self, step: str, config: SessionConfig, sender: str) -> bytes:
        return seal(step, config, sender, self.value.write(Writer().u64(self.op)))

    @classmethod
    def from_bytes(
        cls, data: bytes, step: str, config: SessionConfig, sender: str, op: int,
        key: dtpkc.PublicKey,
    ) -> Reply:  # fmt: skip
        r = unseal(data, step, config, sender)
        _op(r, op, step)
        value = dtpkc.Ciphertext.read(r, key.params, key)
        r.end()
        return cls(op, value)


@dataclass(frozen=True)
class HoLTResult:
    """CC -> CS (``holt-result``) and forwarded CS -> holder (``partial-decrypt``):
    ``Enc(u')`` of a bit under ``h_CS · h_holder``, signed by CC."""

    op: int
    holder: str
    ticket: Ticket
    bit: dtpkc.Ciphertext
    signature: bytes

    @staticmethod
    def signed_bytes(
        config: SessionConfig, op: int, holder: str, ticket: Ticket, bit: dtpkc.Ciphertext
    ) -> bytes:
        w = Writer().str_("privfl revfrf holt-result").bytes_(config.session).u64(op)
        return bit.write(ticket.write(w.str_(holder))).getvalue()

    def to_bytes(self, step: str, config: SessionConfig, sender: str) -> bytes:
        w = self.bit.write(self.ticket.write(Writer().u64(self.op).str_(self.holder)))
        return seal(step, config, sender, w.bytes_(self.signature))

    @classmethod
    def from_bytes(
        cls, data: bytes, step: str, config: SessionConfig, sender: str,
        params: dtpkc.PublicParams,
    ) -> HoLTResult:  # fmt: skip
        r = unseal(data, step, config, sender)
        op, holder, ticket = r.u64(), r.str_(256), Ticket.read(r)
        bit = dtpkc.Ciphertext.read(r, params)
        signature = r.bytes_(64)
        r.end()
        return cls(op, holder, ticket, bit, signature)

    def verify(self, key: Ed25519PublicKey, config: SessionConfig) -> None:
        signed = self.signed_bytes(config, self.op, self.holder, self.ticket, self.bit)
        try:
            key.verify(self.signature, signed)
        except InvalidSignature:
            raise UnknownPartyError("not a comparison result signed by the CC") from None


@dataclass(frozen=True)
class RefreshBatch:
    """CS -> CC (``refresh-request``) and back (``refreshed``): level-2 revocation's split
    ciphertexts, each refreshed by CC under a fresh, discarded key (HEncRef)."""

    op: int
    values: tuple[dtpkc.Ciphertext, ...]

    def to_bytes(self, step: str, config: SessionConfig, sender: str) -> bytes:
        w = Writer().u64(self.op).u32(len(self.values))
        for v in self.values:
            v.write(w)
        return seal(step, config, sender, w)

    @classmethod
    def from_bytes(
        cls, data: bytes, step: str, config: SessionConfig, sender: str,
        params: dtpkc.PublicParams, op: int | None = None, count: int | None = None,
    ) -> RefreshBatch:  # fmt: skip
        r = unseal(data, step, config, sender)
        got = r.u64()
        if op is not None:
            expect_ids((got,), (op,), step)
        n = r.count(config.max_internal_nodes if count is None else count, "ciphertexts")
        if count is not None and n != count:
            raise MalformedMessageError(f"{step} returns {n} ciphertexts, {count} were sent")
        values = tuple(dtpkc.Ciphertext.read(r, params) for _ in range(n))
        r.end()
        return cls(got, values)


# ------------------------------------------------------------------------ CS's half
@dataclass(frozen=True)
class CSMaterial:
    """What CS's half of the protocols needs: the session and CS's own keys only."""

    config: SessionConfig
    sk: dtpkc.SecretKey
    lam1: dtpkc.StrongKeyShare


def secure_add(
    cs: CSMaterial, op: int, a: dtpkc.Ciphertext, b: dtpkc.Ciphertext, holder: str,
    holder_key: dtpkc.PublicKey,
) -> Job[dtpkc.Ciphertext]:  # fmt: skip
    """HoAdd (CS, with CC): Enc(x + y) under h_CS · h_holder from x under a and y under b.
    CS draws α1, α2 uniform in Z_N, sends X = [[x]]·Enc_a(α1), Y = [[y]]·Enc_b(α2) and their
    PSDec1 shares; CC returns Enc(S), S = x + y + α1 + α2; CS removes α1 + α2. CS learns
    nothing (every ciphertext it holds is under the joint key); CC learns S, uniform."""
    prm, joint = cs.sk.public.params, dtpkc.joint_public_key(cs.sk.public, holder_key)
    a1, a2 = secrets.randbelow(int(prm.n)), secrets.randbelow(int(prm.n))
    x = dtpkc.add(a, dtpkc.encrypt_residue(a.public_key, a1))
    y = dtpkc.add(b, dtpkc.encrypt_residue(b.public_key, a2))
    t1, t2 = dtpkc.partial_decrypt_strong1(cs.lam1, x), dtpkc.partial_decrypt_strong1(cs.lam1, y)
    request = BlindedRequest("hoadd-request", op, holder, (x, y), (t1, t2))
    reply = yield Outgoing(CC, request.to_bytes(cs.config))
    s = Reply.from_bytes(reply, "hoadd-response", cs.config, CC, op, joint).value
    return dtpkc.add(s, dtpkc.encrypt_residue(joint, -(a1 + a2)))


def secure_less_than(
    cs: CSMaterial, op: int, x: dtpkc.Ciphertext, y: dtpkc.Ciphertext, holder: str,
    holder_key: dtpkc.PublicKey, ticket: Ticket,
) -> Job[bool]:  # fmt: skip
    """HoLT then ParHDec1/ParHDec2 (CS, with CC and the holder): is x < y? (ties: False).
    CS draws r of sigma bits (odd), β uniform in Z_N and a secret coin c, and blinds each
    input under its own key: A = [[x]]^(2r)·Enc(r + β) = [[r(2x+1) + β]],
    B = [[y]]^(2r)·Enc(β) = [[2ry + β]]; it sends (A, B) if c = 1, (B, A) if c = 0, with
    their PSDec1 shares. CC decrypts both, so l = first - second = ±r(2x+1-2y), and returns
    the signed Enc(u'), u' = [l < 0], under the holder's joint key; the holder strips θ_u;
    CS decrypts u' and outputs [u' = c]. CS learns the bit; CC learns l (each of A, B alone
    is uniform: β), whose sign the coin makes independent of the bit; the holder nothing.
    (The RevFRF paper first runs HoAdd to bring x and y under one key; decrypting both
    blinded inputs at CC gives the same l with two strong partial decryptions fewer.)"""
    prm = cs.sk.public.params
    coin, r = secrets.randbits(1), secrets.randbits(prm.sigma) | 1
    beta = secrets.randbelow(int(prm.n))
    a = dtpkc.add(dtpkc.scale(x, 2 * r), dtpkc.encrypt_residue(x.public_key, r + beta))
    b = dtpkc.add(dtpkc.scale(y, 2 * r), dtpkc.encrypt_residue(y.public_key, beta))
    first, second = (a, b) if coin else (b, a)
    shares = tuple(dtpkc.partial_decrypt_strong1(cs.lam1, c) for c in (first, second))
    request = BlindedRequest("holt-request", op, holder, (first, second), shares, ticket)
    reply = yield Outgoing(CC, request.to_bytes(cs.config))
    result = HoLTResult.from_bytes(reply, "holt-result", cs.config, CC, prm)
    expect_ids((result.op,), (op,), "holt-result")
    if result.holder != holder or result.ticket != ticket:
        raise UnknownPartyError(f"a comparison result for {result.holder!r}, not {holder!r}")
    reply = yield Outgoing(holder, result.to_bytes("partial-decrypt", cs.config, CS))
    partial = Reply.from_bytes(reply, "partial-decrypted", cs.config, holder, op, cs.sk.public)
    u_prime = dtpkc.decrypt(cs.sk, partial.value)
    if u_prime not in (0, 1):
        raise ProtocolError(f"{holder}'s partial decryption is not of a comparison bit")
    return u_prime == coin


# ------------------------------------------------------------------------ CC's half
def _holder_key(registry: Mapping[str, dtpkc.PublicKey], holder: str) -> dtpkc.PublicKey:
    key = registry.get(holder)
    if key is None:
        raise UnknownPartyError(f"CC re-encrypts only to registered holders, not to {holder!r}")
    return key


def cc_hoadd(
    lam2: dtpkc.StrongKeyShare, registry: Mapping[str, dtpkc.PublicKey], request: BlindedRequest
) -> Reply:
    """HoAdd step 2 (CC): S = PSDec2(X) + PSDec2(Y) mod N, returned as Enc(S) under the
    registered holder's joint key. CC learns S, which α1 + α2 makes uniform."""
    target = _holder_key(registry, request.holder)
    n = lam2.params.n
    s = sum(
        dtpkc.partial_decrypt_strong2(lam2, value, share)
        for value, share in zip(request.values, request.shares, strict=True)
    )
    return Reply(request.op, dtpkc.encrypt_residue(target, s % n))


def cc_holt(
    lam2: dtpkc.StrongKeyShare, registry: Mapping[str, dtpkc.PublicKey],
    signing_key: Ed25519PrivateKey, config: SessionConfig, request: BlindedRequest,
) -> tuple[HoLTResult, HoLTAlarm, bool]:  # fmt: skip
    """HoLT step 2 (CC): l = PSDec2(A) - PSDec2(B) mod N; u' = 1 iff l is negative (l > N/2
    as an element of Z_N, never a bit-length test); returns the signed Enc(u') under the
    holder's joint key.
    An out-of-range l (l = 0 or |l| >= 2^(sigma+ell+2)) is *answered* too, with a fresh
    random u' (no refusal: its condition would depend on the plaintext). A signed alarm for
    the KGC and whether l was in range are returned beside the result (the alarm is made on
    both branches; the caller keeps it only when out of range). CC learns u', which the
    CS's secret coin makes independent of [x < y]; the CS learns nothing from the answer
    (see the module doc)."""
    target = _holder_key(registry, request.holder)
    prm = lam2.params
    first, second = (
        dtpkc.partial_decrypt_strong2(lam2, value, share)
        for value, share in zip(request.values, request.shares, strict=True)
    )
    blinded = prm.decode((first - second) % prm.n)
    in_range = blinded != 0 and abs(blinded) < 1 << (prm.sigma + prm.ell + 2)
    coin = secrets.randbits(1)  # drawn either way: the same work on both branches
    bit = dtpkc.encrypt(target, int(blinded < 0) if in_range else coin)
    ticket = request.ticket
    signed = HoLTResult.signed_bytes(config, request.op, request.holder, ticket, bit)
    result = HoLTResult(request.op, request.holder, ticket, bit, signing_key.sign(signed))
    ms = int(time.time() * 1000)  # the alarm is signed on both branches (the same work)
    alarm = HoLTAlarm.sign(signing_key, config, request.op, request.holder, ms)
    return result, alarm, in_range


def cc_refresh(batch: RefreshBatch) -> RefreshBatch:
    """Level-2 revocation (CC): HEncRef of every ciphertext with its own fresh refresh key,
    discarded at once."""
    return RefreshBatch(
        batch.op,
        tuple(dtpkc.refresh(c, dtpkc.new_refresh_key(c.params)) for c in batch.values),
    )


# ------------------------------------------------------------------------ the holder's half
def holder_partial_decrypt(
    sk: dtpkc.SecretKey, name: str, cc_key: Ed25519PublicKey, config: SessionConfig,
    data: bytes, pay: Callable[[Ticket], None],
) -> bytes:  # fmt: skip
    """ParHDec1 (a holder u): strip θ_u from a comparison result, leaving Enc(u') under h_CS,
    but only for a result CC signed for u in this session (so: a bit) whose ticket ``pay``
    accepts (the holder's :class:`DecryptionBudget`: a node where u provides the split, once
    per query). Anything else, e.g. a HoAdd output or a split the CS holds, is refused with
    a typed error."""
    result = HoLTResult.from_bytes(data, "partial-decrypt", config, CS, sk.public.params)
    if result.holder != name:
        raise UnknownPartyError(f"{name} refuses a comparison result meant for {result.holder!r}")
    result.verify(cc_key, config)
    pay(result.ticket)
    partial = dtpkc.joint_partial_decrypt(sk, result.bit)
    return Reply(result.op, partial).to_bytes("partial-decrypted", config, name)
