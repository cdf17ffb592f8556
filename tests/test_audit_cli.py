"""The audit's boundaries: arguments checked against the model before any training, results
as frozen dataclasses, and ``audit recommend`` refusing what it cannot merge (issue 14
finding 14, issue 15 item 9)."""

import dataclasses
import json
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from privfl.audit import data as audit_data
from privfl.audit.inversion import model_inversion
from privfl.audit.recommend import recommend_from_results, recommend_layers
from privfl.cli import app
from privfl.errors import InputError
from privfl.studies.audit import InversionAudit, MembershipAudit, membership_audit
from privfl.training.mlp import MLP

runner = CliRunner()


def _refused_quickly(args, reason, seconds=10.0):
    start = time.process_time()
    out = runner.invoke(app, args)
    elapsed = time.process_time() - start
    assert out.exit_code == 2, out.output
    assert reason in " ".join(out.output.split())
    assert "Traceback" not in out.output
    assert elapsed < seconds, f"refused only after {elapsed:.1f} s: after training?"


@pytest.mark.parametrize(
    "args, reason",
    [
        # the faces model is 4096-100-40: two layers; layer 3 used to cost 30 s of training
        (["audit", "inversion", "--exposed", "2,3"], "layers must be in 1..2"),
        (["audit", "inversion", "--exposed", "1,3"], "layers must be in 1..2"),
        (["audit", "inversion", "--classes", "0,40"], "classes must be training classes"),
        (["audit", "inversion", "--steps", "0"], "steps (--steps) must be an integer >= 1"),
        (["audit", "inversion", "--seed", "-1"], "seed must be a non-negative integer"),
        (["audit", "property", "--layers", "4"], "layers must be in 1..3"),
        (["audit", "property", "--batches", "1"], "batches (--batches) must be an integer >= 2"),
        (["audit", "membership", "--seed", "-1"], "seed must be a non-negative integer"),
        (["audit", "membership", "--layers", "4"], "layers must be in 1..3"),
    ],
)
def test_audit_arguments_are_checked_before_training(args, reason):
    _refused_quickly(args, reason)


@pytest.mark.parametrize(
    "command, option",
    [
        ("membership", "--json-out"),
        ("membership", "--plot"),
        ("inversion", "--json-out"),
        ("inversion", "--plot"),
        ("property", "--json-out"),
    ],
)
def test_audit_output_paths_are_checked_before_training(tmp_path, command, option):
    missing = str(tmp_path / "no" / "such" / "out.file")
    _refused_quickly(["audit", command, option, missing], "does not exist", seconds=5.0)


def test_model_inversion_refuses_a_layer_the_model_lacks_even_without_layer_one():
    model = MLP([4, 3, 2], seed=0)
    x, y = audit_data.digits8x8().x_members[:4, :4], [0, 1, 0, 1]
    with pytest.raises(InputError, match=r"layers must be in 1\.\.2"):
        model_inversion([(1, model)], x, y, exposed=[2, 3])
    with pytest.raises(InputError, match="classes"):
        model_inversion([(1, model)], x, y, exposed=[1], classes=[5])


def test_audits_return_frozen_results_whose_json_keeps_its_keys():
    res = membership_audit("digits8x8", runs=1, attack_epochs=2, layers=[3])
    assert isinstance(res, MembershipAudit) and res.model.sizes == (64, 30, 20, 10)
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.seconds = 0.0  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.layers[0].accuracy = 1.0  # type: ignore[misc]
    d = res.to_dict()
    assert set(d) == {
        "attack", "dataset", "description", "model", "members", "non_members",
        "train_accuracy", "test_accuracy", "attack_epochs", "layers", "over_training", "seconds",
    }  # fmt: skip
    assert d["model"]["sizes"] == [64, 30, 20, 10] and {r["layer"] for r in d["layers"]} == {3}
    assert recommend_layers(res.layers, 1.0) == [1, 2, 3]  # layers 1, 2 not attacked: not safe
    json.dumps(d)


def test_inversion_audit_result_is_typed_and_not_possible_without_layer_one():
    from privfl.studies.audit import inversion_audit

    res = inversion_audit("digits8x8", every=0, classes=[0, 1], exposed=[2, 3], steps=3)
    assert isinstance(res, InversionAudit) and res.result == "not possible in this setting"
    assert res.snapshots == () and res.exposed_layers == (2, 3)
    assert res.to_dict()["exposed_layers"] == [2, 3]


def _result(path, sizes, rows, dataset="digits8x8"):
    path.write_text(json.dumps({"dataset": dataset, "model": {"sizes": sizes}, "layers": rows}))
    return str(path)


def test_recommend_refuses_results_of_different_models(tmp_path):
    rows = [{"layer": 1, "features": "output", "accuracy": 0.6}]
    a = _result(tmp_path / "a.json", [4, 3, 2], rows)
    b = _result(tmp_path / "b.json", [4, 5, 2], rows)  # same depth, other model
    c = _result(tmp_path / "c.json", [4, 3, 2], rows, dataset="location")
    for other in (b, c):
        out = runner.invoke(app, ["audit", "recommend", a, other])
        assert out.exit_code == 2 and "different models" in " ".join(out.output.split())
    out = runner.invoke(app, ["audit", "recommend", a, a, "--json"])
    assert out.exit_code == 0 and json.loads(out.stdout)["model_sizes"] == [4, 3, 2]


@pytest.mark.parametrize("limit", ["2", "0.5", "0.3", "-1", "nan"])
def test_recommend_refuses_a_max_leakage_outside_half_to_one(tmp_path, limit):
    path = _result(tmp_path / "a.json", [4, 3, 2], [{"layer": 1, "accuracy": 0.6}])
    out = runner.invoke(app, ["audit", "recommend", path, "--max-leakage", limit])
    assert out.exit_code == 2 and "(0.5, 1]" in " ".join(out.output.split())
    with pytest.raises(InputError, match=r"\(0\.5, 1\]"):
        recommend_layers([{"layer": 1, "accuracy": 0.6}], float(limit))


@pytest.mark.parametrize(
    "payload, reason",
    [
        ({"layers": [{"layer": 1, "accuracy": 0.6}]}, "no model sizes"),
        ({"model": {"sizes": [4, 3, 2]}, "layers": [{"layer": 3, "accuracy": 0.6}]}, "1..2"),
        ({"model": {"sizes": [4, 3, 2]}, "layers": [{"layer": 1, "accuracy": "x"}]}, "[0, 1]"),
        ({"model": {"sizes": [4, 3, 2]}, "layers": [{"layer": 1}]}, "accuracy"),
        ({"model": {"sizes": [4, 3, 2]}, "layers": [7]}, "must be an object"),
    ],
)
def test_recommend_refuses_malformed_results_with_a_reason(tmp_path, payload, reason):
    path = tmp_path / "r.json"
    path.write_text(json.dumps(payload))
    out = runner.invoke(app, ["audit", "recommend", str(path)])
    assert out.exit_code == 2 and reason in " ".join(out.output.split()), out.output
    with pytest.raises(InputError):
        recommend_from_results([("r.json", payload)])


def test_recommend_json_is_plain_json_on_stdout_and_json_out_writes_it(tmp_path):
    rows = [{"layer": 1, "accuracy": 0.5}, {"layer": 2, "accuracy": 0.8}]
    path = _result(tmp_path / "a.json", [4, 3, 2], rows)
    out = runner.invoke(
        app, ["audit", "recommend", path, "--json", "--json-out", str(tmp_path / "o.json")]
    )
    assert out.exit_code == 0, out.output
    assert "\x1b[" not in out.stdout  # no terminal colour codes
    res = json.loads(out.stdout)
    assert res == json.loads((tmp_path / "o.json").read_text())
    assert res["encrypt_layers"] == [2] and res["worst_accuracy_per_layer"] == {"1": 0.5, "2": 0.8}
    out = runner.invoke(app, ["audit", "recommend", path])
    assert "encrypt layers [2] of 2" in out.stdout


# ------------------------------------------------------- new-user review: --model files
def _not_a_model(kind, path):
    import numpy as np

    if kind == "text":
        path.write_text("weights: 1 2 3\n")
    elif kind == "random bytes":
        path.write_bytes(bytes(range(256)) * 8)
    elif kind == "npy":
        with open(path, "wb") as fh:
            np.save(fh, np.arange(3))
    elif kind == "pickled object":
        with open(path, "wb") as fh:
            np.savez(fh, format=np.array([{"a": 1}], dtype=object))
    elif kind == "other npz":
        with open(path, "wb") as fh:
            np.savez(fh, a=np.arange(3))


@pytest.mark.parametrize("kind", ["text", "random bytes", "npy", "pickled object", "other npz"])
def test_a_file_that_is_no_privfl_model_is_refused_without_pickle_advice(tmp_path, kind):
    # a text or random file printed numpy's "allow_pickle" advice; a .npy file a traceback
    path = tmp_path / "model.npz"
    _not_a_model(kind, path)
    out = runner.invoke(app, ["audit", "membership", "--model", str(path)])
    assert out.exit_code == 2, out.output
    text = " ".join(out.output.split())
    assert "is not a privfl model (the .npz file written by 'privfl train --model-out')" in text
    assert "allow_pickle" not in text and "Traceback" not in text


def test_a_layer_the_model_file_keeps_encrypted_is_named_as_encrypted(tmp_path):
    # "--layers 2" on a 64-5-10 model with its last layer encrypted said "layers must be in
    # 1..1 (1-based, 1 = output)": layer 1 is not the output, layer 2 is encrypted
    import numpy as np

    from privfl.training.result import write_model
    from privfl.training.twin import Schedule

    rng = np.random.default_rng(0)  # not secret: test weights
    model = tmp_path / "m.npz"
    sched = Schedule((64, 5, 10), 1, 1, 1, 10, 1.0, 0)
    write_model(
        model, sched, [(rng.random((5, 64)), rng.random(5))], False, "digits8x8",
        np.arange(10), np.arange(10, 30),
    )  # fmt: skip
    _refused_quickly(
        ["audit", "membership", "--model", str(model), "--layers", "2"],
        "--layers 2: layer(s) [2] of",
    )
    _refused_quickly(
        ["audit", "membership", "--model", str(model), "--layers", "3"],
        "exposes layers 1..1 of 2 (1-based, 2 = output)",
    )
    _refused_quickly(["audit", "inversion", "--exposed", "3"], "--exposed 3: layers must be")


def _model_zip(path, entries):
    """A model-shaped .npz written entry by entry: ``entries`` maps a name to an array, or to
    a shape whose header alone is written (a file that declares more than it holds)."""
    import io
    import zipfile

    with zipfile.ZipFile(path, "w") as archive:
        for name, value in entries.items():
            buf = io.BytesIO()
            if isinstance(value, tuple):
                header = {"descr": "<f8", "fortran_order": False, "shape": value}
                np.lib.format.write_array_header_1_0(buf, header)
            else:
                np.save(buf, value)
            archive.writestr(f"{name}.npy", buf.getvalue())


def _privfl_entries(**changed):
    from privfl.training.result import MODEL_FORMAT

    rng = np.random.default_rng(0)  # not secret: test weights
    entries = {
        "format": np.array(MODEL_FORMAT), "sizes": np.array([64, 5, 10]),
        "encrypted_layers": np.array(1), "revealed": np.array(False),
        "w1": rng.random((5, 64)), "b1": rng.random(5), "members": np.arange(10),
        "non_members": np.arange(10, 30), "dataset": np.array("digits8x8"),
    }  # fmt: skip
    return {**entries, **changed}


@pytest.mark.parametrize(
    ("changed", "reason"),
    [
        # a 10^7 x 10^7 array declared in a few bytes: numpy allocated before any check
        ({"w1": (10**7, 10**7)}, "declares more than"),
        ({"w1": np.full((5, 64), np.nan)}, "layer 1 is not finite"),  # traceback before
        ({"w1": np.ones((5, 64)) * 1j}, "not real numbers"),  # imaginary parts dropped before
        ({"non_members": np.arange(5, 25)}, "a row is listed twice"),  # accepted before
        ({"members": np.array([-1, 2])}, "row indices outside"),  # after 'started' before
    ],
)  # fmt: skip
def test_a_hostile_or_damaged_model_file_is_refused_before_any_work(tmp_path, changed, reason):
    path = tmp_path / "model.npz"
    _model_zip(path, _privfl_entries(**changed))
    start = time.process_time()
    out = runner.invoke(app, ["audit", "membership", "--model", str(path)])
    assert out.exit_code == 2, out.output
    text = " ".join(out.output.split())
    assert reason in text and "started" not in text and "Traceback" not in text
    assert time.process_time() - start < 5


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["membership", "--runs", "0"], "runs (--runs) must be an integer >= 1"),
        (["membership", "--attack-epochs", "0"], "attack_epochs (--attack-epochs) must be"),
        (["inversion", "--steps", "0"], "steps (--steps) must be an integer >= 1"),
        (["property", "--batches", "1"], "batches (--batches) must be an integer >= 2"),
    ],
)  # fmt: skip
def test_a_bad_count_is_refused_before_the_progress_line(args, reason):
    # the progress line said "started" and the refusal followed on a second line
    out = runner.invoke(app, ["audit", *args])
    assert out.exit_code == 2, out.output
    text = " ".join(out.output.split())
    assert reason in text and "started" not in text


def _valid_model_bytes() -> bytes:
    import tempfile

    from privfl.training.result import write_model
    from privfl.training.twin import Schedule

    rng = np.random.default_rng(0)  # not secret: test weights
    sched = Schedule((64, 5, 10), 1, 1, 1, 10, 1.0, 0)
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.npz"
        write_model(
            path, sched, [(rng.random((5, 64)), rng.random(5))], False, "digits8x8",
            np.arange(10), np.arange(10, 30),
        )  # fmt: skip
        return path.read_bytes()


VALID_MODEL = _valid_model_bytes()


@given(
    st.lists(st.tuples(st.integers(0, len(VALID_MODEL) - 1), st.integers(0, 255)), max_size=8),
    st.integers(1, len(VALID_MODEL)),
)
@settings(max_examples=150, deadline=None)
def test_load_model_refuses_mutated_files_in_bounded_time_and_memory(flips, keep):
    """Fuzz: a privfl model file with bytes changed and cut short is loaded or refused with
    InputError, nothing else, within 2 s of CPU and 64 MB of allocations."""
    import tempfile
    import tracemalloc

    from privfl.errors import InputError
    from privfl.training.result import load_model

    raw = bytearray(VALID_MODEL)
    for at, value in flips:
        raw[at] = value
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "m.npz"
        path.write_bytes(bytes(raw[:keep]))
        start = time.process_time()
        tracemalloc.start()
        try:
            load_model(path)
        except InputError:
            pass
        finally:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
    assert time.process_time() - start < 2.0
    assert peak < 64 << 20
