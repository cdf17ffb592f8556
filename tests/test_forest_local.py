"""``privfl forest local`` before any process starts: the node files it writes from one data
file, the checks that refuse a bad input or a missing node file before anything runs, and the
typing of the requester's predictions. (The whole command over real Flower processes is run by
``tests/test_flower_forest_local.py``.)"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

from privfl.cli import app
from privfl.datasets import load_tabular
from privfl.errors import InputError
from privfl.federation.flower.forest_local import (
    ForestRunFailed,
    ForestSettings,
    check_node_files,
    run_forest_local,
    split_columns,
    typed,
    write_node_files,
)


@pytest.fixture
def wine_file(tmp_path):
    d = load_tabular("wine", seed=0)
    df = pd.DataFrame(d.x_train[:60], columns=[f"f{i}" for i in range(d.x_train.shape[1])])
    df["quality"] = d.y_train[:60]
    path = tmp_path / "wine.csv"
    df.to_csv(path, index=False)
    return path, df


def test_the_node_files_split_the_columns_hold_out_the_queries_and_shuffle_each_owner(
    wine_file, tmp_path
):
    path, df = wine_file
    layout = write_node_files(path, ForestSettings("quality", predict=2), tmp_path / "data")
    features = [c for c in df.columns if c != "quality"]
    assert [c for cols in layout["columns"] for c in cols] == features
    labels = pd.read_csv(tmp_path / "data" / "labels.csv")
    assert len(labels) == 58 and list(labels.columns) == ["id", "label"]
    orders = []
    for name, cols in zip(layout["names"], layout["columns"], strict=True):
        part = pd.read_csv(tmp_path / "data" / f"{name}.csv")
        assert list(part.columns) == ["id", *cols] and set(part.id) == set(labels.id)
        row = int(part.id[0].removeprefix("r"))  # each participant's rows are its own data
        assert np.allclose(part.iloc[0, 1:].to_numpy(float), df.loc[row, cols].to_numpy(float))
        orders.append(list(part.id))
    assert orders[0] != orders[1]  # each owner holds the rows in its own order
    query = pd.read_csv(tmp_path / "data" / "requester.csv")
    assert np.allclose(query.to_numpy(float), df[features].iloc[-2:].to_numpy(float))


def test_bad_inputs_are_refused_before_any_process_starts(wine_file, tmp_path):
    path, df = wine_file
    with pytest.raises(InputError, match="unknown label column"):
        run_forest_local(path, ForestSettings("nope"), workdir=tmp_path / "w1")
    assert not (tmp_path / "w1" / "superlink.log").exists()
    df.assign(f0=["x"] * len(df)).to_csv(tmp_path / "text.csv", index=False)
    with pytest.raises(InputError, match="must be numeric"):
        write_node_files(tmp_path / "text.csv", ForestSettings("quality"), tmp_path / "d2")
    with pytest.raises(InputError, match="cannot be split"):
        split_columns(["a", "b"], 3)
    for bad in (ForestSettings("q", participants=1), ForestSettings("q", predict=0),
                ForestSettings("q", task="ranking")):  # fmt: skip
        with pytest.raises(InputError):
            bad.check()


def test_a_missing_or_changed_node_file_is_named_before_the_nodes_start(wine_file, tmp_path):
    path, _ = wine_file
    layout = write_node_files(path, ForestSettings("quality"), tmp_path / "data")
    check_node_files(layout, tmp_path / "data")
    pd.DataFrame({"id": ["a"], "zzz": [1.0]}).to_csv(layout["files"]["participant-2"], index=False)
    with pytest.raises(InputError, match=r"participant-2\.csv has columns"):
        check_node_files(layout, tmp_path / "data")
    layout["files"]["participant-2"].unlink()
    with pytest.raises(InputError, match="participant-2's data file"):
        check_node_files(layout, tmp_path / "data")


def test_predictions_come_back_as_the_label_columns_own_values():
    assert typed(["1", "0"], "classification", [0, 1]) == [1, 0]
    assert all(type(v) is int for v in typed(["1"], "classification", list(np.array([0, 1]))))
    assert typed([">50K"], "classification", ["<=50K", ">50K"]) == [">50K"]
    assert typed(["2.5"], "regression", []) == [2.5]
    with pytest.raises(ForestRunFailed, match="not in the data"):
        typed(["7"], "classification", [0, 1])


def test_the_cli_refuses_a_missing_file_and_insecure_keys_with_exit_code_2(wine_file, tmp_path):
    path, _ = wine_file
    runner = CliRunner()
    missing = runner.invoke(app, ["forest", "local", str(tmp_path / "none.csv"), "-l", "q"])
    assert missing.exit_code == 2 and "not found" in missing.output
    weak = runner.invoke(app, ["forest", "local", str(path), "-l", "quality", "--key-bits", "512"])
    assert weak.exit_code == 2


def test_a_revfrf_node_parses_its_table_once_and_again_only_when_it_changes(tmp_path, monkeypatch):
    from privfl.federation import revfrf_tables

    frame = pd.DataFrame({"id": ["a", "b", "c"], "f0": [1.0, 2.0, 3.0], "f1": [0.5, 0.25, 0.0]})
    path = tmp_path / "p.csv"
    frame.to_csv(path, index=False)
    parsed = []
    real = revfrf_tables.read_node_table
    monkeypatch.setattr(revfrf_tables, "read_node_table", lambda *a: parsed.append(a) or real(*a))
    state: dict[str, bytes] = {}
    first = revfrf_tables.cached_table(state, "train", str(path), "id")
    again = revfrf_tables.cached_table(state, "train", str(path), "id")  # a fresh process
    assert len(parsed) == 1 and first[0] == again[0] == ["a", "b", "c"]
    assert np.array_equal(first[1], again[1])
    frame.assign(
        f0=[
            9.0,
            9.0,
            9.0,
        ]
    ).to_csv(path, index=False)
    assert revfrf_tables.cached_table(state, "train", str(path), "id")[1][0, 0] == 9.0
    assert len(parsed) == 2
