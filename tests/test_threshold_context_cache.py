"""The process keeps the threshold contexts of the few most recently used (parameter set,
parties) pairs, not one per size it ever planned: each holds about 80 MB (ring 2^14), and
``benchmarks/fhauc_acceptance.py --analytic`` (a join check per drawn party count) was
killed by the OOM killer at 21 GB. An evicted context stays usable, and the one built again
for the same pair works with its keys and ciphertexts."""

from __future__ import annotations

import pytest

pytest.importorskip("openfhe")

from privfl.crypto.threshold import context
from privfl.crypto.threshold.params import parameter_set

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
