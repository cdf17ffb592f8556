"""A small RevFRF deployment's files (shared by the in-process and the Flower tests; not a
test module): real wine rows split by columns over three participants, each file with its
own shuffled row order and only part of the ids, a CS labels file, a requester file."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from privfl.datasets import load_tabular
from privfl.federation.revfrf_keys import provision_revfrf

PARTICIPANTS = ("site-a", "site-b", "site-c")
COLUMNS = {"site-a": [0, 1, 2, 3], "site-b": [4, 5, 6, 7], "site-c": [8, 9, 10, 11]}
SETTINGS = dict(n_trees=2, max_depth=1, rho=256, candidates=4)
SEED = 7


def make(
    root: Path, n_train: int = 90, n_test: int = 12, participants: tuple[str, ...] = PARTICIPANTS
) -> dict:
    """Provision the keys (512-bit DT-PKC: tests only) and write every node's files, for
    ``participants`` (a prefix of :data:`PARTICIPANTS`)."""
    data = load_tabular("wine", seed=0)
    rng = np.random.default_rng(11)
    x, y = data.x_train[: n_train + 10], data.y_train[: n_train + 10]
    xt = data.x_test[: n_test + 3]
    ids = np.array([f"w{i:04d}" for i in range(len(x))])
    tids = np.array([f"t{i:03d}" for i in range(len(xt))])
    counts = [len(COLUMNS[p]) for p in participants]
    provision_revfrf(
        participants, counts, root / "keys", requesters=["asker"], key_bits=512,
        allow_insecure_key_bits=True, **SETTINGS,
    )  # fmt: skip
    files = {}
    for p in (*participants, "CS"):
        keep = rng.permutation(np.flatnonzero(rng.random(len(x)) < 0.93))
        tkeep = rng.permutation(np.flatnonzero(rng.random(len(xt)) < 0.9))
        if p == "CS":
            frame = pd.DataFrame({"id": ids[keep], "label": y[keep]})
            frame.to_csv(root / "labels.csv", index=False)
            continue
        cols = COLUMNS[p]
        train = pd.DataFrame(x[keep][:, cols], columns=[f"f{c}" for c in cols])
        train.insert(0, "id", ids[keep])
        test = pd.DataFrame(xt[tkeep][:, cols], columns=[f"f{c}" for c in cols])
        test.insert(0, "id", tids[tkeep])
        train.to_csv(root / f"{p}.csv", index=False)
        test.to_csv(root / f"{p}-test.csv", index=False)
        files[p] = (root / f"{p}.csv", root / f"{p}-test.csv")
    pd.DataFrame(xt[:2]).to_csv(root / "asker.csv", index=False)
    return {"x": x, "y": y, "ids": ids, "xt": xt, "tids": tids, "files": files}


def in_process_forest(truth: dict, aligned_ids: list[str]):
    """The in-process RevFRF grown on the rows in the deployment's aligned order."""
    from privfl.forest import RevFRF

    index = {str(i): k for k, i in enumerate(truth["ids"])}
    rows = np.array([index[i] for i in aligned_ids])
    model = RevFRF(key_bits=512, seed=SEED, allow_insecure_key_bits=True, **SETTINGS)
    parts = {p: truth["x"][rows][:, COLUMNS[p]] for p in PARTICIPANTS}
    return model.fit(parts, truth["y"][rows])


def aligned_test_rows(truth: dict, test_ids: list[str]) -> dict[str, np.ndarray]:
    index = {str(i): k for k, i in enumerate(truth["tids"])}
    rows = np.array([index[i] for i in test_ids])
    return {p: truth["xt"][rows][:, COLUMNS[p]] for p in PARTICIPANTS}
