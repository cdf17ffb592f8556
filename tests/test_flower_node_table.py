"""The ClientApp reads its node's columns without pandas (issue 31: the join round's
0.3-0.5 s of CPU was pandas' import); what it reads must equal what pandas reads, and
everything numpy's reader cannot read exactly goes to pandas."""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from privfl.errors import InputError
from privfl.federation.flower.node_table import numeric_columns, read_columns

COLS = ("score", "label")


def _pandas(path):
    df = pd.read_csv(path)
    return df["score"].to_numpy(), df["label"].to_numpy()


finite = st.floats(allow_nan=False, allow_infinity=False, width=64)


@settings(max_examples=25)
@given(
    scores=st.lists(finite, min_size=1, max_size=30),
    extra=st.booleans(),
    gz=st.booleans(),
    data=st.data(),
)
def test_a_plain_numeric_csv_reads_exactly_as_pandas_reads_it(
    tmp_path_factory, scores, extra, gz, data
):
    labels = data.draw(st.lists(st.integers(0, 1), min_size=len(scores), max_size=len(scores)))
    frame = {"label": labels, "score": scores} if extra else {"score": scores, "label": labels}
    if extra:
        frame["other"] = [float(k) for k in range(len(scores))]
    path = tmp_path_factory.mktemp("t") / ("d.csv.gz" if gz else "d.csv")
    pd.DataFrame(frame).to_csv(path, index=False)
    fast = numeric_columns(path, COLS)
    assert fast is not None
    want_s, want_l = _pandas(path)
    np.testing.assert_array_equal(fast[0], want_s.astype(np.float64))
    np.testing.assert_array_equal(fast[1], want_l.astype(np.float64))


@pytest.mark.parametrize(
    "text",
    [
        "score,label\n0.5,yes\n0.2,no\n",  # labels not numbers
        "score,label\n0.5,1\n,0\n",  # a missing value
        "score,label\n0.5,1\nnan,0\n",  # NaN
        '"score","label"\n0.5,1\n0.2,0\n',  # quoted header
        "score,label\n0.5,1,7\n0.2,0,8\n",  # one more field per row: pandas' index column
        "score,label\n0.5,1\n0.2,0,3\n",  # a ragged row
        "score,label\n",  # no rows
        "id,score,label\na,0.5,1\nb,0.2,0\n",  # another column is not numbers
        "score,label\n#0.5,1\n0.2,0\n",  # a '#' is data for pandas, not a comment
        "score,label\n" + "0" * 70000 + ".5,1\n0.2,0\n",  # a first row too long to peek at
        "score,label",  # a header and nothing else, no newline
    ],
)
def test_what_numpy_cannot_read_exactly_goes_to_pandas(tmp_path, text):
    path = tmp_path / "d.csv"
    path.write_text(text)
    assert numeric_columns(path, COLS) is None
    try:
        want = _pandas(path)
    except Exception:
        with pytest.raises(InputError):
            read_columns(path, COLS)
        return
    got = read_columns(path, COLS)
    for g, w in zip(got, want, strict=True):
        np.testing.assert_array_equal(g, w)
        assert g.dtype == w.dtype


def test_a_missing_column_or_file_is_an_input_error(tmp_path):
    path = tmp_path / "d.csv"
    path.write_text("score,y\n0.5,1\n")
    with pytest.raises(InputError, match="no column 'label'"):
        read_columns(path, COLS)
    with pytest.raises(InputError):
        read_columns(tmp_path / "absent.csv", COLS)


def test_a_plain_csv_is_read_without_importing_pandas(tmp_path):
    import subprocess

    path = tmp_path / "d.csv"
    pd.DataFrame({"score": [0.1, 0.9], "label": [0, 1]}).to_csv(path, index=False)
    code = (
        "import sys; from privfl.federation.flower.node_table import read_columns; "
        f"s, y = read_columns({str(path)!r}, ('score', 'label')); "
        "print(s.tolist(), y.tolist(), 'pandas' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["[0.1,", "0.9]", "[0.0,", "1.0]", "False"]


def test_a_large_csv_goes_to_pandas_whose_parser_repays_its_import(tmp_path, monkeypatch):
    from privfl.federation.flower import node_table

    path = tmp_path / "d.csv"
    pd.DataFrame({"score": [0.1, 0.9], "label": [0, 1]}).to_csv(path, index=False)
    assert numeric_columns(path, COLS) is not None
    monkeypatch.setattr(node_table, "PLAIN_MAX_BYTES", path.stat().st_size - 1)
    assert numeric_columns(path, COLS) is None
    scores, labels = read_columns(path, COLS)
    assert scores.tolist() == [0.1, 0.9] and labels.tolist() == [0, 1]
