"""JSON Schemas (draft 2020-12) of every evaluation result's JSON: the ``to_dict()`` of
:class:`~privfl.evaluation.federated.AUCResult` (one schema, with the rules each security
mode adds), :class:`~privfl.evaluation.dpauc.DPAUCResult`,
:class:`~privfl.evaluation.metrics.Score`, :class:`~privfl.evaluation.metrics.ROCCurve`,
:class:`~privfl.evaluation.metrics.PRCurve`, :class:`~privfl.evaluation.metrics.MetricsResult`,
and what ``privfl auc --json`` (every reveal) and ``privfl dpauc --json`` print.

Non-finite floats are written as ``null`` (``privfl.cli`` does so; ``json.dumps`` of a
``to_dict()`` would write ``Infinity``), so the curves' outermost thresholds (±inf) are
``null``. Every object is closed (``additionalProperties: false``): a new field needs a new
schema line, and the test suite checks the results against these schemas
(``tests/test_result_schemas.py``). ``schema(name)`` returns a copy; ``NAMES`` lists them.
"""

from __future__ import annotations

import copy
from typing import Any

from privfl.errors import InputError

Schema = dict[str, Any]

NUMBER: Schema = {"type": "number"}
NUMBER_OR_NULL: Schema = {"type": ["number", "null"]}
INT_OR_NULL: Schema = {"type": ["integer", "null"]}
UNIT: Schema = {"type": "number", "minimum": 0, "maximum": 1}
NAMES_LIST: Schema = {"type": "array", "items": {"type": "string", "minLength": 1}, "minItems": 1}
MEASURES: Schema = {"type": "object", "additionalProperties": {"type": "number", "minimum": 0}}
CURVE_ARRAY: Schema = {"type": "array", "items": NUMBER_OR_NULL, "minItems": 2}
INTERVAL: Schema = {"type": "array", "items": UNIT, "minItems": 2, "maxItems": 2}
SECURITY: Schema = {"enum": ["semi-honest", "malicious"]}


def _closed(properties: dict[str, Schema], required: list[str] | None = None) -> Schema:
    return {
        "type": "object",
        "properties": properties,
        "required": sorted(properties) if required is None else required,
        "additionalProperties": False,
    }


# What every FHAUC session reports about itself (no AUC): who took part and what it cost.
SESSION: dict[str, Schema] = {
    "security": SECURITY,
    "parties": {"type": "integer", "minimum": 1},
    "party_names": NAMES_LIST,
    "thresholds": {"type": "integer", "minimum": 2},
    "timings": MEASURES,
    "bytes": MEASURES,
    # true: the parties verified the result; null: nothing was verified (never false: a
    # failed verification raises instead of returning a result)
    "verified": {"enum": [True, None]},
    "precision": NUMBER_OR_NULL,  # bound on |result - binned result| when the run has one
    "guarantee_log2": NUMBER_OR_NULL,
}
AUC_FIELDS: dict[str, Schema] = {
    **SESSION,
    "auc": UNIT,
    "cheat_probability": NUMBER_OR_NULL,
    "cheat_probability_log2": NUMBER_OR_NULL,
    "splits": INT_OR_NULL,
    "executions": {"type": "integer", "minimum": 1},
    "tolerance": NUMBER_OR_NULL,
    "spread": NUMBER_OR_NULL,
}
# The modes: semi-honest verifies nothing; malicious always verifies and bounds its error.
MODES: Schema = {
    "if": {"properties": {"security": {"const": "malicious"}}},
    "then": {
        "properties": {
            "verified": {"const": True},
            "precision": NUMBER,
            "splits": {"type": "integer", "minimum": 1},
            "cheat_probability": NUMBER,
            "guarantee_log2": NUMBER,
        }
    },
    "else": {"properties": {"verified": {"const": None}, "splits": {"const": None}}},
}
KEYS: Schema = {"enum": ["single", "threshold"]}
AUC_COMPARE: dict[str, Schema] = {
    k: NUMBER for k in ("binned_auc", "sklearn_auc", "abs_error_vs_binned", "abs_error_vs_sklearn")
}
CURVE_COMPARE: dict[str, Schema] = {
    **AUC_COMPARE,
    **{
        k: NUMBER
        for k in (
            "binned_average_precision", "sklearn_average_precision",
            "ap_abs_error_vs_binned", "ap_abs_error_vs_sklearn",
        )
    },
}  # fmt: skip
THRESHOLD_METRICS: dict[str, Schema] = {
    "threshold": NUMBER,
    **{
        k: NUMBER
        for k in (
            "accuracy",
            "precision",
            "recall",
            "tpr",
            "fpr",
            "f1",
            "balanced_accuracy",
            "mcc",
            "prevalence",
        )
    },
    "undefined": {"type": "array", "items": {"type": "string"}},
}
ROC_FIELDS: dict[str, Schema] = {
    **SESSION,
    "reveal": {"const": "curve"},
    "auc": UNIT,
    "average_precision": UNIT,
    "prevalence": UNIT,
    "fpr": CURVE_ARRAY,
    "tpr": CURVE_ARRAY,
    "roc_thresholds": CURVE_ARRAY,
}
PR_FIELDS: dict[str, Schema] = {
    "pr_precision": CURVE_ARRAY,
    "pr_recall": CURVE_ARRAY,
    "pr_thresholds": CURVE_ARRAY,
}
DPAUC_FIELDS: dict[str, Schema] = {
    "auc": NUMBER_OR_NULL,  # noise may push it outside [0, 1] (noise_dominates)
    "noise_dominates": {"type": "boolean"},
    "mechanism": {"enum": ["laplace", "rr"]},
    "epsilon": {"type": "number", "exclusiveMinimum": 0},
    "thresholds": {"type": "integer", "minimum": 2},
    "parties": {"type": "integer", "minimum": 1},
    "party_names": NAMES_LIST,
    "postprocess": {"type": "string"},
    "calibration": {"type": "string"},
    "noise_scale": {"type": "number", "minimum": 0},
    "flip_probability": {"type": "number", "minimum": 0, "maximum": 0.5},
    "noisy_auc": NUMBER_OR_NULL,
}
ATTACK_ROW: Schema = _closed(
    {
        "party": {"type": "string"},
        "positives": {"type": "integer"},
        "negatives": {"type": "integer"},
        "estimated_positives": NUMBER_OR_NULL,
        "estimated_negatives": NUMBER_OR_NULL,
    }
)


def _with(base: Schema, **extra: Schema) -> Schema:
    """``base`` with optional extra properties."""
    out = copy.deepcopy(base)
    out["properties"].update(extra)
    return out


AUC_RESULT: Schema = {**_closed(AUC_FIELDS), **MODES}
SCORE_AUC: Schema = {
    **_closed(
        {
            **{k: v for k, v in AUC_FIELDS.items() if k != "auc"},
            "value": UNIT,
            "reveal": {"const": "auc"},
            "keys": KEYS,
            "confidence_interval_95": INTERVAL,
        },
        required=sorted([*(k for k in AUC_FIELDS if k != "auc"), "value", "reveal", "keys"]),
    ),
    **MODES,
}
SCORE_CURVE: Schema = _closed(
    {**SESSION, "value": UNIT, "reveal": {"const": "curve"}, "confidence_interval_95": INTERVAL},
    required=sorted([*SESSION, "value", "reveal"]),
)
SCHEMAS: dict[str, Schema] = {
    "AUCResult": AUC_RESULT,
    "DPAUCResult": _closed(DPAUC_FIELDS),
    # an AUC (reveal "auc": the AUC session's facts) or a value read from a revealed curve
    # (the AUC or the average precision: the curve session's facts)
    "Score": {"oneOf": [SCORE_AUC, SCORE_CURVE]},
    "ROCCurve": _closed(ROC_FIELDS),
    "PRCurve": _closed(
        {**SESSION, "reveal": {"const": "curve"}, "average_precision": UNIT, **PR_FIELDS}
    ),
    "MetricsResult": _closed(
        {
            **{k: v for k, v in SESSION.items() if k != "precision"},
            **THRESHOLD_METRICS,
            "reveal": {"const": "metrics"},
            "error_bound": NUMBER_OR_NULL,
        }
    ),
    # privfl auc --json (--reveal auc, the default)
    "cli.auc": {
        **_with(
            _closed(AUC_FIELDS),
            keys=KEYS,
            confidence_interval_95=INTERVAL,
            compare=_closed(AUC_COMPARE),
        ),
        **MODES,
    },
    # privfl auc --reveal curve --json (--metrics-at adds the metrics read from the curve)
    "cli.auc.curve": _with(
        _closed({**ROC_FIELDS, **PR_FIELDS}),
        compare=_closed(CURVE_COMPARE),
        metrics=_closed({**THRESHOLD_METRICS, "reveal": {"enum": ["curve", "metrics"]}}),
    ),
    # privfl auc --reveal metrics --metrics-at T --json
    "cli.auc.metrics": _closed(
        {
            "reveal": {"const": "metrics"},
            "metrics": _closed({**THRESHOLD_METRICS, "reveal": {"const": "metrics"}}),
        }
    ),
    # privfl dpauc --json (--attack adds the server's estimate of each party's class counts)
    "cli.dpauc": _with(
        _closed({**DPAUC_FIELDS, "sklearn_auc": UNIT}),
        attack={"type": "array", "items": ATTACK_ROW},
    ),
}
NAMES = tuple(SCHEMAS)


def schema(name: str) -> Schema:
    """The JSON Schema named ``name`` (one of :data:`NAMES`), with its ``$schema`` and
    ``title``; an unknown name is an :class:`~privfl.errors.InputError`."""
    if name not in SCHEMAS:
        raise InputError(f"no schema named {name!r}; known: {', '.join(NAMES)}")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": name,
        **copy.deepcopy(SCHEMAS[name]),
    }
