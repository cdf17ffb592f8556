"""Flower ServerApp running the FHAUC aggregator through :func:`privfl.evaluation.fhauc.
schedule.run_session`, the same step sequence ``privfl.federated_auc`` runs in process.

Run configuration (``[tool.flwr.app.config]`` of the app, overridable with ``flwr run -c``):

``aggregator-keys``   directory written by ``privfl keys init`` (``.../aggregator``); only
                      its public material is read (the roster, the public CKKS context and
                      the provisioned policy: size bound, executions, limits)
``thresholds``        N (default 100)
``security``          ``"semi-honest"`` or ``"malicious"`` (default: the provisioned mode;
                      the parties refuse a weaker one); ``splits`` (S, default 4)
``score-low``/``score-high``  declared score range (default 0 and 1)
``parties``           comma-separated party names expected (default: every party in the roster)
``reveal``            ``"auc"`` (default), ``"curve"`` or ``"metrics"``: what the parties learn
                      (each node refuses a mode its operator did not consent to, node setting
                      ``reveals``); the parties write it to their result file, never here
``keys``              ``"threshold"`` or ``"single"`` (default ``""``: as provisioned; must
                      match the aggregator keys). Threshold keys add the rounds
                      ``fhauc_keygen``, ``fhauc_keycheck`` (joint key generation, checked by
                      every party), ``fhauc_decrypt`` (every party but the lead) and
                      ``fhauc_fuse`` (the lead only) before ``fhauc_result``
``key-set-file``      threshold keys: a file where the aggregator keeps the session's key set
                      (public material and its count of the decryption shares spent; default
                      ``""``: every run generates a fresh key set). A later run given the same
                      file announces that key set while its budget lasts, and each node reuses
                      the share kept in its node-local state; when the budget is spent the
                      run re-keys and overwrites the file. Written atomically, and before the
                      decryption requests go out (:class:`KeptKeySet`); a reuse run failing
                      at the join removes it (the next run re-keys)
``timeout``           seconds to wait for each round's replies (default 120)
``step-pause``        seconds to sleep between rounds (0; for failure-injection tests)

Rounds: one per protocol step: ``fhauc_join`` (the config out to every connected node,
signed joins back, each naming its party: this maps parties to nodes), ``fhauc_upload`` (all
joins out, signed uploads back), ``fhauc_result`` (the encrypted results out; the parties
decrypt, verify and write the AUC on their side, and answer with a signed status). The
ServerApp never sees, and never logs, any AUC. A node that claims a party it cannot sign for
is refused at the join; a party that does not answer in time, or answers with an error or a
malformed message, stops the run with an error naming it before any result is sent.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from logging import ERROR, INFO
from pathlib import Path
from typing import Any

from flwr.app import ConfigRecord, Context
from flwr.common.logger import log
from flwr.serverapp import Grid, ServerApp

from privfl.errors import InputError, MalformedMessageError, PrivflError, ProtocolError
from privfl.evaluation import fhauc
from privfl.evaluation.fhauc import roles
from privfl.evaluation.fhauc.policy import DEFAULT_SPLITS, Security
from privfl.evaluation.fhauc.reveal import Reveal
from privfl.evaluation.fhauc.threshold.aggregator import ThresholdAggregator
from privfl.evaluation.fhauc.threshold.keyset import export_server_key_set, import_server_key_set
from privfl.evaluation.fhauc.threshold.ops import fhauc_parameters
from privfl.evaluation.fhauc.transport import Transport
from privfl.federation.flower.payload import pack
from privfl.federation.flower.rounds import NodeFailure, check_reply, exchange, node_label
from privfl.federation.provisioning import load_aggregator_keys

app = ServerApp()


class PartyFailure(NodeFailure):
    """A party did not answer, or answered with an error or a malformed message."""


def _cfg(context: Context, key: str, default: Any) -> Any:
    return context.run_config.get(key, default)


def party_of(node: int, targets: Mapping[int, str]) -> str:
    """How errors name a node: its party once the first step mapped it, and its node id."""
    return node_label(node, targets)


def _round(
    grid: Grid, name: str, targets: Mapping[int, str], contents: Mapping[int, Any], timeout: float
) -> dict[int, tuple[list[bytes], dict[str, Any]]]:
    """One round: send each node its content, collect and check every reply
    (:func:`privfl.federation.flower.rounds.exchange`: push, then pull every 50 ms)."""
    return exchange(grid, name, contents, targets, timeout, failure=PartyFailure)


class FlowerTransport(Transport):
    """Delivers each protocol step to the parties' SuperNodes over ``grid``.

    Which node plays which party (``node_of``) is learnt, when not given, from the first step,
    which must send every party the same bytes (the join: the session config, which every
    party may see): it goes to every connected node in ``nodes`` and each reply names its
    party, a claim the aggregator checks cryptographically at the join (the join is signed
    with the party's pinned key), so no separate hello round is needed. Replies of nodes
    playing no expected party are dropped; two nodes claiming one party, or an expected party
    no node claims, stop the run. A first step with per-party bytes is refused before
    anything is sent."""

    def __init__(
        self,
        grid: Grid,
        node_of: Mapping[str, int] | None,
        timeout: float,
        pause: float,
        nodes: Sequence[int] = (),
    ) -> None:
        self.grid, self.timeout, self.pause = grid, timeout, pause
        self.node_of = dict(node_of) if node_of is not None else None
        self.nodes = list(nodes)
        self.bytes_up: dict[str, int] = {}

    def exchange(self, step: str, messages: Mapping[str, bytes]) -> dict[str, bytes]:
        if self.node_of is None:
            if len(set(messages.values())) != 1:
                raise ProtocolError(
                    f"step {step} is the first of the session but sends the parties different "
                    "messages: the first step must be one message for every party (it maps "
                    "the parties to their nodes)"
                )
            return self._first(step, messages)
        targets = {self.node_of[p]: p for p in messages}
        contents = {self.node_of[p]: pack([m]) for p, m in messages.items()}
        got = _round(self.grid, f"fhauc_{step}", targets, contents, self.timeout)
        return self._answers(step, {targets[n]: reply for n, reply in got.items()})

    def stream(
        self, step: str, messages: Mapping[str, bytes], consume: Callable[[str, bytes], None]
    ) -> None:
        """Hand each party's answer to ``consume`` as it is pulled from the SuperLink (its
        bytes are not kept here), so the aggregator takes the uploads in one by one and a
        round of ``M`` large answers never sits in this process whole. The first step of a
        session (it maps the parties to their nodes) collects every answer first."""
        if self.node_of is None:
            for party, data in self.exchange(step, messages).items():
                consume(party, data)
            return
        targets = {self.node_of[p]: p for p in messages}
        contents = {self.node_of[p]: pack([m]) for p, m in messages.items()}

        def take(node: int, blobs: list[bytes], meta: dict[str, Any]) -> None:
            consume(targets[node], self._answer(step, targets[node], blobs, meta))

        exchange(
            self.grid, f"fhauc_{step}", contents, targets, self.timeout,
            failure=PartyFailure, on_reply=take,
        )  # fmt: skip
        self._round_done(step)

    def _first(self, step: str, messages: Mapping[str, bytes]) -> dict[str, bytes]:
        (data,) = set(messages.values())
        kind, names = f"fhauc_{step}", {n: f"node {n}" for n in self.nodes}
        got = exchange(
            self.grid, kind, {n: pack([data]) for n in self.nodes}, names, self.timeout,
            failure=PartyFailure, keep_errors=True,
        )  # fmt: skip
        for node, (_, meta) in got.items():  # a node playing none of these parties may refuse
            if meta.get("party") in messages or meta.get("party") is None:
                check_reply(meta, node_label(node, names), kind, PartyFailure)
        claims = _claims({n: r for n, r in got.items() if r[1].get("status") == "ok"})
        absent = [p for p in messages if p not in claims]
        if absent:
            raise PartyFailure(f"parties {absent} are not connected (connected: {sorted(claims)})")
        self.node_of = {p: claims[p] for p in messages}
        log(INFO, "fhauc: parties mapped at the %s: %s", step, ", ".join(messages))
        return self._answers(step, {p: got[self.node_of[p]] for p in messages})

    def _answers(
        self, step: str, got: Mapping[str, tuple[list[bytes], dict[str, Any]]]
    ) -> dict[str, bytes]:
        """Each asked party's answer; a reply naming another party than the one its node was
        asked as is refused (:func:`check_sender`)."""
        out = {
            party: self._answer(step, party, blobs, meta) for party, (blobs, meta) in got.items()
        }
        self._round_done(step)
        return out

    def _answer(self, step: str, party: str, blobs: list[bytes], meta: Mapping[str, Any]) -> bytes:
        """The one answer of the node asked as ``party`` (:func:`check_sender`, one blob)."""
        check_sender(party, meta, step)
        if len(blobs) != 1:
            raise PartyFailure(f"{party} answered step {step} with {len(blobs)} blobs")
        self.bytes_up[step] = max(self.bytes_up.get(step, 0), len(blobs[0]))
        return blobs[0]

    def _round_done(self, step: str) -> None:
        log(INFO, "fhauc: %s round complete", step)
        time.sleep(self.pause)


def check_sender(party: str, meta: Mapping[str, Any], step: str) -> None:
    """A node asked as ``party`` must answer as ``party``: a reply naming another sender is an
    answer from a party the step was not sent to (:class:`PartyFailure` naming it)."""
    claimed = meta.get("party")
    if claimed != party:
        raise PartyFailure(
            f"an unexpected answer from {claimed!r} in step {step!r} (its node was asked as "
            f"{party!r})"
        )


def _wait_for_nodes(grid: Grid, count: int, timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while True:
        nodes = list(grid.get_node_ids())
        if len(nodes) >= count or time.monotonic() > deadline:
            return nodes
        time.sleep(0.5)


def _claims(first: Mapping[int, tuple[list[bytes], dict[str, Any]]]) -> dict[str, int]:
    """party -> node from the replies of the first round (the join); a node
    without a claim or two nodes claiming the same party stop the run (the claim is checked
    cryptographically at the join)."""
    node_of: dict[str, int] = {}
    for node, (_, meta) in first.items():
        party = meta.get("party")
        if not isinstance(party, str) or not party:
            raise PartyFailure(f"node {node} answered without naming its party")
        if party in node_of:
            raise PartyFailure(f"nodes {node_of[party]} and {node} both claim to be {party!r}")
        node_of[party] = node
    return node_of


def store_atomically(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` so that a crash leaves the old file or the new one, never a
    torn one: a temporary file in the same folder, fsync, ``os.replace``, fsync the folder."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    folder = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(folder)
    finally:
        os.close(folder)


class KeptKeySet:
    """The aggregator's ``key-set-file`` across runs (threshold keys), kept in step with the
    parties' own counts whatever fails:

    - a session reusing the kept set stores the set's new count and last request id right
      after the decryption requests are made, *before* they are relayed (:meth:`spent`): the
      file's count is never below a party's, and no later run repeats a request id a party
      already answered;
    - a session generating a fresh set stores it once every party has finished (each party
      keeps a fresh set only when it finishes; a fresh session failing earlier leaves the old
      file, whose set the parties still hold; one failing at the result step, after some
      parties kept the new set, costs one more run: theirs refuse the old set at the join);
    - a reuse session refused or failed at the join (a node that no longer holds the set, lost
      its node-local state, or reached its abandoned-session limit on it) removes the file,
      with a log line saying so: the next run re-keys. No failure leaves a deployment stuck.
    """

    def __init__(self, path: Path, agg: ThresholdAggregator) -> None:
        self.path, self.agg = path, agg
        self.enabled = path != Path(os.devnull)

    def _reusing(self) -> bool:
        return self.agg.config is not None and bool(self.agg.config.key_set)

    def save(self) -> None:
        """Store the aggregator's current key set (no-op without a ``key-set-file``)."""
        if self.enabled and self.agg.key_set is not None:
            store_atomically(self.path, export_server_key_set(self.agg.key_set))

    def spent(self) -> None:
        """The decryption requests of a reuse session are made: store the count first."""
        if self._reusing():
            self.save()

    def failed(self, joined: bool) -> None:
        """The session failed; ``joined``: whether every party answered the join."""
        if self.enabled and self._reusing() and not joined:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path)
            log(ERROR,
                "fhauc: the session reusing the kept key set failed at the join (a node no "
                "longer holds that set, or refuses more abandoned sessions on it): %s removed, "
                "the next run generates a fresh key set", self.path,
            )  # fmt: skip


@app.main()
def main(grid: Grid, context: Context) -> None:
    """Drive one FHAUC evaluation over the connected SuperNodes."""
    try:
        _run(grid, context)
    except PrivflError as exc:
        log(ERROR, "FHAUC run failed: %s", exc)
        raise


def _run(grid: Grid, context: Context) -> None:
    keys = load_aggregator_keys(str(_cfg(context, "aggregator-keys", "keys/aggregator")))
    wanted = str(_cfg(context, "parties", "")).strip()
    expected = [p.strip() for p in wanted.split(",") if p.strip()] or sorted(keys.roster)
    timeout = float(_cfg(context, "timeout", 120.0))
    pause = float(_cfg(context, "step-pause", 0.0))
    mode = str(_cfg(context, "security", "")).strip()
    security = Security.parse(mode) if mode else None

    mode_keys = str(_cfg(context, "keys", "")).strip() or keys.keys
    if mode_keys != keys.keys:
        raise InputError(
            f"run config keys={mode_keys!r} but the aggregator keys were provisioned for "
            f"{keys.keys!r} keys"
        )
    agg = roles.make_aggregator(keys.keys)
    agg.receive_setup(keys.public_setup)
    kept = Path(str(_cfg(context, "key-set-file", "")).strip() or os.devnull)
    if isinstance(agg, ThresholdAggregator) and kept != Path(os.devnull) and kept.is_file():
        agg.key_set = import_server_key_set(kept.read_bytes(), fhauc_parameters())

    nodes = _wait_for_nodes(grid, len(expected), timeout)
    log(INFO, "fhauc: %d SuperNodes connected, expecting %d parties", len(nodes), len(expected))
    started = time.perf_counter()
    transport = FlowerTransport(grid, None, timeout, pause, nodes)
    request = fhauc.SessionRequest(
        tuple(expected),
        int(_cfg(context, "thresholds", 100)),
        (float(_cfg(context, "score-low", 0.0)), float(_cfg(context, "score-high", 1.0))),
        security,
        int(_cfg(context, "splits", DEFAULT_SPLITS)),
        Reveal.parse(str(_cfg(context, "reveal", Reveal.AUC.value)).strip()),
    )
    try:
        if isinstance(agg, ThresholdAggregator):
            keep = KeptKeySet(kept, agg)
            try:
                report = fhauc.run_session(agg, transport, request, spent=keep.spent)
            except Exception:  # any failure: keep the file in step with the parties
                keep.failed(joined=transport.node_of is not None)
                raise
            keep.save()
        else:
            report = fhauc.run_session(agg, transport, request)
    except MalformedMessageError as exc:
        raise PartyFailure(f"invalid message from a party: {exc}") from exc
    log(INFO,
        "fhauc: done: %d parties, N=%d, %s, %d execution(s); largest upload %d bytes, "
        "wall %.1f s (the AUC is on the SuperNodes)",
        len(expected), report.num_points, report.security, report.executions,
        transport.bytes_up.get("upload", 0), time.perf_counter() - started,
    )  # fmt: skip
    context.state["privfl"] = ConfigRecord(
        {
            "status": "ok",
            "session": report.session,
            "parties": len(expected),
            "completed": len(report.completed),
            "party_upload_bytes": transport.bytes_up.get("upload", 0),
        }
    )
