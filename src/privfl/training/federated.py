"""``privfl.train_federated``: SmartCryptNN's partially encrypted federated training.

The last ``encrypted_layers`` layers stay encrypted under threshold CKKS for the whole run
(no party and not the server can decrypt them alone); the other layers train in the clear and
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
from collections.abc import Callable, Sequence

import numpy as np

from privfl._typing import FloatArray, IntArray
from privfl.errors import InputError
from privfl.messages import new_session_id
from privfl.progress import Progress, ProgressEvent
from privfl.runner import InProcessRunner
from privfl.training.packing import LayerLayout, chebyshev_sigmoid
from privfl.training.party import Party, SigmoidRangeError
from privfl.training.protocol import Session
from privfl.training.result import RoundMetrics, TrainingResult, role_totals
from privfl.training.server import Server
from privfl.training.twin import Schedule, initial_model, plain_forward

log = logging.getLogger(__name__)

__all__ = ["SigmoidRangeError", "TrainingResult", "train_federated", "validate"]

SUPPORTED_ENCRYPTED = (0, 1, 2)


def validate(
    parties: Sequence[tuple[FloatArray, IntArray]],
    schedule: Schedule,
    parameters: str,
) -> list[tuple[FloatArray, IntArray]]:
    """Check every setting before any key is generated (InputError with what to fix)."""
    sizes, secret = schedule.sizes, schedule.secret_layers
    if len(sizes) < 2 or any(int(s) < 1 for s in sizes):
        raise InputError("layers must list at least an input and an output width, all >= 1")
    if not 0 <= secret <= len(sizes) - 1:
        raise InputError(
            f"encrypted_layers={secret}: the model {'-'.join(map(str, sizes))} has "
            f"{len(sizes) - 1} layers; choose 0..{len(sizes) - 1}"
        )
    if secret not in SUPPORTED_ENCRYPTED:
        raise InputError(
            f"encrypted_layers={secret}: this version encrypts at most the last two layers "
            f"(supported: {SUPPORTED_ENCRYPTED})"
        )
    if schedule.epochs < 1 or schedule.rounds < 1 or schedule.epochs % schedule.rounds:
        raise InputError("epochs and rounds must be positive and rounds must divide epochs")
    if schedule.batch_size < 1 or not schedule.learning_rate > 0:
        raise InputError("batch_size must be >= 1 and learning_rate > 0")
    low, high = schedule.sigmoid_range
    if not low < 0 < high or not 3 <= schedule.sigmoid_degree <= 119:
        raise InputError("the sigmoid range must contain 0 and its degree be in 3..119")
    if parameters not in ("secure", "test"):
        raise InputError(f"parameters must be 'secure' or 'test', got {parameters!r}")
    if not 1 <= len(parties) <= 64:
        raise InputError("between 1 and 64 parties")
    out = []
    for k, (x, y) in enumerate(parties):
        x, y = np.asarray(x, dtype=np.float64), np.asarray(y)
        if x.ndim != 2 or x.shape[1] != sizes[0] or x.shape[0] != y.shape[0] or not len(y):
            raise InputError(f"party {k}: X must be (n, {sizes[0]}) with n = len(y) >= 1")
        if not np.all(np.isfinite(x)) or not np.issubdtype(y.dtype, np.integer):
            raise InputError(f"party {k}: X must be finite and y integer class labels")
        if y.min() < 0 or y.max() >= sizes[-1]:
            raise InputError(f"party {k}: labels must be in 0..{sizes[-1] - 1}")
        out.append((x, y.astype(np.int64)))
    if secret:
        _check_initial_range(out, schedule)
    return out


def _check_initial_range(
    parties: Sequence[tuple[FloatArray, IntArray]], schedule: Schedule
) -> None:
    """The data must keep the initial model's encrypted pre-activations inside the range."""
    model = initial_model(schedule)
    t = schedule.plain_layers
    low, high = schedule.sigmoid_range
    for k, (x, _) in enumerate(parties):
        h = plain_forward(model.weights[:t], model.biases[:t], x)[-1]
        for layer in range(t, model.layers):
            u = h @ model.weights[layer].T + model.biases[layer]
            h = chebyshev_sigmoid(u, low, high, schedule.sigmoid_degree)
            if u.min() < low or u.max() > high:
                _refuse_range(k, layer, u, low, high)


def _refuse_range(k: int, layer: int, u: FloatArray, low: float, high: float) -> None:
    raise InputError(
        f"party {k}: the initial model's layer-{layer + 1} pre-activations reach "
        f"[{u.min():.2f}, {u.max():.2f}], outside the sigmoid range [{low}, {high}]; "
        "scale the inputs or declare a wider range (and a higher degree)"
    )


def train_federated(
    parties: Sequence[tuple[FloatArray, IntArray]],
    layers: Sequence[int] = (64, 30, 20, 10),
    encrypted_layers: int = 1,
    epochs: int = 1,
    batch_size: int = 10,
    learning_rate: float = 3.0,
    rounds: int | None = None,
    seed: int = 0,
    *,
    sigmoid_range: tuple[float, float] = (-10.0, 10.0),
    sigmoid_degree: int = 13,
    parameters: str = "secure",
    reveal: bool = False,
    evaluate_every: int = 1,
    on_range: str = "raise",
    on_round: Callable[[RoundMetrics], None] | None = None,
    progress: Progress | None = None,
) -> TrainingResult:
    """Train an MLP over ``parties`` (a list of ``(X, y)``) with the last ``encrypted_layers``
    layers under threshold CKKS (see the module doc).

    ``parameters``: ``"secure"`` (ring 2^15, 128-bit) or ``"test"`` (insecure small ring, for
    tests). ``reveal``: jointly decrypt the encrypted layers at the end (all parties take
    part; party 0 receives them). ``evaluate_every``: after every such round (and the last;
    0 = never) each party decrypts the last layer's pre-activations of its own samples (what a
    prediction reveals) to report loss, accuracy and ``max |u|``, the check that the sigmoid's
    range held (for the last layer; with two encrypted layers the first one's pre-activations
    are checked on the initial model and by the ``e_T`` tripwire only); ``on_range`` =
    ``"raise"`` (:class:`SigmoidRangeError`) or ``"warn"``
    (recorded in ``result.warnings``). ``progress``: an optional callback
    (:mod:`privfl.progress`) told when key generation is done and after every round
    (``total`` = rounds + 1).
    """
    if on_range not in ("raise", "warn"):
        raise InputError("on_range must be 'raise' or 'warn'")
    sched = Schedule(
        tuple(int(s) for s in layers), int(encrypted_layers), int(epochs),
        int(rounds if rounds is not None else epochs), int(batch_size), float(learning_rate),
        int(seed), (float(sigmoid_range[0]), float(sigmoid_range[1])), int(sigmoid_degree),
    )  # fmt: skip
    data = validate(parties, sched, parameters)
    start = time.perf_counter()
    session, setup = _build(data, sched, parameters)
    if progress is not None:
        progress(ProgressEvent("key generation", 1, sched.rounds + 1))
    warnings: list[str] = []
    history: list[RoundMetrics] = []
    train = InProcessRunner()
    session.runner = train
    session.send_model(0)
    for rnd in range(sched.rounds):
        t0 = time.perf_counter()
        largest = 0.0
        for e in range(sched.local_epochs):
            epoch = rnd * sched.local_epochs + e
            for p in session.parties:
                for idx in p.batches(epoch):
                    largest = max(largest, session.train_batch(p, idx))
        session.aggregate(rnd)
        session.send_model(rnd + 1)
        seconds = time.perf_counter() - t0
        loss = acc = max_u = None
        if evaluate_every and ((rnd + 1) % evaluate_every == 0 or rnd + 1 == sched.rounds):
            loss, acc, max_u = _evaluate(session, sched, data)
        epoch_done = (rnd + 1) * sched.local_epochs
        row = RoundMetrics(rnd + 1, epoch_done, loss, acc, max_u, largest, seconds)
        history.append(row)
        if row.max_abs_u is not None and sched.secret_layers:
            _range_check(row, sched, on_range, warnings)
        if on_round is not None:
            on_round(row)
        if progress is not None:
            progress(ProgressEvent("round", rnd + 2, sched.rounds + 1))
    secret = None
    if reveal and sched.secret_layers:
        session.runner = InProcessRunner()
        secret = session.reveal(session.parties[0])
    w, b = session.parties[0].plain_layers()
    return TrainingResult(
        schedule=sched,
        parameters=parameters,
        plain_weights=tuple(w),
        plain_biases=tuple(b),
        secret_weights=None if secret is None else tuple(w for w, _ in secret),
        secret_biases=None if secret is None else tuple(b for _, b in secret),
        history=tuple(history),
        role_seconds=role_totals(train.seconds),
        role_bytes=role_totals(train.sizes, split=True),
        setup_seconds=float(sum(sum(v) for v in setup.seconds.values())),
        setup_bytes=int(sum(sum(v) for v in setup.sizes.values())),
        batches_per_party=tuple(sched.epochs * len(p.batches(0)) for p in session.parties),
        wall_seconds=time.perf_counter() - start,
        warnings=tuple(warnings),
        _session=session,
    )


def _build(
    data: Sequence[tuple[FloatArray, IntArray]], sched: Schedule, parameters: str
) -> tuple[Session, InProcessRunner]:
    """Roles, and (with a secret layer) the joint key generation (no dealer)."""
    setup = InProcessRunner()
    sid = new_session_id()
    if not sched.secret_layers:
        server = Server(sched, sid, None, None)
        parties = [Party(k, sid, x, y, sched, None, None) for k, (x, y) in enumerate(data)]
        return Session(server, parties, setup), setup
    from privfl.crypto.threshold import make_roles, run_key_generation
    from privfl.training.params import check_levels, training_parameters

    t = sched.plain_layers
    nxt = sched.sizes[t + 2] if sched.secret_layers == 2 else 0
    layout = LayerLayout(sched.sizes[t], sched.sizes[t + 1], sched.batch_size, nxt)
    params = training_parameters(layout, parameters)
    check_levels(params, sched.sigmoid_degree)
    t_server, t_parties = make_roles(params, len(data), sid)
    run_key_generation(t_server, t_parties, setup, evaluating_parties=True)
    server = Server(sched, sid, t_server, layout)
    parties = [Party(k, sid, x, y, sched, t_parties[k], layout) for k, (x, y) in enumerate(data)]
    return Session(server, parties, setup), setup


def _evaluate(
    session: Session, sched: Schedule, data: Sequence[tuple[FloatArray, IntArray]]
) -> tuple[float, float, float]:
    """Loss, accuracy and max |u| of the current global model on the parties' own data
    (each party evaluates its own samples; with a secret layer through joint decryption)."""
    runner = session.runner
    session.runner = InProcessRunner()  # evaluation is not counted as training cost
    low, high = sched.sigmoid_range
    losses, correct, largest, total = 0.0, 0, 0.0, 0
    try:
        for p, (x, y) in zip(session.parties, data, strict=True):
            if sched.secret_layers:
                u = session.outputs(p, x)
                a = chebyshev_sigmoid(u, low, high, sched.sigmoid_degree)
            else:
                w, b = p.plain_layers()
                h = plain_forward(w[:-1], b[:-1], x)[-1]
                u = h @ w[-1].T + b[-1]
                a = 1.0 / (1.0 + np.exp(-np.clip(u, -60, 60)))
            yo = np.eye(sched.sizes[-1])[y]
            losses += float(0.5 * np.sum((a - yo) ** 2))
            correct += int(np.sum(np.argmax(u, axis=1) == y))
            largest = max(largest, float(np.max(np.abs(u))))
            total += len(y)
    finally:
        session.runner = runner
    return losses / total, correct / total, largest


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
