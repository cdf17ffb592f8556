"""A RevFRF deployment with its nodes in this process: every batch goes to a node rebuilt
from its key folder, its files and its saved state (as a Flower ClientApp is per message)."""

from __future__ import annotations

import json
import stat

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from _forest_fuzz import decode_safely, mutated
from _revfrf_deployment import (
    COLUMNS,
    PARTICIPANTS,
    SEED,
    aligned_test_rows,
    in_process_forest,
    make,
)
from privfl.errors import InputError, ProtocolError, WrongSessionError
from privfl.federation.revfrf_deploy import CenterDeployment, drive
from privfl.federation.revfrf_keys import load_node
from privfl.federation.revfrf_node import Node, NodeFiles, control, peek, read_control
from privfl.federation.revfrf_run import RunStart
from privfl.forest.jobs import Batch
from privfl.forest.messages import CC, CS, NodeQuery
from privfl.messages import Writer

FUZZ_VALID = control("query-request", bytes(16), CS, Writer().u32(1).str_("site-a").u32(4))


class LocalNodes:
    """Delivers a batch to nodes in this process, one rebuilt node per recipient."""

    def __init__(self, root, truth):
        self.root, self.truth = root, truth
        self.states = {n: {} for n in (*PARTICIPANTS, CC, "asker")}
        self.rounds = 0
        self.leaving: set[str] = set()

    def node(self, name: str) -> Node:
        role = "cc" if name == CC else "requester" if name == "asker" else "participant"
        keys = load_node(self.root / "keys" / name, role)
        files = NodeFiles(output_dir=str(self.root / "out" / name))
        if role == "participant":
            train, test = self.truth["files"][name]
            out = str(self.root / "out" / name)
            files = NodeFiles(str(train), str(test), "id", out, leave=name in self.leaving)
        if role == "requester":
            files = NodeFiles(
                str(self.root / "asker.csv"), None, "id", str(self.root / "out" / name)
            )
        return Node(role, keys, files, self.states[name])

    def __call__(self, batch: Batch) -> tuple[bytes, ...]:
        self.rounds += 1
        by_node: dict[str, list[int]] = {}
        for i, out in enumerate(batch):
            by_node.setdefault(out.to, []).append(i)
        replies: list[bytes] = [b""] * len(batch)
        for name, idx in by_node.items():
            for i, reply in zip(idx, self.node(name).handle_all([batch[i].data for i in idx])):
                replies[i] = reply
        return tuple(replies)


@pytest.fixture(scope="module")
def deployed(tmp_path_factory):
    root = tmp_path_factory.mktemp("revfrf")
    truth = make(root)
    labels = pd.read_csv(root / "labels.csv")
    keys = load_node(root / "keys" / CS, "cs")
    dep = CenterDeployment(keys, labels["id"].tolist(), labels["label"].to_numpy(), seed=SEED)
    nodes = LocalNodes(root, truth)
    drive(dep.align(), nodes)
    drive(dep.fit(), nodes)
    return root, truth, dep, nodes


def _test_ids(root, name="site-a"):
    (path,) = (root / "out" / name).glob("*-test-ids.json")
    return json.loads(path.read_text())["ids"]


def test_deployed_forest_predicts_as_the_in_process_forest_on_the_same_aligned_rows(deployed):
    root, truth, dep, nodes = deployed
    common = set(truth["ids"].astype(str))
    for p in PARTICIPANTS:
        common &= set(__import__("pandas").read_csv(root / f"{p}.csv")["id"])
    assert set(dep.aligned_ids) == common & set(
        __import__("pandas").read_csv(root / "labels.csv")["id"]
    )
    reference = in_process_forest(truth, dep.aligned_ids)
    assert reference.report().nodes_per_participant == dep.summary()["nodes_per_participant"]
    got = drive(dep.test(secure=True), nodes)
    ids = _test_ids(root)
    assert all(_test_ids(root, p) == ids for p in PARTICIPANTS)
    rows = aligned_test_rows(truth, ids)
    assert np.array_equal(got.plain, reference.predict_plain(rows))
    assert np.array_equal(got.secure, reference.predict(rows))
    assert np.array_equal(got.secure, got.plain)
    # a requester's own query: its prediction is written on its node
    values = drive(dep.query("asker"), nodes)
    (path,) = (root / "out" / "asker").glob("*-predictions.json")
    assert json.loads(path.read_text())["predictions"] == [str(v) for v in values]
    want = reference.predict_plain({p: truth["xt"][:2][:, c] for p, c in COLUMNS.items()})
    assert [str(v) for v in want] == [str(v) for v in values]


def test_revocation_over_the_deployment_leaves_no_node_of_the_participant(deployed):
    _, _, dep, nodes = deployed
    victim = next(p for p, n in dep.summary()["nodes_per_participant"].items() if n)
    with pytest.raises(ProtocolError, match="not asked to leave"):
        drive(dep.revoke(victim, level=2), nodes)  # the CS cannot revoke it on its own
    nodes.leaving.add(victim)
    report = drive(dep.revoke(victim, level=2), nodes)
    assert report.participant == victim and report.level == 2
    assert dep.summary()["nodes_per_participant"][victim] == 0
    assert victim in dep.summary()["revoked"]
    cc = nodes.node(CC)._cc()
    assert victim not in cc.holders
    # a second test round in the same run (the first ran before the revocation): each
    # provider answers it afresh, restoring its round from the node's saved state
    got = drive(dep.test(secure=True), nodes)
    assert got.plain.shape == (dep.n_test,)
    assert np.array_equal(got.secure, got.plain)
    with pytest.raises(InputError):
        drive(dep.revoke(victim), nodes)


def test_key_folders_hold_only_their_node_and_are_private(deployed):
    root = deployed[0]
    for name in (*PARTICIPANTS, CC, CS, "asker"):
        files = {p.name for p in (root / "keys" / name).iterdir()}
        assert "session.json" in files
        for p in (root / "keys" / name).glob("*.key"):
            assert stat.S_IMODE(p.stat().st_mode) == 0o600
    assert {p.name for p in (root / "keys" / "site-a").iterdir()} == {
        "session.json",
        "participant-keys.bin",
        "signing.key",
    }
    assert not list((root / "keys").rglob("*.pkl"))
    with pytest.raises(InputError, match="not a participant"):
        load_node(root / "keys" / "asker", "participant")


def test_a_node_refuses_messages_out_of_order(deployed):
    root, truth, _, _ = deployed
    keys = load_node(root / "keys" / "site-a", "participant")
    fresh = Node("participant", keys, NodeFiles(*map(str, truth["files"]["site-a"])), {})
    with pytest.raises(ProtocolError, match="not aligned"):
        fresh._role()


def test_cli_forest_keys_init_writes_one_folder_per_node(tmp_path):
    from typer.testing import CliRunner

    from privfl.cli import app

    args = ["forest", "keys", "init", "--participants", "a,b", "--columns", "2,3",
            "--requesters", "r", "--key-bits", "512", "--insecure-key-bits", "--trees", "2",
            "--depth", "2", "--out", str(tmp_path / "k"), "--json"]  # fmt: skip
    out = CliRunner().invoke(app, args)
    assert out.exit_code == 0, out.output
    files = json.loads(out.stdout)["files"]
    assert {"CS/cs-keys.bin", "CC/cc-keys.bin", "a/participant-keys.bin", "r/requester-keys.bin",
            "CS/requesters/r.bin", "CC/psi.key"} <= set(files)  # fmt: skip
    keys = load_node(tmp_path / "k" / "CS", "cs")
    assert keys.session.participants == ("a", "b") and set(keys.registrations) == {"r"}
    bad = CliRunner().invoke(app, [*args[:5], "x", *args[6:-3], "--out", str(tmp_path / "j")])
    assert bad.exit_code == 2 and "--columns" in bad.output
    again = CliRunner().invoke(app, args)  # a non-empty folder needs --force
    assert again.exit_code == 2 and "--force" in again.output


# ------------------------------------------------------------------ the ClientApp's own logic
def test_the_client_app_keeps_node_state_across_fresh_invocations_and_fails_with_codes(deployed):
    pytest.importorskip("flwr")
    from flwr.app import Context, RecordDict

    from privfl.federation.flower import revfrf_client

    root, truth, dep, _ = deployed
    train, test = truth["files"]["site-b"]
    cfg = {"role": "participant", "keys-dir": str(root / "keys" / "site-b"),
           "data-file": str(train), "test-file": str(test)}  # fmt: skip
    ctx = Context(run_id=1, node_id=1, node_config=cfg, state=RecordDict(), run_config={})

    def ask(blobs):
        replies, meta = revfrf_client.answer(blobs, ctx)
        meta.pop("seconds", None)
        return replies, meta

    assert revfrf_client._node(ctx, {}).name == "site-b"
    provisioning = dep.session.session
    (reply,), meta = ask([control("run-nonce", provisioning, "CS")])
    r = read_control(reply, "run-nonce", provisioning, "site-b")
    start = RunStart.sign(dep.keys.signing_key, provisioning, {"site-b": r.bytes_(32)})
    _, meta = ask([control("run-start", provisioning, "CS", start.write(Writer()))])
    assert meta["status"] == "ok"
    sid = start.run_id(provisioning)  # this run's fresh session id
    begin = control("psi-begin", sid, "CS", Writer().str_("train"))
    blobs, meta = ask([begin])
    assert meta["status"] == "ok" and len(blobs) == 1
    assert "psi-train" in dict(ctx.state["privfl-revfrf"])  # the scalar stays on the node
    _, meta = ask([b"garbage"])
    assert meta == {"status": "error", "reason": "malformed-message"}  # a code, never a text
    _, meta = ask([control("psi-compare", sid, "CS")])
    assert meta == {"status": "error", "reason": "refused"}  # a participant compares nothing


class Recording(LocalNodes):
    """LocalNodes that keep a copy of every message the CS sends (what a deviating CS
    could replay later)."""

    def __init__(self, root, truth):
        super().__init__(root, truth)
        self.sent: list[tuple[str, bytes]] = []

    def __call__(self, batch: Batch) -> tuple[bytes, ...]:
        self.sent += [(out.to, out.data) for out in batch]
        return super().__call__(batch)


def _ask(node_name: str, data: bytes):
    from privfl.forest.messages import Outgoing

    reply = yield (Outgoing(node_name, data),)
    return reply[0]


def test_each_run_draws_a_fresh_session_and_refuses_messages_of_an_earlier_run(deployed):
    """Issue 26: the session id was fixed at provisioning, so a CS could replay a signed
    revocation request (or a PSI message) of one run in the next, to nodes whose
    single-use state a new run starts afresh. Two runs on the same key folders, each with
    fresh node states (as Flower gives every run), through the deployment's node code."""
    root, truth, _, _ = deployed
    labels = pd.read_csv(root / "labels.csv")
    keys = load_node(root / "keys" / CS, "cs")

    def run(nodes):
        dep = CenterDeployment(keys, labels["id"].tolist(), labels["label"].to_numpy(), seed=SEED)
        drive(dep.align(test=False), nodes)
        return dep

    first = Recording(root, truth)
    dep1 = run(first)
    first.leaving.add("site-c")
    ask = control("revocation-please", dep1.run, CS)
    request = drive(_ask("site-c", ask), first)  # signed by site-c in run 1
    psi = [(to, m) for to, m in first.sent if peek(m).protocol == "psi" and to != CC]
    announcement = next(m for _, m in first.sent if peek(m).step == "run-start")

    second = LocalNodes(root, truth)  # run 2: every node starts with a fresh state
    dep2 = run(second)
    assert dep2.run != dep1.run and set(dep2.aligned_ids) == set(dep1.aligned_ids)
    replay = control("cc-revoke", dep2.run, CS, Writer().bytes_(request))
    with pytest.raises(WrongSessionError):
        second.node(CC).handle(replay)  # the revocation of run 1 is refused in run 2
    assert "site-c" in second.node(CC)._cc().holders
    assert psi
    for to, message in psi:  # every PSI message of run 1
        with pytest.raises(ProtocolError, match="another session"):
            second.node(to).handle(message)
    # the CS cannot take run 1's id again: a fresh node checks its own nonce is in it
    third = LocalNodes(root, truth)
    node = third.node("site-a")
    node.handle(control("run-nonce", keys.session.session, CS))
    with pytest.raises(ProtocolError, match="own fresh nonce"):
        node.handle(announcement)
    with pytest.raises(ProtocolError, match="already started"):
        second.node("site-a").handle(control("run-nonce", keys.session.session, CS))


@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(data=st.one_of(st.binary(max_size=300), mutated(FUZZ_VALID)))
def test_node_decoders_survive_fuzzing(deployed, data):
    nodes = deployed[3]
    for name in ("site-c", CC, "asker"):
        node = nodes.node(name)
        node.state = dict(nodes.states[name])  # fuzz a copy of the node's state
        decode_safely(node.handle, data)


def test_the_cc_node_writes_its_audit_log_whether_or_not_a_comparison_was_out_of_range(deployed):
    """Issue 26: the CC node wrote its alarm file only when a comparison was out of range,
    so the time of its answer told the CS which branch ran. It now writes its audit log
    after every batch, on both branches alike."""
    from privfl.crypto import dtpkc
    from privfl.forest import secure_ops
    from privfl.forest.budget import NO_TICKET

    root, _, dep, nodes = deployed
    cs, out = dep.cs, root / "out" / CC
    material, holder = cs._material(), next(iter(nodes.node(CC)._cc().holders))
    key = cs._holder_key(holder)

    def holt_request(x: int, y: int) -> bytes:
        cx, cy = (dtpkc.encrypt_residue(material.sk.public, v) for v in (x, y))
        job = secure_ops.secure_less_than(material, 9_999, cx, cy, holder, key, NO_TICKET)
        return next(job).data

    written = []
    for x, y in ((5, 9), (1 << (material.sk.public.params.ell + 70), 0)):  # in range, not
        for path in out.glob("*-alarms.json"):
            path.unlink()
        nodes.node(CC).handle(holt_request(x, y))
        (path,) = out.glob("*-alarms.json")
        written.append(len(json.loads(path.read_text())["holt-alarms"]))
    assert written[1] == written[0] + 1  # the same file written on both branches


@pytest.fixture()
def fresh_fit(tmp_path):
    """A deployment of its own (fitted, test rows aligned), untouched by other tests."""
    truth = make(tmp_path)
    labels = pd.read_csv(tmp_path / "labels.csv")
    keys = load_node(tmp_path / "keys" / CS, "cs")
    dep = CenterDeployment(keys, labels["id"].tolist(), labels["label"].to_numpy(), seed=SEED)
    nodes = LocalNodes(tmp_path, truth)
    drive(dep.align(), nodes)
    drive(dep.fit(), nodes)
    return dep, nodes


def test_a_participant_node_uploads_no_test_value_in_any_batch(fresh_fit):
    """Issue 26 (attack 1, then the open item 1): a CS re-sent a value-request in every batch
    and got an FRF-Test decryption ticket each time; later once per (tree, node, row) per
    run, still one comparison bit of the CS's choice per test row. FRF-Test now compares at
    the provider in the clear: a node answers no value-request, in any batch."""
    dep, nodes = fresh_fit
    tree, split = next(
        (t.tree_id, n) for t in dep.cs.trees for n in t.nodes.values() if hasattr(n, "provider")
    )
    ask = NodeQuery("value-request", tree, split.node_id, 0).to_bytes(dep.cs.config)
    for _ in range(2):
        with pytest.raises(ProtocolError, match="does not answer 'value-request'"):
            nodes.node(split.provider).handle_all([ask])


def test_a_requester_signs_one_query_batch_per_run_and_follows_one_run(fresh_fit):
    """Issue 26 (attack 2): the requester node encrypted and signed its rows again on every
    ``query-request``, and switched to any CS-signed run-start, so a CS obtained fresh
    signed queries (each a budget of chosen comparisons at the holders) without the
    requester's consent. After its honest query, a second request and another run are
    refused."""
    dep, nodes = fresh_fit
    drive(dep.query("asker"), nodes)
    w = Writer().u32(len(dep.cs.layout()))
    for name, n_columns in dep.cs.layout():
        w.str_(name).u32(n_columns)
    with pytest.raises(ProtocolError, match="already signed"):
        nodes.node("asker").handle(control("query-request", dep.run, CS, w))
    keys = load_node(nodes.root / "keys" / CS, "cs")
    provisioning = keys.session.session
    other = RunStart.sign(keys.signing_key, provisioning, {"site-a": bytes(32)})
    with pytest.raises(ProtocolError, match="another run"):
        nodes.node("asker").handle(control("run-start", provisioning, CS, other.write(Writer())))


def test_the_server_app_refuses_a_second_query_before_any_work_but_not_a_second_test():
    """A requester node signs one query batch per run, so a plan that queries twice fails
    before any key is read or any node is contacted. FRF-Test compares in the clear at the
    providers, one round per test step (:mod:`privfl.forest.branch`): two secure tests in a
    run are fine and reach the key loading (which fails here, on a missing folder)."""
    from types import SimpleNamespace

    from privfl.federation.flower.revfrf_server import _run

    context = SimpleNamespace(run_config={"steps": "train,query,query", "cs-keys": "/none"})
    with pytest.raises(InputError, match="one query per run"):
        _run(None, context)
    context = SimpleNamespace(run_config={"steps": "train,test,revoke,test", "cs-keys": "/none"})
    with pytest.raises(InputError, match="not found"):
        _run(None, context)
