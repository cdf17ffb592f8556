"""``privfl train`` and the audit of its model (issue 17): settings refused before any key is
generated, the JSON rule, --encrypt-last from a recommendation, the saved model audited with
only its plaintext layers exposed."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from privfl.cli import app
from privfl.training.result import load_model

runner = CliRunner()
TINY = [
    "--test-rows",
    "4",
    "--parties",
    "2",
    "--per-party",
    "20",  # every digit occurs at some party (validated)
    "--batch-size",
    "10",
    "--layers",
    "64,5,10",
]


def _refused_quickly(args, reason, seconds=10.0):
    start = time.process_time()
    out = runner.invoke(app, ["train", *args])
    assert out.exit_code == 2, out.output
    assert reason in " ".join(out.output.split()), out.output
    assert "Traceback" not in out.output
    assert time.process_time() - start < seconds


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["--encrypt-last", "4"], "has 3 layers"),
        (["--encrypt-last", "3"], "at most the last two layers"),
        (["--encrypt-last", "nope.json"], "the recommendation file nope.json does not exist"),
        (["--sigmoid-range", "-0.1,0.1"], "outside the sigmoid range"),
        (["--sigmoid-degree", "119"], "too few levels"),
        (["--epochs", "3", "--rounds", "2"], "rounds must divide epochs"),
        (["--dataset", "mnist"], "unknown dataset"),
        (["--json-out", "/no/such/dir/x.json"], "does not exist"),
        (["--model-out", "/no/such/dir/m.npz"], "does not exist"),
        # zero was silently replaced by the default (3 parties, 30 rows each)
        (["--parties", "0"], "--parties must be at least 1, got 0"),
        (["--per-party", "0"], "--per-party must be at least 1, got 0"),
    ],
)
def test_bad_training_settings_are_refused_before_key_generation(args, reason):
    _refused_quickly(args, reason)


def test_a_table_with_one_class_is_refused(tmp_path):
    # it trained a one-output "classifier" with accuracy 1.000 and no warning (new-user review)
    import pandas as pd

    rng = np.random.default_rng(0)
    df = pd.DataFrame(rng.random((20, 4)), columns=list("abcd"))
    df.assign(clinic=["x", "y"] * 10, species="setosa").to_csv(tmp_path / "one.csv", index=False)
    args = ["--data", str(tmp_path / "one.csv"), "--party-column", "clinic"]
    _refused_quickly([*args, "--label-column", "species"], "holds one class ('setosa')")


def test_encrypt_last_comes_from_a_recommendation_file(tmp_path):
    rec = {"encrypt_layers": [3], "layers": 3, "model_sizes": [64, 30, 20, 10]}
    good = tmp_path / "rec.json"
    good.write_text(json.dumps(rec))
    other = tmp_path / "other.json"
    other.write_text(json.dumps({**rec, "model_sizes": [64, 8, 10]}))
    _refused_quickly(["--encrypt-last", str(other)], "recommends layers for the model")
    # the file's answer (1 layer) is used: the sigmoid check then refuses a tiny range
    _refused_quickly(
        ["--encrypt-last", str(good), "--sigmoid-range", "-0.1,0.1"], "outside the sigmoid range"
    )


def test_plain_baseline_prints_one_json_object_and_writes_json_out(tmp_path):
    path = tmp_path / "out.json"
    out = runner.invoke(
        app, ["train", "--encrypt-last", "0", "--epochs", "2", "--json", "--json-out", str(path)]
    )
    assert out.exit_code == 0, out.output
    data = json.loads(out.stdout)
    assert data == json.loads(path.read_text())
    assert data["encrypted_layers"] == 0 and len(data["history"]) == 2
    assert 0 <= data["test_accuracy"] <= 1


def test_trained_model_is_audited_with_only_its_plaintext_layers(tmp_path):
    pytest.importorskip("openfhe")
    pytest.importorskip("torch")
    model = tmp_path / "model.npz"
    args = [
        "train",
        *TINY,
        "--encrypt-last",
        "1",
        "--parameters",
        "test",
        "--learning-rate",
        "1",
        "--epochs",
        "1",
    ]
    out = runner.invoke(app, [*args, "--model-out", str(model), "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["encrypted_layers"] == 1
    saved = load_model(model)
    assert saved.exposed_layers == 1 and not saved.revealed  # the encrypted layer is absent
    assert saved.exposed_model().sizes == [64, 5]
    with np.load(model) as z:
        assert "w2" not in z.files
    audit = runner.invoke(
        app,
        ["audit", "membership", "--model", str(model), "--runs", "1", "--attack-epochs", "2",
         "--json"],
    )  # fmt: skip
    assert audit.exit_code == 0, audit.output
    rows = json.loads(audit.stdout)["layers"]
    assert [(r["layer"], r["features"]) for r in rows] == [(1, "output")]


# ------------------------------------------------- new-user review: messages name the option
@pytest.mark.parametrize(
    ("args", "reason"),
    [
        # it said "must be a number or a recommendation file" for a file that is missing
        (["--encrypt-last", "missing.json"], "the recommendation file missing.json does not exist"),
        (["--encrypt-last", "1.5"], "--encrypt-last must be a whole number >= 0, got '1.5'"),
        (["--encrypt-last", "-1"], "--encrypt-last must be a whole number >= 0, got '-1'"),
        # range checks that combine options named none of them
        (["--parties", "100"], "100 parties (--parties) x 30 rows (--per-party) do not fit"),
        (["--batch-size", "0"], "batch_size (--batch-size) must be >= 1, got 0"),
        (["--learning-rate", "0"], "learning_rate (--learning-rate) must be > 0"),
        (["--epochs", "0"], "epochs (--epochs) must be >= 1, got 0"),
        (["--epochs", "3", "--rounds", "2"], "rounds=2 (--rounds) does not divide epochs=3"),
        (["--sigmoid-degree", "2"], "sigmoid_degree (--sigmoid-degree) must be in 3..119"),
        (["--sigmoid-range", "1,5"], "must contain 0 (--sigmoid-range low,high"),
        (["--layers", "10,5,10"], "--layers 10,5,10 starts with 10 inputs but the data has 64"),
        (["--layers", "64,5,3"], "give layers (--layers) ending in 10"),
    ],
)
def test_refusals_name_the_option_to_fix(args, reason):
    _refused_quickly(args, reason)


def test_a_folder_given_for_the_data_or_the_recommendation_is_called_a_folder(tmp_path):
    # it said "file not found: /tmp" (or "must be a number...") for an existing folder
    table = tmp_path / "t.csv"
    table.write_text("a,b,site,y\n1,2,x,0\n2,3,y,1\n")
    cols = ["--party-column", "site", "--label-column", "y"]
    _refused_quickly(["--data", str(tmp_path), *cols], f"--data {tmp_path} is a directory")
    _refused_quickly(
        ["--data", str(table), *cols, "--test-data", str(tmp_path)],
        f"--test-data {tmp_path} is a directory",
    )
    _refused_quickly(["--encrypt-last", str(tmp_path)], "is a directory, not a recommendation file")


def test_help_and_audit_say_a_model_of_your_own_table_cannot_be_audited(tmp_path):
    # --help promised "--model-out saves what 'privfl audit membership --model' audits"; the
    # audit of a --data model then failed with "unknown dataset '<path>'; choose one of ..."
    from privfl.training.result import write_model
    from privfl.training.twin import Schedule

    helped = runner.invoke(app, ["train", "--help"]).output
    helped = " ".join(helped.replace("\u2502", " ").split())  # without rich's box borders
    assert "saves what" not in helped
    assert "only when it was trained on the built-in dataset" in helped
    sched = Schedule((4, 3, 2), 1, 1, 1, 10, 1.0, 0)
    rng = np.random.default_rng(0)  # not secret: test weights
    model = tmp_path / "own.npz"
    write_model(model, sched, [(rng.random((3, 4)), rng.random(3))], False, "/data/clinic.csv")
    out = runner.invoke(app, ["audit", "membership", "--model", str(model), "--runs", "1"])
    assert out.exit_code == 2, out.output
    text = " ".join(out.output.split())
    assert "was trained on your own table (/data/clinic.csv)" in text
    assert "audits only models trained on the built-in dataset (digits8x8)" in text
    assert "started" not in text  # refused before the attack's progress starts


@given(st.integers(1, 10**18), st.integers(1, 10**18))
@settings(max_examples=60, deadline=None)
def test_the_suggested_rounds_divide_the_epochs_and_come_quickly(epochs, rounds):
    # every divisor was listed: --epochs 1000000001 took a minute, 10**18 would not end
    from privfl.training.config import nearby_divisors

    start = time.process_time()
    fits = nearby_divisors(epochs, rounds)
    assert fits and all(epochs % r == 0 for r in fits) and min(fits) >= 1
    assert time.process_time() - start < 0.5
