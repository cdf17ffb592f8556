"""Every transport refuses an answer from a party the step was not sent to (issue 27): the
schedule's :func:`~privfl.evaluation.fhauc.transport.answers` (what every in-process transport
goes through) and the Flower transports, whose replies name their party (the FHAUC
ServerApp's :class:`FlowerTransport` and the private-AUC :class:`EvalTransport`). Earlier,
``answers`` silently dropped such an answer and a Flower reply naming another party was taken
as the answer of the party its node was asked as."""

from __future__ import annotations

import time
from collections.abc import Mapping

import pytest

from privfl.errors import ProtocolError
from privfl.evaluation.fhauc.rounds import SessionIO
from privfl.evaluation.fhauc.steps import Step
from privfl.evaluation.fhauc.transport import Transport, answers, direct, stream

PARTIES = ("site-a", "site-b")


class Intruding(Transport):
    """Answers every party asked, plus one answer from ``intruder`` (a party not asked)."""

    def __init__(self, intruder: str) -> None:
        self.intruder = intruder

    def exchange(self, step: str, messages: Mapping[str, bytes]) -> dict[str, bytes]:
        got = {p: b"answer of " + p.encode() for p in messages}
        got[self.intruder] = b"unasked"
        return got


@pytest.mark.parametrize("intruder", ["mallory", "site-b"])
def test_answers_refuses_an_answer_from_a_party_the_step_was_not_sent_to(intruder):
    """``site-b`` is in the session but was not sent this step (a step for one party, as
    ``fuse`` is for the lead)."""
    with pytest.raises(ProtocolError, match=f"unexpected answer from \\['{intruder}'\\]"):
        answers(Intruding(intruder), Step.FUSE, {"site-a": b"m"}, ("site-a",))


def test_the_schedule_refuses_an_unasked_answer_at_every_entry_point():
    io = SessionIO(Intruding("mallory"), direct, PARTIES)
    with pytest.raises(ProtocolError, match="mallory"):
        io.everyone(Step.JOIN, b"config")
    with pytest.raises(ProtocolError, match="mallory"):
        io.to(Step.DECRYPT, {"site-b": b"requests"}, ("site-b",))
    with pytest.raises(ProtocolError, match="mallory"):  # stream() refused it already
        stream(Intruding("mallory"), Step.UPLOAD, {"site-a": b"m"}, ("site-a",), print)


def test_an_honest_transport_still_passes_every_answer_in_party_order():
    class Honest(Transport):
        def exchange(self, step: str, messages: Mapping[str, bytes]) -> dict[str, bytes]:
            return {p: m + b"!" for p, m in reversed(list(messages.items()))}

    got = answers(Honest(), Step.JOIN, {p: p.encode() for p in PARTIES}, PARTIES)
    assert list(got.items()) == [("site-a", b"site-a!"), ("site-b", b"site-b!")]


# ----------------------------------------------------------------------------- Flower
def _memory_grid(app):
    pytest.importorskip("flwr")
    from _memory_grid import MemoryGrid, node_context

    return MemoryGrid(app, {k + 1: node_context(5, k + 1, {}) for k in range(len(PARTIES))})


def test_the_fhauc_flower_transport_refuses_a_node_answering_as_another_party(monkeypatch):
    """Node 2 plays ``site-b``; asked as ``site-b`` it answers as ``site-a`` (a reply naming
    a party the step was not sent to): refused, naming that sender."""
    pytest.importorskip("flwr")
    from _memory_grid import task_identity
    from privfl.federation.flower import client_app, server_app

    plays = {1: "site-a", 2: "site-a"}  # node 2's reply names site-a: not the party asked
    monkeypatch.setattr(
        client_app, "run_step", lambda step, data, ctx, phases=None: (plays[ctx.node_id], b"ok")
    )
    with task_identity(5):
        grid = _memory_grid(client_app.app)
        transport = server_app.FlowerTransport(grid, {"site-a": 1, "site-b": 2}, 5.0, 0.0)
        assert transport.exchange("upload", {"site-a": b"m"}) == {"site-a": b"ok"}
        with pytest.raises(ProtocolError, match="unexpected answer from 'site-a'"):
            transport.exchange("upload", {"site-b": b"m"})


def _one_reply_per_pull(monkeypatch, plays: Mapping[int, str]):
    """A memory grid whose pull returns at most one reply, its node ``n`` answering as
    ``plays[n]`` with the message it got plus ``b" answered"``."""
    pytest.importorskip("flwr")
    from _memory_grid import MemoryGrid, node_context
    from privfl.federation.flower import client_app

    class OnePerPull(MemoryGrid):
        def pull_messages(self, ids):
            return super().pull_messages(list(ids)[:1])

    monkeypatch.setattr(
        client_app, "run_step",
        lambda step, data, ctx, phases=None: (plays[ctx.node_id], data + b" answered"),
    )  # fmt: skip
    return OnePerPull(client_app.app, {n: node_context(5, n, {}) for n in plays})


def test_the_fhauc_flower_transport_hands_each_answer_on_as_it_is_pulled(monkeypatch):
    """``FlowerTransport.stream`` gives the schedule each answer as it is pulled (so the
    aggregator takes the uploads in one by one) and keeps none of them: a round of ``M``
    large uploads never sits in the ServerApp whole. A reply naming another party is still
    refused there."""
    from _memory_grid import task_identity
    from privfl.federation.flower import server_app

    with task_identity(5):
        grid = _one_reply_per_pull(monkeypatch, {1: "site-a", 2: "site-b", 3: "site-a"})
        transport = server_app.FlowerTransport(grid, {"site-a": 1, "site-b": 2}, 5.0, 0.0)
        seen: list[tuple[str, bytes, int]] = []
        stream(
            transport, "upload", {"site-a": b"a", "site-b": b"b"}, PARTIES,
            lambda p, d: seen.append((p, d, grid.pulls)),
        )  # fmt: skip
        assert [(p, d) for p, d, _ in seen] == [
            ("site-a", b"a answered"),
            ("site-b", b"b answered"),
        ]
        assert [pulls for _, _, pulls in seen] == [1, 2]  # each consumed before the next pull
        transport.node_of["site-b"] = 3  # node 3 answers as site-a
        with pytest.raises(ProtocolError, match="unexpected answer from 'site-a'"):
            transport.stream("upload", {"site-b": b"b"}, lambda p, d: None)


def test_the_aggregator_s_own_work_on_a_streamed_round_makes_no_node_late(monkeypatch, caplog):
    """Handing each answer on as it is pulled runs the aggregator's work (checking, loading,
    summing an upload) inside the round: that time moves the round's deadline on, so a party
    whose answer was waiting is not reported silent, and the round's logged wall time leaves
    it out (logged apart as ``serverapp``)."""
    import json
    import logging

    from _memory_grid import task_identity
    from privfl.federation.flower import server_app

    got: list[str] = []
    with task_identity(5), caplog.at_level(logging.DEBUG, logger="flwr"):
        grid = _one_reply_per_pull(monkeypatch, {1: "site-a", 2: "site-b"})
        transport = server_app.FlowerTransport(grid, {"site-a": 1, "site-b": 2}, 0.3, 0.0)
        stream(
            transport, "upload", {"site-a": b"a", "site-b": b"b"}, PARTIES,
            lambda p, d: (got.append(p), time.sleep(0.5)),  # longer than the round timeout
        )  # fmt: skip
    assert got == ["site-a", "site-b"]
    (line,) = [
        r.getMessage() for r in caplog.records if "privfl round fhauc_upload" in r.getMessage()
    ]
    record = json.loads(line.split(" ", 3)[3])
    assert record["serverapp"] >= 1.0 > record["wall"]


class _Reply:
    def __init__(self, message_id: str) -> None:
        from types import SimpleNamespace

        from privfl.federation.flower.payload import pack

        self.metadata = SimpleNamespace(reply_to_message_id=message_id)
        self.content = pack([b"x"], status="ok")

    def has_error(self) -> bool:
        return False


class _SlowDownloads:
    """20 nodes that all answer at about 0.1 s; pulling the window holding node 20 takes
    0.6 s (a large download), longer than the round's 0.5 s timeout."""

    def __init__(self) -> None:
        self.available: dict[str, _Reply] = {}
        self.started = time.monotonic()

    def push_messages(self, messages):
        self.ids = [f"m{m.metadata.dst_node_id}" for m in messages]
        return list(self.ids)

    def pull_messages(self, ids):
        ids, now = list(ids), time.monotonic() - self.started
        out = [self.available.pop(i) for i in ids if i in self.available]
        if "m1" in ids and now > 0.1 and not self.available and not out:
            self.available = {i: _Reply(i) for i in self.ids}  # every node answers now
        if "m20" in ids and out:
            time.sleep(0.6)
        return out


@pytest.mark.parametrize("streamed", [True, False])
def test_a_reply_in_before_the_deadline_is_never_reported_silent(streamed):
    """A node is reported silent only when a pull that began after the deadline missed it:
    the time spent downloading other nodes' replies (here 0.6 s, past a 0.5 s timeout) does
    not make the nodes of an earlier window, whose replies came in meanwhile, late."""
    pytest.importorskip("flwr")
    from _memory_grid import task_identity
    from privfl.federation.flower import rounds as flower_rounds
    from privfl.federation.flower.payload import pack

    nodes = range(1, 21)
    handed: list[int] = []
    with task_identity(5):
        flower_rounds.exchange(
            _SlowDownloads(), "fhauc_upload", {n: pack([b"q"]) for n in nodes},
            {n: f"node {n}" for n in nodes}, 0.5,
            on_reply=(lambda n, blobs, meta: handed.append(n)) if streamed else None,
        )  # fmt: skip
    assert sorted(handed) == (list(nodes) if streamed else [])


def test_a_streamed_round_pulls_a_bounded_number_of_replies_at_once(monkeypatch):
    """With ``on_reply``, each pull asks for at most ``STREAM_PULL`` replies, so however many
    nodes have answered, no more than that many replies are in the ServerApp at once."""
    pytest.importorskip("flwr")
    from _memory_grid import MemoryGrid, node_context, task_identity
    from privfl.federation.flower import client_app
    from privfl.federation.flower import rounds as flower_rounds
    from privfl.federation.flower.payload import pack

    asked: list[int] = []

    class Counting(MemoryGrid):
        def pull_messages(self, ids):
            ids = list(ids)
            asked.append(len(ids))
            return super().pull_messages(ids)

    monkeypatch.setattr(
        client_app, "run_step", lambda step, data, ctx, phases=None: (f"p{ctx.node_id}", b"ok")
    )
    nodes = range(1, 2 * flower_rounds.STREAM_PULL + 6)
    with task_identity(5):
        grid = Counting(client_app.app, {n: node_context(5, n, {}) for n in nodes})
        names = {n: f"node {n}" for n in nodes}
        handed: list[int] = []
        flower_rounds.exchange(
            grid, "fhauc_upload", {n: pack([b"x"]) for n in nodes}, names, 5.0,
            on_reply=lambda node, blobs, meta: handed.append(node),
        )  # fmt: skip
    assert sorted(handed) == list(nodes)
    assert max(asked) == flower_rounds.STREAM_PULL and len(asked) >= 3


def test_the_private_auc_flower_transport_refuses_a_node_answering_as_another_party(
    monkeypatch,
):
    pytest.importorskip("flwr")
    from flwr.app import ArrayRecord
    from flwr.clientapp import ClientApp

    from _memory_grid import task_identity
    from privfl.federation.flower import private_eval, private_eval_client

    monkeypatch.setattr(
        private_eval_client, "eval_step", lambda step, message, ctx, fn: ("site-a", b"ok", None)
    )
    app = ClientApp()
    private_eval_client.add_private_auc(app, lambda model, ctx: None)
    with task_identity(5):
        grid = _memory_grid(app)
        node_of = {"site-a": 1, "site-b": 2}
        transport = private_eval.EvalTransport(grid, node_of, 5.0, 1, ArrayRecord(), False)
        assert transport.exchange("upload", {"site-a": b"m"}) == {"site-a": b"ok"}
        with pytest.raises(ProtocolError, match="unexpected answer from 'site-a'"):
            transport.exchange("upload", {"site-b": b"m"})
