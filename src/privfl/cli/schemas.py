"""JSON Schemas (draft 2020-12) of what the other ``privfl`` commands print with ``--json``:
``flower local`` (every party's own result), ``train`` (the training result and its per-round
history), the four ``audit`` commands, ``forest run`` and ``forest local``. The evaluation
results' schemas (``auc``, ``dpauc``, the metrics) are in :mod:`privfl.evaluation.schemas`;
:func:`schema` finds either.

As there, non-finite floats are written as ``null`` (an accuracy not known because the layers
are encrypted is ``null``, never ``NaN``), every field has one type whatever the options, and
the objects privfl defines are closed (``additionalProperties: false``): a new field needs a
new line here, and ``tests/test_cli_schemas.py`` checks what the commands write. Maps keyed
by a party's, participant's or role's name are open (their keys are the user's names).
"""

from __future__ import annotations

import copy

from privfl.errors import InputError
from privfl.evaluation import schemas as evaluation
from privfl.evaluation.schemas import NUMBER, NUMBER_OR_NULL, UNIT, Schema

INT: Schema = {"type": "integer"}
COUNT: Schema = {"type": "integer", "minimum": 0}
POSITIVE: Schema = {"type": "integer", "minimum": 1}
TEXT: Schema = {"type": "string"}
UNIT_OR_NULL: Schema = {"type": ["number", "null"], "minimum": 0, "maximum": 1}
SECONDS: Schema = {"type": "number", "minimum": 0}
LAYERS: Schema = {"type": "array", "items": POSITIVE}


def _closed(properties: dict[str, Schema]) -> Schema:
    return {
        "type": "object",
        "properties": properties,
        "required": sorted(properties),
        "additionalProperties": False,
    }


def _map(values: Schema) -> Schema:
    """An object keyed by names the user chose (parties, roles, channels)."""
    return {"type": "object", "additionalProperties": values}


def _array(items: Schema) -> Schema:
    return {"type": "array", "items": items}


# ----------------------------------------------------------------------------- training
ROUND: Schema = _closed(
    {
        "round": POSITIVE,
        "epoch": COUNT,
        # the parties' own figures; null where a role did not evaluate (the server)
        "loss": NUMBER_OR_NULL,
        "accuracy": UNIT_OR_NULL,
        "max_abs_u": NUMBER_OR_NULL,
        "max_boundary_error": NUMBER_OR_NULL,
        "seconds": SECONDS,
    }
)
TRAINING_RESULT: dict[str, Schema] = {
    "layers": {**LAYERS, "minItems": 2},
    "encrypted_layers": COUNT,
    "epochs": POSITIVE,
    "rounds": POSITIVE,
    "batch_size": POSITIVE,
    "learning_rate": {"type": "number", "exclusiveMinimum": 0},
    "seed": COUNT,
    "sigmoid_range": {"type": "array", "items": NUMBER, "minItems": 2, "maxItems": 2},
    "sigmoid_degree": POSITIVE,
    "parameters": TEXT,
    "revealed": {"type": "boolean"},
    "history": _array(ROUND),
    "role_seconds": _map(SECONDS),
    "role_bytes": _map(_closed({"sent": COUNT, "received": COUNT})),
    "per_party": _map(NUMBER),
    "setup_seconds": SECONDS,
    "setup_bytes": COUNT,
    "wall_seconds": SECONDS,
    "warnings": _array(TEXT),
    "classes": {"type": "array", "items": {"type": ["integer", "string"]}},
    "party_names": {**evaluation.NAMES_LIST, "uniqueItems": True},
}
TRAIN: Schema = {
    **_closed(
        {
            **TRAINING_RESULT,
            "dataset": TEXT,
            "test_rows": COUNT,
            "test_accuracy": UNIT_OR_NULL,  # null: no test rows
            "model_file": TEXT,  # only with --model-out
        }
    ),
}
TRAIN["required"] = sorted(k for k in TRAIN["properties"] if k != "model_file")

# ----------------------------------------------------------------------------- audits
# the training settings are null when not known (a --model file records only its layers)
MODEL: Schema = _closed(
    {
        "sizes": {**LAYERS, "minItems": 2},
        "epochs": {"type": ["integer", "null"], "minimum": 1},
        "batch": {"type": ["integer", "null"], "minimum": 1},
        "lr": {"type": ["number", "null"], "exclusiveMinimum": 0},
    }
)
MEMBERSHIP_ROW: dict[str, Schema] = {
    "layer": POSITIVE,
    "features": TEXT,
    "accuracy": UNIT,
    "auc": UNIT,
    "tpr_at_1pct_fpr": UNIT,
    "runs": POSITIVE,
    "accuracy_max": UNIT,
    "auc_max": UNIT,
}
AUDIT: dict[str, Schema] = {
    "attack": TEXT,
    "dataset": TEXT,
    "description": TEXT,
    "model": MODEL,
    "seconds": SECONDS,
}
MEMBERSHIP: Schema = _closed(
    {
        **AUDIT,
        "members": POSITIVE,
        "non_members": POSITIVE,
        # null: not known (a --model file whose encrypted layers are missing)
        "train_accuracy": UNIT_OR_NULL,
        "test_accuracy": UNIT_OR_NULL,
        "attack_epochs": POSITIVE,
        "layers": _array(_closed(MEMBERSHIP_ROW)),
        "over_training": _array(_closed({"epoch": POSITIVE, **MEMBERSHIP_ROW})),
    }
)
SNAPSHOT: Schema = _closed(
    {
        "epoch": POSITIVE,
        "classes": _array(INT),
        "rmse": _array(NUMBER),
        "mean_rmse": NUMBER,
        "baseline_rmse": _array(NUMBER),
        "mean_baseline_rmse": NUMBER,
        "identified": _array({"type": "boolean"}),
        "identification_rate": UNIT,
        "correlation": _array(NUMBER),
        "mean_correlation": NUMBER,
        "confidence": _array(UNIT),
    }
)
INVERSION: Schema = _closed(
    {
        **AUDIT,
        "train_accuracy": UNIT,
        "test_accuracy": UNIT,
        "exposed_layers": LAYERS,
        "candidate_classes": POSITIVE,
        # "ran", or why not (then no snapshots)
        "result": {"enum": ["ran", "not possible in this setting"]},
        "snapshots": _array(SNAPSHOT),
    }
)
PROPERTY: Schema = _closed(
    {
        **AUDIT,
        "rows": POSITIVE,
        "train_accuracy": UNIT,
        "snapshots": _array(POSITIVE),
        "layers": _array(
            _closed(
                {
                    "layer": POSITIVE,
                    "accuracy": UNIT,
                    "auc": UNIT,
                    "runs": POSITIVE,
                    "accuracy_max": UNIT,
                    "auc_max": UNIT,
                }
            )
        ),
    }
)
RECOMMEND: Schema = _closed(
    {
        "encrypt_layers": LAYERS,
        "max_leakage": UNIT,
        "layers": POSITIVE,
        "exposed_layers": LAYERS,
        "unaudited_layers": LAYERS,
        "model_sizes": {"type": ["array", "null"], "items": POSITIVE},
        "worst_accuracy_per_layer": _map(UNIT_OR_NULL),
    }
)

# ----------------------------------------------------------------------------- RevFRF
EFFECTIVENESS: Schema = _closed(
    {
        "dataset": TEXT,
        "description": TEXT,
        "task": {"enum": ["classification", "regression"]},
        "participants": POSITIVE,
        "train": POSITIVE,
        "test": POSITIVE,
        "trees": POSITIVE,
        "depth": POSITIVE,
        "key_bits": POSITIVE,
        "rho": POSITIVE,
        "candidates": POSITIVE,
        "fit_seconds": SECONDS,
        "revoked_participants": _array(TEXT),
        # one model's test metrics: accuracy/recall/f1 or mse/mae/r2
        "rows": _array(
            {
                "type": "object",
                "properties": {"model": TEXT, "revoked": COUNT},
                "required": ["model", "revoked"],
                "additionalProperties": NUMBER,
            }
        ),
        "report": {"type": "object"},  # the forest's own report (RevFRF.report)
    }
)
FOREST_LOCAL: Schema = _closed(
    {
        "predictions": {"type": "array"},  # the label column's values, as in the file
        "summary": {"type": "object"},  # the CS's summary of the run
        "workdir": TEXT,
        "run_id": {"type": ["integer", "null"]},
        "status": TEXT,
        "seconds": SECONDS,
        "rounds": _map(COUNT),
    }
)

# ----------------------------------------------------------------------------- FHAUC on Flower
# What each party's ClientApp wrote: its own result of the session (the AUC it decrypted).
# "party_names" lists the names, as in AUCResult; open (more fields come with the Flower
# curve/metrics reveals).
PARTY_RESULT: Schema = {
    "type": "object",
    "properties": {
        "party": {"type": "string", "minLength": 1},
        "session": TEXT,
        "auc": UNIT,
        "security": evaluation.SECURITY,
        "thresholds": {"type": "integer", "minimum": 2},
        "party_names": evaluation.NAMES_LIST,
        "verified": {"enum": [True, None]},
        "executions": POSITIVE,
        "precision": NUMBER_OR_NULL,
        "tolerance": NUMBER_OR_NULL,
        "spread": NUMBER_OR_NULL,
        "guarantee_log2": NUMBER_OR_NULL,
    },
    "required": ["party", "session", "security", "thresholds", "party_names", "verified"],
    **evaluation.MODES,  # semi-honest: verified null; malicious: true, with its bounds
}
FLOWER_LOCAL: Schema = _closed(
    {
        "parties": _map(PARTY_RESULT),
        "workdir": TEXT,
        "run_id": {"type": ["integer", "null"]},
        "status": TEXT,
        "seconds": SECONDS,
        "security": evaluation.SECURITY,
        "thresholds": {"type": "integer", "minimum": 2},
    }
)

SCHEMAS: dict[str, Schema] = {
    "cli.flower.local": FLOWER_LOCAL,
    "cli.train": TRAIN,
    "cli.audit.membership": MEMBERSHIP,
    "cli.audit.inversion": INVERSION,
    "cli.audit.property": PROPERTY,
    "cli.audit.recommend": RECOMMEND,
    # one object per dataset of --dataset, in its order
    "cli.forest.run": _closed({"datasets": {**_array(EFFECTIVENESS), "minItems": 1}}),
    "cli.forest.local": FOREST_LOCAL,
}
NAMES = (*evaluation.NAMES, *SCHEMAS)


def schema(name: str) -> Schema:
    """The JSON Schema named ``name`` (one of :data:`NAMES`: a result type or what a command
    prints with ``--json``); an unknown name is an :class:`~privfl.errors.InputError`."""
    if name in evaluation.SCHEMAS:
        return evaluation.schema(name)
    if name not in SCHEMAS:
        raise InputError(f"no schema named {name!r}; known: {', '.join(NAMES)}")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": name,
        **copy.deepcopy(SCHEMAS[name]),
    }
