"""privfl.crypto.parallel: the thread map that spreads DT-PKC packs over cores gives the
same results, in order, as a plain loop, raises what an item raises, and validates its
thread count."""

import secrets

import gmpy2
import pytest

from privfl.crypto import dtpkc
from privfl.crypto.parallel import default_threads, thread_map
from privfl.errors import InputError


def test_thread_map_equals_a_loop_in_order_on_big_integer_work():
    n = gmpy2.mpz(secrets.randbits(1024)) | 1
    items = [
        (gmpy2.mpz(secrets.randbits(1000)), gmpy2.mpz(secrets.randbits(1000))) for _ in range(9)
    ]

    def work(pair):
        return gmpy2.powmod(pair[0], pair[1], n)

    assert thread_map(work, items, 3) == [work(p) for p in items] == thread_map(work, items, 1)


def test_thread_map_raises_an_items_error():
    def fail_on_three(x):
        if x == 3:
            raise InputError("three")
        return x

    with pytest.raises(InputError, match="three"):
        thread_map(fail_on_three, list(range(6)), 2)


def test_dtpkc_decryptions_in_threads_are_the_loops():
    prm, _ = dtpkc.generate_system(512, allow_insecure_key_bits=True)
    sk = dtpkc.new_key_pair(prm)
    cts = [dtpkc.encrypt(sk.public, m) for m in range(-4, 5)]
    assert thread_map(lambda c: dtpkc.decrypt(sk, c), cts, 2) == list(range(-4, 5))


def test_the_thread_count_can_be_set_and_is_validated(monkeypatch):
    monkeypatch.setenv("PRIVFL_DTPKC_THREADS", "1")
    assert default_threads() == 1
    for bad in ("0", "-1", "x", "65"):
        monkeypatch.setenv("PRIVFL_DTPKC_THREADS", bad)
        with pytest.raises(InputError):
            default_threads()
    monkeypatch.delenv("PRIVFL_DTPKC_THREADS")
    assert 1 <= default_threads() <= 8
