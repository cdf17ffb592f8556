"""The layer under privfl's single-key CKKS backend: encryption parameters, the SEAL objects
they need (cached), SEAL's own (de)serialisation into memory, rotate-and-sum steps.

Every load goes through :func:`load`, which turns any failure (truncation, wrong parameters,
crafted bytes) into :class:`~privfl.errors.MalformedMessageError`.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

import tenseal.sealapi as seal

from privfl.errors import MalformedMessageError
from privfl.messages import Reader, Writer

T = TypeVar("T")


@dataclass(frozen=True)
class CKKSParameters:
    """Ring degree, coefficient modulus bit sizes (last = special prime) and scale."""

    poly_modulus_degree: int = 8192
    coeff_mod_bit_sizes: tuple[int, ...] = (53, 53, 52, 60)
    scale_bits: int = 40

    @property
    def slots(self) -> int:
        """Number of complex slots = n / 2."""
        return self.poly_modulus_degree // 2

    @property
    def data_modulus_bits(self) -> int:
        """Bits of the ciphertext modulus (all primes but the special one)."""
        return sum(self.coeff_mod_bit_sizes[:-1])

    @property
    def product_capacity_bits(self) -> int:
        """log2 of the largest |value| a product of two fresh ciphertexts can hold (with a
        5-bit margin for noise and sign): data modulus - 2 * scale - 1 - 5."""
        return self.data_modulus_bits - 2 * self.scale_bits - 6

    def to_bytes(self) -> bytes:
        w = Writer().u32(self.poly_modulus_degree).u32(self.scale_bits)
        w.u32(len(self.coeff_mod_bit_sizes))
        for b in self.coeff_mod_bit_sizes:
            w.u32(b)
        return w.getvalue()

    @classmethod
    def read(cls, r: Reader) -> CKKSParameters:
        n, scale_bits, k = r.u32(), r.u32(), r.u32()
        if k > 64:
            raise MalformedMessageError("CKKS parameters: too many primes")
        bits = tuple(r.u32() for _ in range(k))
        return cls(n, bits, scale_bits)


DEFAULT_PARAMETERS = CKKSParameters()
MAX_CIPHERTEXT_BYTES = 16 << 20  # a ring-32768 ciphertext with 16 primes, uncompressed


# --------------------------------------------------------------------------- serialisation
def save(obj: Any) -> bytes:
    """Serialise a SEAL object (or Serializable<...>) with SEAL's own format."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("privfl-seal")
        try:
            obj.save(f"/proc/self/fd/{fd}")
            size = os.fstat(fd).st_size
            return os.pread(fd, size, 0)
        finally:
            os.close(fd)
    with tempfile.TemporaryDirectory() as tmp:  # pragma: no cover - non-Linux fallback
        path = os.path.join(tmp, "obj")
        obj.save(path)
        with open(path, "rb") as fh:
            return fh.read()


class _LoadFile:
    """A memory file SEAL loads objects from (SEAL reads them from a path only), one per
    thread, reused for every load of that thread: creating, filling and closing a fresh one
    per load cost about a tenth of a ciphertext load (``benchmarks/fhauc_scale.py
    --load``). Closed when its thread ends; a forked child makes its own."""

    def __init__(self) -> None:
        self.fd, self.pid = os.memfd_create("privfl-seal"), os.getpid()
        self.busy = False  # between filling and loading (a signal handler may load too)

    def __del__(self) -> None:
        with contextlib.suppress(OSError):  # already closed
            os.close(self.fd)

    def path_with(self, data: bytes) -> str:
        """The file's path, the file holding exactly ``data``: no byte of an earlier object
        stays behind it, so a truncated object fails to load as from a file of its own."""
        view, at = memoryview(data), 0
        while at < len(view):
            at += os.pwrite(self.fd, view[at:], at)
        os.ftruncate(self.fd, len(view))
        return f"/proc/self/fd/{self.fd}"


_THREAD = threading.local()


def _load_file() -> _LoadFile:
    """This thread's :class:`_LoadFile` (a new one in a forked child), or a one-off file
    when the thread's is in use (a load from a signal handler between filling and loading)."""
    file: _LoadFile | None = getattr(_THREAD, "file", None)
    if file is None or file.pid != os.getpid():
        file = _THREAD.file = _LoadFile()
    return _LoadFile() if file.busy else file


def load(factory: Callable[[], T], seal_context: Any, data: bytes, what: str) -> T:
    """Load a SEAL object; any failure (truncation, wrong parameters) is MalformedMessage."""
    if not data:
        raise MalformedMessageError(f"{what}: empty")
    obj = factory()
    if hasattr(os, "memfd_create"):
        file = _load_file()
        file.busy = True
        try:
            obj.load(seal_context, file.path_with(data))  # type: ignore[attr-defined]
        except Exception as exc:
            raise MalformedMessageError(f"{what}: invalid or truncated ({exc})") from exc
        finally:
            file.busy = False
        return obj
    with tempfile.TemporaryDirectory() as tmp:  # pragma: no cover - non-Linux fallback
        path = os.path.join(tmp, "obj")
        with open(path, "wb") as fh:
            fh.write(data)
        try:
            obj.load(seal_context, path)  # type: ignore[attr-defined]
        except Exception as exc:
            raise MalformedMessageError(f"{what}: invalid or truncated ({exc})") from exc
        return obj


def window_steps(window: int) -> list[int]:
    """Rotation steps of a rotate-and-sum over ``window`` slots: 1, 2, 4, ..., window/2."""
    if window < 1 or window & (window - 1):
        raise ValueError("window must be a power of two")
    return [1 << k for k in range(int(math.log2(window)))]


# --------------------------------------------------------------------------- context
@functools.lru_cache(maxsize=8)
def seal_objects(params: CKKSParameters) -> tuple[Any, Any, Any]:
    """SEALContext, encoder and evaluator for ``params`` (public objects, cached: building
    the NTT tables takes ~15 ms)."""
    parms = seal.EncryptionParameters(seal.SCHEME_TYPE.CKKS)
    parms.set_poly_modulus_degree(params.poly_modulus_degree)
    parms.set_coeff_modulus(
        seal.CoeffModulus.Create(params.poly_modulus_degree, list(params.coeff_mod_bit_sizes))
    )
    context = seal.SEALContext(parms, True, seal.SEC_LEVEL_TYPE.TC128)
    if not context.parameters_set():
        raise ValueError(
            "CKKS parameters rejected by SEAL (128-bit security): "
            + context.parameters_error_message()
        )
    return context, seal.CKKSEncoder(context), seal.Evaluator(context)
