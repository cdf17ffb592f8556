"""One CLI convention over every command (issue 19, item 3): ``--json`` prints one JSON object
to stdout, ``--json-out FILE`` writes the same object, an unwritable output path is refused
before any work, progress is printed also when stderr is not a terminal, ``--version``."""

from __future__ import annotations

import io
import json
import time

import pytest
from rich.console import Console
from typer.testing import CliRunner

from _shared import leaf_commands
from privfl import __version__
from privfl.cli import app
from privfl.cli._progress import Tracker

runner = CliRunner()


COMMANDS = leaf_commands()
# The smallest arguments that get each command past its own argument parsing.
REQUIRED = {
    "auc": ["missing.csv", "-s", "score", "-l", "label", "--parties", "2"],
    "dpauc": ["missing.csv", "-s", "score", "-l", "label", "--parties", "2"],
    "keys init": ["--parties", "a,b", "--out", "{tmp}/keys"],
    "forest keys init": ["--participants", "a,b", "--columns", "2,2", "--out", "{tmp}/keys"],
    "audit recommend": ["missing.json"],
    "flower local": ["missing.csv", "--party-column", "p", "-s", "score", "-l", "label"],
    "flower run": ["missing-app"],
    "flower train": ["missing.csv", "--party-column", "p", "-l", "label"],
    "flower train-node": ["{tmp}"],
    "forest local": ["missing.csv", "-l", "label"],
}


def test_the_command_list_is_the_one_this_test_knows():
    assert {"auc", "dpauc", "demo", "keys init", "bench accuracy", "forest run"} <= set(COMMANDS)
    assert set(REQUIRED) <= set(COMMANDS)


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_takes_json_and_json_out(name):
    opts = {o for p in COMMANDS[name].params for o in getattr(p, "opts", [])}
    assert {"--json", "--json-out"} <= opts, f"privfl {name} lacks --json or --json-out"


@pytest.mark.parametrize("name", sorted(COMMANDS))
def test_every_command_refuses_an_unwritable_json_out_before_any_work(name, tmp_path):
    args = [a.replace("{tmp}", str(tmp_path)) for a in REQUIRED.get(name, [])]
    started = time.process_time()
    out = runner.invoke(
        app, [*name.split(), *args, "--json", "--json-out", str(tmp_path / "no" / "r.json")]
    )
    assert out.exit_code == 2, out.output
    assert "does not exist" in out.output and out.stdout == ""
    assert len(out.stderr.strip().splitlines()) == 1  # one line, however long the path
    assert time.process_time() - started < 5
    assert not (tmp_path / "keys").exists()  # nothing was written before the check


def test_json_and_json_out_agree_and_stdout_holds_only_the_json(tmp_path):
    target = tmp_path / "keys.json"
    out = runner.invoke(
        app,
        ["keys", "init", "--parties", "a,b", "--out", str(tmp_path / "k"), "--json",
         "--json-out", str(target)],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout) == json.loads(target.read_text())
    assert target.read_text().endswith("}\n")


def test_version():
    out = runner.invoke(app, ["--version"])
    assert out.exit_code == 0 and out.stdout.strip() == f"privfl {__version__}"


def test_progress_off_a_terminal_is_plain_lines_with_rate_and_eta():
    buf = io.StringIO()
    with Tracker("runs", 4, console=Console(file=buf, force_terminal=False), every=0) as t:
        for _ in range(4):
            t.advance()
    lines = buf.getvalue().splitlines()
    assert lines[0] == "runs: started (4 steps)"
    assert any("/s" in line and "ETA" in line and "1/4 (25%)" in line for line in lines)
    assert lines[-1].startswith("runs: done (4 steps, ")
    assert "\x1b" not in buf.getvalue()  # no terminal control codes in a log


def test_a_semi_honest_result_says_verified_null_not_false(tmp_path):
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, 200)
    pd.DataFrame({"score": rng.random(200), "label": y}).to_csv(tmp_path / "s.csv", index=False)
    out = runner.invoke(
        app, ["auc", str(tmp_path / "s.csv"), "-s", "score", "-l", "label", "--parties", "2",
              "--thresholds", "10", "--json"],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["verified"] is None


def test_flower_local_refuses_an_unknown_key_mode_before_any_work(tmp_path):
    (tmp_path / "s.csv").write_text("site,score,label\na,0.1,0\nb,0.9,1\n")
    out = runner.invoke(
        app, ["flower", "local", str(tmp_path / "s.csv"), "--party-column", "site", "-s",
              "score", "-l", "label", "--keys", "dealer", "--workdir", str(tmp_path / "w")],
    )  # fmt: skip
    assert out.exit_code == 2, out.output
    assert "--keys must be 'single' or 'threshold'" in out.output
    assert not (tmp_path / "w").exists()


def test_privfl_train_reports_every_round_off_a_terminal_and_keeps_stdout_for_json():
    tiny = ["--parties", "2", "--per-party", "20", "--batch-size", "10", "--layers", "64,5,10"]
    out = runner.invoke(app, ["train", "--encrypt-last", "0", "--epochs", "2", *tiny, "--json"])
    assert out.exit_code == 0, out.output
    rounds = [line for line in out.stderr.splitlines() if line.startswith("round ")]
    assert [line.split()[1] for line in rounds] == ["1/2", "2/2"], out.stderr
    assert all("ETA" in line and "acc" in line for line in rounds)
    assert len(json.loads(out.stdout)["history"]) == 2  # stdout holds only the JSON
