"""FHAUC is one engine: one schedule and one party step handler for both key modes, the
threshold aggregator composed with (not mixed into) the one Aggregator, and every answer the
schedule takes in checked against the parties the step was sent to."""

from __future__ import annotations

import inspect

import pytest

import privfl
from conftest import make_parties
from privfl.crypto.keywrap import IdentityKey
from privfl.errors import InputError, ProtocolError
from privfl.evaluation.federated import InProcessTransport
from privfl.evaluation.fhauc import Aggregator, Policy, roles, rounds
from privfl.evaluation.fhauc.schedule import SessionRequest, party_step, run_session
from privfl.evaluation.fhauc.steps import THRESHOLD_STEPS, Step
from privfl.evaluation.fhauc.tamper import DropParty
from privfl.evaluation.fhauc.threshold import aggregator as threshold_aggregator
from privfl.evaluation.fhauc.threshold import setup as threshold_setup
from privfl.evaluation.fhauc.transport import Transport
from privfl.runner import InProcessRunner


def single_key_federation(rng, names=("p0", "p1")):
    data = make_parties(rng, len(names), 60)
    fed = roles.in_process(list(names), "single", None)
    parties = [
        roles.make_party("single", n, *fed.member(n), s, y)
        for n, (s, y) in zip(names, data, strict=True)
    ]
    runner = InProcessRunner()
    roles.provision(fed, parties, Policy(max_samples_per_party=64), runner)
    return data, fed, parties, runner


def test_the_threshold_aggregator_holds_its_computation_and_key_backend_by_composition():
    tamper = DropParty()
    agg = roles.make_aggregator("threshold", tamper)
    assert not isinstance(agg, Aggregator)  # no mixin: it holds the Aggregator it runs
    assert agg.computation is tamper
    names = ["a", "b"]
    ids = {n: IdentityKey() for n in names}
    roster = {n: k.public_bytes for n, k in ids.items()}
    public, _ = threshold_setup.provision("a", ids["a"], roster, Policy())
    agg.receive_setup(public)
    # the computation runs under the joint-key backend, given once with roster and policy
    assert tamper.keys is agg.keys and tamper.roster == roster and tamper.context is None
    source = inspect.getsource(threshold_aggregator)
    assert "getattr(" not in source and "Mixin" not in source


def test_the_one_schedule_probes_no_object_for_optional_members():
    """Transports stream through a protocol method, parties give their handler table: the
    schedule, its key rounds and its transport helpers never ask ``getattr``/``hasattr``."""
    from privfl.evaluation.fhauc import schedule, transport

    for module in (schedule, rounds, transport):
        source = inspect.getsource(module)
        assert "getattr(" not in source and "hasattr(" not in source, module.__name__


def test_a_single_key_aggregator_is_not_given_a_threshold_aggregator():
    with pytest.raises(InputError, match="keys='single'"):
        roles.make_aggregator("single", threshold_aggregator.ThresholdAggregator())


def test_one_party_step_refuses_a_step_the_partys_key_mode_has_not(rng):
    _, _, parties, _ = single_key_federation(rng)
    party = parties[0]
    assert set(party.handlers()) == {Step.JOIN, Step.UPLOAD}
    for step in set(THRESHOLD_STEPS) - {Step.JOIN, Step.UPLOAD, Step.RESULT}:
        with pytest.raises(ProtocolError, match="not a step of this party"):
            party_step(party, step, b"")
    with pytest.raises(ProtocolError, match="unknown FHAUC step"):
        party_step(party, "exfiltrate", b"")


class ExtraAnswer(InProcessTransport):
    """A transport through which a non-member answers the upload step."""

    def exchange(self, step, messages):
        out = super().exchange(step, messages)
        if step == Step.UPLOAD:
            out["mallory"] = next(iter(out.values()))
        return out


def test_an_upload_answer_from_outside_the_session_is_refused_with_single_keys(rng):
    _, fed, parties, runner = single_key_federation(rng)
    transport = ExtraAnswer(parties, runner)
    request = SessionRequest(fed.names, 5)
    with pytest.raises(ProtocolError, match="unexpected answer"):
        run_session(fed.aggregator, transport, request)


def test_the_one_schedule_runs_single_keys_and_names_no_lead(rng):
    data, fed, parties, runner = single_key_federation(rng)
    transport = InProcessTransport(parties, runner)
    report = run_session(fed.aggregator, transport, SessionRequest(fed.names, 5), runner.run)
    assert report.lead == "" and report.completed == fed.names
    assert isinstance(rounds.rounds_for(fed.aggregator), rounds.SingleKeyRounds)
    for result in transport.results.values():
        assert result.auc == pytest.approx(privfl.binned_auc(data, 5), abs=1e-6)


def test_a_transport_with_only_exchange_streams_through_it():
    class Echo(Transport):
        def exchange(self, step, messages):
            return {p: m + b"!" for p, m in messages.items()}

    got: list[tuple[str, bytes]] = []
    Echo().stream("upload", {"a": b"x", "b": b"y"}, lambda p, d: got.append((p, d)))
    assert got == [("a", b"x!"), ("b", b"y!")]
