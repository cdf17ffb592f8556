"""Partially encrypted federated training (SmartCryptNN, issue 17).

Real threshold-CKKS ciphertexts on the ``"test"`` parameter set (same depth, scale, flooding
and protocol as ``"secure"``, insecure ring 2^12: fast), a tiny model 6-5-4 and few steps.
Tolerance against the numpy twin: 1e-3 on every weight. The encrypted layer's arithmetic
agrees to ~1e-9; what remains is the flooding noise of the joint decryptions (the revealed
weights, and e_T fed into the plaintext backward pass), ~1e-5 per slot here.
"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("openfhe")

import contextlib
import time

import privfl
from privfl.crypto.threshold import BootstrapRequest
from privfl.errors import InputError, ProtocolError
from privfl.training.federated import _build, _range_check
from privfl.training.messages import GlobalPlainLayers
from privfl.training.packing import LayerLayout, chebyshev_sigmoid
from privfl.training.party import SigmoidRangeError
from privfl.training.result import RoundMetrics
from privfl.training.twin import Schedule, _twin_batch, initial_model, train_twin

TOLERANCE = 1e-3
LAYERS = (6, 5, 4)


def _parties(rows: int, count: int = 2) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(rows)  # not secret: test data
    out = [(rng.uniform(0, 1, (rows, 6)), rng.integers(0, 4, rows)) for _ in range(count)]
    out[0][1][:4] = np.arange(4)  # every class occurs somewhere (validated)
    return out


def _run(parties, **kw):
    args = dict(layers=LAYERS, encrypted_layers=1, epochs=1, batch_size=4, learning_rate=1.0)
    args.update(kw)
    return privfl.train_federated(parties, parameters="test", **args)


def _max_diff(res, twin) -> float:
    mine = [*res.plain_weights, *res.secret_weights, *res.plain_biases, *res.secret_biases]
    ref = [*twin.weights, *twin.biases]
    return max(float(np.max(np.abs(a - b))) for a, b in zip(mine, ref, strict=True))


@pytest.fixture(scope="module")
def epoch_run():
    """Two parties, 8 rows each, batch 4: one epoch is two steps per party and one round."""
    parties = _parties(8)
    return parties, _run(parties, reveal=True)


def test_chebyshev_twin_matches_openfhe_interpolant_within_its_error():
    z = np.linspace(-10, 10, 401)
    assert np.max(np.abs(chebyshev_sigmoid(z) - 1 / (1 + np.exp(-z)))) < 1e-2


def test_packing_round_trips_weights_and_places_outputs():
    lay = LayerLayout(20, 10, 10)
    assert lay.slots == 8192 and len(lay.rotation_steps) == 18
    w, b = np.arange(200.0).reshape(10, 20), np.arange(10.0)
    w2, b2 = lay.unpack_weights(lay.pack_weights(w, b))
    assert np.array_equal(w, w2) and np.array_equal(b, b2)
    y = np.eye(10)[:3]
    assert np.array_equal(lay.unpack_outputs(lay.pack_outputs(y), 3), y)


def test_one_step_decrypted_weights_agree_with_the_numpy_twin():
    """Party 0's model after its first mini-batch (real ciphertexts, jointly decrypted)."""
    parties = _parties(4)
    sched = Schedule(LAYERS, 1, 1, 1, 4, 1.0, 0)
    session, _, _ = _build(parties, sched, "test")
    session.send_model(0)
    party = session.parties[0]
    (idx,) = party.batches(0)
    session.train_batch(party, 0, 0, 0)
    ((w_secret, b_secret),) = session.reveal(party)
    twin = initial_model(sched)
    x, y = parties[0]
    _twin_batch(twin, sched, x[idx], np.eye(4)[y[idx]], chebyshev_sigmoid)
    w_plain, b_plain = party.plain_layers()
    mine = [*w_plain, w_secret, *b_plain, b_secret]
    ref = [*twin.weights, *twin.biases]
    assert max(float(np.max(np.abs(a - b))) for a, b in zip(mine, ref, strict=True)) < TOLERANCE


def test_one_epoch_decrypted_weights_agree_with_the_numpy_twin(epoch_run):
    parties, res = epoch_run
    twin = train_twin(res.schedule, parties)
    assert _max_diff(res, twin) < TOLERANCE
    # predictions: on the revealed model and by the joint protocol agree with the twin's
    x = np.concatenate([p[0] for p in parties])
    assert np.array_equal(res.predict(x), twin.predict(x))


def test_two_encrypted_layers_agree_with_the_numpy_twin_and_predict_jointly():
    """The last two layers encrypted (five bootstraps and one decryption per batch)."""
    rng = np.random.default_rng(3)  # not secret: test data
    parties = [(rng.uniform(0, 1, (4, 6)), rng.integers(0, 3, 4)) for _ in range(2)]
    res = _run(parties, layers=(6, 5, 4, 3), encrypted_layers=2, reveal=True, evaluate_every=0)
    twin = train_twin(res.schedule, parties)
    assert len(res.secret_weights) == 2 and _max_diff(res, twin) < TOLERANCE
    hidden = privfl.TrainingResult(**{**res.__dict__, "secret_weights": None,
                                      "secret_biases": None})  # fmt: skip
    x = parties[0][0]
    assert np.array_equal(hidden.predict(x), twin.predict(x))


def test_joint_prediction_without_reveal_matches_the_revealed_model(epoch_run):
    parties, res = epoch_run
    hidden = privfl.TrainingResult(**{**res.__dict__, "secret_weights": None,
                                      "secret_biases": None})  # fmt: skip
    assert not hidden.revealed
    with pytest.raises(InputError, match="not revealed"):
        _ = hidden.model
    x = np.concatenate([p[0] for p in parties])
    assert np.array_equal(hidden.predict(x), res.predict(x))


def test_result_reports_rounds_time_and_bytes_per_role(epoch_run):
    _, res = epoch_run
    (row,) = res.history
    assert row.loss is not None and 0 <= row.accuracy <= 1 and row.max_abs_u < 10
    assert set(res.role_seconds) == {"server", "party-0", "party-1"}
    assert all(v["sent"] > 0 and v["received"] > 0 for v in res.role_bytes.values())
    assert res.per_epoch()["bytes_per_batch"] > 0 and res.setup_bytes > 0
    assert res.to_dict()["encrypted_layers"] == 1


def test_baseline_without_encrypted_layers_is_plain_fedavg_and_equals_the_twin():
    parties = _parties(8)
    res = _run(parties, encrypted_layers=0, epochs=2)
    twin = train_twin(res.schedule, parties)
    for a, b in zip(res.model.weights, twin.weights, strict=True):
        assert np.allclose(a, b, atol=1e-12)


@pytest.mark.parametrize(
    ("kw", "reason"),
    [
        ({"encrypted_layers": 3}, "has 2 layers"),
        ({"encrypted_layers": 3, "layers": (6, 5, 4, 3)}, "at most the last two layers"),
        ({"epochs": 3, "rounds": 2}, "rounds must divide epochs"),
        ({"sigmoid_range": (-0.05, 0.05)}, "outside the sigmoid range"),
        ({"sigmoid_degree": 119}, "too few levels"),
        ({"parameters_kind": "fast"}, "parameters must be"),
    ],
)
def test_bad_settings_are_refused_before_training(kw, reason):
    kind = kw.pop("parameters_kind", "test")
    args = dict(layers=LAYERS, encrypted_layers=1, epochs=1, batch_size=4, learning_rate=1.0)
    args.update(kw)
    with pytest.raises(InputError, match=reason):
        privfl.train_federated(_parties(4), parameters=kind, **args)


def test_too_few_levels_are_refused_before_any_threshold_context(monkeypatch):
    """The level budget is checked with the other settings, before the threshold context
    (on the secure ring: seconds of CPU and a throwaway key generation) or any key exists."""
    from privfl.crypto.threshold import ThresholdContext

    def built(*_args):
        raise AssertionError("a threshold context was built for settings that cannot run")

    monkeypatch.setattr(ThresholdContext, "for_parameters", classmethod(built))
    start = time.process_time()
    with pytest.raises(InputError, match="too few levels"):
        privfl.train_federated(
            _parties(4), layers=LAYERS, encrypted_layers=1, epochs=1, batch_size=4,
            learning_rate=1.0, sigmoid_degree=119, parameters="secure",
        )  # fmt: skip
    assert time.process_time() - start < 1.0


def test_a_pre_activation_leaving_the_range_is_raised_or_reported():
    sched = Schedule(LAYERS, 1, 1, 1, 4, 1.0, 0)
    row = RoundMetrics(1, 1, 0.1, 0.5, 12.5, 0.3, 1.0)
    with pytest.raises(SigmoidRangeError, match="outside the sigmoid range"):
        _range_check(row, sched, "raise", [])
    warnings: list[str] = []
    _range_check(row, sched, "warn", warnings)
    assert warnings and "12.50" in warnings[0]


def test_mutated_training_messages_raise_typed_errors_only(epoch_run):
    _, res = epoch_run
    session = res._session
    plain, _ = session.server.global_model(1)
    data = plain.to_bytes()
    rng = np.random.default_rng(7)  # not secret: fuzzing
    shapes = session.server.shapes
    for _ in range(300):
        raw = bytearray(data)
        cut = int(rng.integers(0, len(raw)))
        if rng.random() < 0.3:
            raw = raw[:cut]
        else:
            raw[cut] ^= 1 << int(rng.integers(0, 8))
        with contextlib.suppress(ProtocolError):
            GlobalPlainLayers.from_bytes(bytes(raw), plain.session, 1, shapes)
    with pytest.raises(ProtocolError):
        GlobalPlainLayers.from_bytes(data, plain.session, 2, shapes)  # stale round
    party = session.parties[0]
    request = party.crypto.start_bootstrap(party._secret[0])
    blob = request.to_bytes()
    for _ in range(40):
        raw = bytearray(blob)
        cut = int(rng.integers(0, 200))
        raw[cut] ^= 0xFF
        with contextlib.suppress(ProtocolError):
            BootstrapRequest.from_bytes(bytes(raw), party.crypto.context, party.session)
