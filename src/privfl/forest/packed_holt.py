"""Packed HoLT (batched FRF-Predict): several comparisons of one requester against the splits
of one holder in one DT-PKC plaintext, and every pack of a tree level in one CS -> CC
message. Slot arithmetic: :mod:`.packing`; the single comparison it generalises (and whose
security argument it keeps): :func:`.secure_ops.secure_less_than`.

**Protocol (one pack of n comparisons x_i < y_i, x_i under the requester's key, y_i the
split values of holder u under u's key).** The CS draws per slot an odd r_i of sigma bits
and a coin c_i, and one β uniform in Z_N for the pack; by Horner
(``P <- P^(2^k) · [[x_i]]^(±2 r_i)``) it builds ``A = [[sum_i 2^(k i) (±r_i (2 x_i + 1) +
2^(k-1)) + β]]`` and ``B = [[sum_i 2^(k i) (±2 r_i y_i) + β]]`` (sign + iff c_i = 1) and sends
them with their PSDec1 shares and one ticket per slot. The CC strong-decrypts both,
``l = A - B = sum_i 2^(k i) (s_i + 2^(k-1))`` with ``s_i = ±r_i (2 x_i + 1 - 2 y_i)``, answers
slot i with ``[s_i < 0]`` if ``0 < |s_i| < 2^(sigma+98)`` and with a fresh random bit
otherwise, and returns ONE signed ``Enc(sum_i 2^i b_i)`` under u's joint key. The holder
strips θ_u once (paying every slot's ticket), the CS decrypts once and reads
``[x_i < y_i] = [b_i = c_i]``.

**Threat model (what packing changes, and what it does not).**

* *CC, following the protocol*, learns each s_i (exactly what one HoLT shows it: the coin
  hides the sign, r_i the magnitude up to a factor 2^sigma); A and B alone are uniform (β).
* *CS, deviating*, can put anything in a slot (any linear combination of ciphertexts under
  the two keys, e.g. ``x - t_i`` for n chosen t_i, or a value scaled so a chunk boundary
  cuts through a secret): the CC answers one bit per slot and **charges every slot's
  ticket** against the query's allowance (:meth:`.query_auth.QueryLedger.charge_all`,
  before any work, the whole batch or nothing), and the holder pays every slot's ticket
  from its budget (:meth:`.budget.DecryptionBudget.spend_all`). So a pack of n slots gives
  the CS at most the n chosen bits n separate HoLTs give it: the bound of
  :mod:`.secure_ops` (per signed query at most ``n_trees * max_depth`` bits) is unchanged.
* *Spill*: an honest slot is below 2^(k-1) after the offset (k has PACK_MARGIN_BITS of
  headroom, :mod:`.packing`); a slot is read from its own k bits only, and its in-range
  test and its sign depend on that chunk alone, never on another slot or on a secret of
  the CC. An input beyond 2^96 (a requester or a holder that encrypted a huge value by
  hand) can corrupt its neighbours' chunks, which then fail the range test with
  probability ~1 - 2^-40 and get random bits: it spoils only the requester's own answers.
* *Refusals*: the CC refuses a batch only on public conditions (malformed, a ticket already
  spent or over the allowance, an unregistered holder); an out-of-range slot is answered
  like any other (a random bit, a signed alarm kept for the KGC).
* *Holder*: learns nothing (a signed ciphertext under its joint key); it strips θ_u only
  for CC-signed packs addressed to it whose every ticket it can pay.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from privfl.crypto import dtpkc
from privfl.crypto.parallel import thread_map
from privfl.errors import MalformedMessageError, ProtocolError, UnknownPartyError
from privfl.forest import packing
from privfl.forest.alarm import HoLTAlarm
from privfl.forest.budget import Ticket
from privfl.forest.messages import CS, SessionConfig, seal, unseal
from privfl.messages import Reader, Writer

MAX_BATCH_ROWS = 1024
"""Rows of one batched query (public): a level's batch holds at most rows x trees slots."""


def max_packs(config: SessionConfig) -> int:
    """Bound on the packs (and slots) of one batch message: every row in every tree."""
    return MAX_BATCH_ROWS * config.n_trees


def _tickets(w: Writer, tickets: Sequence[Ticket]) -> Writer:
    w.u32(len(tickets))
    for t in tickets:
        t.write(w)
    return w


def _read_tickets(r: Reader, limit: int) -> tuple[Ticket, ...]:
    n = r.count(limit, "slots")
    if n < 1:
        raise MalformedMessageError("a pack without a slot")
    return tuple(Ticket.read(r) for _ in range(n))


@dataclass(frozen=True)
class PackRequest:
    """One pack of a ``holt-batch`` (CS -> CC): A (requester side), B (holder side), their
    PSDec1 shares and one ticket per slot (slot i is ticket i)."""

    op: int
    holder: str
    tickets: tuple[Ticket, ...]
    a: dtpkc.Ciphertext
    b: dtpkc.Ciphertext
    share_a: dtpkc.Mpz
    share_b: dtpkc.Mpz

    def write(self, w: Writer) -> Writer:
        _tickets(w.u64(self.op).str_(self.holder), self.tickets)
        self.a.write(w).uint(int(self.share_a))
        return self.b.write(w).uint(int(self.share_b))

    @classmethod
    def read(cls, r: Reader, params: dtpkc.PublicParams) -> PackRequest:
        op, holder = r.u64(), r.str_(256)
        tickets = _read_tickets(r, packing.slot_count(params))
        a, ta = dtpkc.Ciphertext.read(r, params), params.read_unit(r, "a PSDec1 share")
        b, tb = dtpkc.Ciphertext.read(r, params), params.read_unit(r, "a PSDec1 share")
        return cls(op, holder, tickets, a, b, ta, tb)


def write_batch(step: str, config: SessionConfig, sender: str, items: Sequence[PackRequest]
                | Sequence[PackResult]) -> bytes:  # fmt: skip
    w = Writer().u32(len(items))
    for item in items:
        item.write(w)
    return seal(step, config, sender, w)


def read_requests(
    data: bytes, config: SessionConfig, params: dtpkc.PublicParams
) -> tuple[PackRequest, ...]:
    """The CC's reading of a ``holt-batch``: at most :func:`max_packs` packs."""
    r = unseal(data, "holt-batch", config, CS)
    out = tuple(PackRequest.read(r, params) for _ in range(r.count(max_packs(config), "packs")))
    r.end()
    return out


@dataclass(frozen=True)
class PackResult:
    """CC's answer to one pack: ``Enc(sum_i 2^i b_i)`` under the holder's joint key, signed
    with the op, the holder and every slot's ticket (``holt-batch-result`` CC -> CS, then
    ``partial-decrypt-batch`` CS -> holder)."""

    op: int
    holder: str
    tickets: tuple[Ticket, ...]
    bits: dtpkc.Ciphertext
    signature: bytes

    @staticmethod
    def signed_bytes(
        config: SessionConfig, op: int, holder: str, tickets: Sequence[Ticket],
        bits: dtpkc.Ciphertext,
    ) -> bytes:  # fmt: skip
        w = Writer().str_("privfl revfrf packed holt-result").bytes_(config.session).u64(op)
        return bits.write(_tickets(w.str_(holder), tickets)).getvalue()

    def write(self, w: Writer) -> Writer:
        _tickets(w.u64(self.op).str_(self.holder), self.tickets)
        return self.bits.write(w).bytes_(self.signature)

    @classmethod
    def read(cls, r: Reader, params: dtpkc.PublicParams) -> PackResult:
        op, holder = r.u64(), r.str_(256)
        tickets = _read_tickets(r, packing.slot_count(params))
        bits, signature = dtpkc.Ciphertext.read(r, params), r.bytes_(64)
        if len(signature) != 64:
            raise MalformedMessageError("a pack result's signature is 64 bytes")
        return cls(op, holder, tickets, bits, signature)

    def verify(self, key: Ed25519PublicKey, config: SessionConfig) -> None:
        signed = self.signed_bytes(config, self.op, self.holder, self.tickets, self.bits)
        try:
            key.verify(self.signature, signed)
        except InvalidSignature:
            raise UnknownPartyError("not a packed comparison result signed by the CC") from None


def read_results(
    data: bytes, step: str, config: SessionConfig, sender: str, params: dtpkc.PublicParams
) -> tuple[PackResult, ...]:
    r = unseal(data, step, config, sender)
    out = tuple(PackResult.read(r, params) for _ in range(r.count(max_packs(config), "packs")))
    r.end()
    return out


def write_partials(config: SessionConfig, sender: str, ops: Sequence[int],
                   values: Sequence[dtpkc.Ciphertext]) -> bytes:  # fmt: skip
    """Holder -> CS ``partial-decrypted-batch``: (op, ciphertext under h_CS) per pack."""
    w = Writer().u32(len(ops))
    for op, v in zip(ops, values, strict=True):
        v.write(w.u64(op))
    return seal("partial-decrypted-batch", config, sender, w)


def read_partials(
    data: bytes, config: SessionConfig, sender: str, ops: Sequence[int], key: dtpkc.PublicKey
) -> list[dtpkc.Ciphertext]:
    """The CS's reading of a holder's ``partial-decrypted-batch``: exactly the ops it sent."""
    r = unseal(data, "partial-decrypted-batch", config, sender)
    if r.count(len(ops), "packs") != len(ops):
        raise MalformedMessageError(f"{sender} answered another number of packs")
    out = []
    for op in ops:
        if r.u64() != op:
            raise MalformedMessageError(f"{sender} answered packs in another order")
        out.append(dtpkc.Ciphertext.read(r, key.params, key))
    r.end()
    return out


# ------------------------------------------------------------------------ CS's half
def blind_pack(
    sk: dtpkc.SecretKey, lam1: dtpkc.StrongKeyShare, op: int, xs: Sequence[dtpkc.Ciphertext],
    ys: Sequence[dtpkc.Ciphertext], holder: str, tickets: Sequence[Ticket],
) -> tuple[PackRequest, list[int]]:  # fmt: skip
    """CS: the pack of comparisons ``xs[i] < ys[i]`` (xs under one key, ys under the holder's)
    and the secret coins. Horner from the top slot: ``P <- P^(2^k) · [[v_i]]^(2 r_i)``
    (inverted when c_i = 0), then the public offset and β. CS learns nothing here."""
    prm = sk.public.params
    k, n = packing.slot_bits(prm), len(xs)
    if not 1 <= n <= packing.slot_count(prm) or len(ys) != n or len(tickets) != n:
        raise ProtocolError(f"a pack holds 1..{packing.slot_count(prm)} comparisons")
    coins = [secrets.randbits(1) for _ in range(n)]
    acc_a: dtpkc.Ciphertext | None = None
    acc_b: dtpkc.Ciphertext | None = None
    const = 0
    for i in reversed(range(n)):
        r = secrets.randbits(prm.sigma) | 1
        ta, tb = dtpkc.scale(xs[i], 2 * r), dtpkc.scale(ys[i], 2 * r)
        if not coins[i]:
            ta, tb = dtpkc.negate(ta), dtpkc.negate(tb)
        acc_a = ta if acc_a is None else dtpkc.add(dtpkc.scale(acc_a, 1 << k), ta)
        acc_b = tb if acc_b is None else dtpkc.add(dtpkc.scale(acc_b, 1 << k), tb)
        const = (const << k) + (r if coins[i] else -r) + (1 << (k - 1))
    if acc_a is None or acc_b is None:  # pragma: no cover - n >= 1 above
        raise ProtocolError("an empty pack")
    beta = secrets.randbelow(int(prm.n))
    a = dtpkc.add(acc_a, dtpkc.encrypt_residue(acc_a.public_key, const + beta))
    b = dtpkc.add(acc_b, dtpkc.encrypt_residue(acc_b.public_key, beta))
    ta_, tb_ = dtpkc.partial_decrypt_strong1(lam1, a), dtpkc.partial_decrypt_strong1(lam1, b)
    return PackRequest(op, holder, tuple(tickets), a, b, ta_, tb_), coins


def read_pack(sk: dtpkc.SecretKey, partial: dtpkc.Ciphertext, coins: Sequence[int]) -> list[bool]:
    """CS (ParHDec2): decrypt a holder-stripped pack and read ``[x_i < y_i] = [b_i = c_i]``."""
    try:
        bits = packing.unpack_bits(dtpkc.decrypt(sk, partial), len(coins))
    except ValueError as e:
        raise ProtocolError(f"a partial decryption is not of packed comparison bits: {e}") from None
    return [b == c for b, c in zip(bits, coins, strict=True)]


# ------------------------------------------------------------------------ CC's half
def cc_holt_pack(
    lam2: dtpkc.StrongKeyShare, registry: Mapping[str, dtpkc.PublicKey],
    signing_key: Ed25519PrivateKey, config: SessionConfig, request: PackRequest,
) -> tuple[PackResult, HoLTAlarm, bool]:  # fmt: skip
    """CC: l = PSDec2(A) - PSDec2(B) mod N; per slot the sign of its chunk if in range, else
    a fresh random bit (a coin is drawn for every slot: the same work on both branches);
    returns the signed packed answer, an alarm (signed on both branches) and whether every
    slot was in range. The caller has charged every ticket. CC learns the slots' s_i."""
    target = registry.get(request.holder)
    if target is None:
        raise UnknownPartyError(f"CC re-encrypts only to registered holders: {request.holder!r}")
    prm = lam2.params
    a = dtpkc.partial_decrypt_strong2(lam2, request.a, request.share_a)
    b = dtpkc.partial_decrypt_strong2(lam2, request.b, request.share_b)
    blinded, k, rbits = (a - b) % int(prm.n), packing.slot_bits(prm), packing.slot_range_bits(prm)
    bits, all_in = [], True
    for i in range(len(request.tickets)):
        in_range, negative = packing.slot_answer(packing.chunk(blinded, i, k), rbits)
        coin = secrets.randbits(1)
        bits.append(int(negative) if in_range else coin)
        all_in &= in_range
    ct = dtpkc.encrypt(target, packing.pack_bits(bits))
    signed = PackResult.signed_bytes(config, request.op, request.holder, request.tickets, ct)
    result = PackResult(request.op, request.holder, request.tickets, ct, signing_key.sign(signed))
    alarm = HoLTAlarm.sign(signing_key, config, request.op, request.holder, int(time.time() * 1e3))
    return result, alarm, all_in


# ------------------------------------------------------------------------ the holder's half
def holder_strip_packs(
    sk: dtpkc.SecretKey, name: str, cc_key: Ed25519PublicKey, config: SessionConfig,
    data: bytes, pay_all: Callable[[Sequence[Ticket]], None],
) -> bytes:  # fmt: skip
    """ParHDec1 of a ``partial-decrypt-batch`` (holder u): every pack must be CC-signed and
    addressed to u, and ``pay_all`` must accept every slot's ticket (all or nothing) before
    any θ_u is used; then one strip per pack. Learns nothing (ciphertexts)."""
    packs = read_results(data, "partial-decrypt-batch", config, CS, sk.public.params)
    for p in packs:
        if p.holder != name:
            raise UnknownPartyError(f"{name} refuses a pack meant for {p.holder!r}")
        p.verify(cc_key, config)
    pay_all([t for p in packs for t in p.tickets])
    partials = thread_map(lambda p: dtpkc.joint_partial_decrypt(sk, p.bits), packs)
    return write_partials(config, name, [p.op for p in packs], partials)
