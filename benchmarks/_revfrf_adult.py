"""The RevFRF deployment the Flower benchmarks share (not a benchmark): Adult rows split by
columns over the participants, each holding every id in its own shuffled order, a CS labels
file, one test row, optionally a requester; one SuperNode per node of a
:class:`~privfl.federation.flower.local.LocalFederation`."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from privfl.datasets import load_tabular
from privfl.federation.flower.local import LocalFederation
from privfl.federation.revfrf_keys import provision_revfrf

APP = Path(__file__).resolve().parents[1] / "examples" / "flower-revfrf"


def write_files(
    root: Path,
    names: tuple[str, ...],
    rows: int,
    bits: int,
    trees: int,
    depth: int,
    requester: str | None = None,
    predict: int = 1,
) -> dict:
    """Provision the keys and write every node's files (the requester's: ``predict`` Adult
    test rows); returns the rows and the column split."""
    d = load_tabular("adult")
    x, y = d.x_train[:rows], d.y_train[:rows]
    cols = [list(c) for c in np.array_split(np.arange(x.shape[1]), len(names))]
    ids = np.array([f"a{i:05d}" for i in range(len(x))])
    provision_revfrf(
        names, [len(c) for c in cols], root / "keys", requesters=[requester] if requester else [],
        key_bits=bits, allow_insecure_key_bits=bits < 2048, n_trees=trees, max_depth=depth,
    )  # fmt: skip
    rng = np.random.default_rng(0)
    pd.DataFrame({"id": ids, "label": y}).to_csv(root / "labels.csv", index=False)
    xt = d.x_test[:1]
    for name, c in zip(names, cols, strict=True):
        order = rng.permutation(len(x))
        frame = pd.DataFrame(x[order][:, c], columns=[f"f{j}" for j in c])
        frame.insert(0, "id", ids[order])
        frame.to_csv(root / f"{name}.csv", index=False)
        test = pd.DataFrame(xt[:, c], columns=[f"f{j}" for j in c])
        test.insert(0, "id", ["t0"])
        test.to_csv(root / f"{name}-test.csv", index=False)
    if requester:
        pd.DataFrame(d.x_test[:predict]).to_csv(root / f"{requester}.csv", index=False)
    return {"x": x, "y": y, "xt": xt, "cols": cols}


def start_nodes(
    fed: LocalFederation, root: Path, names: tuple[str, ...], requester: str | None = None
) -> None:
    """A SuperLink and one SuperNode per participant, the CC and the requester (if any), each
    reporting its phases; returns when all are online."""
    k, out = root / "keys", root / "out"
    fed.start_superlink()
    for name in names:
        fed.start_supernode(name, {
            "role": "participant", "keys-dir": str(k / name),
            "data-file": str(root / f"{name}.csv"), "test-file": str(root / f"{name}-test.csv"),
            "output-dir": str(out / name), "report-timings": True,
        })  # fmt: skip
    fed.start_supernode("CC", {
        "role": "cc", "keys-dir": str(k / "CC"), "output-dir": str(out / "CC"),
        "report-timings": True,
    })  # fmt: skip
    if requester:
        fed.start_supernode(requester, {
            "role": "requester", "keys-dir": str(k / requester),
            "data-file": str(root / f"{requester}.csv"), "output-dir": str(out / requester),
            "report-timings": True,
        })  # fmt: skip
    fed.wait_for_nodes(len(names) + 1 + bool(requester))


def run_config(root: Path, steps: str, requester: str | None = None) -> dict:
    """The CS's run config: its keys, the labels, where it writes, which steps."""
    k, out = root / "keys", root / "out"
    cfg = {"cs-keys": str(k / "CS"), "labels-file": str(root / "labels.csv"),
           "output-dir": str(out / "CS"), "steps": steps, "timeout": 3600.0}  # fmt: skip
    if requester:
        cfg["requester"] = requester
    return cfg
