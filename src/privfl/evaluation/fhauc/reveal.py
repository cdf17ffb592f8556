"""What a FHAUC session discloses to the parties: the ``reveal`` modes.

Notation: ``TP_j``, ``FP_j`` are the global (summed over the ``M`` parties, possibly
sample-weighted) true/false-positive counts at decision point ``j = 0..N-1``
(``TP_0 = FP_0 = 0``, ``P = TP_{N-1}``, ``Q = FP_{N-1}``), ``c`` is the aggregator's secret
multiplier, drawn afresh per session (and per execution in the malicious variant).

``reveal="auc"`` (the protocol of docs/architecture.md §4)
    Parties decrypt ``X = c·num`` and ``Y = c·P·Q``; they learn ``AUC = X / 2Y`` and nothing
    else but the magnitude ``c·P·Q`` (``c`` log-uniform: semi-honest, over the CKKS headroom;
    malicious, in ``[2^20, 2^21)``, so ``P·Q`` within a factor 2).

``reveal="curve"``
    Party ``m`` uploads its own cumulative counts ``TP_{m,j}``, ``FP_{m,j}`` for ``j = 1..N-1``
    (two vectors, chunked over the CKKS slots; no rotation keys are needed). The aggregator
    only adds the parties' ciphertexts slot-wise and multiplies **every** ciphertext of the
    reply by the **same** integer ``c`` (at scale 1, no modulus level used). Parties decrypt::

        w_TP[j] = c·TP_j,   w_FP[j] = c·FP_j        (j = 1..N-1)

    The common factor cancels in every ratio, so each party computes the normalised counts
    ``u_TP[j] = TP_j / (P+Q)``, ``u_FP[j] = FP_j / (P+Q)`` and from them every ratio-based
    quantity at every decision point: TPR/recall ``TP_j/P``, FPR ``FP_j/Q``, precision
    ``TP_j/(TP_j+FP_j)``, accuracy, F1, balanced accuracy, MCC, the prevalence ``P/(P+Q)``,
    the AUC and the average precision. Had the aggregator used a different multiplier per
    slot (or per ciphertext) the ratios between slots would be destroyed; a common ``c`` keeps
    them and hides only the overall magnitude.

    *What the scale hides, precisely.* ``c`` hides the absolute size ``P+Q`` of the
    federation. It does **not** hide the counts when they are integers: the revealed ratios
    are fractions with denominators ``P`` and ``Q``, known to the CKKS precision (about
    ``1e-9`` relative), so a party can recover the reduced fractions, and with them the
    integer vector ``(TP_j, FP_j)_j`` divided by its greatest common divisor, by continued
    fractions or lattice reduction, whenever ``P·Q`` is below about ``1e9`` (and with many
    decision points even beyond). Treat ``reveal="curve"`` on unweighted data as revealing the
    global counts up to their common divisor. (Exact ratios are inherent to revealing an
    exact curve; only noise of more than one sample per count, i.e. a curve less accurate
    than ``1/P``, would hide them.) With real-valued sample weights the weighted sums have no
    integer structure and ``c`` does hide their magnitude.

``reveal="metrics"``
    The same computation at a single interior threshold ``t`` (``N = 3``): parties decrypt
    ``c·(TP_t, FP_t, P, Q)`` and learn the three free ratios (prevalence, TPR, FPR) up to the
    scale. The seven threshold metrics (accuracy, precision, recall, FPR, F1, balanced
    accuracy, MCC) are functions of those three, and jointly determine them whenever
    ``TP_t > 0`` (recall and FPR are two of them; precision then gives the prevalence), so
    the reveal is exactly what the named metrics disclose, not more. The integer-structure
    caveat of ``"curve"`` applies to the four values. Consent is per mode, not per threshold:
    a party that accepts ``"metrics"`` joins such a session at any threshold the aggregator
    announces, and the sessions' values share the normaliser ``P+Q``, so ``k`` of them reveal
    the curve at those ``k`` points. Consent to ``"metrics"`` for as many sessions as the
    party joins, or restrict who may start them.

The aggregator learns nothing in plaintext in any mode: it holds the public context only
(it cannot decrypt), never receives a decrypted value (parties answer with a fixed status
code), and its objects never hold a count, ratio or metric (tested).

Against a malicious aggregator (:mod:`~privfl.evaluation.fhauc.curve`): every position
``p`` of the two vectors is masked with zero-sum masks, multiplied by a secret per-position
multiplier ``r_p`` in ``[1, 2)``, split into ``S`` additive shares and permuted, for ``K``
independent executions; each execution yields ``c_e·r_p·V_p``; parties remove ``r_p``,
normalise by the total and accept only if the ``K`` normalised vectors agree within a
tolerance in every coordinate, i.e. the double-execution check applied to the whole revealed
vector.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from privfl._typing import FloatArray
from privfl.errors import InputError


class Reveal(StrEnum):
    """What the parties learn (the module docstring derives each mode)."""

    AUC = "auc"
    CURVE = "curve"
    METRICS = "metrics"

    @classmethod
    def parse(cls, value: str | Reveal) -> Reveal:
        try:
            return cls(value)
        except ValueError:
            raise InputError(
                f"reveal must be 'auc', 'curve' or 'metrics' (got {value!r})"
            ) from None


@dataclass(frozen=True)
class RevealedCurve:
    """What a party decrypts in the ``curve``/``metrics`` modes, normalised by the total:
    ``tp[j] = TP_j / (P+Q)``, ``fp[j] = FP_j / (P+Q)`` for ``j = 0..N-1`` (``tp[0] = fp[0] = 0``,
    ``tp[-1] + fp[-1] = 1``). Free of the aggregator's scale, hence of the absolute counts."""

    tp: FloatArray
    fp: FloatArray

    @property
    def prevalence(self) -> float:
        return float(self.tp[-1] / (self.tp[-1] + self.fp[-1]))

    def auc(self) -> float:
        """The binned AUC of docs/architecture.md §4 (scale-free: the same on the counts)."""
        t, f = self.tp, self.fp
        num = float(np.sum((t[1:] + t[:-1]) * (f[1:] - f[:-1])))
        return num / (2.0 * float(t[-1]) * float(f[-1]))
