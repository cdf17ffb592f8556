"""Private ROC-AUC inside a Flower training job: the server side.

A ServerApp that trains with a stock strategy passes :class:`PrivateAUC` as the strategy's
``evaluate_fn``; every ``every`` rounds it runs one FHAUC session (the same
:func:`privfl.evaluation.fhauc.schedule.run_session`, roles and message bytes as the
standalone app) on each client's local validation set, scored by the current global model::

    from flwr.serverapp.strategy import FedAvg
    from privfl.federation.flower.private_eval import PrivateAUC

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        private_auc = PrivateAUC.from_run_config(grid, context)
        result = FedAvg(fraction_evaluate=0.0).start(
            grid, initial_arrays, num_rounds=3, evaluate_fn=private_auc
        )
        private_auc.write_history(result)

The clients register the matching handlers with
:func:`privfl.federation.flower.private_eval_client.add_private_auc`.

Rounds (message types ``query.privauc_*``): ``hello`` once (which node plays which party;
checked cryptographically at the join), then per evaluation ``join`` (the session config, the
evaluation round and the global model's arrays), ``upload`` and ``result``. Each client scores
its validation set with the arrays it received at the join.

Who learns the AUC. By default (``reveal="clients"``, the paper's setting) only the clients
decrypt it; each writes its per-round history file, and the server records per round only the
session, the parties, the model's digest and the status: it never holds the AUC. With
``reveal="server"`` (run config ``reveal-to-server = true``) each client also returns its
decrypted AUC in the result round, *if its own node config allows it*
(``reveal-to-server = true``; a node that does not refuses at the join, before any work),
and the server checks that all parties report the same value and records it in the
strategy's ``Result`` (``evaluate_metrics_serverapp[round]["private-auc"]``) and in its
history file. Trade-off: the operator can then select models or stop early on the AUC, but the
server learns the global AUC of every evaluated model; over many rounds with known model
changes, that sequence is side information about the union of the validation sets (an
aggregate, never a party's counts). The parties report it unsigned (``Done`` is signed, the AUC
is metadata), so a malicious server gains nothing it could not ask for.

Failures. A party that does not answer in time, or answers with an error, stops that round's
evaluation with an error naming it (:class:`~privfl.federation.flower.server_app.
PartyFailure`). With ``on_failure="continue"`` (default) the round is recorded as failed (and
logged) and training goes on: the evaluation never touches the strategy's arrays, and each
client starts the next evaluation round from a fresh session. With ``"stop"`` the error ends
the run (``flwr ls`` shows ``finished:failed``).
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from logging import ERROR, INFO
from pathlib import Path
from typing import Any

from flwr.app import ArrayRecord, Context, MetricRecord
from flwr.common.logger import log
from flwr.serverapp import Grid

from privfl.errors import InputError, MalformedMessageError, PrivflError
from privfl.evaluation import fhauc
from privfl.evaluation.fhauc.policy import DEFAULT_SPLITS, Security
from privfl.evaluation.fhauc.transport import Transport
from privfl.federation.flower.payload import pack
from privfl.federation.flower.server_app import (
    PartyFailure,
    _claims,
    _round,
    _wait_for_nodes,
    check_sender,
)
from privfl.federation.provisioning import load_aggregator_keys

PREFIX = "privauc"
MODEL = "model"
REVEAL_TOLERANCE = 1e-9


def model_digest(arrays: ArrayRecord) -> str:
    """SHA-256 over the arrays' names and bytes (names sorted): which model was evaluated."""
    h = hashlib.sha256()
    for key in sorted(arrays.keys()):
        h.update(key.encode())
        h.update(arrays[key].numpy().tobytes())
    return h.hexdigest()


@dataclass(frozen=True)
class RoundRecord:
    """One evaluation round as the server knows it (``auc`` only when revealed to it)."""

    round: int
    status: str
    model_sha256: str
    seconds: float
    session: str | None = None
    parties: tuple[str, ...] = ()
    auc: float | None = None
    error: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["party_names"] = list(self.parties)
        return out


class EvalTransport(Transport):
    """Delivers one FHAUC step of evaluation round ``server_round`` to the clients: the step's
    protocol bytes plus the round number (and, at the join, the model's arrays)."""

    def __init__(
        self,
        grid: Grid,
        node_of: Mapping[str, int],
        timeout: float,
        server_round: int,
        arrays: ArrayRecord,
        reveal: bool,
    ) -> None:
        self.grid, self.node_of, self.timeout = grid, dict(node_of), timeout
        self.server_round, self.arrays, self.reveal = server_round, arrays, reveal
        self.revealed: dict[str, float] = {}

    def exchange(self, step: str, messages: Mapping[str, bytes]) -> dict[str, bytes]:
        targets = {self.node_of[p]: p for p in messages}
        contents = {}
        for p, m in messages.items():
            content = pack([m], round=self.server_round, reveal=int(self.reveal))
            if step == "join":
                content[MODEL] = self.arrays
            contents[self.node_of[p]] = content
        got = _round(self.grid, f"{PREFIX}_{step}", targets, contents, self.timeout)
        out = {}
        for node, (blobs, meta) in got.items():
            check_sender(targets[node], meta, step)  # a node answers as the party it was asked
            if len(blobs) != 1:
                raise PartyFailure(f"{targets[node]} answered step {step} with {len(blobs)} blobs")
            out[targets[node]] = blobs[0]
            if step == "result" and self.reveal:
                auc = meta.get("auc")
                if not isinstance(auc, float):
                    raise PartyFailure(f"{targets[node]} did not reveal the AUC it was asked for")
                self.revealed[targets[node]] = auc
        log(INFO, "private AUC round %d: %s step complete", self.server_round, step)
        return out

    def agreed_auc(self) -> float:
        """The revealed AUC, once every party reported the same value."""
        values = list(self.revealed.values())
        if not values or max(values) - min(values) > REVEAL_TOLERANCE:
            raise PartyFailure(f"the parties revealed different AUCs: {self.revealed}")
        return values[0]


@dataclass
class PrivateAUC:
    """A strategy's ``evaluate_fn`` running FHAUC every ``every`` rounds (module docstring)."""

    grid: Grid
    aggregator_keys: str | Path
    every: int = 1
    thresholds: int = 100
    security: Security | None = None
    splits: int = DEFAULT_SPLITS
    reveal: str = "clients"
    on_failure: str = "continue"
    timeout: float = 120.0
    parties: tuple[str, ...] = ()
    history_file: Path | None = None
    records: list[RoundRecord] = field(default_factory=list)
    node_of: dict[str, int] | None = None

    def __post_init__(self) -> None:
        if self.every < 1:
            raise InputError(f"evaluate every k >= 1 rounds, got {self.every}")
        if self.reveal not in ("clients", "server"):
            raise InputError(f"reveal must be 'clients' or 'server', got {self.reveal!r}")
        if self.on_failure not in ("continue", "stop"):
            raise InputError(f"on_failure must be 'continue' or 'stop', got {self.on_failure!r}")
        self.keys = load_aggregator_keys(self.aggregator_keys)
        self.parties = self.parties or tuple(sorted(self.keys.roster))

    @classmethod
    def from_run_config(cls, grid: Grid, context: Context) -> PrivateAUC:
        """Settings from the run config: ``aggregator-keys``, ``eval-every``, ``thresholds``,
        ``security``, ``splits``, ``reveal-to-server``, ``eval-on-failure``, ``timeout``,
        ``parties`` (comma-separated), ``output-dir`` (the history file goes there)."""
        cfg = context.run_config
        mode = str(cfg.get("security", "")).strip()
        parties = tuple(p.strip() for p in str(cfg.get("parties", "")).split(",") if p.strip())
        out_dir = Path(str(cfg.get("output-dir", "private-auc-results")))
        return cls(
            grid,
            str(cfg.get("aggregator-keys", "keys/aggregator")),
            every=int(cfg.get("eval-every", 1)),
            thresholds=int(cfg.get("thresholds", 100)),
            security=Security.parse(mode) if mode else None,
            splits=int(cfg.get("splits", DEFAULT_SPLITS)),
            reveal="server" if bool(cfg.get("reveal-to-server", False)) else "clients",
            on_failure=str(cfg.get("eval-on-failure", "continue")),
            timeout=float(cfg.get("timeout", 120.0)),
            parties=parties,
            history_file=out_dir / f"history-{context.run_id}.json",
        )

    # ------------------------------------------------------------------ evaluate_fn
    def __call__(self, server_round: int, arrays: ArrayRecord) -> MetricRecord | None:
        if server_round == 0 or server_round % self.every:
            return None
        started = time.perf_counter()
        digest = model_digest(arrays)
        try:
            transport, report = self._session(server_round, arrays)
            auc = transport.agreed_auc() if self.reveal == "server" else None
        except PrivflError as exc:
            record = RoundRecord(
                server_round, "failed", digest, time.perf_counter() - started,
                parties=self.parties, error=str(exc),
            )  # fmt: skip
            self._add(record)
            log(ERROR, "private AUC evaluation of round %d failed: %s", server_round, exc)
            if self.on_failure == "stop":
                raise
            return MetricRecord({"private-auc-failed": 1})
        record = RoundRecord(
            server_round, "ok", digest, time.perf_counter() - started, report.session,
            report.parties, auc,
        )  # fmt: skip
        self._add(record)
        metrics: dict[str, int | float | list[int] | list[float]] = {
            "private-auc-parties": len(report.parties)
        }
        if auc is not None:
            metrics["private-auc"] = auc
        return MetricRecord(metrics)

    def _session(
        self, server_round: int, arrays: ArrayRecord
    ) -> tuple[EvalTransport, fhauc.SessionReport]:
        if self.node_of is None:
            self.node_of = self._hello()
        agg = fhauc.Aggregator()
        agg.receive_setup(self.keys.public_setup)
        transport = EvalTransport(
            self.grid, self.node_of, self.timeout, server_round, arrays, self.reveal == "server"
        )
        request = fhauc.SessionRequest(
            self.parties, self.thresholds, (0.0, 1.0), self.security, self.splits
        )
        try:
            return transport, fhauc.run_session(agg, transport, request)
        except MalformedMessageError as exc:
            raise PartyFailure(f"invalid message from a party: {exc}") from exc

    def _hello(self) -> dict[str, int]:
        nodes = _wait_for_nodes(self.grid, len(self.parties), self.timeout)
        hello = _round(
            self.grid, f"{PREFIX}_hello", {n: f"node {n}" for n in nodes},
            {n: pack(step="hello") for n in nodes}, self.timeout,
        )  # fmt: skip
        claims = _claims(hello)
        absent = [p for p in self.parties if p not in claims]
        if absent:
            raise PartyFailure(f"parties {absent} are not connected (connected: {sorted(claims)})")
        log(INFO, "private AUC: hello round complete: %s", ", ".join(self.parties))
        return {p: claims[p] for p in self.parties}

    # ------------------------------------------------------------------ results file
    def _add(self, record: RoundRecord) -> None:
        self.records.append(record)
        self.write_history()

    def history(self, result: Any = None) -> dict[str, Any]:
        """The run's results: every evaluation round, and the strategy's metrics when given
        (a ``flwr.serverapp.strategy.Result``)."""
        out: dict[str, Any] = {
            "reveal": self.reveal, "every": self.every, "thresholds": self.thresholds,
            "party_names": list(self.parties), "rounds": [r.to_dict() for r in self.records],
        }  # fmt: skip
        if result is not None:
            out["train_metrics"] = {
                str(r): dict(m) for r, m in result.train_metrics_clientapp.items()
            }
            out["final_model_sha256"] = model_digest(result.arrays)
        return out

    def write_history(self, result: Any = None) -> Path | None:
        """Write :meth:`history` to ``history_file`` (after every round, and at the end)."""
        if self.history_file is None:
            return None
        self.history_file.parent.mkdir(parents=True, exist_ok=True)
        self.history_file.write_text(json.dumps(self.history(result), indent=2) + "\n")
        return self.history_file
