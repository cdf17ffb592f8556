"""The process keeps the threshold contexts of the few most recently used (parameter set,
parties) pairs, not one per size it ever planned: each holds about 80 MB (ring 2^14), and
``benchmarks/fhauc_acceptance.py --analytic`` (a join check per drawn party count) was
killed by the OOM killer at 21 GB. An evicted context stays usable, and the one built again
for the same pair works with its keys and ciphertexts.

Two further sources of that growth: planning a session built a whole context to read its ring
dimension, and every context build left its throwaway key's automorphism keys (36 MB on the
``fhauc`` ring) in OpenFHE's process-global store, which frees nothing by itself: cycling
through 9 party counts grew by 325 MB per round with the cache at 8. Planning now reads the
ring from a bare OpenFHE context (a join-check sweep: 300 draws of 2 to 1,000 parties in 3.5 s
at 82 MB); a context's throwaway automorphism keys stay until the keystore clears OpenFHE's
store at the end of a threshold session."""

from __future__ import annotations

import pytest

pytest.importorskip("openfhe")

import numpy as np

from privfl.crypto.threshold import context
from privfl.crypto.threshold.params import parameter_set
from privfl.evaluation.fhauc.messages import SessionConfig
from privfl.evaluation.fhauc.policy import Policy, Security
from privfl.evaluation.fhauc.reveal import Reveal
from privfl.evaluation.fhauc.threshold import plan as threshold_plan
from privfl.messages import SESSION_ID_BYTES

PARAMS = parameter_set("fhauc-test")  # fast, insecure


def test_contexts_are_bounded_and_an_evicted_one_still_works_with_its_successor():
    first = context.ThresholdContext.for_parameters(PARAMS, 2)
    keys = first.cc.KeyGen()
    ct = first.cc.Encrypt(keys.publicKey, first.cc.MakeCKKSPackedPlaintext([1.5, -2.0]))
    for parties in range(3, 4 + context.MAX_CONTEXTS):
        context.ThresholdContext.for_parameters(PARAMS, parties)
        assert len(context._CONTEXTS) <= context.MAX_CONTEXTS
    assert (PARAMS, 2) not in context._CONTEXTS  # the least recently used went first
    again = context.ThresholdContext.for_parameters(PARAMS, 2)
    assert again is not first and again.ring == first.ring
    doubled = again.cc.EvalAdd(ct, ct)  # the evicted context's ciphertext, the new context
    plain = again.cc.Decrypt(keys.secretKey, doubled)
    plain.SetLength(2)
    assert plain.GetRealPackedValue() == pytest.approx([3.0, -4.0], abs=1e-3)


def test_a_context_in_use_is_kept_while_others_come_and_go():
    kept = context.ThresholdContext.for_parameters(PARAMS, 2)
    for parties in range(3, 3 + 2 * context.MAX_CONTEXTS):
        context.ThresholdContext.for_parameters(PARAMS, parties)
        assert context.ThresholdContext.for_parameters(PARAMS, 2) is kept  # used again: kept


def test_the_ring_without_a_context_is_the_contexts_ring():
    for parties in (2, 5):
        expected = context.ThresholdContext.for_parameters(PARAMS, parties).ring
        assert context.ring_dimension(PARAMS, parties) == expected


@pytest.mark.parametrize("reveal", [Reveal.AUC, Reveal.CURVE])
def test_planning_sessions_of_many_sizes_builds_no_context(monkeypatch, reveal):
    def refuse(*args, **kwargs):
        raise AssertionError("planning built a ThresholdContext")

    monkeypatch.setattr(context.ThresholdContext, "__init__", refuse)
    for parties in (3, 17, 64, 333, 1000):
        config = SessionConfig(
            bytes(SESSION_ID_BYTES), tuple(f"p{i}" for i in range(parties)),
            np.linspace(0.9, 0.1, 50), security=Security.MALICIOUS, splits=4, reveal=reveal,
        )  # fmt: skip
        plan = threshold_plan.plan(config, Policy(Security.MALICIOUS, 2048, executions=2))
        assert plan.executions == 2
