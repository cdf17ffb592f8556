"""The result of :func:`privfl.train_federated`: model, per-round metrics, cost per role."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from privfl._typing import FloatArray
from privfl.errors import InputError
from privfl.training.mlp import MLP, sigmoid
from privfl.training.twin import Schedule

if TYPE_CHECKING:
    from privfl.training.protocol import Session

MODEL_FORMAT = "privfl-smartcryptnn-model-v1"


@dataclass(frozen=True)
class RoundMetrics:
    """After round ``round`` (``epoch`` epochs done): mean loss ``½||a - y||²`` and accuracy on
    the parties' own training samples, ``max |u|`` of the last layer's pre-activations on them
    (None when not evaluated), the largest boundary error seen and the round's wall time. The
    figures are the nodes' own (:attr:`~.node.PartyNode.evaluations`); the server's history
    has None in their place."""

    round: int
    epoch: int
    loss: float | None
    accuracy: float | None
    max_abs_u: float | None
    max_boundary_error: float | None
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def role_totals(values: Mapping[str, Sequence[float]], split: bool = False) -> dict[str, Any]:
    """Per role: seconds summed over ``"<role>:<step>"`` keys, or (``split``) bytes sent and
    received over ``"<sender>><receiver>:<kind>"`` channels."""
    out: dict[str, Any] = defaultdict(lambda: {"sent": 0, "received": 0} if split else 0.0)
    for key, vals in values.items():
        if split:
            pair = key.split(":", 1)[0]
            sender, receiver = pair.split(">", 1)
            out[sender]["sent"] += int(sum(vals))
            out[receiver]["received"] += int(sum(vals))
        else:
            out[key.split(":", 1)[0]] += float(sum(vals))
    return dict(out)


@dataclass(frozen=True)
class TrainingResult:
    """Outcome of a partially encrypted training run.

    ``plain_weights`` / ``plain_biases``: the plaintext layers (as every party holds them at
    the end). ``secret_weights`` / ``secret_biases``: the encrypted layers, only when the caller
    asked to reveal them (else None: they exist only as ciphertexts). ``history``: one
    :class:`RoundMetrics` per round. ``role_seconds``: computation per role (training only,
    keys and evaluation excluded; wall time; ``role_cpu_seconds`` in process CPU time);
    ``role_bytes``: per role ``{"sent", "received"}``.
    ``setup_seconds`` / ``setup_bytes``: joint key generation (all roles). ``warnings``: range
    violations reported instead of raised (``on_range="warn"``). ``classes``: the original
    label of each output unit (:meth:`predict_labels`); ``party_names``: the parties in order.
    """

    schedule: Schedule
    parameters: str
    plain_weights: tuple[FloatArray, ...]
    plain_biases: tuple[FloatArray, ...]
    secret_weights: tuple[FloatArray, ...] | None
    secret_biases: tuple[FloatArray, ...] | None
    history: tuple[RoundMetrics, ...]
    role_seconds: dict[str, float]
    role_bytes: dict[str, dict[str, int]]
    setup_seconds: float
    setup_bytes: int
    batches_per_party: tuple[int, ...]
    wall_seconds: float
    warnings: tuple[str, ...] = ()
    exchanges: dict[str, int] = field(default_factory=dict)
    classes: tuple[int | str, ...] = ()
    party_names: tuple[str, ...] = ()
    role_cpu_seconds: dict[str, float] = field(default_factory=dict)
    _session: Session | None = field(default=None, repr=False, compare=False)

    @property
    def revealed(self) -> bool:
        return self.schedule.secret_layers == 0 or self.secret_weights is not None

    @property
    def model(self) -> MLP:
        """The whole model in the clear (only when no layer is encrypted or it was revealed)."""
        if not self.revealed:
            raise InputError(
                "the encrypted layers were not revealed: use plain_weights, or train with "
                "reveal=True (a joint decryption all parties take part in)"
            )
        weights = [*self.plain_weights, *(self.secret_weights or ())]
        biases = [*self.plain_biases, *(self.secret_biases or ())]
        return MLP(list(self.schedule.sizes), weights=weights, biases=biases)

    def predict(self, x: FloatArray) -> npt.NDArray[np.int64]:
        """Class predictions: on the clear model, or with the encrypted layers under the joint
        protocol (party 0 asks, every party contributes a decryption share; party 0 learns the
        last layer's pre-activations of these rows)."""
        x = np.asarray(x, dtype=np.float64)
        if x.ndim != 2 or x.shape[1] != self.schedule.sizes[0]:
            raise InputError(f"X must have {self.schedule.sizes[0]} columns")
        if self.revealed:
            return self.model.predict(x)
        if self._session is None:
            raise InputError("this result no longer holds the parties needed to predict")
        u = self._session.predict(self._session.parties[0], x)
        return np.asarray(np.argmax(u, axis=1), dtype=np.int64)

    def predict_labels(self, x: FloatArray) -> npt.NDArray[Any]:
        """:meth:`predict` mapped back to the original class labels (integers or strings)."""
        idx = self.predict(x)
        if not self.classes:
            return idx
        return np.asarray(self.classes)[idx]

    def plain_features(self, x: FloatArray) -> FloatArray:
        """Activation of the last plaintext layer (what an attacker on them sees)."""
        a = np.asarray(x, dtype=np.float64)
        for w, b in zip(self.plain_weights, self.plain_biases, strict=True):
            a = sigmoid(a @ w.T + b)
        return a

    # ------------------------------------------------------------------ cost summaries
    def party_seconds(self) -> list[float]:
        return [self.role_seconds.get(f"party-{k}", 0.0) for k in range(self.parties)]

    def party_bytes(self) -> list[int]:
        zero = {"sent": 0, "received": 0}
        return [sum(self.role_bytes.get(f"party-{k}", zero).values()) for k in range(self.parties)]

    @property
    def parties(self) -> int:
        return len(self.batches_per_party)

    def per_epoch(self) -> dict[str, float]:
        """Mean per party: computation seconds and bytes (sent + received) per epoch and per
        batch."""
        e = self.schedule.epochs
        secs, nbytes = np.mean(self.party_seconds()), np.mean(self.party_bytes())
        cpu = np.mean([self.role_cpu_seconds.get(f"party-{k}", 0.0) for k in range(self.parties)])
        batches = float(np.mean(self.batches_per_party))
        return {
            "seconds_per_epoch": float(secs / e),
            "cpu_seconds_per_epoch": float(cpu / e),
            "bytes_per_epoch": float(nbytes / e),
            "seconds_per_batch": float(secs / batches),
            "bytes_per_batch": float(nbytes / batches),
        }

    def to_dict(self) -> dict[str, Any]:
        s = self.schedule
        return {
            "layers": list(s.sizes),
            "encrypted_layers": s.secret_layers,
            "epochs": s.epochs,
            "rounds": s.rounds,
            "batch_size": s.batch_size,
            "learning_rate": s.learning_rate,
            "seed": s.seed,
            "sigmoid_range": list(s.sigmoid_range),
            "sigmoid_degree": s.sigmoid_degree,
            "parameters": self.parameters,
            "revealed": self.revealed,
            "history": [h.to_dict() for h in self.history],
            "role_seconds": self.role_seconds,
            "role_bytes": self.role_bytes,
            "per_party": self.per_epoch(),
            "setup_seconds": self.setup_seconds,
            "setup_bytes": self.setup_bytes,
            "wall_seconds": self.wall_seconds,
            "warnings": list(self.warnings),
            "classes": list(self.classes),
            "party_names": list(self.party_names),
        }

    def save(
        self,
        path: str | Path,
        dataset: str = "",
        member_indices: npt.ArrayLike = (),
        non_member_indices: npt.ArrayLike = (),
    ) -> None:
        """Write the model (plaintext layers; the encrypted ones only if revealed) as ``.npz``
        for ``privfl audit membership --model``, with the dataset's name and the row indices
        of the training members and of held-out rows (non-members)."""
        layers = list(zip(self.plain_weights, self.plain_biases, strict=True))
        if self.secret_weights is not None and self.secret_biases is not None:
            layers += list(zip(self.secret_weights, self.secret_biases, strict=True))
        write_model(
            path, self.schedule, layers, self.revealed, dataset, member_indices, non_member_indices
        )


def write_model(
    path: str | Path,
    schedule: Schedule,
    layers: Sequence[tuple[FloatArray, FloatArray]],
    revealed: bool,
    dataset: str = "",
    member_indices: npt.ArrayLike = (),
    non_member_indices: npt.ArrayLike = (),
) -> None:
    """A model file (``.npz``, read by :func:`load_model`): the exposed ``layers`` (weights,
    biases), all of them when ``revealed``."""
    arrays: dict[str, Any] = {
        "format": np.array(MODEL_FORMAT),
        "sizes": np.array(schedule.sizes, dtype=np.int64),
        "encrypted_layers": np.array(schedule.secret_layers),
        "revealed": np.array(revealed),
        "dataset": np.array(dataset),
        "members": np.asarray(member_indices, dtype=np.int64),
        "non_members": np.asarray(non_member_indices, dtype=np.int64),
    }
    for i, (w, b) in enumerate(layers, 1):
        arrays[f"w{i}"], arrays[f"b{i}"] = w, b
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)


@dataclass(frozen=True)
class SavedModel:
    """A model file of ``privfl train``: the exposed layers (all when revealed)."""

    sizes: tuple[int, ...]
    encrypted_layers: int
    revealed: bool
    dataset: str
    weights: tuple[FloatArray, ...]
    biases: tuple[FloatArray, ...]
    members: npt.NDArray[np.int64]
    non_members: npt.NDArray[np.int64]

    @property
    def exposed_layers(self) -> int:
        return len(self.weights)

    def exposed_model(self) -> MLP:
        """The exposed layers as an MLP (its last layer is the last plaintext layer unless
        the model was revealed)."""
        sizes = list(self.sizes[: self.exposed_layers + 1])
        return MLP(sizes, weights=list(self.weights), biases=list(self.biases))


# the most values a model file's arrays may hold in all (a 64-30-20-10 model has 2,750; the
# widest model privfl trains fits with room): bounds the memory a hostile file costs
MAX_MODEL_VALUES = 1 << 24


def _check_entries(path: Path) -> None:
    """Refuse, before numpy reads any array, a model archive whose entries are not plain
    ``.npy`` arrays of numbers (an object array would need pickle) or whose declared shapes
    hold more than :data:`MAX_MODEL_VALUES` values in all (a small compressed file can
    declare gigabytes: numpy would allocate them before any shape check)."""
    import zipfile

    total = 0
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            with archive.open(info) as fh:
                version = np.lib.format.read_magic(fh)
                if version == (1, 0):
                    shape, _, dtype = np.lib.format.read_array_header_1_0(fh)
                else:
                    shape, _, dtype = np.lib.format.read_array_header_2_0(fh)
            if dtype.hasobject:
                raise InputError(
                    f"{path} is not a privfl model (the .npz file written by 'privfl train "
                    "--model-out'): it holds pickled Python objects, which privfl never loads"
                )
            total += int(np.prod(shape, dtype=object))
            if total > MAX_MODEL_VALUES:
                raise InputError(
                    f"{path} declares more than {MAX_MODEL_VALUES} values: not a privfl model"
                )


def _real(values: npt.ArrayLike) -> FloatArray:
    """A model file's array as float64: real numbers only (a complex array would lose its
    imaginary parts in silence)."""
    array = np.asarray(values)
    if array.dtype.kind not in "biuf":
        raise TypeError(f"an array of {array.dtype}, not real numbers")
    return np.asarray(array, dtype=np.float64)


def load_model(path: str | Path) -> SavedModel:
    """Read a model file of ``privfl train`` (InputError when it is not one). Only a zip
    archive (``.npz``) is opened, never with pickles: any other file (text, ``.npy``, random
    bytes) is refused as not a privfl model before numpy reads it."""
    import zipfile

    p = Path(path)
    not_model = f"{p} is not a privfl model (the .npz file written by 'privfl train --model-out')"
    if p.is_dir():
        raise InputError(f"{p} is a directory, not a model file (.npz of 'privfl train')")
    if not p.exists():
        raise InputError(f"model file {p} not found")
    try:
        with p.open("rb") as fh:
            magic = fh.read(4)
    except OSError as exc:
        raise InputError(f"cannot read the model file {p} ({exc.strerror})") from None
    if magic != b"PK\x03\x04" or not zipfile.is_zipfile(p):
        raise InputError(not_model)
    try:
        _check_entries(p)
        with np.load(p, allow_pickle=False) as z:
            if "format" not in z.files or str(z["format"]) != MODEL_FORMAT:
                raise InputError(f"{not_model}; it lacks the mark {MODEL_FORMAT}")
            sizes = tuple(int(s) for s in z["sizes"])
            enc, revealed = int(z["encrypted_layers"]), bool(z["revealed"])
            count = len(sizes) - 1 if revealed else len(sizes) - 1 - enc
            weights = tuple(_real(z[f"w{i}"]) for i in range(1, count + 1))
            biases = tuple(_real(z[f"b{i}"]) for i in range(1, count + 1))
            extra = [k for k in z.files if k.startswith("w") and k[1:].isdigit()]
            members = np.asarray(z["members"], dtype=np.int64)
            non_members = np.asarray(z["non_members"], dtype=np.int64)
            dataset = str(z["dataset"])
    except InputError:
        raise
    except Exception as exc:  # a hostile file: zip flags, compression, headers, dtypes
        raise InputError(f"the model file {p} is damaged ({type(exc).__name__}: {exc})") from None
    if len(extra) != count:
        raise InputError(f"{path} holds {len(extra)} layers, expected {count}")
    for i, (w, b) in enumerate(zip(weights, biases, strict=True)):
        if w.shape != (sizes[i + 1], sizes[i]) or b.shape != (sizes[i + 1],):
            raise InputError(f"{path}: layer {i + 1} does not have the shape of {sizes}")
        if not (np.isfinite(w).all() and np.isfinite(b).all()):
            raise InputError(f"the model file {path} is damaged: layer {i + 1} is not finite")
    return SavedModel(sizes, enc, revealed, dataset, weights, biases, members, non_members)
