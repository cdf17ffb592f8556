"""RevFRF invariants, secure vs plaintext prediction, revocation at both levels, bad input."""

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from privfl.crypto import dtpkc
from privfl.errors import InputError, UnknownPartyError
from privfl.forest import roles
from privfl.forest.revfrf import RevFRF


def data(n=300, seed=0, task="classification"):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 5))
    score = x[:, 0] + 0.7 * x[:, 1] - 0.4 * x[:, 2] + 0.2 * x[:, 3]
    y = (score > 0).astype(int) if task == "classification" else score + 0.1 * rng.normal(size=n)
    return {f"p{i}": x[:, i : i + 1] for i in range(5)}, y


@pytest.fixture(scope="module")
def forest():
    parts, y = data()
    return RevFRF(n_trees=4, max_depth=4, key_bits=512, seed=3).fit(parts, y), parts, y


def test_plain_forest_learns_and_reports_nodes(forest):
    model, parts, y = forest
    assert (model.predict_plain(parts) == y).mean() > 0.8
    rep = model.report()
    assert sum(rep["nodes_per_participant"].values()) == rep["internal_nodes"] > 0
    assert rep["bytes"]["participant->cs"] > 0 and "cs" in rep["seconds"]


def test_secure_prediction_equals_plaintext_prediction(forest):
    model, parts, _ = forest
    rows = {k: v[:8] for k, v in parts.items()}
    assert np.array_equal(model.predict(rows), model.predict_plain(rows))
    one = {k: v[3] for k, v in parts.items()}
    assert (
        model.predict_for("requester", one)
        == model.predict_plain({k: v[3:4] for k, v in parts.items()})[0]
    )


def test_cs_never_holds_a_plaintext_split(forest):
    model, _, _ = forest
    node = next(n for n in model.trees[0].nodes.values() if not n.is_leaf)
    _col, s = model.participants[node.provider].splits[(0, node.node_id)]
    fixed = dtpkc.to_fixed_point(s)
    assert dtpkc.decrypt(model.cs.sk, node.encrypted_split) != fixed  # CS's weak key
    provider_sk = model.participants[node.provider].sk
    assert dtpkc.decrypt(provider_sk, node.encrypted_split) == fixed  # only the provider's


def test_participant_requests_carry_no_labels(forest):
    model, _parts, y = forest
    p = model.participants["p1"]
    assert not hasattr(p, "labels") and not p.seen_labels
    mask = roles.pack_mask(np.ones(len(y), dtype=bool))
    from privfl.messages import Writer

    req = roles.encode(
        "node-request",
        "CS",
        Writer().u32(9).u32(0).bytes_(mask).u32(1).u32(0).u32(8).u32(4).getvalue(),
        model.session,
    )
    reply = p.handle_node_request(req, model.session)
    # the reply is one bit per node sample per candidate, nothing else of the participant's data
    assert len(reply) < 4 * (len(mask) + 16) + 200


def test_revocation_level1_removes_every_node_of_the_participant():
    parts, y = data(seed=1)
    model = RevFRF(n_trees=4, max_depth=4, key_bits=512, seed=5).fit(parts, y)
    target = max(model.report()["nodes_per_participant"].items(), key=lambda kv: kv[1])[0]
    predicted = model.nodes_destroyed_by(target)
    rep = model.revoke(target, level=1)
    assert rep.destroyed_nodes > 0 and rep.destroyed_nodes == predicted
    assert model.nodes_destroyed_by(target) == 0
    for tree in model.trees:
        for node in tree.nodes.values():
            assert node.provider != target
            if node.feature is not None:
                assert model._features[node.feature].owner != target
    assert model.report()["nodes_per_participant"][target] == 0
    assert target in model.published_removals and target not in model.active_keys
    rows = {k: v[:5] for k, v in parts.items()}
    assert np.array_equal(model.predict(rows), model.predict_plain(rows))
    with pytest.raises(InputError, match="already revoked"):
        model.revoke(target)


def test_revocation_level2_refreshed_splits_resist_the_revoked_key():
    parts, y = data(seed=2)
    model = RevFRF(n_trees=3, max_depth=3, key_bits=512, seed=7).fit(parts, y)
    target = max(model.report()["nodes_per_participant"].items(), key=lambda kv: kv[1])[0]
    sk_u = model.participants[target].sk
    old = [n.encrypted_split for t in model.trees for n in t.nodes.values() if n.provider == target]
    rep = model.revoke(target, level=2)
    assert rep.refreshed_ciphertexts >= len(old) > 0
    lam1, lam2 = model.cs.lam1, model.cc.lam2
    originals = {dtpkc.decrypt(sk_u, ct) for ct in old}
    recovered = set()
    for ct in model.archive:
        # both strong-key shares together still open the archived ciphertext...
        secret = dtpkc.partial_decrypt_strong2(lam2, ct, dtpkc.partial_decrypt_strong1(lam1, ct))
        recovered.add(secret)
        # ...but not the revoked weak key, alone or with CS's weak key, nor CC's share alone
        assert dtpkc.decrypt(sk_u, ct) != secret
        with_cs = dtpkc.SecretKey(sk_u.theta + model.cs.sk.theta, sk_u.public)
        assert dtpkc.decrypt(with_cs, ct) != secret
        assert dtpkc.partial_decrypt_strong2(lam2, ct, gm_one()) != secret
    assert originals <= recovered  # every split of the revoked participant was refreshed


def gm_one():
    import gmpy2

    return gmpy2.mpz(1)


def test_forged_revocation_request_is_rejected():
    parts, y = data(seed=3)
    model = RevFRF(n_trees=2, max_depth=3, key_bits=512, seed=1).fit(parts, y)
    mallory = roles.Participant(
        "p0", parts["p0"], model.participants["p0"].sk, Ed25519PrivateKey.generate()
    )
    forged = mallory.revocation_request(model.session)
    with pytest.raises(UnknownPartyError, match="invalid signature"):
        model.revoke("p0", request=forged)
    assert "p0" not in model.revoked


def test_regression_forest():
    parts, y = data(task="regression")
    model = RevFRF(task="regression", n_trees=4, max_depth=5, key_bits=512, seed=2).fit(parts, y)
    pred = model.predict_plain(parts)
    assert np.mean((pred - y) ** 2) < np.var(y) * 0.6
    rows = {k: v[:3] for k, v in parts.items()}
    assert np.allclose(model.predict(rows), model.predict_plain(rows))


@pytest.mark.parametrize(
    "parts, labels, match",
    [
        ({"a": np.zeros((5, 1)), "b": np.zeros((4, 1))}, [0] * 5, "misaligned"),
        ({"a": np.array([[0.0], [np.nan]])}, [0, 1], "NaN"),
        ({}, [], "partitions"),
        ({"a": np.zeros((3, 1))}, [0, 1], "different numbers"),
    ],
)
def test_bad_inputs(parts, labels, match):
    with pytest.raises(InputError, match=match):
        RevFRF(n_trees=1, key_bits=512).fit(parts, labels)


def test_unknown_participant_in_rows_or_revocation(forest):
    model, parts, _ = forest
    with pytest.raises(InputError, match="unknown participant"):
        model.predict_plain({**{k: v[:2] for k, v in parts.items()}, "zz": np.zeros((2, 1))})
    with pytest.raises(InputError, match="unknown participant"):
        model.revoke("zz")


def test_all_seven_benchmark_datasets_load_with_their_shapes():
    from privfl.datasets import TABULAR_DATASETS, load_tabular

    shapes = {}
    for name in TABULAR_DATASETS:
        d = load_tabular(name)
        assert len(d["x_train"]) == len(d["y_train"]) and len(d["x_test"]) == len(d["y_test"])
        assert np.all(np.isfinite(np.asarray(d["x_train"], dtype=float)))
        shapes[name] = (len(d["y_train"]) + len(d["y_test"]), len(d["features"]))
    assert shapes == {
        "adult": (48842, 14),
        "bank": (45211, 16),
        "wine": (6497, 12),
        "drug": (1885, 12),
        "appliances": (19735, 27),
        "coil2000": (9822, 85),
        "bike": (17379, 12),
    }


def test_cli_forest_run_prints_the_effectiveness_table(tmp_path):
    import json

    from typer.testing import CliRunner

    from privfl.cli import app

    out = CliRunner().invoke(
        app,
        [
            "forest",
            "run",
            "--dataset",
            "drug",
            "--trees",
            "3",
            "--depth",
            "3",
            "--key-bits",
            "512",
            "--revoke",
            "0,1",
            "--json-out",
            str(tmp_path / "f.json"),
        ],
    )
    assert out.exit_code == 0, out.output
    res = json.loads((tmp_path / "f.json").read_text())[0]
    assert [r["revoked"] for r in res["rows"]] == [0, 0, 1]
    assert res["rows"][1]["accuracy"] > 0.6 and "scikit-learn" in out.stdout
    out = CliRunner().invoke(
        app,
        ["forest", "run", "--dataset", "drug", "--trees", "3", "--depth", "3", "--key-bits",
         "512", "--revoke", "0", "--diagnostics", "--json-out", str(tmp_path / "d.json")],
    )  # fmt: skip
    assert out.exit_code == 0, out.output
    models = [r["model"] for r in json.loads((tmp_path / "d.json").read_text())[0]["rows"]]
    assert models == [
        "scikit-learn RF (non-federated)",
        "scikit-learn RF, majority vote of the trees",
        "scikit-learn RF, sqrt(|F|) features per split",
        "RevFRF, features reusable on a path",
        "RevFRF",
    ]
    out = CliRunner().invoke(app, ["forest", "run", "--rho", "1"])
    assert out.exit_code == 2
    bad = CliRunner().invoke(app, ["forest", "run", "--dataset", "iris"])
    assert bad.exit_code == 2 and "unknown dataset" in bad.output


def _path_features(tree):
    """Feature sequences along every root-to-leaf path."""
    out, stack = [], [(0, [])]
    while stack:
        nid, path = stack.pop()
        node = tree.nodes[nid]
        if node.is_leaf:
            out.append(path)
        else:
            stack += [(node.left, [*path, node.feature]), (node.right, [*path, node.feature])]
    return out


def test_feature_subsets_differ_between_nodes_and_used_features_leave_the_path():
    """Each node draws its own ceil(sqrt(|F|)) features (a seeded forest used to redraw the
    same subset at every node), and by default a feature is not reused below its node."""
    rng = np.random.default_rng(4)
    x = rng.normal(size=(200, 16))
    y = (np.sign(x).sum(axis=1) > 0).astype(int)  # every feature equally informative
    parts = {f"p{i:02d}": x[:, i : i + 1] for i in range(16)}
    model = RevFRF(n_trees=12, max_depth=3, key_bits=512, seed=0).fit(parts, y)
    roots = {t.nodes[0].feature for t in model.trees}
    assert len(roots) > 4, roots
    for tree in model.trees:
        for path in _path_features(tree):
            assert len(path) == len(set(path))


def test_reusable_features_may_repeat_on_a_path():
    x = np.random.default_rng(5).normal(size=(300, 2))
    y = ((x[:, 0] > 0.5) | (x[:, 0] < -0.5)).astype(int)  # two cuts on the same feature
    parts = {"a": x[:, :1], "b": x[:, 1:]}
    model = RevFRF(n_trees=3, max_depth=4, key_bits=512, seed=1, reuse_features=True)
    model.fit(parts, y)
    assert any(len(p) != len(set(p)) for t in model.trees for p in _path_features(t))
    assert (model.predict_plain(parts) == y).mean() > 0.9
    with pytest.raises(InputError):
        RevFRF(rho=1)
