"""One JSON Schema per result type (:mod:`privfl.evaluation.schemas`), checked against what
users get: the ``to_dict()`` of real runs (real ciphertexts, default settings, small data) in
every security/key mode, and the JSON the CLI prints. The results name their parties (a
dict's keys, a party column's values), as the errors do."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import privfl
import privfl.metrics as pm
from privfl.cli import app
from privfl.cli._kit import to_jsonable
from privfl.errors import InputError
from privfl.evaluation.schemas import NAMES, schema

jsonschema = pytest.importorskip("jsonschema")

runner = CliRunner()
NAMED = ("site-a", "hospital b")


def check(name: str, value) -> dict:
    """``value``'s JSON (as the CLI writes it) is valid under schema ``name``."""
    document = json.loads(json.dumps(to_jsonable(value), allow_nan=False))
    validator = jsonschema.Draft202012Validator(schema(name))
    errors = sorted(validator.iter_errors(document), key=str)
    assert not errors, f"{name}: " + "; ".join(e.message for e in errors[:5])
    return document


def invalid(name: str, document: dict) -> bool:
    return not jsonschema.Draft202012Validator(schema(name)).is_valid(document)


@pytest.fixture(scope="module")
def parties() -> dict:
    rng = np.random.default_rng(5)  # not secret: test data
    out = {}
    for name in NAMED:
        y = rng.integers(0, 2, 150)
        out[name] = (np.clip(0.3 * y + 0.7 * rng.random(150), 0, 1), y)
    return out


def test_every_schema_is_a_valid_draft_2020_12_schema():
    for name in NAMES:
        jsonschema.Draft202012Validator.check_schema(schema(name))
    with pytest.raises(InputError, match="no schema named"):
        schema("AUCresult")


def test_auc_result_names_its_parties_and_matches_its_schema_in_both_security_modes(parties):
    semi = privfl.federated_auc(parties, 10)
    assert semi.party_names == NAMED
    doc = check("AUCResult", semi)
    assert doc["party_names"] == list(NAMED) and doc["verified"] is None
    listed = privfl.federated_auc(list(parties.values()), 10)
    assert listed.party_names == ("party-0", "party-1")
    malicious = privfl.federated_auc(parties, 10, security="malicious", splits=2)
    doc = check("AUCResult", malicious)
    assert doc["verified"] is True and doc["party_names"] == list(NAMED)
    # the schema can fail: the semi-honest mode never claims a verification, nothing is false
    assert invalid("AUCResult", {**check("AUCResult", semi), "verified": False})
    assert invalid("AUCResult", {**doc, "verified": None})
    missing = check("AUCResult", semi)
    del missing["party_names"]
    assert invalid("AUCResult", missing)


@pytest.mark.slow
def test_threshold_key_auc_result_names_its_parties_and_matches_the_schema(parties):
    pytest.importorskip("openfhe")
    res = privfl.federated_auc(parties, 10, keys="threshold")
    assert res.party_names == NAMED
    assert check("AUCResult", res)["precision"] > 0


def test_a_party_name_too_long_for_the_protocol_is_refused_before_any_work(parties):
    (a, b) = parties.values()
    with pytest.raises(InputError, match="at most 128 bytes"):
        privfl.federated_auc({"x" * 129: a, "y": b}, 10)


def test_dpauc_result_names_its_parties_and_matches_its_schema(parties):
    for mechanism in ("laplace", "rr"):
        res = privfl.dpauc(parties, 10, 1.0, mechanism, 3)
        assert res.party_names == NAMED
        check("DPAUCResult", res)


def test_the_metrics_results_match_their_schemas(parties):
    data = list(parties.values())
    doc = check("Score", pm.roc_auc_score(data, 10))
    assert doc["reveal"] == "auc" and doc["party_names"] == ["party-0", "party-1"]
    check("Score", pm.roc_auc_score(data, 10, reveal="curve"))
    check("Score", pm.average_precision_score(data, 10))
    check("ROCCurve", pm.roc_curve(data, 10))
    check("PRCurve", pm.precision_recall_curve(data, 10))
    metrics = pm.threshold_metrics(data, threshold=0.5)
    doc = check("MetricsResult", metrics)
    # the classifier's precision, not the session's error bound (which is error_bound)
    assert doc["precision"] == pytest.approx(metrics.metrics.precision)


@pytest.fixture(scope="module")
def scores_csv(parties, tmp_path_factory):
    frames = [pd.DataFrame({"site": n, "score": s, "label": y}) for n, (s, y) in parties.items()]
    path = tmp_path_factory.mktemp("csv") / "scores.csv"
    pd.concat(frames).to_csv(path, index=False)
    return path


def cli_json(*args: str) -> dict:
    done = runner.invoke(app, [*args, "--json"])
    assert done.exit_code == 0, done.output
    return json.loads(done.stdout)


def test_the_cli_json_of_auc_and_dpauc_matches_the_schemas(scores_csv):
    common = [str(scores_csv), "-s", "score", "-l", "label", "--party-column", "site"]
    doc = cli_json("auc", *common, "--thresholds", "10", "--compare")
    assert doc["party_names"] == sorted(NAMED)  # the party column's values
    check("cli.auc", doc)
    check("cli.auc.curve", cli_json("auc", *common, "--thresholds", "11", "--reveal", "curve",
                                    "--metrics-at", "0.5", "--compare"))  # fmt: skip
    check("cli.auc.metrics", cli_json("auc", *common, "--reveal", "metrics",
                                      "--metrics-at", "0.5"))  # fmt: skip
    doc = check("cli.dpauc", cli_json("dpauc", *common, "--thresholds", "10", "--attack"))
    assert doc["party_names"] == sorted(NAMED)
