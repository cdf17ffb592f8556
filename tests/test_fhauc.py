import dataclasses
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import privfl
from conftest import make_parties
from privfl.crypto import keywrap
from privfl.errors import (
    DecryptionNotPermittedError,
    InputError,
    MalformedMessageError,
    ProtocolError,
    UnexpectedStepError,
    UnknownPartyError,
    WrongProtocolError,
    WrongSessionError,
)
from privfl.evaluation import fhauc

TOL = 1e-6


@st.composite
def party_lists(draw):
    m = draw(st.integers(2, 50))
    sizes = draw(st.lists(st.integers(1, 5000), min_size=m, max_size=m))
    # keep the total modest so the property test stays fast
    sizes = [max(1, s // max(1, m // 5)) for s in sizes]
    kind = draw(st.sampled_from(["normal", "ties", "all_equal", "grid", "extreme"]))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    parties = []
    for n in sizes:
        y = (rng.random(n) < draw(st.sampled_from([0.5, 0.05, 0.95]))).astype(np.int8)
        if kind == "normal":
            s = np.clip(rng.normal(0.4 + 0.2 * y, 0.25), 0, 1)
        elif kind == "ties":
            s = rng.choice([0.0, 0.3, 0.5, 0.7, 1.0], n)
        elif kind == "all_equal":
            s = np.full(n, 0.5)
        elif kind == "grid":
            s = rng.integers(0, 11, n) / 10
        else:
            s = rng.choice([0.0, 1.0], n)
        parties.append((s, y))
    all_y = np.concatenate([p[1] for p in parties])
    if all_y.min() == all_y.max():  # both classes must be present globally
        parties[0] = (np.append(parties[0][0], 0.5), np.append(parties[0][1], 1 - all_y[0]))
    return parties


# 10 examples (was 20): every example is a full session with fresh keys; the same identity is
# checked at fixed sizes below and in tests/test_fhauc_acceptance.py and tests/test_metrics.py
@given(party_lists(), st.sampled_from([3, 4, 7, 25, 100, 1000, 2047, 2048, 4096]))
@settings(max_examples=10)
def test_protocol_equals_binned_reference_on_random_data(parties, n_points):
    res = privfl.federated_auc(parties, n_points)
    assert res.auc == pytest.approx(privfl.binned_auc(parties, n_points), abs=TOL)
    assert res.num_parties == len(parties) and res.thresholds == n_points


def test_extreme_imbalance_one_negative_at_n_4096_is_still_accurate(rng):
    y = np.ones(20000, dtype=np.int8)
    y[123] = 0
    s = rng.random(20000)
    parties = [(s[:10000], y[:10000]), (s[10000:], y[10000:])]
    res = privfl.federated_auc(parties, 4096)
    assert res.auc == pytest.approx(privfl.binned_auc(parties, 4096), abs=TOL)


def test_large_counts_at_the_capacity_bound_stay_exact():
    # counts, not samples, drive the CKKS magnitudes: emulate 1000 x 10^7 by max_samples
    rng = np.random.default_rng(5)
    parties = make_parties(rng, 3, 100000)
    res = privfl.federated_auc(parties, 100, max_samples_per_party=10**7)
    assert res.auc == pytest.approx(privfl.binned_auc(parties, 100), abs=TOL)


def test_explicit_thresholds_and_other_score_range(rng):
    parties = [(s * 10 - 5, y) for s, y in make_parties(rng, 4, 300)]
    thr = np.linspace(4.5, -4.5, 37)
    res = privfl.federated_auc(parties, thr, score_range=(-5, 5))
    assert res.auc == pytest.approx(privfl.binned_auc(parties, thr, score_range=(-5, 5)), abs=TOL)
    assert res.thresholds == 39


def test_result_reports_timings_and_real_sizes(rng):
    res = privfl.federated_auc(make_parties(rng, 5, 100), 100)
    assert set(res.timings) >= {"party_encrypt", "aggregator", "party_decrypt"}
    assert 100_000 < res.bytes["party_upload"] < 1_000_000
    assert res.bytes["aggregator_reply"] > 0 and res.bytes["setup_public_context"] < 12_000_000
    assert res.to_dict()["parties"] == 5


@pytest.mark.parametrize(
    "parties, match",
    [
        (
            [(np.array([0.1, 0.2]), np.array([1, 1])), (np.array([0.3]), np.array([1]))],
            "no negative",
        ),
        ([(np.array([0.1, 0.2]), np.array([0, 0]))], "no positive"),
        ([(np.array([0.1, np.nan]), np.array([0, 1]))], "NaN"),
        ([(np.array([0.1, 2.0]), np.array([0, 1]))], "declared range"),
        ([(np.array([0.1, 0.2]), np.array([0, 3]))], "0 or 1"),
        ([(np.array([0.1, 0.2]), np.array([0, 1])), (np.array([]), np.array([]))], "no samples"),
        ([], "non-empty"),
    ],
)
def test_bad_input_raises_input_error_and_no_auc(parties, match):
    with pytest.raises(InputError, match=match):
        privfl.federated_auc(parties, 10)


def test_non_monotone_thresholds_and_too_few_points_are_rejected(rng):
    parties = make_parties(rng, 2, 20)
    with pytest.raises(InputError, match="strictly decreasing"):
        privfl.federated_auc(parties, [0.2, 0.4])
    with pytest.raises(InputError, match="at least 3"):
        privfl.federated_auc(parties, 2)


def test_party_larger_than_declared_maximum_is_rejected(rng):
    with pytest.raises(InputError, match="max_samples_per_party"):
        privfl.federated_auc(make_parties(rng, 2, 50), 10, max_samples_per_party=10)


def test_too_many_samples_for_the_ckks_capacity_is_rejected(rng):
    with pytest.raises(InputError, match="exceed"):
        privfl.federated_auc(make_parties(rng, 2, 10), 10, max_samples_per_party=10**12)


# ----------------------------------------------------------------------------- roles & messages
class Deployment:
    """Roles wired by hand, to attack individual messages."""

    def __init__(self, rng, count=3, n_points=50, security="semi-honest", splits=4, **policy):
        self.names = [f"p{i}" for i in range(count)]
        self.ids = {n: keywrap.IdentityKey() for n in self.names}
        self.roster = {n: k.public_bytes for n, k in self.ids.items()}
        self.data = make_parties(rng, count, 200)
        mode = fhauc.Security(security)
        malicious = mode is fhauc.Security.MALICIOUS
        positives = sum(int(y.sum()) for _, y in self.data)
        pairs = positives * (sum(len(y) for _, y in self.data) - positives)
        defaults = {
            "security": mode,
            "max_points": n_points,
            "max_splits": splits if malicious else 1,
            "max_samples_per_party": 256 if malicious else 10**7,
            # 3 x 200 rows: the worst case over the multipliers needs a 4th execution for
            # 2^-8 (as fhauc.sizing would provision); with 3 every party refuses at join
            "executions": 4 if malicious else 3,
            # the provisioned lower bound on the global pairs (each party's join check uses
            # it, never its own counts): the true product rounded down to a power of two
            "min_pairs": 1 << (pairs.bit_length() - 1) if malicious else 0,
        }
        self.policy = fhauc.Policy(**(defaults | policy))
        self.holder = fhauc.KeyHolder(self.names[0], self.ids[self.names[0]], self.roster)
        self.public, self.bundles = self.holder.provision(self.policy)
        self.agg = fhauc.Aggregator()
        self.agg.receive_setup(self.public)
        self.parties = []
        for n, (s, y) in zip(self.names, self.data):
            p = fhauc.Party(n, self.ids[n], self.roster, self.names[0], s, y)
            p.receive_bundle(self.bundles[n])
            self.parties.append(p)
        self.by_name = {p.name: p for p in self.parties}
        self.n_points, self.security, self.splits = n_points, mode, splits
        self.new_session()

    def new_session(self, agg=None):
        agg = agg or self.agg
        self.config = agg.start_session(self.names, self.n_points, security=self.security,
                                        splits=self.splits)  # fmt: skip
        self.joins = {p.name: p.join(self.config) for p in self.parties}
        self.start = agg.collect_joins(self.joins)
        self._uploads = None
        return self.config

    def uploads(self):
        if self._uploads is None:
            self._uploads = {p.name: p.upload(self.start) for p in self.parties}
        return dict(self._uploads)

    def result(self):
        return self.agg.handle_uploads(self.uploads())


def test_hand_wired_roles_agree_with_reference(rng):
    d = Deployment(rng)
    result = d.result()
    aucs = [p.finish(result).auc for p in d.parties]
    assert aucs == pytest.approx([privfl.binned_auc(d.data, d.n_points)] * 3, abs=TOL)


def test_aggregator_holds_no_secret_key_and_cannot_decrypt_uploads(rng):
    d = Deployment(rng)
    assert not d.agg.context.is_private
    msg = fhauc.PartyUpload.from_bytes(d.uploads()["p0"], d.agg.config.session, d.roster)
    up = msg.open(d.agg.context, 1, 0, 40, 0)[0]  # one joint ciphertext: T and F
    with pytest.raises(DecryptionNotPermittedError):
        d.agg.context.decrypt(up.t[0])


def test_message_from_another_session_is_rejected(rng):
    d = Deployment(rng)
    stale = d.uploads()
    d.new_session()  # new session id
    with pytest.raises(WrongSessionError):
        d.agg.handle_uploads(stale)


def test_message_from_another_protocol_or_step_is_rejected(rng):
    d = Deployment(rng)
    ups = d.uploads()
    with pytest.raises(UnexpectedStepError):
        d.agg.handle_uploads(ups | {"p0": d.config})
    foreign = ups["p0"].replace(b"fhauc", b"dpauc", 1)
    with pytest.raises(WrongProtocolError):
        d.agg.handle_uploads(ups | {"p0": foreign})


@pytest.mark.parametrize("cut", [0, 3, 20, 200, 100_000])
def test_truncated_upload_raises_malformed(rng, cut):
    d = Deployment(rng)
    ups = d.uploads()
    with pytest.raises(MalformedMessageError):
        d.agg.handle_uploads(ups | {"p0": ups["p0"][:cut]})


def test_trailing_garbage_is_rejected(rng):
    d = Deployment(rng)
    ups = d.uploads()
    with pytest.raises(MalformedMessageError, match="trailing"):
        d.agg.handle_uploads(ups | {"p0": ups["p0"] + b"x"})


def test_missing_or_duplicated_upload_is_rejected(rng):
    d = Deployment(rng)
    ups = d.uploads()
    with pytest.raises(ProtocolError, match="no upload from"):
        d.agg.handle_uploads({k: v for k, v in ups.items() if k != "p2"})
    with pytest.raises(UnknownPartyError, match="arrived as"):
        d.agg.handle_uploads(ups | {"p1": ups["p0"]})


def test_truncated_reply_is_rejected_by_parties(rng):
    d = Deployment(rng)
    result = d.result()
    with pytest.raises(MalformedMessageError):
        d.parties[0].finish(result[:-10])


def test_bundle_from_an_impostor_key_holder_is_rejected(rng):
    d = Deployment(rng)
    mallory = keywrap.IdentityKey()
    roster = dict(d.roster)
    roster["p0"] = mallory.public_bytes  # mallory's own view of the roster
    fake = fhauc.KeyHolder("p0", mallory, roster)
    _, fake_bundles = fake.provision(d.policy)
    victim = fhauc.Party("p1", d.ids["p1"], d.roster, "p0")
    with pytest.raises(UnknownPartyError):
        victim.receive_bundle(fake_bundles["p1"])


def test_config_naming_unknown_party_is_rejected(rng):
    d = Deployment(rng)
    with pytest.raises(UnknownPartyError):
        d.agg.start_session([*d.names, "stranger"], 10)


def test_keys_provisioned_for_small_n_refuse_larger_n(rng):
    d = Deployment(rng, n_points=50)
    with pytest.raises(InputError, match="would refuse"):
        d.agg.start_session(d.names, 1000)


def test_custom_aggregator_subclass_is_used(rng):
    calls = []

    class Counting(fhauc.Aggregator):
        def aggregate(self, uploads):
            calls.append([u.sender for u in uploads])
            return super().aggregate(uploads)

    parties = make_parties(rng, 3, 50)
    res = privfl.federated_auc(parties, 20, aggregator=Counting())
    assert calls == [["party-0", "party-1", "party-2"]]
    assert res.auc == pytest.approx(privfl.binned_auc(parties, 20), abs=TOL)


def reachable(obj, seen=None):
    """Every object reachable from ``obj`` through attributes, containers and dataclasses."""
    seen = set() if seen is None else seen
    if id(obj) in seen or isinstance(obj, str | int | float | bool | type(None)):
        return
    seen.add(id(obj))
    yield obj
    children = []
    if isinstance(obj, dict):
        children = [*obj.keys(), *obj.values()]
    elif isinstance(obj, list | tuple | set | frozenset):
        children = list(obj)
    elif hasattr(obj, "__dict__") and not isinstance(obj, type):
        children = list(vars(obj).values())
    for child in children:
        yield from reachable(child, seen)


def test_roles_hold_only_their_own_secrets(rng):
    d = Deployment(rng)
    seed = d.parties[0]._seed
    privates = {n: k.private_bytes() for n, k in d.ids.items()}

    def secrets_in(role):
        found = set()
        for o in reachable(role):
            if isinstance(o, fhauc.Party.__mro__[0]) and o is not role:
                found.add("another party object")
            if isinstance(o, keywrap.IdentityKey):
                found.add(next(n for n, b in privates.items() if b == o.private_bytes()))
            if isinstance(o, bytes) and o == seed:
                found.add("seed")
            if getattr(o, "is_private", False):
                found.add("ckks secret key")
        return found

    assert secrets_in(d.agg) == set()  # no seed, no identity key, no CKKS secret key
    for p in d.parties:
        assert secrets_in(p) == {p.name, "seed", "ckks secret key"}
    assert secrets_in(d.holder) == {"p0"}  # it generated keys but keeps none of them


def test_an_upload_at_another_scale_is_malformed_and_names_its_sender(rng):
    d = Deployment(rng)
    ups = d.uploads()
    msg = fhauc.PartyUpload.from_bytes(ups["p1"], d.agg.config.session, d.roster)
    ctx = d.parties[1].keys._ctx()
    odd = ctx.encrypt(np.ones(4), 30).to_bytes()  # scale 2^30 instead of 2^40
    executions = (((odd,), msg.executions[0][1], msg.executions[0][2]),)
    # signed by p1 itself: a member that uploads at the wrong scale
    forged = fhauc.PartyUpload(msg.session, "p1", msg.transcript, executions).seal(d.ids["p1"])
    with pytest.raises(MalformedMessageError, match=r"upload from p1.*scale"):
        d.agg.handle_uploads(ups | {"p1": forged})


def test_missing_state_is_a_protocol_error_not_an_assertion(rng):
    agg = fhauc.Aggregator()
    with pytest.raises(ProtocolError, match="public setup"):
        agg.start_session(["a"], 10)
    d = Deployment(rng)
    fresh = fhauc.Aggregator()
    fresh.receive_setup(d.public)
    with pytest.raises(ProtocolError, match="no session"):
        fresh.collect_joins({})
    with pytest.raises(ProtocolError, match="no session"):
        fresh.handle_uploads({})
    party = fhauc.Party("p0", d.ids["p0"], d.roster, "p0")
    with pytest.raises(ProtocolError, match="no key bundle"):
        party.join(d.config)


def test_timings_and_traffic_have_the_same_fields_in_every_mode(rng):
    """Typed measurements (issue 27): a field that does not apply to a mode is 0, never
    missing, so code reading ``res.timings[...]`` works whatever the keys and variant."""
    from privfl.evaluation.fhauc.measures import Timings, Traffic

    parties = make_parties(rng, 2, 100)
    res = privfl.federated_auc(parties, 5)
    assert isinstance(res.timings, Timings) and isinstance(res.bytes, Traffic)
    assert list(res.timings) == [f.name for f in dataclasses.fields(Timings)]
    assert list(res.bytes) == [f.name for f in dataclasses.fields(Traffic)]
    assert res.timings["party_keygen"] == 0.0 and res.bytes["party_upload"] > 0
    assert json.loads(json.dumps(res.to_dict()))["bytes"]["reveal"] == 0
    with pytest.raises(KeyError):
        res.timings["nonexistent"]
