"""A RevFRF node's own tables: its data files parsed once per run and kept in the node's
state (a Flower ClientApp is a fresh process per message), and the rows the PSI aligned."""

from __future__ import annotations

import io
import json
import os
from collections.abc import MutableMapping

import numpy as np

from privfl.datasets import read_table
from privfl.errors import InputError


def read_node_table(
    path: str | None, id_column: str | None, what: str
) -> tuple[list[str], np.ndarray]:
    """A node's file: its ids (none when ``id_column`` is ``None``) and its values as floats."""
    if not path:
        raise InputError(f"node config needs a {what}")
    df = read_table(path)
    if id_column is None:
        return [], np.asarray(df, dtype=np.float64)
    if id_column not in df.columns:
        raise InputError(f"{path} has no id column {id_column!r}")
    ids = [str(v) for v in df[id_column].tolist()]
    return ids, np.asarray(df.drop(columns=[id_column]), dtype=np.float64)


def cached_table(
    state: MutableMapping[str, bytes], which: str, path: str | None, id_column: str
) -> tuple[list[str], np.ndarray]:
    """A participant's table (ids, features), parsed once and then kept in ``state`` (a
    ClientApp is a fresh process per message; parsing the file imports pandas every time).
    The copy is keyed by the file's path, size and modification time, so a changed file is
    read again; it is stored with :func:`numpy.save` (no pickles) and never leaves the node."""
    key = f"table-{which}"
    try:
        st = os.stat(path) if path else None
    except OSError:
        st = None  # read_node_table names the missing file
    stamp = json.dumps([path, st.st_size, st.st_mtime_ns, id_column] if st else None).encode()
    raw = state.get(key)
    if st is not None and raw is not None and raw.startswith(stamp + b"\n"):
        buf = io.BytesIO(raw[len(stamp) + 1 :])
        ids = np.load(buf, allow_pickle=False)
        return [str(i) for i in ids], np.load(buf, allow_pickle=False)
    ids, x = read_node_table(path, id_column, f"{which} file")
    kept = np.asarray(ids, dtype=str)
    if st is not None and [str(i) for i in kept] == ids:  # (numpy drops trailing NULs)
        buf = io.BytesIO()
        np.save(buf, kept, allow_pickle=False)
        np.save(buf, x, allow_pickle=False)
        state[key] = stamp + b"\n" + buf.getvalue()
    return ids, x


def aligned_rows(state: MutableMapping[str, bytes], which: str) -> np.ndarray | None:
    raw = state.get(f"rows-{which}")
    return None if raw is None else np.frombuffer(raw, dtype=">u4").astype(np.int64)
