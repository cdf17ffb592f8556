"""A Flower ``Grid`` without processes (shared by the in-memory deployment tests; not a test
module): each pushed message goes straight to the ClientApp of its destination node with that
node's :class:`Context` (the same handlers and message bytes as over the network)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from flwr.app import Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.supercore.task_identity import TaskIdentity


class MemoryGrid:
    """``Grid`` stand-in: node id -> that node's Context, answered by ``client_app``;
    ``silent`` nodes never answer, ``refuse`` makes the SuperLink refuse every push;
    ``pulls`` counts the pulls."""

    def __init__(self, client_app: ClientApp, nodes: dict[int, Context]) -> None:
        self.client_app = client_app
        self.nodes = nodes
        self.replies: dict[str, Message] = {}
        self.silent: set[int] = set()
        self.refuse = False
        self.pulls = 0

    def get_node_ids(self) -> list[int]:
        return list(self.nodes)

    def send_and_receive(self, messages, timeout=None):
        return list(self.pull_messages(self.push_messages(messages)))

    def push_messages(self, messages):
        if self.refuse:
            return [None for _ in messages]
        ids = []
        for m in messages:
            m.metadata.__dict__["_message_id"] = m.object_id
            node = m.metadata.dst_node_id
            if node not in self.silent:
                self.replies[m.object_id] = self.client_app(m, self.nodes[node])
            ids.append(m.object_id)
        return ids

    def pull_messages(self, ids):
        self.pulls += 1
        return [self.replies.pop(i) for i in ids if i in self.replies]


def node_context(
    run_id: int, node_id: int, node_config: Mapping[str, Any], run_config: Mapping[str, Any] = ()
) -> Context:
    """A node's (or, with node id 0, the ServerApp's) Context with empty state."""
    return Context(
        run_id=run_id, node_id=node_id, state=RecordDict(), run_config=dict(run_config),
        node_config=dict(node_config),
    )  # fmt: skip


@contextlib.contextmanager
def task_identity(run_id: int) -> Iterator[None]:
    """Flower's task identity (which a reply Message reads) set for an in-process run."""
    saved = (TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id)
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = run_id, 0, 1
    try:
        yield
    finally:
        TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = saved
