"""One JSON Schema per command output (:mod:`privfl.cli.schemas`), checked against what the
commands print with ``--json`` (default settings except the sizes, real ciphertexts): the
training result and its history in both modes (plaintext and encrypted last layer), the four
audit commands (a model file with encrypted layers gives ``null`` accuracies, never NaN) and
``forest run``. The evaluation results' schemas are tested in tests/test_result_schemas.py."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from privfl.cli import app
from privfl.cli.schemas import NAMES, schema
from privfl.errors import InputError

jsonschema = pytest.importorskip("jsonschema")

runner = CliRunner()


def run_json(name: str, *args: str) -> dict:
    """Run ``privfl ARGS --json`` and check stdout is one JSON document valid under ``name``."""
    out = runner.invoke(app, [*args, "--json"])
    assert out.exit_code == 0, out.output
    document = json.loads(out.stdout)
    errors = sorted(jsonschema.Draft202012Validator(schema(name)).iter_errors(document), key=str)
    assert not errors, f"{name}: " + "; ".join(
        f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in errors[:5]
    )
    return document


def kinds(obj: dict) -> dict[str, str]:
    return {
        k: "null" if v is None else type(v).__name__.replace("int", "float") for k, v in obj.items()
    }


def test_every_cli_schema_is_valid_and_the_names_are_one_list():
    for name in NAMES:
        jsonschema.Draft202012Validator.check_schema(schema(name))
    assert "AUCResult" in NAMES and "cli.train" in NAMES and len(set(NAMES)) == len(NAMES)
    with pytest.raises(InputError, match="no schema named"):
        schema("cli.trian")


@pytest.mark.slow
def test_train_json_has_one_schema_in_both_modes(tmp_path):
    tiny = ["--parties", "2", "--per-party", "20", "--batch-size", "20", "--epochs", "1"]
    tiny += ["--layers", "64,4,10", "--test-rows", "5"]
    plain = run_json("cli.train", "train", "--encrypt-last", "0", *tiny)
    model = tmp_path / "m.npz"
    encrypted = run_json(
        "cli.train", "train", "--encrypt-last", "1", "--parameters", "test", *tiny,
        "--model-out", str(model),
    )  # fmt: skip
    assert plain["encrypted_layers"] == 0 and encrypted["encrypted_layers"] == 1
    assert encrypted["model_file"] == str(model) and "model_file" not in plain
    assert plain["party_names"] == encrypted["party_names"] == ["0", "1"]
    for key, kind in kinds(plain).items():
        assert kind == kinds(encrypted)[key] or "null" in (kind, kinds(encrypted)[key]), key
    assert [kinds(r) for r in plain["history"]] == [kinds(r) for r in encrypted["history"]]


def test_a_model_file_without_training_settings_writes_null_not_zero():
    from privfl.studies.audit import Hyper, TargetModel

    model = TargetModel((64, 4, 10), Hyper((4,), 0, 0, 0.0)).to_dict()  # as a --model file
    assert model == {"sizes": [64, 4, 10], "epochs": None, "batch": None, "lr": None}
    mem = schema("cli.audit.membership")["properties"]["model"]
    assert jsonschema.Draft202012Validator(mem).is_valid(model)
    assert not jsonschema.Draft202012Validator(mem).is_valid({**model, "batch": 0})


def test_membership_and_recommend_json_match_their_schemas(tmp_path):
    path = tmp_path / "membership.json"
    res = run_json(
        "cli.audit.membership", "audit", "membership", "--dataset", "digits8x8", "--layers",
        "3", "--runs", "1", "--attack-epochs", "1", "--json-out", str(path),
    )  # fmt: skip
    assert isinstance(res["train_accuracy"], float) and res["over_training"] == []
    rec = run_json("cli.audit.recommend", "audit", "recommend", str(path))
    assert rec["unaudited_layers"] == [1, 2] and rec["encrypt_layers"][-1] == 3


def test_inversion_json_has_one_schema_whether_it_ran_or_not():
    common = ["audit", "inversion", "--dataset", "digits8x8", "--epochs-every", "100"]
    ran = run_json("cli.audit.inversion", *common, "--classes", "0", "--steps", "2")
    not_possible = run_json("cli.audit.inversion", *common, "--exposed", "2")
    assert ran["result"] == "ran" and len(ran["snapshots"]) == 2
    assert not_possible["result"] == "not possible in this setting"
    assert not_possible["snapshots"] == []
    assert kinds(ran) == kinds(not_possible)


def test_property_json_matches_its_schema_with_the_fewest_batches():
    # two batches of each kind and one snapshot: a random half of four batches can miss a
    # class, which crashed the attack forest (IndexError) before the split kept both classes
    res = run_json(
        "cli.audit.property", "audit", "property", "--runs", "1", "--batches", "2",
        "--epochs-every", "100",
    )  # fmt: skip
    assert [r["layer"] for r in res["layers"]] == [1, 2, 3]


def test_forest_run_json_matches_its_schema():
    res = run_json(
        "cli.forest.run", "forest", "run", "--dataset", "wine", "--trees", "1", "--depth", "2",
        "--key-bits", "512", "--insecure-key-bits",  # INSECURE, for speed only
    )  # fmt: skip
    assert [d["dataset"] for d in res["datasets"]] == ["wine"]  # one object, as every command
    assert {"accuracy", "recall", "f1"} <= set(res["datasets"][0]["rows"][0])


def test_the_property_split_keeps_both_kinds_in_each_half_or_refuses():
    import numpy as np

    from privfl.audit.property import _split

    rng = np.random.default_rng(0)  # not secret: test draws
    labels = np.array([1, 1, 0, 0])
    for _ in range(50):
        tr, te = _split(labels, rng)
        assert sorted(labels[tr]) == sorted(labels[te]) == [0, 1]
    with pytest.raises(InputError, match="at least 2 batches"):
        _split(np.array([1, 0, 0, 0]), rng)  # would loop forever
