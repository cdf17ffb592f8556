"""The DPAUC and bench commands: options, the JSON rule and exit code 2 for bad input."""

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import privfl
from privfl.cli import app
from privfl.datasets import deal

runner = CliRunner()


def _scores_csv(path, rng, n):
    """n rows of (score, label, pct = 100 x score) written to ``path``."""
    y = rng.integers(0, 2, n)
    s = np.clip(rng.normal(0.4 + 0.2 * y, 0.2), 0, 1)
    pd.DataFrame({"score": s, "label": y, "pct": 100 * s}).to_csv(path, index=False)
    return path, s, y


def _dpauc(path, *extra, score="score"):
    return runner.invoke(
        app, ["dpauc", str(path), "-s", score, "-l", "label", "--parties", "3", *extra]
    )


def test_cli_dpauc_with_attack(tmp_path, rng):
    path, _, _ = _scores_csv(tmp_path / "s.csv", rng, 600)
    out = _dpauc(path, "--epsilon", "8", "--attack", "--json", "--noise-seed", "1")
    assert out.exit_code == 0, out.output
    res = json.loads(out.stdout)
    assert res["mechanism"] == "laplace" and len(res["attack"]) == 3
    out = _dpauc(path, "--mechanism", "nope")
    assert out.exit_code == 2


def test_cli_bench_accuracy_writes_json_and_plot(tmp_path, rng):
    data, _, _ = _scores_csv(tmp_path / "scores.csv", rng, 2000)
    out = runner.invoke(
        app,
        [
            "bench",
            "accuracy",
            "--data",
            str(data),
            "--sizes",
            "100,1000",
            "--thresholds",
            "25",
            "--runs",
            "3",
            "--parties",
            "5",
            "--json-out",
            str(tmp_path / "o.json"),
            "--plot",
            str(tmp_path / "o.png"),
        ],
    )
    assert out.exit_code == 0, out.output
    res = json.loads((tmp_path / "o.json").read_text())
    assert len(res["accuracy"]) == 2 and len(res["leakage"]["rows"]) == 12
    assert (tmp_path / "o.png").stat().st_size > 10_000
    assert "Table 1" in out.stdout and "Table 2" in out.stdout


def test_cli_bench_accuracy_needs_a_source():
    out = runner.invoke(app, ["bench", "accuracy"])
    assert out.exit_code == 2 and "exactly one" in out.output


@pytest.fixture
def scores_csv(tmp_path):
    return _scores_csv(tmp_path / "s.csv", np.random.default_rng(5), 60)  # not secret: test data


@pytest.mark.parametrize(
    "extra, reason",
    [
        (["--thresholds", "dpauc:x"], "'dpauc:N' needs an integer N >= 3"),
        (["--thresholds", "dpauc:2"], "3 <= N"),
        (["--thresholds", "1000000000"], "100,000"),
        (["--thresholds", "20.5"], "unknown threshold grid"),
        (["--epsilon", "nan"], "epsilon must be a finite number > 0"),
        (["--epsilon", "-1"], "epsilon must be a finite number > 0"),
        (["--noise-seed", "-1"], "seed must be a non-negative integer"),
        (["--seed", "-1"], "seed must be a non-negative integer"),
        (["--postprocess", "clip"], "postprocess must be one of"),
        (["--calibration", "tight"], "calibration must be one of"),
        (["--score-range", "1,0"], "--score-range"),
        (["--json-out", "no/such/folder/x.json"], "does not exist"),
    ],
)
def test_cli_dpauc_bad_input_exits_2_with_a_reason(scores_csv, extra, reason):
    """Issue 14 findings 10 and 14: no traceback, exit code 2 and what to fix."""
    out = _dpauc(scores_csv[0], *extra)
    assert out.exit_code == 2, out.output
    assert reason in " ".join(out.output.split())
    assert "Traceback" not in out.output


def test_cli_dpauc_takes_a_score_range(scores_csv):
    path, _, _ = scores_csv
    out = _dpauc(path, "--json", score="pct")
    assert out.exit_code == 2 and "declared range" in " ".join(out.output.split())
    out = _dpauc(path, "--json", "--score-range", "0,100", "--noise-seed", "1", score="pct")
    assert out.exit_code == 0, out.output
    res = json.loads(out.stdout)
    ref = _dpauc(path, "--json", "--noise-seed", "1")
    assert res["auc"] == pytest.approx(json.loads(ref.stdout)["auc"], abs=1e-9)


def test_cli_dpauc_flags_impossible_aucs_in_table_and_json(scores_csv, tmp_path):
    path, s, y = scores_csv
    data = deal(s, y, 3, 0)
    seed = next(
        i for i in range(200) if privfl.dpauc(data, 20, 0.05, seed=i).noise_dominates
    )  # a noise seed whose faithful AUC leaves [0, 1]
    args = ["--thresholds", "20", "--epsilon", "0.05", "--noise-seed", str(seed)]
    out = _dpauc(path, *args, "--json-out", str(tmp_path / "r.json"))
    assert out.exit_code == 0, out.output
    assert "noise dominates" in out.stdout
    res = json.loads((tmp_path / "r.json").read_text())
    assert res["noise_dominates"] is True and not 0 <= res["auc"] <= 1
    out = _dpauc(path, *args, "--postprocess", "dpauc-authors", "--json")
    res = json.loads(out.stdout)
    assert res["noise_dominates"] is False and 0 <= res["auc"] <= 1
    assert res["postprocess"] == "dpauc-authors"


def test_cli_dpauc_calibration_sets_the_noise_scale(scores_csv):
    path = scores_csv[0]
    for calibration, scale in (("total-budget", 400), ("per-count", 1), ("sensitivity-2", 800)):
        out = _dpauc(path, "--json", "--calibration", calibration)
        assert out.exit_code == 0, out.output
        res = json.loads(out.stdout)
        assert res["calibration"] == calibration and res["noise_scale"] == pytest.approx(scale)


def test_cli_bench_checks_output_paths_and_options_before_any_work(tmp_path):
    """Issue 14 finding 14: a missing folder used to fail after the whole study."""
    import time

    for extra, reason in (
        (["--json-out", str(tmp_path / "no" / "r.json")], "does not exist"),
        (["--plot", str(tmp_path / "no" / "r.png")], "does not exist"),
        (["--calibration", "tight"], "--calibration must be one of"),
        (["--thresholds", "25,1000000000"], "100,000"),
        (["--seed", "-1"], "--seed must be a non-negative integer"),
        (["--sizes", "10", "--parties", "15"], "at least --parties"),
    ):
        start = time.process_time()
        out = runner.invoke(app, ["bench", "accuracy", "--dataset", "adult", *extra])
        assert out.exit_code == 2, out.output
        assert reason in " ".join(out.output.split())
        assert time.process_time() - start < 5  # refused before training the Adult scorer


def test_cli_bench_json_prints_only_json_with_both_postprocessings(tmp_path):
    data, _, _ = _scores_csv(tmp_path / "scores.csv", np.random.default_rng(2), 300)
    args = ["bench", "accuracy", "--data", str(data), "--sizes", "100", "--thresholds", "10"]
    out = runner.invoke(app, [*args, "--runs", "2", "--parties", "3", "--epsilons", "0.01,8"])
    assert out.exit_code == 0, out.output
    assert "Lap ε=0.01 authors" in out.stdout and "noise dominates" in out.stdout
    out = runner.invoke(app, [*args, "--runs", "2", "--parties", "3", "--json"])
    res = json.loads(out.stdout)
    cells = res["accuracy"][0]["dpauc"]
    assert {"laplace eps=1", "laplace eps=1 dpauc-authors", "rr eps=8 dpauc-authors"} <= set(cells)
    assert res["calibration"] == "total-budget"
