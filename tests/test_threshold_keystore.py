"""OpenFHE keeps evaluation keys in process-global stores that never free an entry by
themselves; privfl's key store (:mod:`privfl.threshold.keystore`) removes a key set when the
last role holding it is gone, and keeps every other key set usable. Real keys and
ciphertexts on the fast ``test`` ring."""

import gc

import numpy as np

from test_threshold_support import require_openfhe_for_tests

openfhe = require_openfhe_for_tests()

import privfl  # noqa: E402
from privfl.crypto.threshold import parameter_set  # noqa: E402
from privfl.evaluation.fhauc.threshold import ops as threshold_ops  # noqa: E402
from privfl.runner import InProcessRunner  # noqa: E402
from privfl.threshold import keystore, make_roles, run_joint_decryption, run_key_generation  # noqa: E402

PARAMS = parameter_set("test")
SLOTS = PARAMS.batch_size
BOUND = PARAMS.decryption_error_bound(2)


def key_set():
    server, parties = make_roles(PARAMS, 2)
    run_key_generation(server, parties, InProcessRunner())
    return server, parties


def installed(cc, tag):
    try:
        cc.GetEvalMultKeyVector(tag)
    except RuntimeError:
        return False
    return True


def test_a_finished_key_set_leaves_openfhes_stores_and_the_others_stay_usable():
    kept_server, kept_parties = key_set()
    server, parties = key_set()
    cc, kept, gone = server.context.cc, kept_server.tag, server.tag
    assert {kept, gone} <= keystore.held_tags()
    assert installed(cc, gone) and installed(cc, kept)

    del server, parties
    gc.collect()
    assert gone not in keystore.held_tags()
    assert not installed(cc, gone)  # fails without the key store: OpenFHE kept the keys
    # the kept key set was cleared and re-inserted: it still relinearises and rotates
    assert installed(cc, kept)
    x = np.random.default_rng(1).uniform(-1, 1, SLOTS)  # not secret: test data
    ct = kept_server.encrypt(x)
    out = run_joint_decryption(
        kept_parties[0], kept_parties, (ct * ct).rotate(1), InProcessRunner(), SLOTS
    )
    assert np.max(np.abs(out - np.roll(x * x, -1))) < 4 * BOUND


def test_threshold_sessions_in_one_process_leave_no_keys_behind(monkeypatch):
    monkeypatch.setattr(threshold_ops, "FHAUC_PARAMETER_SET", "fhauc-test")
    rng = np.random.default_rng(2)  # not secret: test data
    gc.collect()
    before = keystore.held_tags()
    for _ in range(2):
        y = [(rng.random(200) < 0.4).astype(np.int8) for _ in range(2)]
        parties = [(np.clip(rng.normal(0.4 + 0.2 * t, 0.2), 0, 1), t) for t in y]
        res = privfl.federated_auc(parties, 20, keys="threshold", security="malicious")
        assert abs(res.auc - privfl.binned_auc(parties, 20)) < 1e-6
        gc.collect()
        assert keystore.held_tags() == before


def test_a_lease_released_early_is_not_released_again_at_collection():
    server, parties = key_set()
    tag = server.tag
    leases = [keystore.install(server.context, tag, _unused, None, _Owner()) for _ in range(2)]
    for lease in leases:
        lease.release()
        lease.release()
    assert tag in keystore.held_tags()  # the roles' own leases still hold it
    del server, parties
    gc.collect()
    assert tag not in keystore.held_tags()


class _Owner:
    pass


def _unused():
    raise AssertionError("the key set is installed already: nothing is rebuilt")
