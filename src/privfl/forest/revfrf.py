"""RevFRF: revocable federated random forest on vertically partitioned data (DT-PKC).

A short facade over the roles (:class:`~.center_server.CenterServer` holding the labels,
:class:`~.participant.Participant` per feature owner, the
:class:`~.computation_provider.ComputationProvider` and the
:class:`~.kgc.KeyGenerationCenter`): it builds them, runs their conversations with
:class:`privfl.runner.InProcessRunner` (real bytes, per-role time) and returns typed results.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from privfl._typing import FloatArray
from privfl.crypto import dtpkc
from privfl.errors import InputError
from privfl.forest import provenance, schedule
from privfl.forest.center_server import CenterServer
from privfl.forest.computation_provider import ComputationProvider
from privfl.forest.freshness import RevocationReport
from privfl.forest.kgc import KeyGenerationCenter
from privfl.forest.messages import CC, CS, SessionConfig
from privfl.forest.participant import Participant, Requester, check_matrix, check_name
from privfl.forest.psi import PsiComparer, PsiConfig, PsiParty
from privfl.forest.tree import Tree
from privfl.messages import new_session_id
from privfl.progress import Progress
from privfl.runner import InProcessRunner

TASKS = ("classification", "regression")


@dataclass(frozen=True)
class ForestReport:
    """Internal nodes per participant, trees, bytes per channel and seconds per role."""

    nodes_per_participant: Mapping[str, int]
    trees: int
    internal_nodes: int
    revoked: tuple[str, ...]
    bytes: Mapping[str, int]
    seconds: Mapping[str, float]
    key_bits: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _positive(value: object, what: str, minimum: int = 1) -> int:
    if not isinstance(value, int | np.integer) or isinstance(value, bool) or value < minimum:
        raise InputError(f"{what} must be an integer >= {minimum}, got {value!r}")
    return int(value)


def _partitions(partitions: object) -> dict[str, FloatArray]:
    if not isinstance(partitions, Mapping) or not partitions:
        raise InputError("partitions must map participant name -> feature matrix")
    mats = {check_name(k, "participant"): check_matrix(v, f"participant {k!r}")
            for k, v in partitions.items()}  # fmt: skip
    counts = sorted({m.shape[0] for m in mats.values()})
    if len(counts) != 1:
        raise InputError(f"partitions are misaligned: row counts {counts} differ")
    return mats


class RevFRF:
    """The forest. ``rho`` is ϱ (samples a participant probes for a feature's range),
    ``candidates`` ς. ``reuse_features=False`` (the paper) removes a node's feature from its
    subtree. Keys below 2048 bits need ``allow_insecure_key_bits=True`` (tests, the paper's
    1024-bit comparisons)."""

    def __init__(
        self, task: str = "classification", n_trees: int = 100, max_depth: int = 10,
        min_samples: int = 2, key_bits: int = dtpkc.MIN_KEY_BITS, rho: int = 32,
        candidates: int = 8, reuse_features: bool = False, seed: int | None = None, *,
        allow_insecure_key_bits: bool = False,
    ) -> None:  # fmt: skip
        if task not in TASKS:
            raise InputError("task must be 'classification' or 'regression'")
        self.task, self.seed, self.reuse_features = task, seed, bool(reuse_features)
        self.n_trees, self.max_depth = (
            _positive(n_trees, "n_trees"),
            _positive(max_depth, "max_depth"),
        )
        self.min_samples = _positive(min_samples, "min_samples")
        self.rho = _positive(rho, "rho (samples probed)", 2)
        self.candidates = _positive(candidates, "candidates")
        self.allow_insecure_key_bits = bool(allow_insecure_key_bits)
        self.key_bits = dtpkc.check_key_bits(key_bits, self.allow_insecure_key_bits)
        self.runner = InProcessRunner()
        self._requesters: dict[str, Requester] = {}
        self.aligned_rows: dict[str, np.ndarray] = {}

    # ------------------------------------------------------------------------ roles
    def _fitted(self) -> tuple[CenterServer, ComputationProvider, dict[str, Participant]]:
        if not hasattr(self, "_cs"):
            raise InputError("fit the forest first")
        return self._cs, self._cc, self._participants

    @property
    def center_server(self) -> CenterServer:
        return self._fitted()[0]

    @property
    def computation_provider(self) -> ComputationProvider:
        return self._fitted()[1]

    @property
    def participants(self) -> Mapping[str, Participant]:
        return dict(self._fitted()[2])

    @property
    def trees(self) -> list[Tree]:
        return self.center_server.trees

    @property
    def classes_(self) -> np.ndarray:
        return self.center_server.classes

    @property
    def revoked(self) -> list[str]:
        return list(self.center_server.revoked)

    def _peers(self) -> dict[str, schedule.Peer]:
        return {**self._participants, self._cc.name: self._cc}

    # ------------------------------------------------------------------------ fit
    def fit(
        self, partitions: Mapping[str, object], labels: object, *,
        ids: Mapping[str, Sequence[object]] | None = None,
        label_ids: Sequence[object] | None = None,
        progress: Progress | None = None,
    ) -> RevFRF:  # fmt: skip
        """Set up the system (KGC, CS, CC, participants) and grow the forest. ``progress``:
        an optional callback told after every protocol step (:mod:`privfl.progress`). With ``ids``
        (participant -> the id of each of its rows) and ``label_ids`` (the id of each label),
        rows are first aligned by private set intersection (:mod:`.psi`): the forest is grown
        on the common ids only, in an order no party chose; :attr:`aligned_rows` then gives
        each party's rows of it (the CS's under ``"CS"``)."""
        self.runner.progress = progress
        try:
            return self._fit(partitions, labels, ids, label_ids)
        finally:
            self.runner.progress = None

    def _fit(
        self, partitions: Mapping[str, object], labels: object,
        ids: Mapping[str, Sequence[object]] | None, label_ids: Sequence[object] | None,
    ) -> RevFRF:  # fmt: skip
        session = new_session_id()
        names = (
            [k for k in partitions if isinstance(k, str)] if isinstance(partitions, Mapping) else []
        )
        # each role's Ed25519 identity: signs its PSI messages, split receipts, revocations
        identity = {n: Ed25519PrivateKey.generate() for n in (CS, CC, *names)}
        if ids is not None or label_ids is not None:
            partitions, labels = self._align(session, partitions, labels, ids, label_ids, identity)
        mats = _partitions(partitions)
        config = SessionConfig(
            session, next(iter(mats.values())).shape[0], self.n_trees, self.max_depth,
            self.rho, self.candidates, allow_insecure_key_bits=self.allow_insecure_key_bits,
            min_node_size=max(provenance.MIN_NODE_SIZE, self.min_samples),
        )  # fmt: skip
        cs = CenterServer(config, labels, self.task, min_samples=self.min_samples,
                          reuse_features=self.reuse_features, seed=self.seed)  # fmt: skip
        participants = {name: Participant(name, m, config, signing_key=identity[name])
                        for name, m in mats.items()}  # fmt: skip
        self._cc = ComputationProvider(config, signing_key=identity[CC])
        self._kgc = KeyGenerationCenter(config, self.key_bits)
        schedule.provision(self.runner, self._kgc, cs, self._cc, participants)
        self._cs, self._participants, self._requesters = cs, participants, {}
        schedule.drive(self.runner, cs.fit(), self._peers())
        return self

    def _align(
        self, session: bytes, partitions: Mapping[str, object], labels: object,
        ids: Mapping[str, Sequence[object]] | None, label_ids: Sequence[object] | None,
        identity: Mapping[str, Ed25519PrivateKey],
    ) -> tuple[dict[str, FloatArray], np.ndarray]:  # fmt: skip
        items = partitions.items() if isinstance(partitions, Mapping) else ()
        mats = {check_name(k, "participant"): check_matrix(v, f"participant {k!r}")
                for k, v in items}  # fmt: skip
        if not mats or ids is None or label_ids is None or set(ids) != set(mats):
            raise InputError("give ids for every participant's rows and label_ids for the labels")
        y = np.asarray(labels)
        for name, column in [*ids.items(), (CS, label_ids)]:
            want = y.shape[0] if name == CS else mats[name].shape[0]
            if y.ndim != 1 or len(column) != want:
                raise InputError(f"{name}: {len(column)} ids for {want} rows")
        keys = {name: key.public_key() for name, key in identity.items()}
        config = PsiConfig(session, (CS, *mats), CC, keys)
        parties = {CS: PsiParty(CS, label_ids, config, identity[CS])}
        parties |= {name: PsiParty(name, ids[name], config, identity[name]) for name in mats}
        rows = schedule.align(self.runner, parties, PsiComparer(config, identity[CC]))
        if rows[CS].size == 0:
            raise InputError("the parties have no id in common")
        self.aligned_rows = rows
        return {name: m[rows[name]] for name, m in mats.items()}, y[rows[CS]]

    # ------------------------------------------------------------------------ predict
    def _load(self, rows: Mapping[str, object]) -> int:
        """Hand each participant its own columns of the rows; the number of rows."""
        cs = self.center_server
        mats = _partitions(rows)
        unknown = sorted(set(mats) - set(self._participants))
        if unknown:
            raise InputError(f"unknown participants in rows: {unknown}")
        missing = [n for n in self._participants if n not in mats and n not in cs.revoked]
        if missing:
            raise InputError(f"rows lack the columns of participant(s) {missing}")
        batch = secrets.token_bytes(32)  # one identity for these rows, new per call
        for name, m in mats.items():
            self._participants[name].load_rows(m, batch)
        return int(next(iter(mats.values())).shape[0])

    def predict(self, rows: Mapping[str, object]) -> np.ndarray:
        """FRF-Test: prediction of vertically partitioned rows. At every node the split's
        provider compares its own test value with its own threshold (it holds both) and
        sends the CS the branch bits only (:meth:`.CenterServer.predict_plain`); no value is
        decrypted, so a test row gives a deviating CS no comparison of its choice."""
        n = self._load(rows)
        return schedule.drive(self.runner, self.center_server.predict_plain(n), self._peers())

    def predict_plain(self, rows: Mapping[str, object]) -> np.ndarray:
        """The same as :meth:`predict` (FRF-Test has one path: the providers' comparisons)."""
        return self.predict(rows)

    def predict_for(self, requester: str, x: Mapping[str, object]) -> Any:
        """FRF-Predict: a requester with a KGC key encrypts its whole feature vector under
        its own key; CS evaluates every node with HoLT and returns the vote / mean."""
        cs = self._requester(requester)
        if not isinstance(x, Mapping):
            raise InputError("x must map participant name -> that participant's values")
        sample = {k: v for k, v in x.items() if k not in cs.revoked}
        query = self.runner.run("requester", self._requesters[requester].query, cs.layout(), sample)
        job = cs.predict_query(requester, self.runner.send("requester->cs", query))
        return schedule.drive(self.runner, job, self._peers())[0]

    def predict_many(self, requester: str, rows: Mapping[str, object]) -> np.ndarray:
        """Batched FRF-Predict of many rows (participant -> its rows, up to
        :data:`~.packed_holt.MAX_BATCH_ROWS`): one requester message, each row its own
        signed query; the CS walks all rows x trees level by level with packed comparisons
        (:mod:`.packed_holt`): one CC exchange and one exchange per holder per level. The
        same predictions as :meth:`predict_for` row by row; values below 2^64 (at 32
        fraction bits)."""
        cs = self._requester(requester)
        if not isinstance(rows, Mapping):
            raise InputError("rows must map participant name -> that participant's rows")
        sample = {k: v for k, v in rows.items() if k not in cs.revoked}
        role = self._requesters[requester]
        query = self.runner.run("requester", role.query_batch, cs.layout(), sample)
        job = cs.predict_queries(requester, self.runner.send("requester->cs", query))
        return np.asarray(schedule.drive(self.runner, job, self._peers()))

    def _requester(self, requester: str) -> CenterServer:
        """The CS, after registering ``requester`` with the KGC on its first query."""
        cs = self.center_server
        if requester not in self._requesters:
            if requester in self._participants:
                raise InputError(f"{requester!r} is a participant's name")
            role = Requester(requester, cs.config)
            hello = self.runner.send("requester->kgc", role.hello())
            keys, registration = self.runner.run("kgc_setup", self._kgc.issue_requester, hello)
            role.install_keys(self.runner.send("kgc->requester", keys))
            cs.register_requester(self.runner.send("kgc->cs", registration))
            self._cc.register_requester(self.runner.send("kgc->cc", registration))
            self._requesters[requester] = role
        return cs

    # ------------------------------------------------------------------------ revocation
    def revoke(
        self, participant: str, level: int = 1, request: bytes | None = None
    ) -> RevocationReport:
        """FRF-Revoc: the participant's signed request (or ``request``), verified by CS, which
        destroys and regrows its subtrees (level 1) and refreshes their splits (level 2);
        the KGC then revokes the participant's key at CC."""
        cs = self.center_server
        if level not in (1, 2):
            raise InputError("revocation level must be 1 or 2")
        if participant not in self._participants:
            raise InputError(f"unknown participant {participant!r}")
        if participant in cs.revoked:
            raise InputError(f"{participant!r} is already revoked")
        if len(cs.revoked) + 1 >= len(self._participants):
            raise InputError(f"revoking {participant!r} would leave no participant")
        start = time.perf_counter()
        if request is None:
            request = self.runner.run(
                "participant", self._participants[participant].revocation_request
            )
        job = cs.revoke(self.runner.send("participant->cs", request), level, participant)
        report = schedule.drive(self.runner, job, self._peers())
        self._cc.revoke_key(self.runner.send("kgc->cc", self._kgc.revoke(participant)))
        return replace(report, seconds=time.perf_counter() - start)

    def nodes_destroyed_by(self, participant: str) -> int:
        """Internal nodes revoking ``participant`` would destroy now."""
        return self.center_server.nodes_destroyed_by(participant)

    # ------------------------------------------------------------------------ report
    def report(self) -> ForestReport:
        per = self.center_server.nodes_per_participant()
        return ForestReport(
            nodes_per_participant=per,
            trees=len(self.trees),
            internal_nodes=sum(per.values()),
            revoked=tuple(self.center_server.revoked),
            bytes={k: sum(v) for k, v in self.runner.sizes.items()},
            seconds={k: sum(v) for k, v in self.runner.seconds.items()},
            key_bits=self.key_bits,
        )
