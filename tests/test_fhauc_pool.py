"""The aggregator's upload workers (issue 30): same checks, same sum, bit for bit."""

from types import SimpleNamespace

import numpy as np
import pytest

import privfl
from conftest import make_parties
from privfl.errors import InputError, ProtocolError, UnknownPartyError
from privfl.evaluation import fhauc
from privfl.evaluation.fhauc import aggregator as aggregator_module
from privfl.evaluation.fhauc.upload_pool import (
    MIN_PARALLEL_CIPHERTEXTS,
    default_workers,
    resolve_workers,
    shared_pool,
)

PARTIES = MIN_PARALLEL_CIPHERTEXTS + 2  # one joint ciphertext per party: above the crossover


class BothWays(fhauc.Aggregator):
    """Handles the same uploads with 2 workers, then in process; optionally tampered."""

    def __init__(self, tamper=None):
        super().__init__(workers=2)
        self.tamper = tamper or (lambda uploads: uploads)
        self.outcomes = []

    def handle_uploads(self, uploads):
        self.received = dict(uploads)
        uploads = self.tamper(dict(uploads))
        for workers in (2, 1):
            self.workers = workers
            try:
                self.outcomes.append(("ok", super().handle_uploads(uploads), self.worker_cpu))
            except ProtocolError as exc:
                self.outcomes.append((type(exc), str(exc), self.worker_cpu))
        self.workers = 2
        if self.outcomes[0][0] != "ok":
            raise self.outcomes[0][0](self.outcomes[0][1])
        return self.outcomes[0][1]


@pytest.fixture
def fixed_multiplier(monkeypatch):
    """The same c (inside the session's range) in both runs, so that the two results can be
    compared byte for byte."""
    monkeypatch.setattr(
        aggregator_module, "random_multiplier", lambda low, high: int(2 ** ((low + high) / 2))
    )


@pytest.fixture(scope="module")
def parties():
    return make_parties(np.random.default_rng(3), PARTIES, 40)  # not secret: test data


@pytest.fixture(scope="module")
def session(parties):
    """One honest session's aggregator (its state kept) and the uploads it received: each
    refusal test replays tampered copies through handle_uploads, both ways."""
    agg = BothWays()
    agg.result_auc = privfl.federated_auc(parties, 20, aggregator=agg).auc
    return agg


def test_pool_result_is_bit_identical_to_the_in_process_sum(fixed_multiplier, session, parties):
    session.outcomes = []
    session.handle_uploads(session.received)
    (s2, r2, cpu2), (s1, r1, cpu1) = session.outcomes
    assert s2 == s1 == "ok"
    assert r2 == r1
    assert cpu2 > 0 and cpu1 == 0.0  # the helper did its share
    assert session.result_auc == pytest.approx(privfl.binned_auc(parties, 20), abs=1e-9)


def test_pool_result_is_bit_identical_in_the_malicious_variant(fixed_multiplier):
    # K = 3 executions of two ciphertexts: 10 parties are 60 upload ciphertexts
    parties = make_parties(np.random.default_rng(4), 10, 40)  # not secret: test data
    agg = BothWays()
    res = privfl.federated_auc(parties, 20, security="malicious", aggregator=agg)
    (s2, r2, cpu2), (s1, r1, cpu1) = agg.outcomes
    assert s2 == s1 == "ok"
    assert r2 == r1
    assert cpu2 > 0 and cpu1 == 0.0
    assert res.auc == pytest.approx(privfl.binned_auc(parties, 20), abs=1e-6)


def swap_two(uploads):
    names = list(uploads)
    uploads[names[0]], uploads[names[1]] = uploads[names[1]], uploads[names[0]]
    return uploads


def flip_a_ciphertext_byte(uploads):
    name = list(uploads)[-1]
    data = bytearray(uploads[name])
    data[len(data) // 2] ^= 1  # inside the signed body: the signature no longer verifies
    uploads[name] = bytes(data)
    return uploads


def arrive_under_a_long_name(uploads):
    name = list(uploads)[-1]
    uploads["é" * 3000] = uploads.pop(name)  # 6 KB of UTF-8: longer than any message field
    return uploads


def arrive_under_a_name_longer_than_64_kb(uploads):
    # 80 KB of UTF-8 on the first upload (a helper's first grant): refused as a stranger,
    # as in process, not by the pipe's format
    return {"é" * 40_000 if k == 0 else n: v for k, (n, v) in enumerate(uploads.items())}


def arrive_under_an_unencodable_name(uploads):
    uploads["\udc80"] = uploads.pop(next(iter(uploads)))  # a lone surrogate: no UTF-8 for it
    return uploads


def drop_one(uploads):
    uploads.pop(list(uploads)[PARTIES // 2])
    return uploads


@pytest.mark.parametrize(
    "tamper, error",
    [
        (swap_two, UnknownPartyError),
        (flip_a_ciphertext_byte, ProtocolError),
        (drop_one, ProtocolError),
        (arrive_under_a_long_name, UnknownPartyError),
        (arrive_under_a_name_longer_than_64_kb, UnknownPartyError),
        (arrive_under_an_unencodable_name, UnknownPartyError),
    ],
)
def test_pool_refuses_what_the_in_process_checks_refuse(session, tamper, error):
    session.outcomes, session.tamper = [], tamper
    try:
        with pytest.raises(error):
            session.handle_uploads(session.received)
    finally:
        session.tamper = lambda uploads: uploads
    (kind2, msg2, _), (kind1, msg1, _) = session.outcomes
    assert kind2 is kind1 and issubclass(kind2, error)
    assert msg2 == msg1


def test_the_aggregators_own_chunk_refuses_a_type_error_as_the_helpers_do(session, monkeypatch):
    """SEAL may refuse to combine ciphertexts with a TypeError: the aggregator's own chunk
    turns it into the same typed refusal as its helpers (never a bare TypeError)."""
    from privfl.errors import MalformedMessageError
    from privfl.evaluation.fhauc import upload_pool

    def refuse(*args, **kwargs):
        raise TypeError("incompatible function arguments")

    monkeypatch.setattr(upload_pool, "sum_uploads", refuse)  # the aggregator's own chunk only
    session.outcomes = []
    with pytest.raises(MalformedMessageError, match="the uploads cannot be combined"):
        session.handle_uploads(session.received)


def test_pool_survives_a_refused_session_and_serves_the_next(session):
    session.outcomes, session.tamper = [], swap_two  # the module's session: no stale outcome
    try:
        with pytest.raises(UnknownPartyError):
            session.handle_uploads(session.received)
    finally:
        session.tamper = lambda uploads: uploads
    session.outcomes = []
    session.handle_uploads(session.received)
    assert [o[0] for o in session.outcomes] == ["ok", "ok"]
    assert session.worker_cpu == 0.0 and session.outcomes[0][2] > 0


def test_a_dead_helper_is_replaced_by_the_next_session(session):
    pool = shared_pool(2)
    pool._helpers[0].proc.kill()
    pool._helpers[0].proc.wait()
    session.outcomes = []
    session.handle_uploads(session.received)  # a fresh pool serves it
    assert session.outcomes[0][0] == "ok" and session.outcomes[0][2] > 0
    assert shared_pool(2) is not pool


def test_a_subclass_overriding_aggregate_still_gets_every_party(parties):
    seen = []

    class Counting(fhauc.Aggregator):
        def aggregate(self, uploads):
            seen.append(len(uploads))
            return super().aggregate(uploads)

    privfl.federated_auc(parties, 20, aggregator=Counting(workers=2))
    assert seen == [PARTIES]


@pytest.mark.parametrize("bad", [0, -1, 65, True, 2.0, "2"])
def test_workers_is_validated(bad):
    with pytest.raises(InputError, match="workers"):
        fhauc.Aggregator(workers=bad)


def test_default_workers_follows_the_usable_cores():
    assert resolve_workers(None) == default_workers()
    assert 1 <= default_workers() <= 8
    assert fhauc.Aggregator(workers=1).workers == 1


def test_helpers_get_the_public_context_at_key_setup_for_a_large_roster(monkeypatch):
    from privfl.crypto import keywrap

    warmed = []
    monkeypatch.setattr(
        aggregator_module, "shared_pool", lambda w: SimpleNamespace(warm=warmed.append)
    )
    names = [f"p{i}" for i in range(16)]
    ids = {n: keywrap.IdentityKey() for n in names}
    roster = {n: k.public_bytes for n, k in ids.items()}
    public, _ = fhauc.KeyHolder(names[0], ids[names[0]], roster).provision(fhauc.Policy())
    fhauc.Aggregator(workers=2).receive_setup(public)
    fhauc.Aggregator(workers=1).receive_setup(public)
    assert len(warmed) == 1  # once, for the aggregator with helpers


def two_refusals(first, second):
    """Upload ``first`` fails its signature, upload ``second`` arrives under another name:
    whichever process checks which, the refusal raised is the first one in arrival order."""

    def tamper(uploads):
        names = list(uploads)
        data = bytearray(uploads[names[first]])
        data[len(data) // 2] ^= 1
        uploads[names[first]] = bytes(data)
        out = {}
        for k, (name, value) in enumerate(uploads.items()):
            out["\udc80" if k == second else name] = value
        return out

    return tamper


@pytest.mark.parametrize("first, second", [(0, 40), (40, 0), (2, 3), (3, 2), (PARTIES - 1, 1)])
def test_the_first_refusal_in_arrival_order_is_raised_whoever_checked_it(session, first, second):
    # the helper's first grants are uploads 0 and 1, this process starts at upload 2
    session.outcomes, session.tamper = [], two_refusals(first, second)
    try:
        with pytest.raises(UnknownPartyError):
            session.handle_uploads(session.received)
    finally:
        session.tamper = lambda uploads: uploads
    (kind2, msg2, _), (kind1, msg1, _) = session.outcomes
    assert kind2 is kind1 is UnknownPartyError
    assert msg2 == msg1
    assert ("does not verify" in msg2) == (first < second)


def _queue_lane():
    from multiprocessing import Pipe

    helper_in, to_helper = Pipe(duplex=False)  # (reading end, writing end)
    from_helper, helper_out = Pipe(duplex=False)
    return (helper_in, helper_out), (from_helper, to_helper)


def _granted(conn, path_data):
    """The (index, name, bytes) of every grant waiting on ``conn``, up to its end."""
    from privfl.messages import Reader

    job = Reader(conn.recv_bytes())
    assert job.str_() == "sum"
    job.bytes_()
    path = job.bytes_().decode()
    got = []
    while True:
        r = Reader(conn.recv_bytes())
        if r.str_() == "end":
            return got
        index, count = r.u64(), r.u32()
        names = [r.bytes_().decode() for _ in range(count)]
        sizes = [r.u64() for _ in names]
        offset = r.u64()
        with open(path, "rb") as fh:
            fh.seek(offset)
            for k, (name, size) in enumerate(zip(names, sizes, strict=True)):
                got.append((index + k, name, fh.read(size)))
        path_data.append(path)


def test_the_shared_queue_adapts_the_split_to_how_fast_each_helper_asks():
    """Not equal halves: a helper that never asks for more gets only its first grants, a
    helper that asked twice gets two more; every upload is handed out once, in order, and
    a helper reads exactly the granted bytes from its memory file."""
    from privfl.evaluation.fhauc.upload_checks import UploadCheck
    from privfl.evaluation.fhauc.upload_queue import AHEAD, MORE, MemFile, SharedQueue

    items = [(f"p{k}", bytes([k]) * (100 + k)) for k in range(12)]
    for asks in (0, 2):
        (helper_in, helper_out), (from_helper, to_helper) = _queue_lane()
        file = MemFile()
        queue = SharedQueue(items, [(to_helper, from_helper, file)])
        queue.start(UploadCheck(b"s" * 16, {}, b"t" * 32, frozenset(), 1, (1, 0, 0), 40.0))
        for _ in range(asks):
            helper_out.send_bytes(MORE)
        own = list(queue.own(lambda name, data: int(name[1:])))
        helper_out.send_bytes(b"final answer")
        assert queue.finish() == [b"final answer"]
        paths = []
        granted = _granted(helper_in, paths)
        queue.close()
        file.close()
        assert len(granted) == AHEAD + asks
        assert [g[0] for g in granted] == list(range(AHEAD + asks))
        assert [(f"p{i}", data) for i, _, data in granted] == [items[i] for i, *_ in granted]
        assert own == list(range(AHEAD + asks, len(items)))  # this process took the rest
