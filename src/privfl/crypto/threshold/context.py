"""OpenFHE crypto context for threshold CKKS, the byte layouts of what travels, and CRPs.

One :class:`ThresholdContext` per (parameter set, number of parties) and process: the OpenFHE
``CryptoContext`` (with the decryption-noise-flooding configuration of
:mod:`privfl.crypto.threshold.params`), the ring, the RNS moduli, and the **layouts**
(:mod:`privfl.crypto.threshold.wire`) of every object that crosses the wire.

Key layouts come from a throwaway key pair generated and dropped inside
:meth:`ThresholdContext._key_layouts`: only its serialised *public* objects are kept (to learn
the byte layout of a public key, a key-switching key and an automorphism-key map) plus its
public key, used to encrypt zeros as templates for ciphertext layouts. It is never used on
data and is no share of any joint key.

Common reference polynomials (CRPs): the ``a`` halves of every party's public-key,
key-switching and automorphism-key contribution are the same uniformly random polynomials,
expanded from the session id (:func:`~privfl.crypto.threshold.wire.seed_for`). OpenFHE's
``MultipartyKeyGen(pk, fresh=True)``, ``MultiKeySwitchGen`` and ``MultiEvalAtIndexKeyGen``
read only the ``a`` parts of the key they are given, so every party runs the same step on
a CRP key with a zero ``b``: no lead party, no key material relayed from one party to the
others, and uploads carry only ``b`` halves.
"""

from __future__ import annotations

import functools
import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

import privfl.crypto.threshold.wire as wire
from privfl.crypto.threshold.params import (
    DECRYPTION_TOWERS,
    FIRST_MOD_BITS,
    SCALING_MOD_BITS,
    ThresholdParameters,
    require_openfhe,
)
from privfl.errors import InputError, MalformedMessageError

__all__ = [
    "KeyShape",
    "LevelBudgetError",
    "ThresholdContext",
    "estimate_noise_bits",
    "ring_dimension",
]

# the contexts of the most recently used (parameter set, parties) pairs: each holds about 80 MB
# (ring 2^14: its key layouts' throwaway keys, CRP keys, tables), so a process that plans
# sessions of many sizes (a benchmark drawing party counts, a notebook sweeping them) must not
# keep one per size it ever saw (it grew to 4 GB over 60 sizes). An evicted context stays
# valid for the objects holding it, and one built again for the same pair shares OpenFHE's
# registered crypto context, so the keys and ciphertexts of either work with the other.
MAX_CONTEXTS = 8
_CONTEXTS: OrderedDict[tuple[ThresholdParameters, int, bool], ThresholdContext] = OrderedDict()
_LOCK = threading.Lock()


@functools.lru_cache(maxsize=1024)
def ring_dimension(params: ThresholdParameters, parties: int) -> int:
    """The ring dimension of ``params``' context for ``parties`` parties, read from a bare
    OpenFHE context (no keys, about 9 ms and no lasting memory): planning a session of a
    new size must not build a :class:`ThresholdContext` (80 MB and a throwaway key
    generation; a join-check sweep over 1,000 sizes grew by 40 MB per size)."""
    params.check(parties)
    cc = _cc_params(require_openfhe(), params, params.noise_estimate_bits(parties))
    return int(cc.GetRingDimension())


class LevelBudgetError(InputError):
    """The ciphertext has consumed too many levels for the requested operation."""


@dataclass(frozen=True, eq=False)
class KeyShape:
    """A key object's layout and which of its vectors are CRP (``a``) or party (``b``)."""

    layout: wire.Layout
    a_index: npt.NDArray[np.int64]
    b_index: npt.NDArray[np.int64]

    @property
    def b_moduli(self) -> npt.NDArray[np.uint64]:
        return self.layout.moduli[self.b_index]

    def merge(self, a: npt.NDArray[np.uint64], b: npt.NDArray[np.uint64]) -> bytes:
        """The full payload with ``a`` (CRP) and ``b`` (party or joint) vectors in place."""
        out = np.empty((self.layout.vectors, self.layout.ring), dtype=wire.U64)
        out[self.a_index] = a
        out[self.b_index] = b
        return out.tobytes()


def _key_shape(layout: wire.Layout, keys: int, a_first: bool) -> KeyShape:
    per = layout.vectors // keys
    half = per // 2
    first = np.concatenate([k * per + np.arange(half) for k in range(keys)])
    second = first + half
    a, b = (first, second) if a_first else (second, first)
    return KeyShape(layout, a.astype(np.int64), b.astype(np.int64))


def _cc_params(
    fhe: Any, params: ThresholdParameters, noise_estimate: float | None, complex_slots: bool = False
) -> Any:
    p = fhe.CCParamsCKKSRNS()
    p.SetSecretKeyDist(fhe.UNIFORM_TERNARY)
    if params.insecure_ring_for_tests:
        p.SetSecurityLevel(fhe.HEStd_NotSet)
    else:
        p.SetSecurityLevel(fhe.HEStd_128_classic)
    if params.ring_dimension:
        p.SetRingDim(params.ring_dimension)
    p.SetScalingModSize(SCALING_MOD_BITS)
    p.SetFirstModSize(FIRST_MOD_BITS)
    p.SetScalingTechnique(fhe.FLEXIBLEAUTO)
    p.SetMultiplicativeDepth(params.multiplicative_depth)
    p.SetNumLargeDigits(params.num_large_digits)
    p.SetKeySwitchTechnique(fhe.HYBRID)
    p.SetBatchSize(params.batch_size)
    p.SetInteractiveBootCompressionLevel(fhe.CompressionLevel.SLACK)
    p.SetDecryptionNoiseMode(fhe.NOISE_FLOODING_DECRYPT)
    if noise_estimate is None:
        p.SetExecutionMode(fhe.EXEC_NOISE_ESTIMATION)
    else:
        p.SetExecutionMode(fhe.EXEC_EVALUATION)
        p.SetNoiseEstimate(noise_estimate)
    if complex_slots:
        p.SetCKKSDataType(fhe.COMPLEX)  # REAL, the default, decodes imaginary parts as zero
    cc = fhe.GenCryptoContext(p)
    for feature in (fhe.PKE, fhe.KEYSWITCH, fhe.LEVELEDSHE, fhe.ADVANCEDSHE, fhe.MULTIPARTY):
        cc.Enable(feature)
    return cc


def _rotation_steps(params: ThresholdParameters) -> tuple[int, ...]:
    """Rotation steps with keys: powers of two below the batch size for sums, plus the set's
    own steps. OpenFHE's sum keys are exactly the rotations by 1, 2, 4, ..., batch/2."""
    steps = set(params.rotation_steps)
    if params.sum_keys:
        steps |= {1 << k for k in range(int(math.log2(params.batch_size)))}
    return tuple(sorted(steps))


class ThresholdContext:
    """The crypto context and layouts for one parameter set and number of parties;
    ``complex_slots``: its twin decoding COMPLEX (REAL zeroes imaginary parts), used by
    :func:`~privfl.crypto.threshold.ciphertext.imaginary_parts` only."""

    def __init__(
        self, params: ThresholdParameters, parties: int, complex_slots: bool = False
    ) -> None:
        params.check(parties)
        self.fhe = require_openfhe()
        self.params, self.parties, self.complex_slots = params, parties, complex_slots
        self.cc = _cc_params(self.fhe, params, params.noise_estimate_bits(parties), complex_slots)
        self.ring = int(self.cc.GetRingDimension())
        self.slots, self.levels = params.batch_size, params.multiplicative_depth + 1
        self.steps = _rotation_steps(params)
        self._layouts: dict[tuple[object, ...], wire.Layout] = {}
        self._layout_lock = threading.Lock()
        self._scales: dict[tuple[int, int], float] = {}
        self._crp_session = b""  # the session whose CRP keys are kept (crp_key)
        self._crp_keys: dict[tuple[str, str, KeyShape], Any] = {}
        self._crp_lock = threading.Lock()
        self._key_layouts()

    @classmethod
    def for_parameters(
        cls, params: ThresholdParameters, parties: int, complex_slots: bool = False
    ) -> ThresholdContext:
        """The process-wide context for ``params``, ``parties`` and ``complex_slots`` (built
        once while among the :data:`MAX_CONTEXTS` most recently used: key layouts need a
        throwaway key generation)."""
        key = (params, parties, complex_slots)
        with _LOCK:
            ctx = _CONTEXTS.get(key)
            if ctx is None:
                ctx = cls(params, parties, complex_slots)
                _CONTEXTS[key] = ctx
                while len(_CONTEXTS) > MAX_CONTEXTS:
                    _CONTEXTS.popitem(last=False)
            _CONTEXTS.move_to_end(key)
            return ctx

    # ------------------------------------------------------------------ layouts
    def serialize(self, obj: Any) -> bytes:
        """OpenFHE's binary serialisation of one of this process's own objects."""
        return bytes(self.fhe.Serialize(obj, self.fhe.BINARY))

    def _key_layouts(self) -> None:
        cc = self.cc
        throwaway = cc.KeyGen()
        tag = throwaway.publicKey.GetKeyTag()
        self._template_key = throwaway.publicKey
        probe = self.serialize(cc.Encrypt(throwaway.publicKey, cc.MakeCKKSPackedPlaintext([0.0])))
        loose = wire.loose_moduli(probe, self.ring)
        q = loose[: self.levels]
        if (
            len(q) != self.levels
            or abs(math.log2(math.prod(q)) - math.log2(cc.GetModulus())) > 1e-6
        ):
            raise RuntimeError("could not read the RNS moduli from OpenFHE's serialisation")
        switch = cc.KeySwitchGen(throwaway.secretKey, throwaway.secretKey)
        p = [m for m in wire.loose_moduli(self.serialize(switch), self.ring) if m not in q]
        if max(q + p) >> wire.PACKED_BITS:
            raise RuntimeError(f"a modulus of this context exceeds 2^{wire.PACKED_BITS}")
        self.q_moduli = np.array(q, dtype=np.uint64)
        self.moduli = frozenset(q) | frozenset(p)
        self.public_key_shape: KeyShape = _key_shape(
            wire.scan_layout(self.serialize(throwaway.publicKey), self.ring, self.moduli, tag),
            1,
            a_first=False,
        )
        self.switch_key_shape: KeyShape = _key_shape(
            wire.scan_layout(self.serialize(switch), self.ring, self.moduli, tag), 1, True
        )
        self.automorphism_shape: KeyShape | None = None
        if self.steps:
            indices = [cc.FindAutomorphismIndex(s % (self.ring // 2)) for s in self.steps]
            keys = cc.EvalAutomorphismKeyGen(throwaway.secretKey, indices)
            # OpenFHE also stores them in its process-global automorphism store, under the
            # throwaway's tag, until privfl.threshold.keystore next clears that store (at the
            # end of a threshold session); planning builds no context (ring_dimension)
            layout = wire.scan_layout(self.serialize(keys), self.ring, self.moduli, tag)
            self.automorphism_shape = _key_shape(layout, len(self.steps), True)
        del throwaway, switch  # the throwaway secret key goes out of scope here
        self.crp_layout: wire.Layout = self._scan(
            cc.IntMPBootRandomElementGen(self._template_key), self._template_key.GetKeyTag()
        )

    def _scan(self, obj: Any, tag: str) -> wire.Layout:
        return wire.scan_layout(self.serialize(obj), self.ring, self.moduli, tag)

    def check_level(self, level: int, deg: int) -> None:
        """Refuse a (level, scaling degree) no ciphertext of this context can have."""
        if not 0 <= level < self.levels or deg not in (1, 2) or level + deg > self.levels:
            raise MalformedMessageError(
                f"ciphertext shape (level {level}, degree {deg}) is impossible for "
                f"depth {self.params.multiplicative_depth}"
            )

    def _template_ciphertext(self, level: int, deg: int) -> Any:
        plain = self.cc.MakeCKKSPackedPlaintext([0.0], deg, level)
        return self.cc.Encrypt(self._template_key, plain)

    def _layout(self, key: tuple[object, ...], build: Callable[[], tuple[Any, str]]) -> wire.Layout:
        """The cached layout ``key``, built from ``build()`` -> (object, key tag), once, under
        a lock (messages may be decoded on several threads). A shape OpenFHE cannot produce
        (declared by a peer) is a MalformedMessageError."""
        layout = self._layouts.get(key)
        if layout is not None:
            return layout
        with self._layout_lock:
            if key not in self._layouts:
                try:
                    obj, tag = build()
                    self._layouts[key] = self._scan(obj, tag)
                except (RuntimeError, ValueError) as exc:
                    raise MalformedMessageError(f"no ciphertext can have the shape {key}") from exc
            return self._layouts[key]

    def ciphertext_layout(self, level: int, deg: int, towers: int = 0) -> wire.Layout:
        """Layout of a 2-element ciphertext at ``level`` with scaling degree ``deg``, optionally
        compressed to ``towers`` towers (OpenFHE's ``Compress``)."""
        self.check_level(level, deg)

        def build() -> tuple[Any, str]:
            ct = self._template_ciphertext(level, deg)
            if towers:
                return self.cc.Compress(ct, towers), ct.GetKeyTag()
            self._scales[(level, deg)] = float(ct.GetScalingFactor())
            return ct, ct.GetKeyTag()

        return self._layout(("ct", level, deg, towers), build)

    def scaling_factor(self, level: int, deg: int) -> float:
        """The scaling factor every ciphertext at (``level``, ``deg``) has (FLEXIBLEAUTO)."""
        self.ciphertext_layout(level, deg)
        return self._scales[(level, deg)]

    def compressed_layout(self, level: int, deg: int) -> wire.Layout:
        """Layout of a whole ciphertext compressed for joint decryption (``c0`` and ``c1``)."""
        return self.ciphertext_layout(level, deg, DECRYPTION_TOWERS)

    def c1_layout(self, level: int, deg: int, towers: int = DECRYPTION_TOWERS) -> wire.Layout:
        """Layout of the second element alone of a compressed ciphertext (a decryption
        request, a decryption share, a fused result)."""
        self.check_level(level, deg)

        def build() -> tuple[Any, str]:
            ct = self.cc.Compress(self._template_ciphertext(level, deg), towers)
            c1 = ct.Clone()
            c1.RemoveElement(0)
            return c1, ct.GetKeyTag()

        return self._layout(("c1", level, deg, towers), build)

    def boot_c1_layout(self, level: int, deg: int) -> wire.Layout:
        """Layout of ``c1`` of a ciphertext after ``IntMPBootAdjustScale`` (a bootstrapping
        request and the masked-decryption half of a bootstrapping share)."""
        self.check_level(level, deg)

        def build() -> tuple[Any, str]:
            ct = self.cc.IntMPBootAdjustScale(self._template_ciphertext(level, deg))
            c1 = ct.Clone()
            c1.RemoveElement(0)
            return c1, ct.GetKeyTag()

        return self._layout(("boot", level, deg), build)

    # ------------------------------------------------------------------ (de)serialise
    def dump(self, layout: wire.Layout, obj: Any) -> bytes:
        """Coefficient payload of one of this process's own objects of ``layout``'s shape."""
        return wire.extract(layout, self.serialize(obj), self.moduli)

    def load(self, kind: str, layout: wire.Layout, payload: bytes, tag: str) -> Any:
        """An OpenFHE object rebuilt from a *checked* payload: ``layout``'s bytes with the
        payload's coefficients and key tag ``tag`` (OpenFHE parses only such bytes)."""
        data = wire.splice(layout, payload, tag)
        loader = {
            "ciphertext": self.fhe.DeserializeCiphertextString,
            "public_key": self.fhe.DeserializePublicKeyString,
            "eval_key": self.fhe.DeserializeEvalKeyString,
            "eval_key_map": self.fhe.DeserializeEvalKeyMapString,
        }[kind]
        try:
            return loader(data, self.fhe.BINARY)
        except Exception as exc:  # pragma: no cover - spliced bytes are OpenFHE's own format
            raise MalformedMessageError(f"OpenFHE refused a rebuilt {kind}: {exc}") from exc

    # ------------------------------------------------------------------ CRPs
    def crp(self, shape: KeyShape, session: bytes, purpose: str) -> npt.NDArray[np.uint64]:
        """The ``a`` vectors of ``shape`` for ``session`` (identical at every role)."""
        moduli = shape.layout.moduli[shape.a_index]
        raw = wire.uniform_coefficients(wire.seed_for(session, purpose), purpose, moduli, self.ring)
        return np.frombuffer(raw, dtype=wire.U64).reshape(len(moduli), self.ring)

    def crp_key(self, shape: KeyShape, session: bytes, purpose: str, kind: str) -> Any:
        """A key object whose ``a`` parts are the session's CRPs and ``b`` parts are zero:
        the input every party hands to OpenFHE's ``Multi*KeyGen`` calls.

        Public and the same at every role of ``session``, and those calls only read it, so
        it is built once per session and process: the parties one process simulates (all
        of them in :func:`privfl.federated_auc`) share it instead of each expanding and
        parsing it again (a sixth of a party's key generation). Only the latest session's
        are kept (about 40 MB with the ``fhauc`` set, until another session asks), per context:
        a process that keeps contexts for many party counts keeps as many sets."""
        with self._crp_lock:
            if session != self._crp_session:
                self._crp_session, self._crp_keys = session, {}
            key = self._crp_keys.get((purpose, kind, shape))
            if key is None:
                zeros = np.zeros((len(shape.b_index), self.ring), dtype=wire.U64)
                payload = shape.merge(self.crp(shape, session, purpose), zeros)
                key = self.load(kind, shape.layout, payload, session.hex())
                self._crp_keys[(purpose, kind, shape)] = key
            return key

    def crp_boot_element(self, session: bytes, request_id: int) -> Any:
        """The uniformly random element ``a`` of interactive bootstrapping ``request_id``."""
        purpose = f"bootstrap-{request_id}"
        layout = self.crp_layout
        payload = wire.uniform_coefficients(
            wire.seed_for(session, purpose), purpose, layout.moduli, self.ring
        )
        return self.load("ciphertext", layout, payload, session.hex())


def estimate_noise_bits(
    params: ThresholdParameters,
    computation: Callable[[Any, Callable[[Sequence[float]], Any]], Any],
) -> float:
    """OpenFHE's static noise estimate (``EXEC_NOISE_ESTIMATION``) of ``computation``: ``log2``
    of the error of its output ciphertext, in coefficient units, under a throwaway single key
    with the same ring, moduli and keys as ``params``. ``computation(cc, encrypt)`` gets the
    OpenFHE context and an encryption function and returns the ciphertext it would decrypt.
    Compare with :attr:`ThresholdParameters.circuit_noise_bits` (which adds nothing for the
    joint key: :meth:`ThresholdParameters.noise_estimate_bits` does)."""
    fhe = require_openfhe()
    cc = _cc_params(fhe, params, None)
    keys = cc.KeyGen()
    cc.EvalMultKeyGen(keys.secretKey)
    steps = _rotation_steps(params)
    if steps:
        cc.EvalAtIndexKeyGen(keys.secretKey, list(steps))

    def encrypt(values: Sequence[float]) -> Any:
        return cc.Encrypt(keys.publicKey, cc.MakeCKKSPackedPlaintext([float(v) for v in values]))

    out = computation(cc, encrypt)
    return float(cc.Decrypt(out, keys.secretKey).GetLogError())
