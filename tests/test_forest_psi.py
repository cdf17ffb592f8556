"""Private alignment of sample ids (multi-party X25519 DH-PSI, privfl.forest.psi)."""

from __future__ import annotations

import secrets

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from hypothesis import HealthCheck, given, settings

from _forest_fuzz import decode_safely, payloads
from privfl.errors import InputError, MalformedMessageError, ProtocolError, UnknownPartyError
from privfl.forest import RevFRF, schedule
from privfl.forest.psi import (
    CODEC,
    Positions,
    PsiComparer,
    PsiConfig,
    PsiList,
    PsiParty,
    RepeatedStageError,
    SealedFinal,
    SizeAnnouncement,
    _tag,
    hash_id,
)
from privfl.messages import decode_message, new_session_id
from privfl.runner import InProcessRunner

NAMES = ("CS", "a", "b", "c")
ID = {n: Ed25519PrivateKey.generate() for n in (*NAMES, "CC")}  # provisioned identities


def psi_config(parties, session=None, **kw):
    keys = {n: k.public_key() for n, k in ID.items()}
    return PsiConfig(session or new_session_id(), tuple(parties), "CC", keys, **kw)


def party(name, ids, config, secret=None):
    return PsiParty(name, ids, config, ID[name], secret)


def comparer_of(config):
    return PsiComparer(config, ID["CC"])


def _sets(seed: int = 0) -> dict[str, list[str]]:
    """Four id sets over a universe of 200 with a partial overlap, in shuffled orders."""
    rng = np.random.default_rng(seed)
    universe = [f"id-{i:04d}" for i in range(200)]
    out = {}
    for name in NAMES:
        keep = rng.random(200) < 0.7
        ids = [u for u, k in zip(universe, keep, strict=True) if k]
        out[name] = [ids[i] for i in rng.permutation(len(ids))]
    return out


class Recording(InProcessRunner):
    """A runner that also keeps every message, for the what-each-role-receives tests."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[str, bytes]] = []

    def send(self, channel: str, data: bytes) -> bytes:
        self.log.append((channel, bytes(data)))
        return super().send(channel, data)


def _run(sets: dict[str, list[str]]):
    config = psi_config(sets)
    parties = {n: party(n, ids, config) for n, ids in sets.items()}
    comparer = comparer_of(config)
    runner = Recording()
    rows = schedule.align(runner, parties, comparer)
    return config, parties, comparer, runner, rows


def test_psi_intersection_is_exact_and_in_one_order_for_every_party():
    sets = _sets()
    _, _, _, _, rows = _run(sets)
    common = set.intersection(*(set(s) for s in sets.values()))
    aligned = {n: [sets[n][i] for i in rows[n]] for n in sets}
    assert len(common) > 10 and set(aligned["CS"]) == common
    for n in sets:
        assert aligned[n] == aligned["CS"]  # same ids, same order at every party


def test_psi_disjoint_sets_give_an_empty_intersection_and_ids_compare_as_text():
    config = psi_config(("CS", "a"))
    parties = {"CS": party("CS", [1, 2, 3], config), "a": party("a", ["4", "5"], config)}
    rows = schedule.align(InProcessRunner(), parties, comparer_of(config))
    assert rows["CS"].size == 0 and rows["a"].size == 0
    parties = {"CS": party("CS", [1, 2, 3], config), "a": party("a", ["3", "1"], config)}
    rows = schedule.align(InProcessRunner(), parties, comparer_of(config))
    assert sorted(rows["CS"].tolist()) == [0, 2] and sorted(rows["a"].tolist()) == [0, 1]


def _single_key_images(ids, key: X25519PrivateKey, session: bytes) -> set[bytes]:
    out = set()
    for x in ids:
        u = hash_id(session, x)
        out |= {u, key.exchange(X25519PublicKey.from_public_bytes(u))}
    return out


def test_no_role_receives_a_value_it_can_link_to_an_id_outside_the_intersection():
    sets = _sets(1)
    config, parties, comparer, runner, rows = _run(sets)
    union = set.union(*(set(s) for s in sets.values()))
    common = set.intersection(*(set(s) for s in sets.values()))
    for name, party in parties.items():
        got = _received(runner, config)[name]  # others' lists it keyed, its positions
        assert len(got) == len(config.parties)  # n - 1 lists of the others, 1 result
        mine = _single_key_images(union - common, party._key, config.session)
        for data in got:
            assert not any(v in data for v in mine), name  # no tag it could recompute
        # its output names exactly the common ids
        assert {sets[name][i] for i in rows[name]} == common
    # the comparer sees fully keyed lists only: none equals a hashed id or a one-key image
    finals = _finals(runner, config)
    assert len(finals) == len(config.parties)
    for party in parties.values():
        images = _single_key_images(union, party._key, config.session)
        for sealed in finals:
            assert not images & set(sealed.open(config, comparer._key))


def _received(runner: Recording, config: PsiConfig) -> dict[str, list[bytes]]:
    """Who each message is for: a list goes to its next holder, a result to its party."""
    out: dict[str, list[bytes]] = {n: [] for n in (*config.parties, config.comparer)}
    for _, data in runner.log:
        header, r = CODEC.decode(data, None, config.session)
        if header.step in ("psi-start", "psi-pass"):
            origin, stage = r.str_(), r.u32()
            out[config.holder(origin, stage)].append(data)
        else:
            out[config.comparer if header.step == "psi-final" else r.str_()].append(data)
    return out


def _finals(runner: Recording, config: PsiConfig) -> list[SealedFinal]:
    out = []
    for _, data in runner.log:
        header, _ = CODEC.decode(data, None, config.session)
        if header.step == "psi-final":
            out.append(SealedFinal.from_bytes(data, config, header.sender))
    return out


def test_the_relay_cannot_open_a_final_list_and_positions_are_bounded():
    sets = _sets(2)
    config, parties, _comparer, runner, _ = _run(sets)
    sealed = _finals(runner, config)[0]
    with pytest.raises(MalformedMessageError, match="does not open"):
        sealed.open(config, X25519PrivateKey.generate())  # the CS (or anyone but CC)
    bad = Positions("a", bytes(16), (0, 0)).to_bytes(config, ID["CC"])
    with pytest.raises(MalformedMessageError, match="repeat"):
        Positions.from_bytes(bad, config, "a", 10, bytes(16))
    forged = Positions("a", bytes(16), (1,)).to_bytes(config, ID["CS"])  # the relay's own result
    with pytest.raises(ProtocolError, match="not signed by 'CC'"):
        parties["a"].finish(forged)


def test_duplicate_ids_empty_sets_and_a_party_out_of_turn_are_refused():
    config = psi_config(("CS", "a", "b"))
    with pytest.raises(InputError, match="duplicates"):
        party("a", ["x", "y", "x"], config)
    with pytest.raises(InputError, match="between 1"):
        party("a", [], config)
    with pytest.raises(InputError, match="comparer"):
        psi_config(("CS", "CC"))
    parties = {n: party(n, ["x", "y"], config) for n in config.parties}
    start = parties["CS"].start()
    with pytest.raises(ProtocolError, match="not the next holder"):
        parties["b"].pass_on(start, comparer_of(config).public_key)
    size = SizeAnnouncement.sign(ID["a"], config, "a", 0, bytes(16))
    with pytest.raises(ProtocolError, match="cannot send"):
        PsiList.from_bytes(PsiList("a", 1, (), size).to_bytes(config, "b", ID["b"]), config)


def test_a_rebuilt_party_continues_the_session_from_its_secret_state():
    config = psi_config(("a", "b"))
    a, b = party("a", ["x", "y", "z"], config), party("b", ["y", "z", "w"], config)
    again = party("a", ["x", "y", "z"], config, a.secret_state())
    assert again.start() == a.start()  # X25519 and Ed25519 are deterministic: same message
    rows = schedule.align(InProcessRunner(), {"a": again, "b": b}, comparer_of(config))
    assert sorted(rows["a"].tolist()) == [1, 2]
    with pytest.raises(MalformedMessageError):
        party("a", ["x", "y"], config, a.secret_state())


def test_fit_with_id_columns_equals_fit_on_rows_aligned_by_hand():
    rng = np.random.default_rng(3)
    n = 60
    x = rng.normal(size=(n, 3))
    y = (x[:, 0] + x[:, 1] > 0).astype(int)
    ids = np.array([f"s{i}" for i in range(n)])
    keep = {p: rng.random(n) < 0.9 for p in ("CS", "a", "b")}
    parts, id_cols = {}, {}
    for j, p in enumerate(("a", "b")):
        rows = rng.permutation(np.flatnonzero(keep[p]))
        parts[p], id_cols[p] = x[rows][:, [j, 2] if j else [j]], list(ids[rows])
    lrows = rng.permutation(np.flatnonzero(keep["CS"]))
    kw = dict(n_trees=2, max_depth=2, key_bits=512, rho=n, seed=5, allow_insecure_key_bits=True)
    model = RevFRF(**kw).fit(parts, y[lrows], ids=id_cols, label_ids=list(ids[lrows]))
    order = [id_cols["a"][i] for i in model.aligned_rows["a"]]
    assert order == [str(ids[lrows][i]) for i in model.aligned_rows["CS"]]
    common = sorted(set(ids[keep["CS"] & keep["a"] & keep["b"]]))
    assert sorted(order) == common
    idx = np.array([int(s[1:]) for s in order])
    by_hand = RevFRF(**kw).fit({"a": x[idx][:, [0]], "b": x[idx][:, [1, 2]]}, y[idx])
    test = {"a": x[:8, [0]], "b": x[:8, [1, 2]]}
    assert np.array_equal(model.predict_plain(test), by_hand.predict_plain(test))
    with pytest.raises(InputError, match="ids"):
        RevFRF(**kw).fit(parts, y[lrows], ids=id_cols)


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=payloads(b""))
def test_psi_decoders_survive_fuzzing(data):
    config = FUZZ_CONFIG
    for decoder in (
        lambda d: PsiList.from_bytes(d, config),
        lambda d: SealedFinal.from_bytes(d, config, "a"),
        lambda d: Positions.from_bytes(d, config, "a", 50, bytes(16)),
    ):
        decode_safely(decoder, data)
    for valid in FUZZ_VALID:
        decode_safely(lambda d: PsiList.from_bytes(d, config), valid)


FUZZ_CONFIG = psi_config(("CS", "a", "b"), secrets.token_bytes(16), max_ids=1000)
_fuzz_parties = {n: party(n, ["x", "y", "z"], FUZZ_CONFIG) for n in FUZZ_CONFIG.parties}
FUZZ_VALID = [
    _fuzz_parties["CS"].start(),
    Positions("a", bytes(16), (2, 0)).to_bytes(FUZZ_CONFIG, ID["CC"]),
]


@settings(max_examples=120, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=payloads(FUZZ_VALID[0]))
def test_psi_list_decoder_survives_mutations_of_a_valid_list(data):
    decode_safely(lambda d: PsiList.from_bytes(d, FUZZ_CONFIG), data)
    decode_safely(lambda d: Positions.from_bytes(d, FUZZ_CONFIG, "a", 3, bytes(16)), data)


# ------------------------------------------------------------------ issue 26, finding 3
def test_a_relay_cannot_have_the_parties_key_a_dictionary_of_ids():
    """The attack: the CS (relay and party) makes the others key candidate ids as extra
    passes, then matches them against a list it finalised itself. Every extra pass is
    refused with a typed error, and the CS ends with no id outside the intersection."""
    rng = np.random.default_rng(7)
    universe = [f"patient-{i:05d}" for i in range(400)]
    sets = {n: sorted(rng.choice(universe, 120, replace=False)) for n in ("CS", "a", "b")}
    config = psi_config(sets)
    parties = {n: party(n, ids, config) for n, ids in sets.items()}
    cs, a, b = parties["CS"], parties["a"], parties["b"]
    cc = comparer_of(config)
    # the CS's own list is the dictionary (allowed: it is its own input), keyed once by a
    dictionary = tuple(_tag(hash_id(config.session, x), cs._key) for x in universe)
    size = SizeAnnouncement.sign(ID["CS"], config, "CS", len(dictionary), bytes(16))
    own = PsiList("CS", 1, dictionary, size).to_bytes(config, "CS", ID["CS"])
    keyed_by_a = PsiList.from_bytes(a.pass_on(own, cc.public_key), config)
    with pytest.raises(RepeatedStageError):
        a.pass_on(own, cc.public_key)  # a second keying of the same list
    # relabel k_a k_CS u(dict) as a's first-stage list so that b returns it to the CS unsealed
    a_size = SizeAnnouncement.sign(ID["a"], config, "a", len(sets["a"]), bytes(16))
    relabelled = PsiList("a", 1, keyed_by_a.values, a_size)
    with pytest.raises(UnknownPartyError, match="not signed by 'a'"):  # forging a's name
        b.pass_on(_as_sender(relabelled.to_bytes(config, "CS", ID["CS"]), "a"), cc.public_key)
    with pytest.raises(UnknownPartyError, match="cannot send"):  # not a's predecessor
        b.pass_on(relabelled.to_bytes(config, "CS", ID["CS"]), cc.public_key)
    # the CS as b's list's next holder lengthens it with the dictionary before a seals it
    b_start = PsiList.from_bytes(b.start(), config)
    longer = PsiList("b", 2, (*b_start.values, *dictionary[:5]), b_start.size)
    with pytest.raises(MalformedMessageError, match="announced"):
        a.pass_on(longer.to_bytes(config, "CS", ID["CS"]), cc.public_key)
    # the honest run still works, and gives every party only the common ids
    rows = schedule.align(InProcessRunner(), {n: party(n, s, config) for n, s in sets.items()},
                          comparer_of(config))  # fmt: skip
    common = set.intersection(*(set(s) for s in sets.values()))
    assert {sets["CS"][i] for i in rows["CS"]} == common


def _as_sender(data: bytes, sender: str) -> bytes:
    """The same payload under another sender's name in the header (the signature stays)."""
    header, payload = decode_message(data, protocol="psi", version=1)
    return CODEC.encode(header.step, header.session, sender, payload)


def _accepted(p, data):
    try:
        p.finish(data)
    except ProtocolError:
        return False
    return True


def test_a4_a_result_of_an_earlier_attempt_is_refused_after_a_restart():
    """The reviewer's A4: the relay replays the comparer's signed Positions of an earlier
    attempt to a party that restarted (new scalar, new order): refused, not misaligned."""
    from privfl.forest.messages import StaleMessageError

    sets = _sets(3)
    config, parties, _comparer, runner, rows = _run(sets)
    results = [d for ch, d in runner.log if ch.startswith("psi->")]
    old = next(d for d in results if _accepted(parties["a"], d))
    assert np.array_equal(parties["a"].finish(old), rows["a"])  # the genuine one, this attempt
    restarted = party("a", sets["a"], config)
    restarted.start()
    with pytest.raises(StaleMessageError, match="another attempt"):
        restarted.finish(old)
