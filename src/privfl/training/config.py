"""The training configuration: the :class:`Schedule` the protocol and its twin share, the
defaults a user gets, and the checks of a configuration made before any key is generated.

Defaults (``benchmarks/training.py defaults`` measures them): hidden layers 30-20, the last
layer encrypted, 30 epochs with one averaging round per epoch, batch 10, learning rate 5.0 on
the loss ``½ ||a - y||²``. On digits 8x8 in the paper's setting (3 parties x 30 rows,
64-30-20-10) the numpy twin of this schedule reaches 65.4 % test accuracy after 30 epochs with
seed 0 (mean 55.9 %, minimum 42.0 %, above 50 % on 11 of 16 data splits: 90 training rows
leave that much spread); the former rates 2.0 and 3.0 reach 47.7 % and 58.8 % with seed 0
(means 41.6 % and 50.0 %). Its last-layer pre-activations stay within |u| <= 7.93 on every
split, inside the Chebyshev sigmoid's [-10, 10]. Data whose last layer starts near that range
(Location's 64 -> 30) needs a wider range and a higher degree (see the benchmark).

Capacity: an encrypted layer with ``n_in`` inputs and ``n_out`` outputs over a batch of ``B``
packs ``pow2(B) * pow2(n_in + 1) * pow2(n_out)`` slots in one ciphertext
(:class:`~privfl.training.packing.LayerLayout`); the ``"secure"`` ring 2^15 holds 2^14 slots.
:func:`check_capacity` refuses a wider layout naming that limit and the largest batch that fits.
"""

from __future__ import annotations

from dataclasses import dataclass

from privfl.crypto.threshold.params import parameter_set
from privfl.errors import InputError
from privfl.training.packing import LayerLayout, pow2
from privfl.training.params import check_levels, training_parameters

DEFAULT_HIDDEN = (30, 20)
DEFAULT_ENCRYPTED_LAYERS = 1
DEFAULT_EPOCHS = 30
DEFAULT_BATCH_SIZE = 10
DEFAULT_LEARNING_RATE = 5.0
DEFAULT_SIGMOID_RANGE = (-10.0, 10.0)
DEFAULT_SIGMOID_DEGREE = 13
SUPPORTED_ENCRYPTED = (0, 1, 2)
PARAMETER_KINDS = ("secure", "test")
MAX_PARTIES = 64


@dataclass(frozen=True)
class Schedule:
    """Hyper-parameters shared by the protocol and its twin."""

    sizes: tuple[int, ...]
    secret_layers: int
    epochs: int
    rounds: int
    batch_size: int
    learning_rate: float
    seed: int
    sigmoid_range: tuple[float, float] = DEFAULT_SIGMOID_RANGE
    sigmoid_degree: int = DEFAULT_SIGMOID_DEGREE

    @property
    def plain_layers(self) -> int:
        return len(self.sizes) - 1 - self.secret_layers

    @property
    def local_epochs(self) -> int:
        return self.epochs // self.rounds


def default_sizes(features: int, classes: int) -> tuple[int, ...]:
    """The default model for ``features`` inputs and ``classes`` outputs."""
    return (int(features), *DEFAULT_HIDDEN, int(classes))


# the command-line options that set encrypted_layers (named in its refusals)
ENCRYPTED_OPTIONS = "privfl train --encrypt-last, privfl flower train --encrypted-layers"


def nearby_divisors(n: int, near: int, scan: int = 100_000) -> list[int]:
    """The divisors of ``n`` next to ``near`` (the nearest below and above it, 1 and ``n``
    otherwise), each found within ``scan`` candidates: a refusal's suggestion, bounded in
    time whatever the numbers (``--epochs 1000000001`` took a minute to list every divisor)."""
    start = max(1, min(near, n))
    below = next((d for d in range(start, max(0, start - scan), -1) if n % d == 0), 1)
    above = next((d for d in range(start, min(n, start + scan) + 1) if n % d == 0), n)
    return sorted({below, above})


def check_schedule(schedule: Schedule, parameters: str, parties: int) -> None:
    """Refuse settings the protocol cannot run (InputError saying what to fix)."""
    sizes, secret = schedule.sizes, schedule.secret_layers
    if len(sizes) < 2 or any(int(s) < 1 for s in sizes):
        raise InputError(
            "layers (--layers) must list at least an input and an output width, all >= 1"
        )
    if not 0 <= secret <= len(sizes) - 1:
        raise InputError(
            f"encrypted_layers={secret} ({ENCRYPTED_OPTIONS}): the model "
            f"{'-'.join(map(str, sizes))} has "
            f"{len(sizes) - 1} layers; choose 0..{len(sizes) - 1}"
        )
    if secret not in SUPPORTED_ENCRYPTED:
        raise InputError(
            f"encrypted_layers={secret} ({ENCRYPTED_OPTIONS}): this version encrypts at most "
            "the last two layers "
            f"(supported: {SUPPORTED_ENCRYPTED})"
        )
    epochs, rounds = schedule.epochs, schedule.rounds
    for value, name in (
        (epochs, "epochs"),
        (rounds, "rounds"),
        (schedule.batch_size, "batch_size"),
    ):
        if value < 1:
            raise InputError(f"{name} (--{name.replace('_', '-')}) must be >= 1, got {value}")
    if epochs % rounds:
        raise InputError(
            f"rounds must divide epochs: rounds={rounds} (--rounds) does not divide "
            f"epochs={epochs} (--epochs), every round trains epochs/rounds local epochs; "
            "choose rounds from "
            f"{nearby_divisors(epochs, rounds)}"
        )
    if not schedule.learning_rate > 0:
        raise InputError(
            f"learning_rate (--learning-rate) must be > 0, got {schedule.learning_rate}"
        )
    low, high = schedule.sigmoid_range
    if not low < 0 < high:
        raise InputError(
            f"sigmoid_range ({low:g}, {high:g}) must contain 0 (--sigmoid-range low,high with "
            "low < 0 < high)"
        )
    if not 3 <= schedule.sigmoid_degree <= 119:
        raise InputError(
            f"sigmoid_degree (--sigmoid-degree) must be in 3..119, got {schedule.sigmoid_degree}"
        )
    if parameters not in PARAMETER_KINDS:
        raise InputError(f"parameters must be 'secure' or 'test', got {parameters!r}")
    if not 1 <= parties <= MAX_PARTIES:
        raise InputError(f"between 1 and {MAX_PARTIES} parties, got {parties}")
    check_capacity(schedule, parameters)
    layout = secret_layout(schedule)
    if layout is not None:  # the level budget, before any context or key exists
        check_levels(training_parameters(layout, parameters), schedule.sigmoid_degree)


def secret_layout(schedule: Schedule) -> LayerLayout | None:
    """Slot layout of the first encrypted layer (None without one)."""
    if not schedule.secret_layers:
        return None
    t, sizes = schedule.plain_layers, schedule.sizes
    nxt = sizes[t + 2] if schedule.secret_layers == 2 else 0
    return LayerLayout(sizes[t], sizes[t + 1], schedule.batch_size, nxt)


def check_capacity(schedule: Schedule, parameters: str) -> None:
    """The encrypted layers' packing must fit the ``"secure"`` ring's slots (the ``"test"``
    ring grows with the packing). The error names the limit and the largest batch that fits."""
    layout = secret_layout(schedule)
    if layout is None or parameters != "secure":
        return
    limit = parameter_set("training").batch_size
    if layout.slots <= limit:
        return
    t, sizes = schedule.plain_layers, schedule.sizes
    widths = "-".join(str(s) for s in sizes[t:])
    fits = limit // layout.block
    batch_hint = (
        f"a batch of at most {fits}" if fits >= 1 else "narrower encrypted layers (no batch fits)"
    )
    raise InputError(
        f"the encrypted layers {widths} with batch {schedule.batch_size} need "
        f"{layout.slots} slots ({pow2(schedule.batch_size)} batch blocks x {layout.rows} "
        f"inputs+bias x {layout.cols} outputs, each rounded up to a power of two), but the "
        f"secure ring 2^15 holds {limit} slots: use {batch_hint}, or encrypt a narrower last "
        "layer"
    )
