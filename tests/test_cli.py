import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import privfl
from privfl.cli import app
from privfl.evaluation import fhauc
from privfl.federation.provisioning import load_aggregator_keys, load_party_keys

runner = CliRunner()


@pytest.fixture
def scores_csv(tmp_path):
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 900)
    s = np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1)
    df = pd.DataFrame({"score": s, "label": y, "site": rng.choice(["a", "b", "c"], 900)})
    path = tmp_path / "scores.csv"
    df.to_csv(path, index=False)
    df.to_parquet(tmp_path / "scores.parquet")
    return path, df


def test_auc_json_with_party_column_matches_library(scores_csv):
    path, df = scores_csv
    out = runner.invoke(
        app,
        [
            "auc",
            str(path),
            "-s",
            "score",
            "-l",
            "label",
            "--party-column",
            "site",
            "--json",
            "--compare",
        ],
    )
    assert out.exit_code == 0, out.output
    res = json.loads(out.stdout)
    assert res["parties"] == 3 and res["thresholds"] == 100
    assert {"auc", "timings", "bytes"} <= set(res)
    parts = [(g.score.to_numpy(), g.label.to_numpy()) for _, g in df.groupby("site")]
    assert res["auc"] == pytest.approx(privfl.binned_auc(parts, 100), abs=1e-6)
    assert res["compare"]["abs_error_vs_binned"] < 1e-6


def test_auc_parquet_dealt_to_k_parties(scores_csv, tmp_path):
    out = runner.invoke(
        app,
        [
            "auc",
            str(tmp_path / "scores.parquet"),
            "-s",
            "score",
            "-l",
            "label",
            "--parties",
            "7",
            "--thresholds",
            "25",
            "--json",
        ],
    )
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["parties"] == 7


def test_auc_table_output(scores_csv):
    path, _ = scores_csv
    out = runner.invoke(
        app, ["auc", str(path), "-s", "score", "-l", "label", "--parties", "3", "--compare"]
    )
    assert out.exit_code == 0 and "FHAUC AUC" in out.stdout and "scikit-learn" in out.stdout


@pytest.mark.parametrize(
    "args, message",
    [
        (["-s", "nope", "-l", "label", "--parties", "3"], "unknown column"),
        (["-s", "score", "-l", "label"], "exactly one of"),
        (["-s", "score", "-l", "label", "--parties", "3", "--thresholds", "2"], "at least 3"),
        (["-s", "score", "-l", "site", "--parties", "3"], "0 or 1"),
        (
            ["-s", "score", "-l", "label", "--parties", "3", "--score-range", "0,0.5"],
            "declared range",
        ),
    ],
)
def test_auc_bad_input_exits_2_with_one_line_and_no_auc(scores_csv, args, message):
    path, _ = scores_csv
    out = runner.invoke(app, ["auc", str(path), *args, "--json"])
    assert out.exit_code == 2
    assert message in out.output
    assert '"auc"' not in out.stdout


def test_auc_missing_file_exits_2(tmp_path):
    out = runner.invoke(
        app, ["auc", str(tmp_path / "x.csv"), "-s", "a", "-l", "b", "--parties", "2"]
    )
    assert out.exit_code == 2 and "not found" in out.output


def test_demo_json_reports_three_aucs():
    out = runner.invoke(app, ["demo", "--json"])
    assert out.exit_code == 0, out.output
    res = json.loads(out.stdout)
    assert res["parties"] == 15
    assert res["auc"] == pytest.approx(res["binned_auc"], abs=1e-6)
    assert abs(res["auc"] - res["sklearn_auc"]) < 1e-3


def test_keys_init_provisions_nodes_that_run_fhauc(tmp_path):
    out = runner.invoke(
        app,
        [
            "keys",
            "init",
            "--parties",
            "site-a,site-b,site-c",
            "--out",
            str(tmp_path / "k"),
            "--max-thresholds",
            "50",
            "--json",
        ],
    )
    assert out.exit_code == 0, out.output
    agg_keys = load_aggregator_keys(tmp_path / "k" / "aggregator")
    agg = fhauc.Aggregator()
    agg.receive_setup(agg_keys.public_setup)
    rng = np.random.default_rng(0)
    parties, data = [], []
    for name in ("site-a", "site-b", "site-c"):
        k = load_party_keys(tmp_path / "k" / name)
        y = rng.integers(0, 2, 100)
        s = rng.random(100)
        data.append((s, y))
        p = fhauc.Party(k.name, k.identity, k.roster, k.key_holder, s, y)
        p.receive_bundle(k.bundle)
        parties.append(p)
    cfg = agg.start_session(["site-a", "site-b", "site-c"], 50)
    start = agg.collect_joins({p.name: p.join(cfg) for p in parties})
    result = agg.handle_uploads({p.name: p.upload(start) for p in parties})
    got = parties[1].finish(result)
    assert got.auc == pytest.approx(privfl.binned_auc(data, 50), abs=1e-6)
    # the aggregator's folder holds nothing secret
    assert sorted(f.name for f in (tmp_path / "k" / "aggregator").iterdir()) == [
        "public_setup.bin",
        "roster.json",
    ]
    assert (tmp_path / "k" / "site-a" / "identity.key").stat().st_mode & 0o077 == 0


def test_keys_init_refuses_bad_input(tmp_path):
    out = runner.invoke(app, ["keys", "init", "--parties", "solo", "--out", str(tmp_path / "k")])
    assert out.exit_code == 2 and "at least 2" in out.output
    out = runner.invoke(app, ["keys", "init", "--parties", "a,a", "--out", str(tmp_path / "k")])
    assert out.exit_code == 2 and "distinct" in out.output


def test_party_keys_from_a_wrong_folder_are_rejected(tmp_path):
    runner.invoke(app, ["keys", "init", "--parties", "a,b", "--out", str(tmp_path / "k")])
    (tmp_path / "k" / "a" / "identity.key").write_bytes(
        (tmp_path / "k" / "b" / "identity.key").read_bytes()
    )
    with pytest.raises(privfl.InputError, match="does not match"):
        load_party_keys(tmp_path / "k" / "a")


def test_auc_malicious_json_reports_verification(scores_csv):
    path, df = scores_csv
    out = runner.invoke(
        app,
        [
            "auc",
            str(path),
            "-s",
            "score",
            "-l",
            "label",
            "--party-column",
            "site",
            "--security",
            "malicious",
            "--splits",
            "3",
            "--json",
        ],
    )
    assert out.exit_code == 0, out.output
    res = json.loads(out.stdout)
    assert res["verified"] is True and res["cheat_probability_log2"] < -20
    parts = [(g.score.to_numpy(), g.label.to_numpy()) for _, g in df.groupby("site")]
    assert res["auc"] == pytest.approx(privfl.binned_auc(parts, 100), abs=1e-6)


def test_auc_bad_security_exits_2(scores_csv):
    path, _ = scores_csv
    out = runner.invoke(
        app,
        [
            "auc",
            str(path),
            "-s",
            "score",
            "-l",
            "label",
            "--parties",
            "2",
            "--security",
            "paranoid",
        ],
    )
    assert out.exit_code == 2


# ----------------------------------------------------------------------------- issue 14, #14
def auc_cli(path, *extra):
    return runner.invoke(app, ["auc", str(path), "-s", "score", "-l", "label", *extra])


def test_rows_without_a_party_are_refused_not_silently_dropped(tmp_path, scores_csv):
    _, df = scores_csv
    df = df.copy()
    df.loc[df.index[:67], "site"] = None
    path = tmp_path / "blank.csv"
    df.to_csv(path, index=False)
    out = auc_cli(path, "--party-column", "site", "--compare")
    assert out.exit_code == 2 and "67 of 900 rows" in out.output


@pytest.mark.parametrize(
    "extra, reason",
    [
        (["--parties", "3", "--seed", "-1"], ""),
        (["--parties", "3", "--thresholds", "4000000"], "GiB"),
        (["--parties", "3", "--thresholds", "10000000"], "at most"),
        (["--parties", "3", "--security", "malicious", "--splits", "40"], "splits"),
        (["--parties", "3", "--security", "malicious", "--executions", "1"], "executions"),
    ],
)
def test_bad_auc_settings_exit_2_without_a_traceback(scores_csv, extra, reason):
    out = auc_cli(scores_csv[0], *extra)
    assert out.exit_code == 2, out.output
    assert reason in out.output and "Traceback" not in out.output


def test_an_unwritable_json_out_is_refused_before_the_run(tmp_path, scores_csv):
    out = auc_cli(scores_csv[0], "--parties", "3", "--json-out", str(tmp_path / "no" / "x.json"))
    assert out.exit_code == 2 and "does not exist" in out.output


def test_json_out_writes_the_same_object_json_prints(tmp_path, scores_csv):
    target = tmp_path / "r.json"
    out = auc_cli(scores_csv[0], "--parties", "3", "--json", "--json-out", str(target))
    assert out.exit_code == 0
    assert json.loads(target.read_text()) == json.loads(out.stdout)


def test_keys_init_into_an_existing_file_exits_2(tmp_path):
    target = tmp_path / "keys"
    target.write_text("not a folder")
    out = runner.invoke(app, ["keys", "init", "--parties", "a,b", "--out", str(target)])
    assert out.exit_code == 2 and "not a directory" in out.output


def test_keys_init_says_which_malicious_sessions_the_policy_serves(tmp_path):
    """A malicious policy: the table's advice and the JSON say up to which N the parties'
    join check passes (sizing.largest_points), and a policy that serves no AUC session says
    so and names the options to change; semi-honest policies carry no such field."""
    from privfl.evaluation.fhauc.reveal import Reveal
    from privfl.evaluation.fhauc.sizing import largest_points

    args = ["keys", "init", "--parties", "a,b,c", "--security", "malicious",
            "--max-samples-per-party", "1000"]  # fmt: skip
    out = runner.invoke(app, [*args, "--min-pairs", "1000000", "--out", str(tmp_path / "k1"),
                              "--json"])  # fmt: skip
    assert out.exit_code == 0, out.output
    served = json.loads(out.stdout)["join_check"]
    policy = fhauc.Policy(fhauc.Security.MALICIOUS, 1000, min_pairs=10**6)
    assert served == {
        "parties": 3,
        "splits": 4,
        "auc_max_points": largest_points(policy, 3, 4, "single", Reveal.AUC),
        "curve_max_points": largest_points(policy, 3, 4, "single", Reveal.CURVE),
    }
    assert 100 < served["auc_max_points"] < policy.max_points
    out = runner.invoke(app, [*args, "--min-pairs", "1000", "--out", str(tmp_path / "k2")])
    assert out.exit_code == 0, out.output
    text = " ".join(out.output.split())
    assert "AUC sessions pass at no N" in text
    assert "--min-pairs" in text and "--executions" in text
    out = runner.invoke(app, ["keys", "init", "--parties", "a,b", "--out", str(tmp_path / "k3"),
                              "--json"])  # fmt: skip
    assert "join_check" not in json.loads(out.stdout)
    out = runner.invoke(app, [*args, "--min-pairs", "1000000", "--out", str(tmp_path / "k4"),
                              "--keys", "threshold", "--json"])  # fmt: skip
    assert out.exit_code == 0, out.output
    threshold = json.loads(out.stdout)["join_check"]
    assert threshold["auc_max_points"] == largest_points(policy, 3, 4, "threshold", Reveal.AUC)
    assert threshold["auc_max_points"] < served["auc_max_points"]  # its own noise model


def test_keys_init_refuses_a_policy_no_session_can_meet(tmp_path):
    """More --min-parties than parties, or a malicious policy whose --max-splits is below the
    2 shares the variant needs: every session would be refused, so nothing is provisioned."""
    base = ["keys", "init", "--parties", "a,b,c"]
    out = runner.invoke(app, [*base, "--min-parties", "4", "--out", str(tmp_path / "k1")])
    assert out.exit_code == 2 and "--min-parties" in out.output
    out = runner.invoke(app, [*base, "--security", "malicious", "--min-pairs", "1000",
                              "--max-splits", "1", "--out", str(tmp_path / "k2")])  # fmt: skip
    assert out.exit_code == 2 and "--max-splits" in out.output
    assert not (tmp_path / "k1").exists() and not (tmp_path / "k2").exists()


def test_keys_init_writes_the_policy_the_parties_enforce(tmp_path):
    out = runner.invoke(
        app,
        ["keys", "init", "--parties", "a,b", "--out", str(tmp_path / "k"), "--security",
         "malicious", "--max-samples-per-party", "512", "--executions", "3",
         "--min-pairs", "4096"],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    agg = fhauc.Aggregator()
    agg.receive_setup(load_aggregator_keys(tmp_path / "k" / "aggregator").public_setup)
    assert agg.policy.security is fhauc.Security.MALICIOUS
    assert (agg.policy.max_samples_per_party, agg.policy.executions) == (512, 3)
    party = load_party_keys(tmp_path / "k" / "b")
    p = fhauc.Party(party.name, party.identity, party.roster, party.key_holder)
    p.receive_bundle(party.bundle)
    assert p.policy.min_pairs == 4096  # the parties' bound; the aggregator's copy has none
    assert p.policy.public() == agg.policy
