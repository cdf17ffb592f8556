"""Flower ServerApp running the FHAUC aggregator.

Run configuration (``[tool.flwr.app.config]`` of the app, overridable with ``flwr run -c``):

``aggregator-keys``   directory written by ``privfl keys init`` (``.../aggregator``); only
                      its public material is read
``thresholds``        N (default 100)
``security``          ``"semi-honest"`` or ``"malicious"``; ``splits`` (S, default 4)
``score-low``/``score-high``  declared score range (default 0 and 1)
``max-samples-per-party``      public bound (default 10000000)
``parties``           comma-separated party names expected (default: every party in the roster)
``timeout``           seconds to wait for each round's replies (default 120)
``step-pause``        seconds to sleep between rounds (0; for failure-injection tests)

Rounds: ``fhauc_hello`` (which node is which party), ``fhauc_upload`` (session configuration
out, encrypted statistics back), ``fhauc_result`` (the encrypted results out; the parties
decrypt, verify and write the AUC on their side). The ServerApp never sees, and never logs,
any AUC. If a party does not answer in time or answers with a malformed message, the run
stops with an error naming the party before any result is sent, so no AUC exists anywhere.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from logging import ERROR, INFO
from typing import Any

from flwr.app import ConfigRecord, Context, Message
from flwr.common.logger import log
from flwr.serverapp import Grid, ServerApp

from privfl.errors import PrivflError, ProtocolError
from privfl.evaluation import fhauc
from privfl.federation.flower.payload import pack, unpack
from privfl.federation.provisioning import load_aggregator_keys

app = ServerApp()


class PartyFailure(ProtocolError):
    """A party did not answer, or answered with an error or a malformed message."""


def _cfg(context: Context, key: str, default: Any) -> Any:
    return context.run_config.get(key, default)


def _round(
    grid: Grid,
    name: str,
    targets: dict[int, str],
    contents: dict[int, Any],
    timeout: float,
) -> dict[int, tuple[list[bytes], dict[str, Any]]]:
    """One protocol round: send each node its content, collect and check every reply."""
    messages = [
        Message(content=contents[node], dst_node_id=node, message_type=f"query.{name}")
        for node in targets
    ]
    replies: Iterable[Message] = grid.send_and_receive(messages, timeout=timeout)
    got: dict[int, tuple[list[bytes], dict[str, Any]]] = {}
    for reply in replies:
        node = reply.metadata.src_node_id
        who = targets.get(node, f"node {node}")
        if reply.has_error():
            raise PartyFailure(f"{who} failed in round {name}: {reply.error.reason}")
        blobs, meta = unpack(reply.content, who)
        if meta.get("status") != "ok":
            raise PartyFailure(
                f"{who} failed in round {name}: {meta.get('reason', 'no reason given')}"
            )
        got[node] = (blobs, meta)
    missing = [targets[n] for n in targets if n not in got]
    if missing:
        raise PartyFailure(
            f"no reply from {', '.join(missing)} in round {name} within {timeout:g} s; "
            "stopping before any result is produced"
        )
    return got


def _wait_for_nodes(grid: Grid, count: int, timeout: float) -> list[int]:
    deadline = time.monotonic() + timeout
    while True:
        nodes = list(grid.get_node_ids())
        if len(nodes) >= count or time.monotonic() > deadline:
            return nodes
        time.sleep(0.5)


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
    security = str(_cfg(context, "security", "semi-honest"))

    agg = fhauc.Aggregator()
    agg.receive_setup(keys.public_setup)

    nodes = _wait_for_nodes(grid, len(expected), timeout)
    log(INFO, "fhauc: %d SuperNodes connected, expecting %d parties", len(nodes), len(expected))
    hello = _round(
        grid,
        "fhauc_hello",
        {n: f"node {n}" for n in nodes},
        {n: pack(step="hello") for n in nodes},
        timeout,
    )
    party_of = {node: str(meta["party"]) for node, (_, meta) in hello.items()}
    node_of = {p: n for n, p in party_of.items() if p in expected}
    absent = [p for p in expected if p not in node_of]
    if absent:
        raise PartyFailure(f"parties {absent} are not connected (connected: {sorted(node_of)})")
    targets = {node_of[p]: p for p in expected}
    log(INFO, "fhauc: hello round complete: %s", ", ".join(expected))
    time.sleep(pause)

    started = time.perf_counter()
    config = agg.start_session(
        expected,
        int(_cfg(context, "thresholds", 100)),
        (float(_cfg(context, "score-low", 0.0)), float(_cfg(context, "score-high", 1.0))),
        int(_cfg(context, "max-samples-per-party", fhauc.DEFAULT_MAX_SAMPLES_PER_PARTY)),
        security,
        int(_cfg(context, "splits", 4)) if security == "malicious" else 1,
    )
    uploads = _round(grid, "fhauc_upload", targets, {n: pack([config]) for n in targets}, timeout)
    log(INFO, "fhauc: upload round complete")
    time.sleep(pause)

    assert agg.config is not None
    agg_seconds = 0.0
    replies = []
    for e in range(agg.config.executions):
        t0 = time.perf_counter()
        try:
            batch = [uploads[node_of[p]][0][e] for p in expected]
        except IndexError:
            raise PartyFailure("a party sent fewer uploads than the session needs") from None
        try:
            replies.append(agg.handle_uploads(batch, e))
        except ProtocolError as exc:
            raise PartyFailure(f"invalid upload: {exc}") from exc
        agg_seconds += time.perf_counter() - t0
    _round(grid, "fhauc_result", targets, {n: pack([config, *replies]) for n in targets}, timeout)
    upload_bytes = max(sum(len(b) for b in blobs) for blobs, _ in uploads.values())
    log(INFO,
        "fhauc: done: %d parties, N=%d, %s; aggregator %.3f s, largest upload %d bytes, "
        "reply %d bytes per party, wall %.1f s (the AUC is on the SuperNodes)",
        len(expected), agg.config.num_points, security, agg_seconds, upload_bytes,
        sum(len(r) for r in replies), time.perf_counter() - started,
    )  # fmt: skip
    context.state["privfl"] = ConfigRecord(
        {
            "status": "ok",
            "parties": len(expected),
            "aggregator_seconds": agg_seconds,
            "party_upload_bytes": upload_bytes,
            "reply_bytes": sum(len(r) for r in replies),
        }
    )
