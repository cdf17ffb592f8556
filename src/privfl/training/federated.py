"""``privfl.train_federated``: SmartCryptNN's partially encrypted federated training.

The last ``encrypted_layers`` layers stay encrypted under threshold CKKS for the whole run
(the server cannot decrypt anything; a party gets only the joint decryptions the public
schedule grants it, and the layers themselves only with every party's signed consent:
:mod:`~.desk`); the other layers train in the clear and
are averaged by the server (FedAvg). ``encrypted_layers=0`` is the plaintext baseline through
the same roles and messages. Roles: :class:`~.server.Server` and :class:`~.party.Party` (their
docstrings say what each holds and learns); :class:`~.protocol.Session` moves the bytes.

Schedule: ``rounds`` averaging rounds, ``epochs / rounds`` local epochs per round (default: one
round per epoch), per-party batches from a seeded shuffle, ``w <- w - lr/B sum grad``, MSE on
one-hot labels with ``e = a - y`` (the paper's Protocol 3 has the sign the other way round).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from privfl._typing import FloatArray, IntArray
from privfl.crypto.identity import IdentityKey
from privfl.errors import InputError
from privfl.progress import Progress, ProgressEvent
from privfl.runner import InProcessRunner
from privfl.training.config import (
    DEFAULT_BATCH_SIZE,
    DEFAULT_ENCRYPTED_LAYERS,
    DEFAULT_EPOCHS,
    DEFAULT_LEARNING_RATE,
    DEFAULT_SIGMOID_DEGREE,
    DEFAULT_SIGMOID_RANGE,
    check_schedule,
    default_sizes,
    secret_layout,
)
from privfl.training.data import Label, PartyRows, PreparedData, prepare_parties, show_values
from privfl.training.node import PartyNode
from privfl.training.party import SigmoidRangeError
from privfl.training.protocol import Session
from privfl.training.result import RoundMetrics, TrainingResult, role_totals
from privfl.training.schedule import InProcessTransport, run_training
from privfl.training.setup import NodeHost, check_initial_range, party_names, run_setup
from privfl.training.tickets import TrainingPlan
from privfl.training.twin import Schedule

log = logging.getLogger(__name__)

__all__ = ["SigmoidRangeError", "TrainingResult", "train_federated", "validate"]

# the exchanges whose cost is training's (evaluation, consent, reveal and finish are not)
TRAINING_STEPS = frozenset({"train", "relay", "model", "aggregate"})


def validate(
    parties: Sequence[PartyRows] | Mapping[str, PartyRows],
    schedule: Schedule,
    parameters: str,
    classes: Sequence[Label] | None = None,
) -> PreparedData:
    """Check the data (:func:`~privfl.training.data.prepare_parties`: finite features, labels
    mapped to ``0..C-1`` alike at every party, each class somewhere) against ``schedule``'s
    input and output widths, and every setting (:func:`~privfl.training.config.check_schedule`,
    the ring's capacity included), before any key is generated (InputError with what to fix)."""
    check_schedule(schedule, parameters, len(parties))
    sizes = schedule.sizes
    data = prepare_parties(parties, classes, sizes[0], sizes[-1])
    if len(data.classes) != sizes[-1]:
        raise InputError(
            f"the output layer has {sizes[-1]} units but the data has {len(data.classes)} "
            f"classes {show_values(list(data.classes))}: give layers (--layers) ending in "
            f"{len(data.classes)}"
        )
    if schedule.secret_layers:
        check_initial_range(data.parties, schedule)
    return data


def _sizes(
    layers: Sequence[int] | None,
    parties: Sequence[PartyRows] | Mapping[str, PartyRows],
    classes: Sequence[Label] | None,
) -> tuple[int, ...]:
    """``layers``, or the default model for the data's width and class count."""
    if layers is not None:
        return tuple(int(s) for s in layers)
    data = prepare_parties(parties, classes)
    return default_sizes(data.features, len(data.classes))


def train_federated(
    parties: Sequence[PartyRows] | Mapping[str, PartyRows],
    layers: Sequence[int] | None = None,
    encrypted_layers: int = DEFAULT_ENCRYPTED_LAYERS,
    epochs: int = DEFAULT_EPOCHS,
    batch_size: int = DEFAULT_BATCH_SIZE,
    learning_rate: float = DEFAULT_LEARNING_RATE,
    rounds: int | None = None,
    seed: int = 0,
    *,
    classes: Sequence[Label] | None = None,
    sigmoid_range: tuple[float, float] = DEFAULT_SIGMOID_RANGE,
    sigmoid_degree: int = DEFAULT_SIGMOID_DEGREE,
    parameters: str = "secure",
    reveal: bool = False,
    evaluate_every: int = 1,
    on_range: str = "raise",
    on_round: Callable[[RoundMetrics], None] | None = None,
    max_update_norm: float | None = None,
    progress: Progress | None = None,
) -> TrainingResult:
    """Train an MLP over ``parties`` (a list of ``(X, y)``, or a mapping party name ->
    ``(X, y)``) with the last ``encrypted_layers`` layers under threshold CKKS (see the
    module doc).

    Data: ``X`` numeric and finite, ``y`` integer or string class labels, mapped to the
    output units in the order of ``classes`` (default: integers in ``0..outputs-1`` are their
    own unit, other labels sorted); every class must occur at some party
    (:func:`~privfl.training.data.prepare_parties`; errors name the party). ``layers``:
    default ``(features, 30, 20, classes)``. The defaults (30 epochs, batch 10, learning rate
    5.0) are measured in :mod:`privfl.training.config`; the encrypted layers' packing must
    fit the secure ring (the error names the limit).

    ``parameters``: ``"secure"`` (ring 2^15, 128-bit) or ``"test"`` (insecure small ring, for
    tests). ``reveal``: jointly decrypt the encrypted layers at the end (all parties take
    part; party 0 receives them). ``evaluate_every``: after every such round (and the last;
    0 = never) each party decrypts the last layer's pre-activations of its own samples (what a
    prediction reveals) to report loss, accuracy and ``max |u|``, the check that the sigmoid's
    range held (for the last layer; with two encrypted layers the first one's pre-activations
    are checked on the initial model and by the ``e_T`` tripwire only); ``on_range`` =
    ``"raise"`` (:class:`SigmoidRangeError`) or ``"warn"``
    (recorded in ``result.warnings``). ``max_update_norm``: the server clips each party's
    plaintext-layer update of a round to this L2 norm (a bound on what one deviating party
    can move those layers; None = plain FedAvg, the paper's). ``progress``: an optional
    callback (:mod:`privfl.progress`) told when key generation is done and after every round
    (``total`` = rounds + 1).
    """
    if on_range not in ("raise", "warn"):
        raise InputError("on_range must be 'raise' or 'warn'")
    sched = Schedule(
        _sizes(layers, parties, classes), int(encrypted_layers), int(epochs),
        int(rounds if rounds is not None else epochs), int(batch_size), float(learning_rate),
        int(seed), (float(sigmoid_range[0]), float(sigmoid_range[1])), int(sigmoid_degree),
    )  # fmt: skip
    prepared = validate(parties, sched, parameters, classes)
    data = list(prepared.parties)
    start = time.perf_counter()
    session, setup, plan = _build(data, sched, parameters, evaluate_every, max_update_norm)
    if progress is not None:
        progress(ProgressEvent("key generation", 1, sched.rounds + 1))
    warnings: list[str] = []
    train = InProcessRunner()
    reveal_to = plan.names[0] if reveal else None
    nodes = [PartyNode(p, plan.names, reveal_to) for p in session.parties]

    history: list[RoundMetrics] = []

    def round_done(server_row: RoundMetrics) -> None:
        row = _from_nodes(nodes, server_row)
        history.append(row)
        if row.max_abs_u is not None and sched.secret_layers:
            _range_check(row, sched, on_range, warnings)
        if on_round is not None:
            on_round(row)
        if progress is not None:
            progress(ProgressEvent("round", row.round + 1, sched.rounds + 1))

    report = run_training(
        session.server,
        plan,
        InProcessTransport(nodes, train),
        reveal_to=reveal_to,
        run=train.run,
        on_round=round_done,
    )
    secret = nodes[0].revealed
    counted = {k: v for k, v in train.seconds.items() if k.split(":", 1)[1] in TRAINING_STEPS}
    cpu = {k: v for k, v in train.cpu.items() if k.split(":", 1)[1] in TRAINING_STEPS}
    sizes = {k: v for k, v in train.sizes.items() if k.split(":", 1)[1] in TRAINING_STEPS}
    w, b = session.parties[0].plain_layers()
    return TrainingResult(
        schedule=sched,
        parameters=parameters,
        plain_weights=tuple(w),
        plain_biases=tuple(b),
        secret_weights=None if secret is None else tuple(w for w, _ in secret),
        secret_biases=None if secret is None else tuple(b for _, b in secret),
        history=tuple(history),
        role_seconds=role_totals(counted),
        role_bytes=role_totals(sizes, split=True),
        setup_seconds=float(sum(sum(v) for v in setup.seconds.values())),
        setup_bytes=int(sum(sum(v) for v in setup.sizes.values())),
        batches_per_party=tuple(sched.epochs * len(p.batches(0)) for p in session.parties),
        wall_seconds=time.perf_counter() - start,
        warnings=tuple(warnings),
        exchanges=report.exchanges,
        classes=prepared.classes,
        party_names=prepared.names,
        role_cpu_seconds=role_totals(cpu),
        _session=session,
    )


def _from_nodes(nodes: Sequence[PartyNode], row: RoundMetrics) -> RoundMetrics:
    """The round's figures from the nodes' own records (in process, the caller operates every
    node; the server's row has only the time): loss and accuracy over all parties' rows, the
    largest ``max |u|`` and the largest boundary error so far."""
    evals = [e for n in nodes for e in n.evaluations if e.round == row.round]
    errors = [v for n in nodes for r, v in n.boundary_errors.items() if r <= row.round]
    row = replace(row, max_boundary_error=max(errors, default=0.0))
    rows = sum(e.rows for e in evals)
    if not rows:
        return row
    loss = sum(e.loss_sum for e in evals) / rows
    accuracy = sum(e.correct for e in evals) / rows
    return replace(row, loss=loss, accuracy=accuracy, max_abs_u=max(e.max_abs_u for e in evals))


def _build(
    data: Sequence[tuple[FloatArray, IntArray]],
    sched: Schedule,
    parameters: str,
    evaluate_every: int = 1,
    max_update_norm: float | None = None,
) -> tuple[Session, InProcessRunner, TrainingPlan]:
    """Roles and the public plan, through the setup steps (:mod:`~.setup`: the joint key
    generation, no dealer) over the in-process transport, as in a deployment. Each party's
    node makes its own identity key; only the public halves go into the plan (the roster,
    which every node pins). The nodes share one threshold context (public parameters)."""
    setup = InProcessRunner()
    names = party_names(len(data))
    identities = [IdentityKey() for _ in data]
    pinned = {n: i.public_bytes for n, i in zip(names, identities, strict=True)}
    ctx = None
    layout = secret_layout(sched)
    if layout is not None:
        from privfl.crypto.threshold import ThresholdContext
        from privfl.training.params import training_parameters

        ctx = ThresholdContext.for_parameters(training_parameters(layout, parameters), len(data))
    hosts = [
        NodeHost(n, x, y, i, pinned, context=ctx, parameters=parameters)
        for n, (x, y), i in zip(names, data, identities, strict=True)
    ]
    transport = InProcessTransport(hosts, setup)
    server, plan = run_setup(
        transport, len(data), sched, parameters, evaluate_every, max_update_norm, ctx, setup.run
    )
    parties = [h.party for h in hosts if h.party is not None]
    return Session(server, parties, setup), setup, plan


def _range_check(row: RoundMetrics, sched: Schedule, on_range: str, warnings: list[str]) -> None:
    low, high = sched.sigmoid_range
    if row.max_abs_u is None or row.max_abs_u <= min(-low, high):
        return
    msg = (
        f"round {row.round}: a last-layer pre-activation reached |u| = {row.max_abs_u:.2f}, "
        f"outside the sigmoid range [{low}, {high}]"
    )
    if on_range == "raise":
        raise SigmoidRangeError(msg + " (lower the learning rate or widen the range)")
    log.warning(msg)
    warnings.append(msg)
