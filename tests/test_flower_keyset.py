"""Threshold key sets kept across ``flwr run``s (issue 27, item 4 in a deployment): each node
keeps its key share and its own decryption count in its node-local ``context.state``, the
aggregator its public key set in its ``key-set-file``; a second run reuses the set (no key
rounds), a run past the budget re-keys, and a node refuses at the join, before any upload, a
reuse its own count does not allow, whatever the aggregator's file says. Through the real
ServerApp and ClientApp on an in-memory grid (the nodes' Contexts outlive the runs, as a
SuperNode's do); insecure ``fhauc-test`` ring with a budget of 2 decryption shares (fast)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging

import pytest

pytest.importorskip("openfhe")
pytest.importorskip("flwr")

from flwr.app import ConfigRecord

import privfl
from _memory_grid import task_identity
from privfl.crypto.threshold import params as threshold_params
from privfl.evaluation.fhauc.threshold import ops as threshold_ops
from privfl.evaluation.fhauc.threshold.keyset import export_server_key_set, import_server_key_set
from privfl.federation.flower import server_app
from test_flower_rounds import PARTIES, server_context, write_parties


@pytest.fixture(autouse=True)
def small_budget(monkeypatch):
    """``fhauc-test`` with a budget of 2 shares: a semi-honest AUC session spends 1."""
    small = dataclasses.replace(threshold_params.parameter_set("fhauc-test"), name="fhauc-b2",
                                max_decryptions=2)  # fmt: skip
    monkeypatch.setitem(threshold_params.PARAMETER_SETS, "fhauc-b2", small)
    monkeypatch.setattr(threshold_ops, "FHAUC_PARAMETER_SET", "fhauc-b2")


def budget(monkeypatch, shares: int) -> None:
    """The test set's budget raised to ``shares`` decryption shares per party."""
    wider = dataclasses.replace(threshold_params.parameter_set("fhauc-b2"), max_decryptions=shares)
    monkeypatch.setitem(threshold_params.PARAMETER_SETS, "fhauc-b2", wider)


def runner(grid, tmp_path, kept):
    """One `flwr run` each call: a fresh ServerApp Context with the kept key set's file."""
    return lambda: server_app._run(grid, server_context(tmp_path, **{"key-set-file": str(kept)}))


def rounds(caplog) -> list[str]:
    lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith("privfl round")]
    caplog.clear()
    return [line.split()[2] for line in lines]


def shares_made(grid) -> list[int]:
    """Each node's own count, read back from its node-local key set."""
    from privfl.evaluation.fhauc.threshold.keyset import import_key_set

    out = []
    for k, node in grid.nodes.items():
        record = node.state["privfl-fhauc"]
        assert isinstance(record, ConfigRecord)
        kept = import_key_set(record["key-set"], PARTIES[k - 1], threshold_ops.fhauc_parameters())
        out.append(kept.keys.decryption_shares_made)
    return out


def test_a_second_flwr_run_reuses_the_nodes_key_sets_and_a_spent_set_is_re_keyed(tmp_path, caplog):
    kept = tmp_path / "key-set.bin"
    with task_identity(5), caplog.at_level(logging.INFO, logger="flwr"):
        grid, parts = write_parties(tmp_path, keys="threshold")
        expected = privfl.binned_auc(parts, 100)

        def run() -> None:  # a fresh ServerApp Context each time: a new `flwr run`
            server_app._run(grid, server_context(tmp_path, **{"key-set-file": str(kept)}))

        run()
        assert "fhauc_keygen" in rounds(caplog) and kept.is_file()
        first = import_server_key_set(kept.read_bytes(), threshold_ops.fhauc_parameters())
        assert shares_made(grid) == [1, 1, 1]
        run()  # reuses the kept set: no key rounds
        assert "fhauc_keygen" not in rounds(caplog)
        assert shares_made(grid) == [2, 2, 2]
        second = import_server_key_set(kept.read_bytes(), threshold_ops.fhauc_parameters())
        assert second.key_id == first.key_id and second.used == 2
        run()  # the budget is spent: the aggregator re-keys
        assert "fhauc_keygen" in rounds(caplog)
        third = import_server_key_set(kept.read_bytes(), threshold_ops.fhauc_parameters())
        assert third.key_id != first.key_id and shares_made(grid) == [1, 1, 1]
    for name in PARTIES:
        results = [json.loads(f.read_text()) for f in (tmp_path / "out" / name).glob("fhauc-*")]
        assert len(results) == 3
        assert all(r["auc"] == pytest.approx(expected, abs=1e-6) for r in results)


def test_a_node_refuses_a_reuse_its_own_count_does_not_allow_whatever_the_aggregator_says(
    tmp_path,
):
    kept = tmp_path / "key-set.bin"
    with task_identity(5):
        grid, _ = write_parties(tmp_path, keys="threshold")
        context = {"key-set-file": str(kept)}
        server_app._run(grid, server_context(tmp_path, **context))
        server_app._run(grid, server_context(tmp_path, **context))
        assert shares_made(grid) == [2, 2, 2]
        lying = import_server_key_set(kept.read_bytes(), threshold_ops.fhauc_parameters())
        lying.used = 0  # the aggregator's file claims the set is fresh
        kept.write_bytes(export_server_key_set(lying))
        with pytest.raises(server_app.PartyFailure, match="refused"):
            server_app._run(grid, server_context(tmp_path, **context))
        assert shares_made(grid) == [2, 2, 2]  # no share made


def test_stored_key_sets_are_read_with_bounded_reads_and_fail_typed(tmp_path):
    """The stored key sets are the roles' own bytes, yet their decoders must fail with a typed
    error on a truncated or garbled file (no numpy or OpenFHE traceback, no huge allocation):
    every truncation, a garbled header, and another parameter set (dropped: re-key)."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from privfl.errors import PrivflError
    from privfl.evaluation.fhauc.threshold.keyset import export_key_set, import_key_set

    kept = tmp_path / "key-set.bin"
    with task_identity(5):
        grid, _ = write_parties(tmp_path, keys="threshold")
        server_app._run(grid, server_context(tmp_path, **{"key-set-file": str(kept)}))
    params = threshold_ops.fhauc_parameters()
    server_bytes = kept.read_bytes()
    record = grid.nodes[1].state["privfl-fhauc"]
    party_bytes = record["key-set"]
    assert export_key_set(import_key_set(party_bytes, PARTIES[0], params)) == party_bytes
    assert export_server_key_set(import_server_key_set(server_bytes, params)) == server_bytes
    other = dataclasses.replace(params, name="another-set")
    assert import_key_set(party_bytes, PARTIES[0], other) is None
    assert import_server_key_set(server_bytes, other) is None
    with pytest.raises(PrivflError):
        import_key_set(party_bytes, "site-z", params)  # not one of its parties

    @settings(max_examples=60, deadline=None)
    @given(cut=st.integers(0, 10**9), junk=st.binary(max_size=64), at=st.integers(0, 64))
    def fuzz(cut, junk, at):
        for data, read in (
            (server_bytes, lambda b: import_server_key_set(b, params)),
            (party_bytes, lambda b: import_key_set(b, PARTIES[0], params)),
        ):
            with pytest.raises(PrivflError):
                read(data[: cut % len(data)])  # every truncation
            garbled = data[:at] + junk + data[at + len(junk) :]
            if garbled != data and at + len(junk) <= 64:  # the header only (never the share)
                with contextlib.suppress(PrivflError):  # a typed refusal, or a valid set
                    read(garbled)

    fuzz()


def test_a_run_failing_after_the_decryption_relay_leaves_the_deployment_usable(
    tmp_path, monkeypatch, caplog
):
    """The aggregator stores its key set's count and last request id before it relays the
    decryption requests: a run whose lead fails to fuse (after every other party made its
    share) does not leave the file behind the parties' counts, so the next run reuses the set
    (fresh request ids, a count that fits) instead of being refused at the decrypt step."""
    from privfl.errors import ProtocolError
    from privfl.evaluation.fhauc.threshold.party import ThresholdPartyKeys

    budget(monkeypatch, 3)
    kept = tmp_path / "key-set.bin"
    with task_identity(5), caplog.at_level(logging.INFO, logger="flwr"):
        grid, parts = write_parties(tmp_path, keys="threshold")
        run = runner(grid, tmp_path, kept)

        run()
        assert "fhauc_keygen" in rounds(caplog)

        def refuse(self, party, data):
            raise ProtocolError("the lead fails after the decryption relay")

        with monkeypatch.context() as m:
            m.setattr(ThresholdPartyKeys, "fuse", refuse)
            with pytest.raises(server_app.PartyFailure, match="fhauc_fuse"):
                run()
        assert "fhauc_decrypt" in rounds(caplog)
        stored = import_server_key_set(kept.read_bytes(), threshold_ops.fhauc_parameters())
        assert stored.used == 2 and max(shares_made(grid)) == 2  # never behind any party
        run()  # reuses the set: fresh request ids, a count that fits
        assert "fhauc_keygen" not in rounds(caplog)
        assert sorted(shares_made(grid)) == [2, 3, 3]  # the lead never fused in run 2
    expected = privfl.binned_auc(parts, 100)
    for name in PARTIES:
        results = [json.loads(f.read_text()) for f in (tmp_path / "out" / name).glob("fhauc-*")]
        assert len(results) == 2 and all(r["auc"] == pytest.approx(expected, abs=1e-6)
                                         for r in results)  # fmt: skip
    assert not list(tmp_path.glob(".key-set.bin.*"))  # no temporary file left behind


def test_a_reuse_run_refused_at_the_join_removes_the_file_and_the_next_run_re_keys(
    tmp_path, caplog
):
    """A node that lost its node-local key set refuses the reuse at the join: the aggregator
    removes its key-set file and says so, and the next run re-keys (no stuck deployment)."""
    kept = tmp_path / "key-set.bin"
    with task_identity(5), caplog.at_level(logging.INFO, logger="flwr"):
        grid, _ = write_parties(tmp_path, keys="threshold")
        context = {"key-set-file": str(kept)}
        server_app._run(grid, server_context(tmp_path, **context))
        del grid.nodes[2].state["privfl-fhauc"]  # a node lost its state
        caplog.clear()
        with pytest.raises(server_app.PartyFailure, match="fhauc_join"):
            server_app._run(grid, server_context(tmp_path, **context))
        assert not kept.exists()
        assert any("the next run generates a fresh key set" in r.getMessage()
                   for r in caplog.records)  # fmt: skip
        caplog.clear()
        server_app._run(grid, server_context(tmp_path, **context))
        assert "fhauc_keygen" in rounds(caplog) and kept.is_file()
        assert shares_made(grid) == [1, 1, 1]


def test_nodes_refuse_a_kept_set_after_two_abandoned_sessions_and_the_next_run_re_keys(
    tmp_path, monkeypatch, caplog
):
    """The abandon limit through the real apps: each node's count of sessions on the kept set
    abandoned after the lead draw lives in its node-local state; after ABANDON_LIMIT (2) the
    nodes refuse the set at the join, the ServerApp removes its file, and the next run
    re-keys and succeeds."""
    from privfl.errors import ProtocolError
    from privfl.evaluation.fhauc.threshold.keyset import ABANDON_LIMIT
    from privfl.evaluation.fhauc.threshold.party import ThresholdPartyKeys

    budget(monkeypatch, 8)
    kept = tmp_path / "key-set.bin"
    with task_identity(5), caplog.at_level(logging.INFO, logger="flwr"):
        grid, _ = write_parties(tmp_path, keys="threshold")
        run = runner(grid, tmp_path, kept)

        run()

        def refuse(self, party, data):
            raise ProtocolError("the lead stops after the lead draw")

        with monkeypatch.context() as m:
            m.setattr(ThresholdPartyKeys, "fuse", refuse)
            for _ in range(ABANDON_LIMIT):  # abandoned after the key checks drew the lead
                with pytest.raises(server_app.PartyFailure, match="fhauc_fuse"):
                    run()
        caplog.clear()
        with pytest.raises(server_app.PartyFailure, match="fhauc_join"):
            run()  # every node notes the second abandon and refuses the set
        assert not kept.exists()
        assert any("abandoned after the lead was drawn" in r.getMessage() for r in caplog.records)
        caplog.clear()
        run()  # re-keys
        assert "fhauc_keygen" in rounds(caplog) and kept.is_file()


@pytest.mark.parametrize("reuse_failed", [False, True])
def test_a_release_that_changes_the_budget_re_keys_also_mid_session(
    tmp_path, monkeypatch, caplog, reuse_failed
):
    """Key sets kept by a release whose parameter set of the same name had another budget
    (its stored header named the set by name only) are dropped, and the next run re-keys
    instead of giving the old set the new budget: after completed runs, and after a reuse run
    that failed after the key check (the nodes' unfinished session on the dropped set is
    forgotten, not refused at every later join)."""
    from privfl.errors import ProtocolError
    from privfl.evaluation.fhauc.threshold import keyset
    from privfl.evaluation.fhauc.threshold.party import ThresholdPartyKeys

    budget(monkeypatch, 3)
    kept = tmp_path / "key-set.bin"
    with task_identity(5), caplog.at_level(logging.INFO, logger="flwr"):
        grid, parts = write_parties(tmp_path, keys="threshold")
        run = runner(grid, tmp_path, kept)
        with monkeypatch.context() as m:  # the previous release
            m.setattr(keyset, "stored_set_name", lambda params: params.name)
            run()
            if reuse_failed:

                def refuse(self, party, data):
                    raise ProtocolError("the lead fails after the decryption relay")

                m.setattr(ThresholdPartyKeys, "fuse", refuse)
                with pytest.raises(server_app.PartyFailure, match="fhauc_fuse"):
                    run()
            else:
                caplog.clear()
                run()
                assert "fhauc_keygen" not in rounds(caplog)  # reused
        budget(monkeypatch, 6)  # this release: the same name, another budget
        caplog.clear()
        run()
        assert "fhauc_keygen" in rounds(caplog) and shares_made(grid) == [1, 1, 1]
        caplog.clear()
        run()  # the fresh set is kept and reused
        assert "fhauc_keygen" not in rounds(caplog) and shares_made(grid) == [2, 2, 2]
    expected = privfl.binned_auc(parts, 100)
    for name in PARTIES:
        results = [json.loads(f.read_text()) for f in (tmp_path / "out" / name).glob("fhauc-*")]
        assert all(r["auc"] == pytest.approx(expected, abs=1e-6) for r in results)
