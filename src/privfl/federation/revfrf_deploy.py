"""The center server's side of a RevFRF deployment, independent of the network.

:class:`CenterDeployment` holds the CS's key folder and its labels; it aligns the ids with
the participants (:mod:`privfl.forest.psi`), then builds the same
:class:`~privfl.forest.center_server.CenterServer` the in-process facade builds, and returns
its conversations as batched jobs (:mod:`privfl.forest.jobs`); each run first draws a
fresh session id with the nodes (:meth:`CenterDeployment.start`, :mod:`.revfrf_run`).
:func:`drive` runs a job over any ``deliver`` function that sends a batch of messages to the
nodes named in it and returns their replies in order: the Flower ServerApp's rounds, or
nodes in this process (tests).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np

from privfl.errors import InputError, ProtocolError
from privfl.federation.revfrf_keys import NodeKeys
from privfl.federation.revfrf_node import CONTROL, control, psi_config, read_control
from privfl.federation.revfrf_run import NONCE_BYTES, RunStart
from privfl.forest.center_server import CenterServer
from privfl.forest.freshness import RevocationReport
from privfl.forest.jobs import Batch, Par, gather
from privfl.forest.messages import CC, CS, Outgoing
from privfl.forest.psi import PsiConfig, PsiParty
from privfl.messages import Writer

T = TypeVar("T")
Deliver = Callable[[Batch], tuple[bytes, ...]]


def drive(job: Par[T], deliver: Deliver) -> T:
    """Run a CS job: every batch it yields goes to ``deliver``, the replies come back."""
    try:
        batch = next(job)
        while True:
            replies = deliver(batch)
            if len(replies) != len(batch):
                raise ProtocolError(f"{len(replies)} replies to {len(batch)} messages")
            batch = job.send(replies)
    except StopIteration as stop:
        result: T = stop.value
        return result


@dataclass(frozen=True)
class Predictions:
    """What a test run gave the CS: the plaintext-comparison and secure predictions."""

    plain: np.ndarray
    secure: np.ndarray


class CenterDeployment:
    """The CS of a deployment: its keys, its labels (with their ids), the forest."""

    def __init__(
        self, keys: NodeKeys, label_ids: Sequence[object], labels: Sequence[object], *,
        task: str = "classification", seed: int | None = 0, min_samples: int = 2,
    ) -> None:  # fmt: skip
        if len(label_ids) != len(labels):
            raise InputError(f"{len(label_ids)} ids for {len(labels)} labels")
        self.keys, self.session = keys, keys.session
        self._ids, self._labels = [str(i) for i in label_ids], np.asarray(labels)
        self._task, self._seed, self._min = task, seed, min_samples
        self._cs: CenterServer | None = None
        self.run: bytes | None = None  # this run's fresh session id (start)
        self._announcement = b""  # the signed run-start, for the requesters
        self.aligned_ids: list[str] = []
        self.n_test = 0

    @property
    def participants(self) -> tuple[str, ...]:
        return self.session.participants

    @property
    def cs(self) -> CenterServer:
        if self._cs is None:
            raise ProtocolError("align the ids first")
        return self._cs

    # ---------------------------------------------------------------- the run
    def start(self) -> Par[bytes]:
        """Draw this run's fresh session id with the CC and the participants (each adds a
        fresh nonce; the CS signs the announcement, :mod:`.revfrf_run`); returns it."""
        if self.keys.signing_key is None:
            raise ProtocolError("the CS has no signing key (CS/signing.key)")
        if self.run is not None:
            raise ProtocolError("this run has started already")
        provisioning, names = self.session.session, [*self.participants, CC]
        ask = control("run-nonce", provisioning, CS)
        replies = yield tuple(Outgoing(n, ask) for n in names)
        nonces = {}
        for name, reply in zip(names, replies, strict=True):
            r = read_control(reply, "run-nonce", provisioning, name)
            nonces[name] = r.bytes_(NONCE_BYTES)
            r.end()
        start = RunStart.sign(self.keys.signing_key, provisioning, nonces)
        run = start.run_id(provisioning)
        announcement = control("run-start", provisioning, CS, start.write(Writer()))
        replies = yield tuple(Outgoing(n, announcement) for n in names)
        for name, reply in zip(names, replies, strict=True):
            read_control(reply, "run-started", run, name).end()
        self.run, self._announcement = run, announcement
        return run

    def _run(self) -> bytes:
        if self.run is None:
            raise ProtocolError("start the run first")
        return self.run

    # ---------------------------------------------------------------- alignment
    def align(self, test: bool = True) -> Par[None]:
        """Start the run (a fresh session id) if needed, then the PSI of the training ids
        (CS and participants) and, with ``test``, of the participants' test ids, side by
        side; then the CS is built on the aligned labels."""
        if self.run is None:
            yield from self.start()
        run = self._run()
        train = psi_config(self.session, "train", run)
        if self.keys.signing_key is None:
            raise ProtocolError("the CS has no signing key (CS/signing.key)")
        local = PsiParty(CS, self._ids, train, self.keys.signing_key)
        jobs = [self._psi(train, local)]
        if test:
            jobs.append(self._psi(psi_config(self.session, "test", run), None))
        counts = yield from gather(jobs)
        if local.rows is None:
            raise ProtocolError("the private set intersection gave this node no rows")
        if counts[0] == 0:
            raise InputError("the CS and the participants have no training id in common")
        self.n_test = counts[1] if test else 0
        self.aligned_ids = [self._ids[i] for i in local.rows]
        cs = CenterServer(
            self.session.config(len(local.rows), run), self._labels[local.rows], self._task,
            min_samples=self._min, seed=self._seed,
        )  # fmt: skip
        cs.install_keys(self.keys.grant)
        for data in self.keys.registrations.values():
            cs.register_requester(data)
        self._cs = cs

    def _psi(self, config: PsiConfig, local: PsiParty | None) -> Par[int]:
        """One PSI over the nodes: the CS starts the parties, relays every list to its next
        holder (keying its own turns itself), sends the sealed lists to CC and each result to
        its party. Returns the size of the intersection."""
        sid = self._run()
        remote = [p for p in config.parties if local is None or p != local.name]
        begin = control("psi-begin", sid, CS, Writer().str_("train" if local else "test"))
        held = dict(zip(remote, (yield tuple(Outgoing(p, begin) for p in remote)), strict=True))
        if local is not None:
            held[local.name] = local.start()
        key = self.session.psi_comparer_key
        for stage in range(1, len(config.parties)):
            turns = {o: config.holder(o, stage) for o in config.parties}
            away = [o for o, h in turns.items() if local is None or h != local.name]
            replies = yield tuple(Outgoing(turns[o], held[o]) for o in away)
            for o in config.parties:
                if o not in away and local is not None:
                    held[o] = local.pass_on(held[o], key)
            held.update(zip(away, replies, strict=True))
        ask = control("psi-compare", sid, CS, Writer().list_(list(held.values())))
        (answer,) = yield (Outgoing(CC, ask),)
        r = read_control(answer, "psi-results", sid, CC)
        results = dict(zip(config.parties, r.list_(len(config.parties)), strict=True))
        r.end()
        done = yield tuple(Outgoing(p, results[p]) for p in remote)
        counts = set()
        for p, reply in zip(remote, done, strict=True):
            rr = read_control(reply, "psi-done", sid, p)
            counts.add(rr.u32())
            rr.end()
        if local is not None:
            counts.add(len(local.finish(results[local.name])))
        if len(counts) != 1:
            raise ProtocolError(f"the parties disagree on the intersection: sizes {counts}")
        return counts.pop()

    # ---------------------------------------------------------------- forest
    def fit(self) -> Par[None]:
        return self.cs.fit()

    def test(self, secure: bool = True) -> Par[Predictions]:
        """FRF-Test on the participants' aligned test rows: each provider compares its own
        test values with its own threshold (it holds both; no value is decrypted, so a test
        row is no decryption ticket for the CS). FRF-Test has one path: with ``secure`` the
        result's ``secure`` field repeats it (kept for the apps' JSON), else it is empty."""
        if self.n_test == 0:
            raise InputError("no aligned test rows (give the participants a test-file)")
        plain = yield from self.cs.predict_plain(self.n_test)
        return Predictions(plain, plain.copy() if secure else np.asarray([]))

    def query(self, requester: str) -> Par[np.ndarray]:
        """FRF-Predict for every row of a requester's file, batched: the requester learns the
        run it signs for and the forest's layout in one round, and answers with its rows
        encrypted under its key, each row its own signed query, in ``query-batch`` messages;
        the CS walks each batch with packed HoLT comparisons
        (:meth:`~privfl.forest.center_server.CenterServer.predict_queries`: one CC message
        and one message per holder per tree level for all rows and trees, each comparison
        charged to its own row's query) and sends the requester its predictions."""
        if requester not in self.session.requesters:
            raise InputError(f"{requester!r} is not a provisioned requester")
        sid, w = self._run(), Writer()
        layout = self.cs.layout()
        w.u32(len(layout))
        for name, n_columns in layout:
            w.str_(name).u32(n_columns)
        ask = control("query-request", sid, CS, w)
        ack, reply = yield (Outgoing(requester, self._announcement), Outgoing(requester, ask))
        read_control(ack, "run-started", sid, requester).end()  # the run it signs for
        r = read_control(reply, "queries", sid, requester)
        batches = r.list_(1 << 16)
        r.end()
        if not batches:
            raise ProtocolError(f"{requester} sent no query batch")
        out = yield from gather(self.cs.predict_queries(requester, b) for b in batches)
        values = np.concatenate(out)
        w = Writer().u32(len(values))
        for v in values:
            w.str_(str(v))
        (ack,) = yield (Outgoing(requester, control("prediction", sid, CS, w)),)
        read_control(ack, "ack", sid, requester).end()
        return values

    def revoke(self, participant: str, level: int = 1) -> Par[RevocationReport]:
        """FRF-Revoc: the participant's own signed request, verified by the CS (destroy,
        regrow, forget; level 2 refreshes at CC), then by CC, which stops re-encrypting
        to it (the KGC is offline)."""
        if participant not in self.participants or participant in self.cs.revoked:
            raise InputError(f"{participant!r} is not an active participant")
        if level not in (1, 2):
            raise InputError("revocation level must be 1 or 2")
        sid = self._run()
        (request,) = yield (Outgoing(participant, control("revocation-please", sid, CS)),)
        report = yield from self.cs.revoke(request, level, participant)
        ask = control("cc-revoke", sid, CS, Writer().bytes_(request))
        (ack,) = yield (Outgoing(CC, ask),)
        r = read_control(ack, "cc-revoked", sid, CC)
        if r.str_(256) != participant:
            raise ProtocolError("CC revoked another participant")
        r.end()
        return report

    def summary(self) -> dict[str, Any]:
        cs = self.cs
        per = cs.nodes_per_participant()
        return {
            "session": self.session.session.hex(), "run": self._run().hex(),
            "aligned_samples": len(self.aligned_ids),
            "test_rows": self.n_test, "trees": len(cs.trees),
            "nodes_per_participant": per, "internal_nodes": sum(per.values()),
            "revoked": list(cs.revoked),
        }  # fmt: skip


__all__ = ["CONTROL", "CenterDeployment", "Predictions", "drive"]
