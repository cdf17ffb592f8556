"""Threshold-CKKS parameters and level budget for an encrypted last layer.

``"secure"``: the ``"training"`` set of :mod:`privfl.crypto.threshold.params` (depth 11,
59-bit scale, HYBRID with 6 digits, 128-bit classical security: OpenFHE picks ring 2^15), with
the batch size set to the layer's packing (``K R C`` slots: 8192 for 20 -> 10 and a batch of
10) and the rotation keys the packing needs (18 for 64-30-20-10).
``"test"``: the same depth on an insecure ring (``HEStd_NotSet``, 2^12 or the smallest that
holds the packing) for fast tests only; everything else (scale, flooding, protocol) is equal.

Level budget (levels consumed; the weights come back from averaging at level 4: the update is
at level 3 and the ``1/N`` of the average takes one more):

* ``u`` = weights + 2 must be bootstrappable: ``<= depth - 4`` (SLACK);
* the sigmoid of degree ``d`` uses ``ceil(log2(d + 1)) + 1`` levels from a fresh ciphertext and
  its output must be bootstrappable;
* ``e_T`` = weights + 2 must keep two towers for joint decryption: ``<= depth - 1``.
"""

from __future__ import annotations

import math

from privfl.crypto.threshold import ThresholdParameters, parameter_set
from privfl.errors import InputError
from privfl.training.packing import LayerLayout

WEIGHT_LEVEL = 4
PARAMETER_KINDS = ("secure", "test")


def sigmoid_levels(degree: int) -> int:
    return math.ceil(math.log2(degree + 1)) + 1


def check_levels(params: ThresholdParameters, degree: int) -> None:
    """Refuse a depth too small for the packing and the sigmoid degree (InputError)."""
    boot = params.bootstrap_max_level
    need_u = WEIGHT_LEVEL + 2
    need_sig = sigmoid_levels(degree)
    if need_u > boot or need_sig > boot or need_u > params.decrypt_max_level:
        raise InputError(
            f"too few levels: depth {params.multiplicative_depth} lets interactive "
            f"bootstrapping refresh ciphertexts up to level {boot}, but the packing needs "
            f"{need_u} (weights at {WEIGHT_LEVEL} + product + mask) and a degree-{degree} "
            f"sigmoid {need_sig}; raise the depth to {max(need_u, need_sig) + 4} or lower "
            "the degree"
        )


def training_parameters(layout: LayerLayout, kind: str = "secure") -> ThresholdParameters:
    """The parameter set for ``layout`` (see the module doc)."""
    if kind not in PARAMETER_KINDS:
        raise InputError(f"parameters must be one of {PARAMETER_KINDS}, got {kind!r}")
    base = parameter_set("training")
    if kind == "secure":
        if layout.slots > base.batch_size:
            raise InputError(
                f"the packing needs {layout.slots} slots, ring 2^15 has {base.batch_size}: "
                "use a smaller batch or narrower last layer"
            )
        return ThresholdParameters(
            "smartcryptnn",
            base.multiplicative_depth,
            layout.slots,
            base.num_large_digits,
            base.circuit_noise_bits,
            base.max_decryptions,
            rotation_steps=layout.rotation_steps,
        )
    ring = max(1 << 12, 2 * layout.slots)
    return ThresholdParameters(
        "smartcryptnn-test",
        base.multiplicative_depth,
        layout.slots,
        3,
        base.circuit_noise_bits,
        1 << 12,
        ring,
        True,
        False,
        layout.rotation_steps,
    )
