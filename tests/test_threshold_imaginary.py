"""The lead's decoding of every slot a fused plaintext holds (``fuse_and_decode(...,
every_slot=True)`` for the real parts, :func:`imaginary_parts` through the twin context that
decodes COMPLEX): on real OpenFHE ciphertexts, the complex values put in are the ones read,
in a sparse set (the batch repeats) and in a full one."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from test_threshold_support import require_openfhe_for_tests

require_openfhe_for_tests()

from privfl.crypto.threshold import ThresholdContext, parameter_set  # noqa: E402
from privfl.crypto.threshold.ciphertext import (  # noqa: E402
    JointDecryptionError,
    fuse_and_decode,
    imaginary_parts,
)
from privfl.crypto.threshold.params import DECRYPTION_TOWERS  # noqa: E402
from privfl.errors import InputError  # noqa: E402

SETS = ("test", "fhauc-test")  # batch 32 in ring 2^12 (sparse), 2048 in ring 2^12 (full)


@pytest.fixture(scope="module")
def contexts():
    out = {}
    for name in SETS:
        ctx = ThresholdContext.for_parameters(parameter_set(name), 2)
        twin = ThresholdContext.for_parameters(parameter_set(name), 2, complex_slots=True)
        out[name] = (ctx, twin, ctx.cc.KeyGen())
    return out


def lead_share(ctx, keys, ciphertext):
    """A lead's fused share of ``ciphertext`` under a throwaway single key (the whole secret:
    the lead's ``MultipartyDecryptLead`` with no other share), as the lead loads it."""
    compressed = ctx.cc.Compress(ciphertext, DECRYPTION_TOWERS)
    level, deg = compressed.GetLevel(), compressed.GetNoiseScaleDeg()
    layout = ctx.compressed_layout(level, deg)
    tag = keys.publicKey.GetKeyTag()
    loaded = ctx.load("ciphertext", layout, ctx.dump(layout, compressed), tag)
    return ctx.cc.MultipartyDecryptLead([loaded], keys.secretKey)[0], level, deg, tag


@settings(max_examples=16, deadline=None)
@given(
    name=st.sampled_from(SETS),
    seed=st.integers(0, 2**32 - 1),
    imaginary_scale=st.sampled_from([0.0, 1e-3, 1.0, 1e4]),
)
def test_every_slot_decodes_the_complex_values_put_in(contexts, name, seed, imaginary_scale):
    """Real parts (scale 1) and imaginary parts (``imaginary_scale``) in all ``ring / 2``
    slots: the twin reads the imaginary parts (to the lead share's flooding noise); OpenFHE's
    REAL decoding gives the real parts with noise of the imaginary parts' size added, and
    refuses large ones (its refusal kept: :class:`JointDecryptionError`)."""
    ctx, twin, keys = contexts[name]
    half = ctx.ring // 2
    rng = np.random.default_rng(seed)  # not secret: test values
    z = rng.normal(size=half) + 1j * imaginary_scale * rng.normal(size=half)
    plain = twin.cc.MakeCKKSPackedPlaintext(list(z), 1, 0, None, half)  # every slot
    share, level, deg, tag = lead_share(ctx, keys, ctx.cc.Encrypt(keys.publicKey, plain))
    imaginary = imaginary_parts(ctx, share, level, deg, tag)
    # the lead share's flooding noise per slot: the set's bound, for ring / 2 decoded slots
    flooding = 2 * ctx.params.decryption_error_bound(2) * np.sqrt(half / ctx.slots)
    assert np.abs(imaginary - z.imag).max() < flooding + 1e-6 * imaginary_scale
    if imaginary_scale > 100:
        with pytest.raises(JointDecryptionError, match="approximation error"):
            fuse_and_decode(ctx, [share], half, every_slot=True)
        return
    real = fuse_and_decode(ctx, [share], half, every_slot=True)
    # REAL adds noise of the imaginary parts' root mean square (measured: max 3.1 to 4.6 times)
    assert np.abs(real - z.real).max() < flooding + 6 * imaginary_scale


def test_a_batch_decodes_as_the_mean_of_its_copies_and_every_slot_needs_the_ring(contexts):
    """Sparse set: a batch decoding is the mean of the ``ring / (2 batch)`` copies the full
    decoding shows (what differs between them the batch never reads); more slots than the
    ring holds are refused."""
    ctx, twin, keys = contexts["test"]
    half, batch = ctx.ring // 2, ctx.slots
    z = np.random.default_rng(7).normal(size=half)  # not secret: test values
    plain = twin.cc.MakeCKKSPackedPlaintext(list(z), 1, 0, None, half)
    share, *_ = lead_share(ctx, keys, ctx.cc.Encrypt(keys.publicKey, plain))
    again, *_ = lead_share(ctx, keys, ctx.cc.Encrypt(keys.publicKey, plain))
    batch_view = fuse_and_decode(ctx, [share], batch)
    flooding = 2 * ctx.params.decryption_error_bound(2)
    assert np.abs(batch_view - z.reshape(-1, batch).mean(axis=0)).max() < flooding + 1e-3
    with pytest.raises(InputError, match="length must be in"):
        fuse_and_decode(ctx, [again], half + 1, every_slot=True)
