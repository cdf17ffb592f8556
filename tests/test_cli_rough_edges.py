"""Issue 29, item 3: the rough edges a newcomer hit, each with the test that failed before the
fix: the threshold table crash, unwritable outputs, one label rule and party names, results
that behave like numbers, one JSON schema per result, input validation and help texts."""

from __future__ import annotations

import json
import re
import time

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import privfl
import privfl.metrics as pm
from _shared import leaf_commands
from conftest import make_parties
from privfl.cli import app
from privfl.errors import InputError

runner = CliRunner()


@pytest.fixture
def scores_csv(tmp_path):
    """A realistic small file: 600 rows, three named sites, 0/1 labels."""
    rng = np.random.default_rng(7)  # not secret: test data
    n = 600
    y = rng.integers(0, 2, n)
    s = np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1)
    site = rng.choice(["site-a", "site-b", "site-c"], n)
    path = tmp_path / "scores.csv"
    pd.DataFrame({"site": site, "score": s, "label": y}).to_csv(path, index=False)
    return path


def one_line_exit_2(out) -> str:
    assert out.exit_code == 2, out.output
    assert out.stdout == ""
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    return lines[0]


# ----------------------------------------------------------------------------- table crash
def test_threshold_auc_prints_its_table(scores_csv):
    pytest.importorskip("openfhe")
    out = runner.invoke(
        app, ["auc", str(scores_csv), "-s", "score", "-l", "label", "--party-column", "site",
              "--thresholds", "10", "--keys", "threshold"],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    assert "FHAUC AUC" in out.stdout and "upload per party" in out.stdout


# ----------------------------------------------------------------------------- output paths
BAD_FILES = ["/proc/privfl-x.json", "/dev/full", "/proc/self"]


def auc_args(csv):
    return ["auc", str(csv), "-s", "score", "-l", "label", "--parties", "2", "--thresholds", "5"]


def dpauc_args(csv):
    return ["dpauc", str(csv), "-s", "score", "-l", "label", "--parties", "2"]


def flower_args(csv):
    return ["flower", "local", str(csv), "--party-column", "site", "-s", "score", "-l", "label"]


@pytest.mark.parametrize("bad", BAD_FILES)
@pytest.mark.parametrize("make", [auc_args, dpauc_args, flower_args])
def test_an_unwritable_json_out_is_refused_before_any_work(make, bad, scores_csv):
    started = time.monotonic()
    out = runner.invoke(app, [*make(scores_csv), "--json-out", bad])
    line = one_line_exit_2(out)
    assert "--json-out" in line and bad in line
    assert time.monotonic() - started < 5


@pytest.mark.parametrize("bad", ["/proc/privfl-roc.png", "/dev/full"])
def test_an_unwritable_plot_is_refused_before_any_work(bad, scores_csv):
    out = runner.invoke(app, [*auc_args(scores_csv), "--reveal", "curve", "--plot", bad])
    assert "--plot" in one_line_exit_2(out)


def test_audit_recommend_refuses_an_unwritable_json_out(tmp_path):
    (tmp_path / "m.json").write_text("{}")
    out = runner.invoke(app, ["audit", "recommend", str(tmp_path / "m.json"), "--json-out",
                              "/dev/full"])  # fmt: skip
    assert "--json-out" in one_line_exit_2(out)


@pytest.mark.parametrize(
    "args",
    [
        ["flower", "local", "{csv}", "--party-column", "site", "-s", "score", "-l", "label",
         "--workdir", "/proc/privfl-w"],
        ["keys", "init", "--parties", "a,b", "--out", "/proc/privfl-keys"],
        ["forest", "keys", "init", "--participants", "a,b", "--columns", "2,2", "--out",
         "/proc/privfl-keys"],
    ],
)  # fmt: skip
def test_an_unwritable_output_folder_is_refused_before_any_work(args, scores_csv):
    out = runner.invoke(app, [a.replace("{csv}", str(scores_csv)) for a in args])
    assert "not writable" in one_line_exit_2(out)


def test_a_writable_existing_file_is_left_unchanged_by_the_check(tmp_path):
    from privfl.cli._kit import check_output_dir, check_output_path

    target = tmp_path / "r.json"
    target.write_text("keep")
    check_output_path(target, "--json-out")
    check_output_path(tmp_path / "new.json", "--json-out")
    check_output_dir(tmp_path / "a" / "b", "--out")
    assert target.read_text() == "keep"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.json"]


# ----------------------------------------------------------------------------- party names
@pytest.mark.parametrize("parties", ["a,,b", "a", "a,a", "a,a ", " a,b", "a,b,"])
def test_keys_init_refuses_empty_single_or_repeated_party_names(parties, tmp_path):
    out = runner.invoke(app, ["keys", "init", "--parties", parties, "--out", str(tmp_path / "k")])
    one_line_exit_2(out)
    assert not (tmp_path / "k").exists()


def test_auc_refuses_a_federation_of_one(scores_csv):
    args = auc_args(scores_csv)
    args[args.index("--parties") + 1] = "1"
    assert "at least 2" in one_line_exit_2(runner.invoke(app, args))


@pytest.mark.parametrize("command", [["auc"], ["dpauc"], ["flower", "local"]])
def test_a_party_column_with_one_name_is_a_federation_of_one(command, tmp_path, scores_csv):
    df = pd.read_csv(scores_csv).assign(site="only")
    df.to_csv(tmp_path / "one.csv", index=False)
    opts = ["--party-column", "site", "-s", "score", "-l", "label"]
    extra = ["--workdir", str(tmp_path / "w")] if command[0] == "flower" else []
    out = runner.invoke(app, [*command, str(tmp_path / "one.csv"), *opts, *extra])
    message = one_line_exit_2(out)
    assert "holds one value ('only')" in message and "at least 2 parties" in message, message
    assert not (tmp_path / "w").exists()
    if command == ["dpauc"]:
        args = [*dpauc_args(scores_csv)]
        args[args.index("--parties") + 1] = "1"
        assert "at least 2" in one_line_exit_2(runner.invoke(app, args))


def whitespace_variant_csv(tmp_path):
    rng = np.random.default_rng(3)  # not secret: test data
    path = tmp_path / "ws.csv"
    y = np.tile([0, 1], 50)
    site = ["site-a"] * 50 + ["site-a "] * 50
    pd.DataFrame({"site": site, "score": rng.random(100), "label": y}).to_csv(path, index=False)
    return path


@pytest.mark.parametrize("command", [["auc"], ["dpauc"], ["flower", "local"]])
def test_party_names_differing_only_by_whitespace_are_refused_not_merged(command, tmp_path):
    path = whitespace_variant_csv(tmp_path)
    opts = ["--party-column", "site", "-s", "score", "-l", "label"]
    out = runner.invoke(
        app, [*command, str(path), *opts, "--workdir", str(tmp_path / "w")]
        if command[0] == "flower" else [*command, str(path), *opts],
    )  # fmt: skip
    assert "whitespace" in one_line_exit_2(out)


def test_errors_name_the_party_not_its_index():
    good = (np.array([0.2, 0.8]), np.array([0, 1]))
    with pytest.raises(InputError, match="party site-b has no samples"):
        privfl.federated_auc({"site-a": good, "site-b": ([], [])}, 10)
    with pytest.raises(InputError, match="party site-b: 2 scores but 3 labels"):
        privfl.exact_auc({"site-a": good, "site-b": ([0.1, 0.2], [0, 1, 1])})


def test_dpauc_attack_rows_name_the_parties(scores_csv):
    out = runner.invoke(
        app, ["dpauc", str(scores_csv), "-s", "score", "-l", "label", "--party-column", "site",
              "--attack", "--json", "--noise-seed", "1"],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    assert [r["party"] for r in json.loads(out.stdout)["attack"]] == ["site-a", "site-b", "site-c"]


# ----------------------------------------------------------------------------- one label rule
def test_every_entry_point_accepts_minus_one_one_and_pos_label(rng):
    parties = make_parties(rng, 2, 150)
    signed = [(s, 2 * y.astype(int) - 1) for s, y in parties]
    named = [(s, np.where(y == 1, "sick", "well")) for s, y in parties]
    want = privfl.exact_auc(parties)
    assert privfl.exact_auc(signed) == want
    assert privfl.exact_auc(named, pos_label="sick") == want
    assert privfl.binned_auc(signed, 10) == privfl.binned_auc(named, 10, pos_label="sick")
    assert (
        privfl.dpauc(signed, 10, seed=1).auc
        == privfl.dpauc(named, 10, seed=1, pos_label="sick").auc
    )
    fed = privfl.federated_auc(signed, 10)
    assert fed.auc == pytest.approx(privfl.binned_auc(parties, 10), abs=1e-6)
    assert privfl.federated_auc(named, 10, pos_label="sick").auc == pytest.approx(fed.auc, abs=1e-6)
    assert float(pm.roc_auc_score(named, 10, pos_label="sick")) == pytest.approx(fed.auc, abs=1e-6)
    with pytest.raises(InputError, match="pos_label"):
        privfl.federated_auc(named, 10)


def test_dpauc_and_flower_local_take_pos_label(tmp_path):
    path = tmp_path / "yn.csv"
    rng = np.random.default_rng(5)  # not secret: test data
    y = np.tile(["yes", "no"], 150)
    site = np.repeat(["a", "b"], 150)
    pd.DataFrame({"site": site, "score": rng.random(300), "label": y}).to_csv(path, index=False)
    base = ["dpauc", str(path), "-s", "score", "-l", "label", "--party-column", "site"]
    assert "pos_label" in one_line_exit_2(runner.invoke(app, base))
    out = runner.invoke(app, [*base, "--pos-label", "yes", "--json"])
    assert out.exit_code == 0, out.output
    from privfl.federation.flower.quickstart import split_by_party

    files = split_by_party(path, "site", "score", "label", tmp_path / "split", "yes")
    got = pd.read_csv(files["a"])
    assert set(got["label"]) == {0, 1} and got["label"].sum() == 75


# ----------------------------------------------------------------------------- numbers
def test_results_behave_like_their_value(rng):
    parties = make_parties(rng, 2, 150)
    score = pm.roc_auc_score(parties, 10)
    res = privfl.federated_auc(parties, 10)
    dp = privfl.dpauc(parties, 10, seed=2)
    for r, value in ((score, score.value), (res, res.auc), (dp, dp.auc)):
        assert float(r) == value and r == value and r > value - 1 and value - 1 < r
        assert r >= value and r <= value and not r < value
        assert f"{r:.3f}" == f"{value:.3f}" and round(r, 2) == round(value, 2)
        assert r - 0.5 == value - 0.5 and 1 - r == 1 - value and abs(r) == abs(value)
        assert sorted([r, value + 1, value - 1])[1] is r
    assert score > 0.5 and res > 0.5


# ----------------------------------------------------------------------------- JSON schemas
def kinds(obj: dict) -> dict[str, str]:
    def kind(v):
        if v is None:
            return "null"
        if isinstance(v, bool):
            return "bool"
        if isinstance(v, int | float):
            return "number"
        return type(v).__name__

    return {k: kind(v) for k, v in obj.items()}


def test_the_auc_json_has_one_schema_in_every_mode(rng):
    from privfl.cli._kit import to_jsonable

    parties = make_parties(rng, 2, 200)
    honest = to_jsonable(privfl.federated_auc(parties, 10))
    mal = to_jsonable(privfl.federated_auc(parties, 10, security="malicious", splits=2))
    assert set(honest) == set(mal)
    assert honest["verified"] is None and mal["verified"] is True
    for key, k in kinds(honest).items():
        assert k == kinds(mal)[key] or k == "null", key
    assert kinds(mal)["precision"] == "number"


def test_curve_json_keeps_the_thresholds_and_one_meaning_per_key(scores_csv):
    out = runner.invoke(app, [*auc_args(scores_csv), "--reveal", "curve", "--json"])
    assert out.exit_code == 0, out.output
    got = json.loads(out.stdout)
    assert got["thresholds"] == 5  # N, as in every result
    assert len(got["roc_thresholds"]) == len(got["fpr"]) == 5
    assert got["roc_thresholds"][0] is None and got["roc_thresholds"][-1] is None  # +-inf
    assert isinstance(got["pr_precision"], list) and isinstance(got["pr_thresholds"], list)
    assert got["precision"] is None or isinstance(got["precision"], float)
    assert got["verified"] is None  # semi-honest: nothing was verified (never false)
    roc = pm.roc_curve(make_parties(np.random.default_rng(2), 2, 100), 5).to_dict()
    pr = pm.precision_recall_curve(make_parties(np.random.default_rng(2), 2, 100), 5).to_dict()
    assert roc["thresholds"] == 5 and len(roc["roc_thresholds"]) == 5
    assert len(pr["pr_precision"]) == len(pr["pr_recall"]) and not isinstance(
        pr["precision"], np.ndarray
    )


# ----------------------------------------------------------------------------- validation
def test_a_predict_proba_array_gets_the_fix_in_the_error():
    rng = np.random.default_rng(0)  # not secret: test data
    proba = rng.random((200, 1))
    proba = np.hstack([1 - proba, proba])
    y = (proba[:, 1] > 0.5).astype(int)
    with pytest.raises(InputError, match=r"predict_proba\(X\)\[:, 1\]"):
        privfl.federated_auc([(proba, y), (proba, y)], 10)
    with pytest.raises(InputError, match=r"two columns"):
        privfl.exact_auc([(proba, np.repeat(y, 2))])  # 2n labels: refused, not flattened
    assert privfl.exact_auc([(proba[:, 1], y), (proba[:, 1:], y)]) == pytest.approx(1.0)


def test_complex_scores_and_thresholds_none_are_refused_with_the_reason():
    y = np.array([0, 1, 0, 1])
    with pytest.raises(InputError, match="complex"):
        privfl.binned_auc([(np.array([0.1, 0.9, 0.2, 0.8]) + 0j, y)], 10)
    with pytest.raises(InputError, match="None"):
        privfl.binned_auc([(np.array([0.1, 0.9, 0.2, 0.8]), y)], None)
    with pytest.raises(InputError, match="None"):
        privfl.dpauc([(np.array([0.1, 0.9, 0.2, 0.8]), y)], None)


# ----------------------------------------------------------------------------- help texts
def squash(text: str) -> str:
    return re.sub(r"[\s│]+", " ", text)


@pytest.mark.parametrize("name", sorted(leaf_commands()))
def test_help_texts_keep_their_brackets(name):
    cmd = leaf_commands()[name]
    sources = [cmd.help or ""] + [getattr(p, "help", None) or "" for p in cmd.params]
    wanted = {m for s in sources for m in re.findall(r"\[[A-Za-z_-]+\]", s.replace("\\[", "["))}
    out = runner.invoke(app, [*name.split(), "--help"], env={"COLUMNS": "2000"})
    assert out.exit_code == 0
    shown = squash(out.stdout)
    for term in wanted:
        assert term in shown, f"privfl {name} --help lost {term}"
    assert "  extra" not in out.stdout


def test_security_help_names_the_default_three_executions():
    out = runner.invoke(app, ["auc", "--help"], env={"COLUMNS": "2000"})
    assert "two executions" not in out.stdout and "three by default" in squash(out.stdout)


# ----------------------------------------------------------------------------- audit loop
def membership_json(path, rows):
    """What `privfl audit membership --model model.npz --json-out` writes for a model whose
    output layer stays encrypted: rows for the exposed layers 1 and 2 only."""
    payload = {"dataset": "digits8x8", "model": {"sizes": [64, 30, 20, 10]}, "layers": rows,
               "train_accuracy": None, "test_accuracy": None}  # fmt: skip
    path.write_text(json.dumps(payload))
    return str(path)


def test_an_unaudited_output_layer_is_never_called_safe(tmp_path):
    rows = [{"layer": 1, "features": "output", "accuracy": 0.51},
            {"layer": 2, "features": "output", "accuracy": 0.5}]  # fmt: skip
    path = membership_json(tmp_path / "membership.json", rows)
    out = runner.invoke(app, ["audit", "recommend", path, "--json-out", str(tmp_path / "r.json")])
    assert out.exit_code == 0, out.output
    assert "encrypt nothing" not in out.stdout and "no attack result" in out.stdout
    rec = json.loads((tmp_path / "r.json").read_text())
    assert rec["encrypt_layers"] == [3] and rec["unaudited_layers"] == [3]
    assert rec["exposed_layers"] == [1, 2]


def test_a_layer_without_a_result_is_encrypted_with_every_layer_after_it(tmp_path):
    from privfl.audit.recommend import recommend_layers

    rows = [{"layer": 1, "accuracy": 0.5}, {"layer": 2, "accuracy": float("nan")},
            {"layer": 3, "accuracy": 0.5}]  # fmt: skip
    assert recommend_layers(rows, 0.55, 3) == [2, 3]
    assert recommend_layers(rows[:1], 0.55, 3) == [2, 3]
    assert recommend_layers([{"layer": 3, "accuracy": 0.5}], 0.55, 3) == [1, 2, 3]
    path = membership_json(tmp_path / "m.json", [rows[2]])
    out = runner.invoke(app, ["audit", "recommend", path])
    assert out.exit_code == 0 and "encrypt all 3 layers: layer 1 was not audited" in out.stdout


def test_membership_headers_never_print_nan():
    from privfl.cli.audit import _acc

    assert _acc(float("nan")) == "not known (encrypted layers)" and _acc(0.5) == "0.500"


# ----------------------------------------------------------------------------- progress
def test_federated_auc_reports_every_protocol_step(rng):
    events = []
    privfl.federated_auc(make_parties(rng, 3, 100), 10, progress=events.append)
    assert [e.done for e in events] == list(range(1, len(events) + 1)) and len(events) > 5
    assert {"party_encrypt", "aggregator"} <= {e.step for e in events}
    curve_events = []
    pm.roc_curve(make_parties(rng, 2, 100), 10, progress=curve_events.append)
    assert len(curve_events) > 3


def test_revfrf_fit_reports_progress():
    from privfl.forest import RevFRF

    rng = np.random.default_rng(0)  # not secret: test data
    x = rng.normal(size=(60, 2))
    y = (x[:, 0] > 0).astype(int)
    events = []
    keys = {"key_bits": 512, "allow_insecure_key_bits": True}  # INSECURE, for speed only
    RevFRF(n_trees=1, max_depth=2, seed=1, **keys).fit(
        {"p0": x[:, :1], "p1": x[:, 1:]}, y, progress=events.append
    )
    assert events and events[-1].done == len(events)


def test_auc_prints_plain_progress_lines_off_a_terminal(scores_csv):
    out = runner.invoke(app, [*auc_args(scores_csv), "--json"])
    assert out.exit_code == 0, out.output
    json.loads(out.stdout)  # stdout holds only the JSON
    assert "protocol steps: started" in out.stderr and "protocol steps: done (" in out.stderr


def test_quiet_silences_every_progress_line_and_keeps_the_json(scores_csv):
    out = runner.invoke(app, ["--quiet", *auc_args(scores_csv), "--json"])
    assert out.exit_code == 0, out.output
    assert out.stderr == "" and json.loads(out.stdout)["auc"] > 0.5
    tiny = ["--parties", "2", "--per-party", "20", "--batch-size", "10", "--layers", "64,5,10"]
    out = runner.invoke(app, ["-q", "train", "--encrypt-last", "0", "--epochs", "1", *tiny])
    assert out.exit_code == 0, out.output
    assert out.stderr == "" and "test accuracy" in out.stdout
    out = runner.invoke(app, [*auc_args(scores_csv), "--json"])  # the next command: not quiet
    assert "protocol steps: started" in out.stderr
    out = runner.invoke(app, ["--quiet", *auc_args(scores_csv), "--security", "bogus"])
    assert "security must be" in one_line_exit_2(out)  # errors still say why


def test_train_federated_reports_every_round_to_its_callback():
    from privfl.training.federated import train_federated

    rng = np.random.default_rng(0)  # not secret: test data
    x = rng.random((40, 4))
    y = (x[:, 0] > 0.5).astype(int)
    events = []
    parties = {"site-a": (x[:20], y[:20]), "site-b": (x[20:], y[20:])}
    res = train_federated(parties, [4, 3, 2], 0, 2, 10, progress=events.append)
    assert events and events[-1].done == len(events) and len(res.history) == 2
    assert res.party_names == ("site-a", "site-b")


MINIMAL = {  # the smallest arguments that get each command past its own argument parsing
    "auc": ["missing.csv", "-s", "score", "-l", "label", "--parties", "2"],
    "dpauc": ["missing.csv", "-s", "score", "-l", "label", "--parties", "2"],
    "keys init": ["--parties", "a,b", "--out", "{tmp}/keys"],
    "forest keys init": ["--participants", "a,b", "--columns", "2,2", "--out", "{tmp}/keys"],
    "audit recommend": ["missing.json"],
    "flower local": ["missing.csv", "--party-column", "p", "-s", "score", "-l", "label"],
    "flower run": ["missing-app"],
    "forest local": ["missing.csv", "-l", "label"],
    "flower train": ["missing.csv", "--party-column", "p", "-l", "label"],
    "flower train-node": ["{tmp}/node"],
}


@pytest.mark.parametrize("name", sorted(leaf_commands()))
def test_every_command_refuses_dev_full_before_any_work(name, tmp_path):
    args = [a.replace("{tmp}", str(tmp_path)) for a in MINIMAL.get(name, [])]
    started = time.monotonic()
    out = runner.invoke(app, [*name.split(), *args, "--json-out", "/dev/full"])
    assert "--json-out path /dev/full is not a regular file" in one_line_exit_2(out)
    assert time.monotonic() - started < 5
    assert not (tmp_path / "keys").exists()


def test_a_bad_protocol_option_is_one_line_without_progress_noise(scores_csv):
    out = runner.invoke(app, [*auc_args(scores_csv), "--security", "bogus"])
    assert "security must be" in one_line_exit_2(out)


# -------------------------------------- new-user review of train, audit and forest (folders)
@pytest.mark.parametrize(
    ("command", "named"),
    [
        (["train", "--data", "{dir}", "--party-column", "site", "--label-column", "label"],
         "--data {dir} is a directory"),
        (["forest", "local", "{dir}", "-l", "label"], "FILE {dir} is a directory"),
        (["audit", "membership", "--model", "{dir}"], "--model {dir} is a directory"),
        (["audit", "recommend", "{dir}"], "result file {dir} is a directory"),
        (["auc", "{dir}", "-s", "score", "-l", "label", "--parties", "2"],
         "{dir} is a directory, not a file"),
        (["flower", "local", "{dir}", "--party-column", "site", "-s", "score", "-l", "label"],
         "FILE {dir} is a directory"),
        (["flower", "train", "{dir}", "--party-column", "site", "-l", "label"],
         "FILE {dir} is a directory"),
    ],
)  # fmt: skip
def test_a_folder_given_for_a_data_file_is_called_a_folder(command, named, tmp_path):
    # every one said "file not found" (or printed the OS error) for an existing folder
    out = runner.invoke(app, [c.format(dir=tmp_path) for c in command])
    line = one_line_exit_2(out)
    assert named.format(dir=tmp_path) in line and "not found" not in line


@pytest.fixture
def small_table(tmp_path):
    rng = np.random.default_rng(1)  # not secret: test data
    path = tmp_path / "small.csv"
    frame = pd.DataFrame(rng.random((15, 3)), columns=["a", "b", "c"])
    frame.assign(label=rng.integers(0, 2, 15)).to_csv(path, index=False)
    return path


@pytest.mark.parametrize(
    ("args", "reason"),
    [
        (["run", "--trees", "0"], "--trees must be at least 1, got 0"),
        (["run", "--depth", "0"], "--depth must be at least 1, got 0"),
        (["run", "--candidates", "0"], "--candidates must be at least 1, got 0"),
        (["run", "--rho", "1"], "--rho must be at least 2, got 1"),
        (["run", "--dataset", "wine", "--revoke", "50"], "--revoke: cannot revoke [50]"),
        (["local", "{table}", "-l", "label", "--participants", "4"],
         "--participants 4: the table has 3 feature columns"),
        (["local", "{table}", "-l", "label", "--predict", "10"],
         "--predict 10: the table has 15 rows"),
        (["local", "{table}", "-l", "label", "--trees", "0"], "--trees must be at least 1, got 0"),
        (["local", "{table}", "-l", "label", "--depth", "0"], "--depth must be at least 1, got 0"),
    ],
)  # fmt: skip
def test_forest_range_checks_name_the_option(args, reason, small_table):
    # "--revoke values must be >= 0, --trees, --depth and --candidates >= 1, --rho >= 2" for
    # any one of them; forest local's counts against the file named no option
    keys = ["--key-bits", "512", "--insecure-key-bits"]
    start = time.process_time()
    out = runner.invoke(app, ["forest", *[a.format(table=small_table) for a in args], *keys])
    assert reason.format(table=small_table) in one_line_exit_2(out)
    assert time.process_time() - start < 5  # before any key, forest or node


def test_forest_local_names_the_insecure_key_option_before_reading_the_table(small_table):
    # it named the library's allow_insecure_key_bits=True, after reading the table
    out = runner.invoke(
        app, ["forest", "local", str(small_table), "-l", "label", "--key-bits", "512"]
    )
    assert "(--insecure-key-bits)" in one_line_exit_2(out)
