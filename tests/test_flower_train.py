"""Training deployed over Flower (:mod:`privfl.federation.flower.train_server`,
``train_client``, ``train_party``) without SuperLink processes: the training ServerApp's
logic against the real training ClientApp through an in-memory grid that hands each pushed
message to the ClientApp of its destination node, and each node's real party process
(:class:`~privfl.federation.flower.train_party.PartyProcess`, here a thread) behind its Unix
socket. Real keys, real ciphertexts, the same bytes as over the network. The process-level
test is ``test_flower_train_processes.py``."""

from __future__ import annotations

import json
import tempfile
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import privfl

pytest.importorskip("flwr")
pytest.importorskip("openfhe")

from flwr.app import Context, RecordDict
from flwr.supercore.task_identity import TaskIdentity

from privfl.federation.flower import train_client, train_server
from privfl.federation.flower.server_app import PartyFailure
from privfl.federation.flower.train_party import PartyProcess
from privfl.training.result import load_model
from privfl.training.setup import SETUP_STEPS

LAYERS = (6, 5, 4)


class MemoryGrid:
    """``Grid`` stand-in: node id -> that node's Context; messages go to the training
    ClientApp of their destination node."""

    def __init__(self, nodes: dict[int, Context]) -> None:
        self.nodes = nodes
        self.replies: dict[str, object] = {}

    def get_node_ids(self) -> list[int]:
        return list(self.nodes)

    def push_messages(self, messages):
        ids = []
        for m in messages:
            m.metadata.__dict__["_message_id"] = m.object_id
            self.replies[m.object_id] = train_client.app(m, self.nodes[m.metadata.dst_node_id])
            ids.append(m.object_id)
        return ids

    def pull_messages(self, ids):
        return [self.replies.pop(i) for i in ids if i in self.replies]


def _data(seed: int = 3) -> list[tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [(rng.uniform(0, 1, (8, 6)), rng.integers(0, 4, 8)) for _ in range(3)]


def start_parties(root: Path, data, reveal_to: str | None = None, roster_edit=None):
    """One party process (thread) per party, its node folder under ``root``."""
    procs, threads = [], []
    for k, (x, y) in enumerate(data):
        d = root / f"party-{k}"
        d.mkdir(parents=True)
        np.savez(d / "data.npz", x=x, y=y)
        procs.append(PartyProcess(d, f"party-{k}", reveal_to, parameters="test"))
    roster = {p.name: p.identity.public_bytes.hex() for p in procs}
    for p in procs:
        pinned = roster_edit(p.name, dict(roster)) if roster_edit else roster
        (p.dir / "roster.json").write_text(json.dumps(pinned))
        t = threading.Thread(target=p.serve, args=(60.0,), daemon=True)
        t.start()
        threads.append(t)
    for p in procs:  # listening before the first message, as privfl flower train waits too
        while not p.socket_path.exists():
            time.sleep(0.01)
    return procs, threads


@pytest.fixture
def root():
    saved = (TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id)
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 5, 0, 1
    with tempfile.TemporaryDirectory(dir="/tmp") as d:  # short: a socket path's limit
        yield Path(d)
    TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id = saved


def grid_for(procs) -> MemoryGrid:
    nodes = {}
    for k, p in enumerate(procs):
        nodes[k + 11] = Context(
            run_id=5, node_id=k + 11, state=RecordDict(), run_config={},
            node_config={"party-socket": str(p.socket_path), "party-timeout": 60.0},
        )  # fmt: skip
    return MemoryGrid(nodes)


def server_context(root: Path, **config) -> Context:
    run_config = {
        "parties": 3, "layers": ",".join(map(str, LAYERS)), "encrypted-layers": 1, "epochs": 1,
        "batch-size": 4, "learning-rate": 1.0, "parameters": "test", "evaluate-every": 1,
        "timeout": 60.0, "output-dir": str(root / "server"), "seed": 7, **config,
    }  # fmt: skip
    return Context(run_id=5, node_id=0, state=RecordDict(), run_config=run_config, node_config={})


def test_training_over_the_flower_apps_gives_the_in_process_model(root):
    data = _data()
    procs, threads = start_parties(root, data, reveal_to="party-0")
    train_server._run(grid_for(procs), server_context(root, **{"reveal-to": "party-0"}))
    for t in threads:
        t.join(10)
    assert all(p.closed for p in procs)
    ref = privfl.train_federated(
        data, layers=LAYERS, encrypted_layers=1, epochs=1, batch_size=4, learning_rate=1.0,
        seed=7, parameters="test", reveal=True,
    )  # fmt: skip
    summary = json.loads(next((root / "server").glob("history-*.json")).read_text())
    # the same schedule: the same exchanges, each one Flower round, after the setup rounds
    # (hello, plan, joint key, key check, evaluation keys)
    setup = len(SETUP_STEPS)
    assert summary["exchanges"] == ref.exchanges and summary["setup_rounds"] == setup == 5
    assert summary["flower_rounds"] == setup + sum(ref.exchanges.values())
    expected = [*ref.plain_weights, *ref.secret_weights]
    correct = rows = 0
    for k, p in enumerate(procs):
        model = load_model(p.dir / "model.npz")
        assert model.revealed is (k == 0)  # the encrypted layer went to party-0 only
        for got, want in zip(model.weights, expected, strict=False):
            np.testing.assert_allclose(got, want, atol=1e-4)
        history = json.loads((p.dir / "history.json").read_text())
        first = history["own_evaluations"][0]
        assert first["rows"] == 8
        correct, rows = correct + first["correct"], rows + first["rows"]
        # evaluation figures stay on the nodes: the server's history carries none
        assert history["server_history"]["history"][0]["accuracy"] is None
    assert correct / rows == pytest.approx(ref.history[0].accuracy)


def test_a_server_downgrading_to_the_insecure_ring_is_refused_by_the_nodes(root):
    procs, _ = start_parties(root, _data())
    for p in procs:
        p.parameters = "secure"  # the operators accept the secure ring only
    with pytest.raises(PartyFailure, match=r"party-0.*refused"):
        train_server._run(grid_for(procs), server_context(root))  # asks for "test"
    assert all(p.host is None or p.host.crypto is None for p in procs)  # no key share made


def test_a_node_whose_operator_pinned_another_roster_refuses_the_plan(root):
    def swap(name, roster):  # party-2's operator pinned another key for party-0
        if name == "party-2":
            roster["party-0"] = "00" * 64
        return roster

    procs, _ = start_parties(root, _data(), roster_edit=swap)
    with pytest.raises(PartyFailure, match=r"party-2.*unknown-party"):
        train_server._run(grid_for(procs), server_context(root))


def test_the_example_app_is_the_app_privfl_flower_train_runs():
    from privfl.federation.flower.train_local import APP_PYPROJECT

    example = Path(__file__).parents[1] / "examples" / "flower-train" / "pyproject.toml"
    assert example.read_text() == APP_PYPROJECT


def test_a_party_socket_appears_only_once_it_accepts(root, monkeypatch):
    """The launcher and the tests wait for the socket file, then send the first message; the
    file used to appear at bind(), before listen(), and a connect in between was refused
    ("no party process listens", seen as bad-local-input in a loaded CI run)."""
    import socket

    from privfl.federation.flower.train_wire import ask

    listen = socket.socket.listen

    def slow_listen(self, *args):
        time.sleep(0.3)  # a loaded machine between bind() and listen()
        return listen(self, *args)

    monkeypatch.setattr(socket.socket, "listen", slow_listen)
    (root / "p").mkdir()
    proc = PartyProcess(root / "p", "party-0", None, parameters="test")
    threading.Thread(target=proc.serve, args=(5.0,), daemon=True).start()
    while not proc.socket_path.exists():
        time.sleep(0.005)
    status, _, _ = ask(proc.socket_path, "step", b"not an envelope", 5.0)  # connects at once
    assert status != "ok"  # answered (a refusal of the bad envelope), not refused to connect
