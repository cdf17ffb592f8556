"""A CKKS ciphertext bound to its context, with the operations the protocols need."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt
import tenseal.sealapi as seal

from privfl.crypto.seal_io import load, save, window_steps
from privfl.errors import MalformedMessageError

if TYPE_CHECKING:
    from privfl.crypto.ckks import CKKSContext

__all__ = ["Ciphertext", "add_all"]


class Ciphertext:
    """A CKKS ciphertext bound to its context, with the operations FHAUC needs.

    Operators return new ciphertexts: ``a + b``, ``a - b``, ``a * b`` (ciphertext product,
    relinearised, *not* rescaled), ``a * k`` for an integer ``k`` (scale unchanged),
    ``a + array`` (plaintext addition at the ciphertext's scale), :meth:`rotate`,
    :meth:`window_sum`. ``to_bytes`` is SEAL's serialisation; a freshly encrypted
    ciphertext keeps its seeded (compact) form until it is first used.
    """

    __slots__ = ("_bytes", "_seal", "context")

    def __init__(self, context: CKKSContext, ct: Any | None, data: bytes | None = None) -> None:
        self.context = context
        self._seal = ct
        self._bytes = data

    @property
    def seal(self) -> Any:
        """The underlying SEAL ciphertext (loaded on first use)."""
        if self._seal is None:
            if self._bytes is None:
                raise MalformedMessageError("a ciphertext with neither a SEAL object nor bytes")
            self._seal = load(seal.Ciphertext, self.context.seal_context, self._bytes, "ciphertext")
        return self._seal

    @property
    def scale(self) -> float:
        return float(self.seal.scale)

    def to_bytes(self) -> bytes:
        if self._bytes is None:
            self._bytes = save(self._seal)
        return self._bytes

    def _new(self, ct: Any) -> Ciphertext:
        return Ciphertext(self.context, ct)

    def _check_same_scale(self, other: Ciphertext) -> None:
        if not math.isclose(self.scale, other.scale, rel_tol=1e-9):
            raise ValueError(
                f"ciphertexts at different scales (2^{math.log2(self.scale):.1f} vs "
                f"2^{math.log2(other.scale):.1f}) cannot be added"
            )

    def __add__(self, other: Ciphertext | npt.ArrayLike) -> Ciphertext:
        ev = self.context.evaluator
        out = seal.Ciphertext()
        if isinstance(other, Ciphertext):
            self._check_same_scale(other)
            ev.add(self.seal, other.seal, out)
        else:
            ev.add_plain(self.seal, self._encode_like(other), out)
        return self._new(out)

    def __sub__(self, other: Ciphertext | npt.ArrayLike) -> Ciphertext:
        ev = self.context.evaluator
        out = seal.Ciphertext()
        if isinstance(other, Ciphertext):
            self._check_same_scale(other)
            ev.sub(self.seal, other.seal, out)
        else:
            ev.sub_plain(self.seal, self._encode_like(other), out)
        return self._new(out)

    def __neg__(self) -> Ciphertext:
        out = seal.Ciphertext()
        self.context.evaluator.negate(self.seal, out)
        return self._new(out)

    def __mul__(self, other: Ciphertext | int) -> Ciphertext:
        ev = self.context.evaluator
        out = seal.Ciphertext()
        if isinstance(other, Ciphertext):
            if self.context.relin_keys is None:
                raise ValueError("ciphertext multiplication needs relinearisation keys")
            ev.multiply(self.seal, other.seal, out)
            ev.relinearize_inplace(out, self.context.relin_keys)
            return self._new(out)
        if isinstance(other, int | np.integer) and not isinstance(other, bool):
            k = int(other)
            if abs(k) >= 2**62:
                raise ValueError("integer multiplier too large")
            if k == 0:
                return self - self
            plain = seal.Plaintext()
            self.context.encoder.encode(k, self.seal.parms_id(), 1.0, plain)
            ev.multiply_plain(self.seal, plain, out)
            return self._new(out)
        raise TypeError(
            "a ciphertext can be multiplied by a ciphertext or an integer "
            f"(got {type(other).__name__})"
        )

    __rmul__ = __mul__

    def scale_by(self, factor: float, precision_bits: int = 30) -> Ciphertext:
        """Multiply every slot by a real ``factor`` (encoded at scale ``2^precision_bits``,
        so the result's scale grows by that much and uses that much more capacity)."""
        if not math.isfinite(factor):
            raise ValueError("factor must be finite")
        plain = seal.Plaintext()
        self.context.encoder.encode(
            float(factor), self.seal.parms_id(), float(2**precision_bits), plain
        )
        out = seal.Ciphertext()
        self.context.evaluator.multiply_plain(self.seal, plain, out)
        return self._new(out)

    def scale_by_slots(self, factors: npt.ArrayLike, precision_bits: int = 30) -> Ciphertext:
        """Multiply slot ``i`` by ``factors[i]`` (encoded at scale ``2^precision_bits``, as
        :meth:`scale_by`; missing slots are zero)."""
        vec = np.asarray(factors, dtype=np.float64).ravel()
        if not np.isfinite(vec).all():
            raise ValueError("factors must be finite")
        plain = seal.Plaintext()
        self.context.encoder.encode(
            vec.tolist(), self.seal.parms_id(), float(2**precision_bits), plain
        )
        out = seal.Ciphertext()
        self.context.evaluator.multiply_plain(self.seal, plain, out)
        return self._new(out)

    def _encode_like(self, values: npt.ArrayLike) -> Any:
        vec = np.asarray(values, dtype=np.float64).ravel()
        plain = seal.Plaintext()
        if vec.size == 1:
            self.context.encoder.encode(float(vec[0]), self.seal.parms_id(), self.scale, plain)
        else:
            self.context.encoder.encode(vec.tolist(), self.seal.parms_id(), self.scale, plain)
        return plain

    def rotate(self, steps: int) -> Ciphertext:
        """Rotate the slot vector left by ``steps`` (needs the matching Galois key(s))."""
        gk = self.context.galois_keys
        if gk is None:
            raise ValueError("this context holds no Galois keys; rotations are impossible")
        out = seal.Ciphertext()
        try:
            self.context.evaluator.rotate_vector(self.seal, int(steps), gk, out)
        except Exception as exc:
            raise ValueError(f"cannot rotate by {steps}: missing Galois key ({exc})") from exc
        return self._new(out)

    def window_sum(self, window: int, stride: int = 1) -> Ciphertext:
        """Rotate-and-sum: slot i receives the sum of slots ``i + stride·j`` for
        ``j < window`` (cyclically).

        For a vector that is periodic with period ``window·stride`` every slot receives the
        total of its residue class mod ``stride`` over one period (``stride`` 1: the whole
        period); ``log2(window)`` rotations."""
        acc = self
        for step in window_steps(window):
            acc = acc + acc.rotate(step * stride)
        return acc


def add_all(cts: Sequence[Ciphertext]) -> Ciphertext:
    """Sum of a non-empty list of ciphertexts (a new ciphertext; the inputs are unchanged).

    One ``add`` then ``add_inplace`` into the result: SEAL's ``add_many`` through the Python
    binding first copies every input into a C++ vector (0.33 vs 0.06 ms per ring-8192
    ciphertext, ``benchmarks/fhauc_scale.py --profile``). Additions modulo each prime are
    exact, so the sum does not depend on the order or grouping."""
    if not cts:
        raise ValueError("nothing to add")
    first = cts[0]
    for other in cts[1:]:
        first._check_same_scale(other)
    ev = first.context.evaluator
    out = seal.Ciphertext()
    if len(cts) == 1:
        ev.add_many([first.seal], out)
        return Ciphertext(first.context, out)
    ev.add(first.seal, cts[1].seal, out)
    for other in cts[2:]:
        ev.add_inplace(out, other.seal)
    return Ciphertext(first.context, out)
