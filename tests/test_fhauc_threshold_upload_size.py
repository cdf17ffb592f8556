"""The largest upload an honest threshold party can send fits the aggregator's decoder (issue
27): the upload step's bound once was the key messages' 64 MiB, and honest malicious AUC
uploads of about 80 MB (2 x 1,119 rows at N = 3,202, found by
``benchmarks/fhauc_acceptance.py --random``) were refused after the join as malformed."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("openfhe")

from privfl.crypto.threshold import ThresholdContext
from privfl.errors import MalformedMessageError
from privfl.evaluation.fhauc.messages import SessionConfig
from privfl.evaluation.fhauc.policy import MAX_EXECUTIONS, Policy, Security
from privfl.evaluation.fhauc.reveal import Reveal
from privfl.evaluation.fhauc.threshold import messages as tmsg
from privfl.evaluation.fhauc.threshold import plan as tp
from privfl.messages import SESSION_ID_BYTES

FRAMING = 1 << 20  # signature, names, transcript, per-ciphertext headers: far below 1 MiB


def largest_honest_upload(parties: int, n_points: int, splits: int = 4) -> int:
    """Ciphertext bytes of the largest honest malicious AUC upload on the default ring: the
    most executions a session may use, every vector and chunk of the plan's layout."""
    config = SessionConfig(
        bytes(SESSION_ID_BYTES), tuple(f"p{i}" for i in range(parties)),
        np.linspace(0.999, 0.001, n_points), security=Security.MALICIOUS, splits=splits,
        reveal=Reveal.AUC,
    )  # fmt: skip
    plan = tp.plan(config, Policy(Security.MALICIOUS, 2048, executions=MAX_EXECUTIONS))
    ctx = ThresholdContext.for_parameters(plan.params, parties)
    vectors = 1 if plan.layout.joint else 2
    per_ciphertext = ctx.ciphertext_layout(plan.upload_level, 2).vectors * ctx.ring * 8
    return MAX_EXECUTIONS * vectors * plan.layout.chunks * per_ciphertext


@pytest.mark.parametrize(("parties", "n_points"), [(2, 3202), (2, 4096), (1000, 4096)])
def test_the_largest_honest_upload_fits_the_upload_steps_bound(parties, n_points):
    size = largest_honest_upload(parties, n_points)
    assert size > 64 << 20  # the old bound refused each of these
    assert size + FRAMING <= tmsg.UploadStep.UPLOAD_LIMIT


def test_an_upload_step_above_the_bound_is_refused():
    assert tmsg.UploadStep.from_bytes(tmsg.UploadStep(b"m", bytes(16)).to_bytes()).upload
    big = tmsg.UploadStep(b"m", bytes(tmsg.UploadStep.UPLOAD_LIMIT + 1)).to_bytes()
    with pytest.raises(MalformedMessageError):
        tmsg.UploadStep.from_bytes(big)
