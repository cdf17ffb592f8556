"""A deviating server or party against encrypted training's joint steps (issue 28, item 1).

Real threshold-CKKS ciphertexts on the ``"test"`` parameter set, three parties, model 6-5-4,
the last layer encrypted. Every refusal is checked to make no share at all: the party's
flooding-budget counter does not move and no bytes come back.
"""

from __future__ import annotations

import contextlib
import dataclasses

import numpy as np
import pytest

pytest.importorskip("openfhe")

from privfl.crypto.identity import IdentityKey
from privfl.crypto.threshold import (
    BootstrapRequest,
    BootstrapShare,
    DecryptionRequest,
    DecryptionShare,
)
from privfl.crypto.threshold.ciphertext import JointDecryptionError, fuse_and_decode
from privfl.errors import DecryptionNotPermittedError, ProtocolError, UnknownPartyError
from privfl.runner import InProcessRunner
from privfl.threshold.party import REQUEST_ID_SHIFT, ThresholdParty
from privfl.training.desk import ShareDesk
from privfl.training.federated import _build
from privfl.training.joint import REQUEST_DOMAIN, Consent, SealedShare, SignedRequest
from privfl.training.party import Done
from privfl.training.tickets import Purpose, Ticket
from privfl.training.twin import Schedule

LAYERS = (6, 5, 4)


@pytest.fixture(scope="module")
def session():
    rng = np.random.default_rng(11)  # not secret: test data
    parties = [(rng.uniform(0, 1, (8, 6)), rng.integers(0, 4, 8)) for _ in range(3)]
    sched = Schedule(LAYERS, 1, 4, 4, 4, 1.0, 0)  # 4 rounds of one epoch, 2 batches each
    s, _, _ = _build(parties, sched, "test", 1)
    s.send_model(0)
    return s


def _others(session, p):
    return [q for q in session.parties if q is not p]


def _boundary_request(session, p, epoch, batch):
    """Drive ``p``'s batch through its bootstraps; return its signed e_T request (pending)."""
    message = p.start_batch(epoch, epoch, batch)
    while p.pending_kind == "boot":
        message = p.advance([q.answer(message) for q in _others(session, p)])
    return message


def _finish(session, p, message):
    out = p.advance([q.answer(message) for q in _others(session, p)])
    assert isinstance(out, Done)


def _refused(party, data, error=DecryptionNotPermittedError):
    """``party`` refuses ``data`` and makes no share (budget counter and desk unchanged)."""
    made = party.crypto.decryption_shares_made
    refused = party.desk.refused
    with pytest.raises(error):
        party.answer(data)
    assert party.crypto.decryption_shares_made == made
    assert party.desk.refused == refused + 1


def _forge(signed: SignedRequest, key: IdentityKey, **changes) -> bytes:
    msg = dataclasses.replace(signed, **changes)
    sig = key.sign(REQUEST_DOMAIN, msg.signed_part())
    return dataclasses.replace(msg, signature=sig).to_bytes()


def test_the_servers_own_decryption_request_for_the_encrypted_layer_is_refused(session):
    server, p0, p1 = session.server, session.parties[0], session.parties[1]
    request = server.crypto.request_decryption(server._secret[0])
    ticket = Ticket(Purpose.BOUNDARY, 0, 0, 0, 2)
    rogue = IdentityKey()
    unsigned = SignedRequest(
        server.session, "server", ticket, "decrypt", request.to_bytes(), (), bytes(64)
    )
    # as itself (not in the roster), and posing as party 0 (its key is not party 0's)
    _refused(p1, _forge(unsigned, rogue), UnknownPartyError)
    as_p0 = DecryptionRequest(**{**request.__dict__, "sender": p0.name})
    _refused(p1, _forge(unsigned, rogue, sender=p0.name, request=as_p0.to_bytes()),
             UnknownPartyError)  # fmt: skip
    # the bare threshold request (what every party answered before) is not even a request
    with pytest.raises(ProtocolError):
        p1.answer(request.to_bytes())


def test_a_relaying_server_never_holds_a_share_it_could_fuse(session):
    """Everything the parties exchange in an honest batch passes the server: none of it
    decodes as a bootstrapping or decryption share (they are sealed for the requester)."""
    p = session.parties[2]
    relayed: list[bytes] = []

    class Tap(InProcessRunner):
        def send(self, channel, data):
            relayed.append(data)
            return super().send(channel, data)

    runner, session.runner = session.runner, Tap()
    try:
        session.train_batch(p, 3, 3, 1)
    finally:
        session.runner = runner
    assert len(relayed) == 3 * 2 * 2  # 3 joint steps, 2 other parties, request + share
    ctx = p.crypto.context
    for data in relayed:
        for share_type in (DecryptionShare, BootstrapShare):
            with pytest.raises(ProtocolError):
                share_type.from_bytes(data, ctx, p.session)


def _min_root(q: int, m: int) -> int:
    """OpenFHE's NTT root: the smallest primitive ``m``-th root of unity modulo ``q``."""
    for g in range(2, 1000):
        r = pow(g, (q - 1) // m, q)
        if pow(r, m // 2, q) == q - 1:
            return min(pow(r, k, q) for k in range(1, m, 2))
    raise AssertionError("no root")  # pragma: no cover


def _dft(x: np.ndarray, w: int, q: int) -> np.ndarray:
    """Cyclic DFT of ``x`` (object array of ints) with root of unity ``w`` modulo ``q``."""
    n = len(x)
    if n == 1:
        return x
    even, odd = _dft(x[0::2], w * w % q, q), _dft(x[1::2], w * w % q, q)
    tw = np.array([pow(w, k, q) for k in range(n // 2)], dtype=object)
    t = odd * tw % q
    return np.concatenate([(even + t) % q, (even - t) % q])


def _bitrev(n: int) -> np.ndarray:
    bits = n.bit_length() - 1
    return np.array([int(f"{i:0{bits}b}"[::-1], 2) for i in range(n)])


def _to_coefficients(rows, moduli) -> list[int]:
    """The CRT-combined, centred coefficients of the polynomial whose OpenFHE NTT rows
    (bit-reversed order, evaluations at odd powers of the minimal ``2n``-th root) are ``rows``."""
    n = rows.shape[1]
    rev = _bitrev(n)
    residues = []
    for row, q in zip(rows, (int(q) for q in moduli), strict=True):
        psi = _min_root(q, 2 * n)
        v = np.array([int(x) for x in row], dtype=object)[rev]  # natural order: a(psi w^k)
        b = _dft(v, pow(psi, -2, q), q) * pow(n, -1, q) % q
        residues.append(b * np.array([pow(psi, -j, q) for j in range(n)], dtype=object) % q)
    big = int(np.prod([int(q) for q in moduli], dtype=object))
    total = sum(r * ((big // int(q)) * pow(big // int(q), -1, int(q)))
                for r, q in zip(residues, moduli))  # fmt: skip
    return [int(x) - big if x > big // 2 else int(x) for x in total % big]


def _to_ntt(coefficients: list[int], moduli) -> np.ndarray:
    """The inverse of :func:`_to_coefficients`: OpenFHE NTT rows of a small polynomial."""
    n = len(coefficients)
    rev = _bitrev(n)
    rows = []
    for q in (int(q) for q in moduli):
        psi = _min_root(q, 2 * n)
        a = np.array([c % q for c in coefficients], dtype=object)
        b = a * np.array([pow(psi, j, q) for j in range(n)], dtype=object) % q
        rows.append(_dft(b, psi * psi % q, q)[rev])
    return np.array(rows, dtype=object)


def test_open_one_crafted_c1_under_a_valid_ticket_yields_the_joint_key(session):
    """THE OPEN ATTACK (docs/security/training.md), kept as a test so that a fix shows up as a
    failure here. Party 0 signs its own legitimate boundary ticket for ``c1 = C + r`` (``C`` a
    large constant, ``r`` small and random) instead of its batch's ``e_T``; parties 1 and 2
    answer as the desk allows. The sum of their answers and party 0's own share is
    ``s C + r s + E`` with ``|r s + E|`` about 2^40, far below ``C = 2^100``: rounding gives
    every coefficient of the joint key ``s`` (and of party 0's own share), and party 0 then
    decrypts the global encrypted layer alone, to the value an honest joint decryption gives.
    No check the answering party can make on ``c1`` alone tells this ``c1`` from an honest one
    in general (see the security page): this stays open until the decrypted ciphertext is
    checked to be the scheduled one."""
    p0, p1, p2 = session.parties
    ctx = p0.crypto.context
    honest = _boundary_request(session, p0, 3, 1)
    ticket, kind, pending = p0._pending
    big = 1 << 100
    layout = ctx.c1_layout(pending.level, pending.deg)
    # c1 = C + r, r small and random: every NTT value differs and looks uniform modulo its
    # tower (a cheap "looks uniform" check on c1 would pass it), and r s stays far below C
    rng = np.random.default_rng(3)  # not secret: the attacker's own choice
    r = [int(v) for v in rng.integers(-(1 << 20), 1 << 20, ctx.ring)]
    crafted = (_to_ntt(r, layout.moduli) + big) % np.array(
        [[int(q)] for q in layout.moduli], dtype=object)  # fmt: skip
    assert all(len(set(row)) == ctx.ring for row in crafted)
    request = dataclasses.replace(pending, c1=np.array(crafted, dtype=np.uint64).tobytes())
    signed = p0.desk.sign(ticket, kind, request.to_bytes()).to_bytes()
    sealed = [SealedShare.from_bytes(q.answer(signed), p0.session) for q in (p1, p2)]
    stolen = p0.desk.open(ticket, pending.request_id, kind, sealed)
    assert honest != signed
    p0._flow = p0._pending = None  # party 0 abandons its batch
    own = p0.crypto.decryption_share(request)  # its own Main share on the same c1

    def rounded(payloads) -> list[int]:
        total = sum(np.frombuffer(x, dtype=np.uint64).astype(object) for x in payloads)
        rows = (total.reshape(len(layout.moduli), -1) % np.array(
            [[int(q)] for q in layout.moduli], dtype=object))  # fmt: skip
        return [round(c / big) for c in _to_coefficients(rows, layout.moduli)]

    s_all = rounded([own.share, *(x.share for x in stolen)])
    s_own = rounded([own.share])
    assert len(s_all) == ctx.ring and set(s_own) <= {-1, 0, 1}
    others = [a - b for a, b in zip(s_all, s_own, strict=True)]
    # with the key: party 0 decrypts the global layer it holds, nobody else answering
    layer = p0._secret[0]
    attack = p0.crypto.request_decryption(layer)
    c1 = np.frombuffer(attack.c1, dtype=np.uint64).astype(object).reshape(len(layout.moduli), -1)
    moduli = ctx.c1_layout(attack.level, attack.deg).moduli
    forged = _to_ntt(others, moduli) * c1 % np.array([[int(q)] for q in moduli], dtype=object)
    zero = np.zeros_like(forged)
    fake = [DecryptionShare(p0.session, q.name, attack.request_id,
                            np.array(rows, dtype=np.uint64).tobytes())
            for q, rows in ((p1, forged), (p2, zero))]  # fmt: skip
    stolen_layer = p0.crypto.fuse(attack, fake, 32)
    # the control: an honest joint decryption of the same layer (every party answering)
    oracle = p0.crypto.request_decryption(layer)
    shares = [q.crypto.decryption_share(oracle) for q in (p1, p2)]
    truth = p0.crypto.fuse(oracle, shares, 32)
    assert np.max(np.abs(truth)) > 1e-2
    assert np.allclose(stolen_layer, truth, atol=1e-3)


def test_a_party_never_receives_a_ciphertext_but_the_global_layer(session):
    """Limiting the damage of the open attack: over a round (the global model and another
    party's batch, relayed), everything addressed to party 0 is the global model, a
    signed request carrying only ``c1`` (no ``c0``: nothing to decrypt with any key), or a
    share sealed for party 0. A party that recovered the joint key decrypts the global layer
    (which its legitimate outputs on rows of its choice also reveal) and its own ciphertexts;
    it never holds another party's encrypted update or boundary error."""
    p0 = session.parties[0]
    ctx = p0.crypto.context
    seen: list[tuple[str, bytes]] = []

    class Tap(InProcessRunner):
        def send(self, channel, data):
            if f">{p0.name}:" in channel:
                seen.append((channel.split(":", 1)[1], data))
            return super().send(channel, data)

    runner, session.runner = session.runner, Tap()
    try:
        session.send_model(3)
        session.train_batch(session.parties[1], 3, 3, 0)
    finally:
        session.runner = runner
    kinds = sorted({k for k, _ in seen})
    assert kinds == ["boot-request", "decrypt-request", "global-plain", "global-secret"], kinds
    for kind, data in seen:
        if kind == "global-secret":
            assert data == session.server.global_model(3)[1][0].to_bytes()
        elif kind.endswith("-request"):  # another party's joint step: c1 only
            signed = SignedRequest.from_bytes(data, p0.session)
            decode = BootstrapRequest if signed.kind == "boot" else DecryptionRequest
            inner = decode.from_bytes(signed.request, ctx, p0.session)
            layout = (ctx.boot_c1_layout if signed.kind == "boot" else ctx.c1_layout)(
                inner.level, inner.deg
            )
            assert signed.sender != p0.name and len(inner.c1) == layout.payload_bytes


def test_a_request_for_another_ciphertext_than_the_signed_e_t_is_refused(session):
    """The server swaps the c1 of party 0's signed e_T request for the encrypted layer's."""
    server, p0, p1 = session.server, session.parties[0], session.parties[1]
    honest = _boundary_request(session, p0, 0, 0)
    msg = SignedRequest.from_bytes(honest, p0.session)
    theirs = server.crypto.request_decryption(server._secret[0])
    swapped = DecryptionRequest(**{**theirs.__dict__, "sender": p0.name})
    _refused(p1, dataclasses.replace(msg, request=swapped.to_bytes()).to_bytes(),
             UnknownPartyError)  # fmt: skip
    # nor may it move the signed request to another ticket or purpose
    for ticket in (Ticket(Purpose.REVEAL, 4, 0, 0, 0), Ticket(Purpose.BOUNDARY, 1, 1, 0, 2)):
        _refused(p1, dataclasses.replace(msg, ticket=ticket).to_bytes(), UnknownPartyError)
    _finish(session, p0, honest)


def test_a_second_request_for_the_same_batch_is_refused(session):
    p0, p1, p2 = session.parties
    honest = _boundary_request(session, p0, 1, 0)
    share = p1.answer(honest)
    _refused(p1, honest)  # a replay of the same request
    # party 0 itself asks again for the same ticket (a new request id, its own signature)
    msg = SignedRequest.from_bytes(honest, p0.session)
    again = p0.desk.sign(msg.ticket, "decrypt", msg.request)
    _refused(p1, again.to_bytes())
    out = p0.advance([share, p2.answer(honest)])
    assert isinstance(out, Done)


def test_a_repeated_bootstrapping_request_id_is_refused(session):
    """Two bootstrapping answers under one request id share the CRP ``a``: their difference
    would be ``s_i (c1 - c1')``, a decryption share of a ciphertext of the requester's choice."""
    p0, p1, p2 = session.parties
    first = p0.start_batch(1, 1, 1)
    share = p1.answer(first)
    msg = SignedRequest.from_bytes(first, p0.session)
    other = dataclasses.replace(msg.ticket, step=1)
    _refused(p1, p0.desk.sign(other, "boot", msg.request).to_bytes())
    # nor may party 0 take an id from party 2's range (honest ids never collide across parties)
    inner = BootstrapRequest.from_bytes(msg.request, p0.crypto.context, p0.session)
    theirs = dataclasses.replace(inner, request_id=(3 << REQUEST_ID_SHIFT) + 1)
    _refused(p1, p0.desk.sign(other, "boot", theirs.to_bytes()).to_bytes())
    message = p0.advance([share, p2.answer(first)])
    while not isinstance(message, Done):
        message = p0.advance([q.answer(message) for q in (p1, p2)])


def test_a_restarted_node_refuses_what_its_desk_answered_before(session):
    """The desk's once-only records travel with the key share in the node's local state: a
    node restarted from it (a Flower ClientApp runs each step in a fresh process) refuses a
    replay and a reused request id, and keeps counting the flooding budget."""
    p0, p1, p2 = session.parties
    honest = _boundary_request(session, p0, 2, 0)
    share = p1.answer(honest)
    state = p1.desk.export_local_state()
    fresh = ThresholdParty(p1.name, p1.crypto.index, p1.crypto.context, p1.session)
    fresh.public_key = p1.crypto.public_key  # public: the joint key
    desk = ShareDesk(p1.desk._identity, p1.desk.plan, fresh)
    desk.import_local_state(state)
    assert fresh.decryption_shares_made == p1.crypto.decryption_shares_made
    msg = SignedRequest.from_bytes(honest, p0.session)
    moved = p0.desk.sign(Ticket(Purpose.BOUNDARY, 2, 2, 1, 2), "decrypt", msg.request)
    for replay in (msg, moved):  # the same ticket; the same request id under a fresh ticket
        with pytest.raises(DecryptionNotPermittedError):
            desk.answer(replay)
    assert fresh.decryption_shares_made == p1.crypto.decryption_shares_made
    with pytest.raises(ProtocolError):  # a desk restores its state once
        desk.import_local_state(state)
    assert isinstance(p0.advance([share, p2.answer(honest)]), Done)


def test_tickets_outside_the_schedule_are_refused(session):
    p0, p1 = session.parties[0], session.parties[1]
    request = p0.crypto.request_decryption(p0._secret[0]).to_bytes()
    for ticket in (
        Ticket(Purpose.BOUNDARY, 0, 0, 2, 2),  # party 0 has 2 batches per epoch
        Ticket(Purpose.BOUNDARY, 4, 4, 0, 2),  # 4 epochs
        Ticket(Purpose.BOUNDARY, 1, 0, 0, 2),  # epoch 0 is in round 0
        Ticket(Purpose.BOOT, 0, 0, 0, 2),  # 2 bootstraps per batch
        Ticket(Purpose.OUTPUT, 0, 0, 2, 0),  # 8 rows: 2 blocks of K = 4
    ):
        _refused(p1, p0.desk.sign(ticket, "decrypt", request).to_bytes())
    _refused(p1, p0.desk.sign(Ticket(Purpose.BOUNDARY, 2, 2, 0, 2), "boot", request).to_bytes())


def test_a_reveal_without_every_partys_consent_is_refused(session):
    p0, p1, p2 = session.parties
    request = p0.crypto.request_decryption(p0._secret[0]).to_bytes()
    ticket = Ticket(Purpose.REVEAL, 4, 0, 0, 0)
    consents = [Consent.from_bytes(q.consent(p0.name, Purpose.REVEAL, 1), p0.session)
                for q in (p0, p1)]  # fmt: skip
    _refused(p1, p0.desk.sign(ticket, "decrypt", request).to_bytes())
    _refused(p1, p0.desk.sign(ticket, "decrypt", request, consents).to_bytes())
    forged = dataclasses.replace(consents[0], sender=p2.name)
    _refused(p1, p0.desk.sign(ticket, "decrypt", request, [*consents, forged]).to_bytes(),
             UnknownPartyError)  # fmt: skip
    for_p1 = Consent.from_bytes(p2.consent(p1.name, Purpose.REVEAL, 1), p0.session)
    _refused(p1, p0.desk.sign(ticket, "decrypt", request, [*consents, for_p1]).to_bytes())
    # a prediction is an oracle on the layer: it needs the same consent
    predict = Ticket(Purpose.PREDICT, 4, 0, 0, 0)
    _refused(p1, p0.desk.sign(predict, "decrypt", request).to_bytes())


def test_a_share_sealed_for_the_requester_opens_for_nobody_else(session):
    p0, p1, p2 = session.parties
    honest = _boundary_request(session, p0, 2, 1)
    sealed = [SealedShare.from_bytes(q.answer(honest), p0.session) for q in (p1, p2)]
    ticket, kind, request = p0._pending
    with pytest.raises(ProtocolError):  # party 2 (or the server with any key) cannot open it
        p2.desk.open(ticket, request.request_id, kind, sealed)
    out = p0.advance([s.to_bytes() for s in sealed])
    assert isinstance(out, Done)


def test_bootstrapping_shares_never_expose_an_unmasked_value(session):
    """Whoever holds ``c0`` and every other party's bootstrapping half ``h0 = s_i c1 + M_i``
    (the server would, if the shares were not sealed) fuses ``m + sum M_i``: the masks are
    full size, the sum does not decode. The same fusion with unmasked decryption shares of
    the same ciphertext decodes ``m`` (the control: the test can fail)."""
    p0, p1, p2 = session.parties
    crypto, ctx = p0.crypto, p0.crypto.context
    values = np.linspace(-1, 1, 16)
    request = crypto.start_bootstrap(crypto.encrypt(values))
    adjusted = crypto._bootstraps.pop(request.request_id)
    lead = ctx.cc.MultipartyDecryptLead([adjusted], crypto._share())[0]
    mains = [ctx.cc.MultipartyDecryptMain([adjusted], q.crypto._share())[0] for q in (p1, p2)]
    assert np.allclose(fuse_and_decode(ctx, [lead, *mains], 16), values, atol=1e-3)
    layout = ctx.boot_c1_layout(0, 1)
    h0 = [ctx.load("ciphertext", layout, q.crypto.bootstrap_share(request).h0, crypto.tag)
          for q in (p1, p2)]  # fmt: skip
    with contextlib.suppress(JointDecryptionError):
        decoded = fuse_and_decode(ctx, [lead, *h0], 16)
        assert not np.allclose(decoded, values, atol=0.5)


def test_training_messages_decode_only_to_typed_errors(session):
    """Mutated signed requests, sealed shares and consents: a typed error or a refusal, never a
    share and never another exception."""
    p0, p1, p2 = session.parties
    honest = _boundary_request(session, p0, 3, 0)
    sealed = p1.answer(honest)
    consent = p1.consent(p0.name, Purpose.REVEAL, 1)
    rng = np.random.default_rng(5)  # not secret: fuzzing
    made = p2.crypto.decryption_shares_made
    for blob, decode in (
        (honest, lambda raw: p2.answer(raw)),
        (sealed, lambda raw: SealedShare.from_bytes(raw, p0.session)),
        (consent, lambda raw: Consent.from_bytes(raw, p0.session)),
    ):
        for _ in range(150):
            raw = bytearray(blob)
            cut = int(rng.integers(0, min(len(raw), 600)))
            if rng.random() < 0.3:
                raw = raw[:cut]
            else:
                raw[cut] ^= 1 << int(rng.integers(0, 8))
            with contextlib.suppress(ProtocolError):
                decode(bytes(raw))
    assert p2.crypto.decryption_shares_made == made
    assert isinstance(p0.advance([sealed, p2.answer(honest)]), Done)


def test_a_poisoning_partys_plaintext_update_is_clipped_to_the_declared_norm():
    """One party uploads plaintext layers moved by 1e3 (model replacement); with
    ``max_update_norm`` the global layers move by at most bound / parties."""
    from privfl.training.messages import PartyPlainLayers
    from privfl.training.server import Server

    sched = Schedule(LAYERS, 0, 1, 1, 4, 1.0, 0)
    for bound, limit in ((None, 100.0), (0.5, 0.5 / 3 + 1e-9)):
        server = Server(sched, bytes(16), None, None, bound)
        plain, _ = server.global_model(0)
        ups = [
            PartyPlainLayers(
                plain.session,
                f"party-{k}",
                0,
                tuple(w + (1e3 if k == 0 else 0.0) for w in plain.weights),
                plain.biases,
            )
            for k in range(3)
        ]
        server.aggregate(ups, [[], [], []])
        after, _ = server.global_model(1)
        pairs = zip(after.weights, plain.weights, strict=True)
        moved = np.sqrt(sum(float(np.sum((a - b) ** 2)) for a, b in pairs))
        assert (moved <= limit) == (bound is not None)
        assert [c[1] for c in server.clipped] == ([] if bound is None else ["party-0"])
