"""One RevFRF node of a deployment: a participant, the computation provider (CC) or a
requester, rebuilt from its key folder and its own files for every batch of messages.

The node answers the CS's messages one by one, in order, with the same role objects the
in-process runner uses (:class:`~privfl.forest.participant.Participant`,
:class:`~privfl.forest.computation_provider.ComputationProvider`,
:class:`~privfl.forest.participant.Requester`, :mod:`~privfl.forest.psi`). A message is
routed by its header: the ``revfrf`` protocol goes to the role's ``handle``, ``psi`` to the
node's PSI party, and the node-control codec ``revfrf-node`` (:data:`CONTROL`) carries what
the in-process facade does by calling methods (start a PSI, your revocation request, encrypt
your query, your prediction; to the CC: compare PSI lists, a participant left). A node's
progress through a run (PSI scalar and order, aligned rows, pending candidates, thresholds,
the CC's revocations) lives in ``state``, bytes the Flower ClientApp keeps in the node-local
``context.state``; nothing of it leaves the node.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from privfl.errors import InputError, MalformedMessageError, ProtocolError, WrongProtocolError
from privfl.federation.revfrf_keys import NodeKeys, RevfrfSession
from privfl.federation.revfrf_run import RUN, RunStart, accept, draw_nonce
from privfl.federation.revfrf_tables import aligned_rows, cached_table, read_node_table
from privfl.forest.computation_provider import ComputationProvider
from privfl.forest.messages import CC, CS
from privfl.forest.messages import CODEC as FOREST_CODEC
from privfl.forest.packed_holt import MAX_BATCH_ROWS
from privfl.forest.participant import Participant, Requester
from privfl.forest.psi import CODEC as PSI_CODEC
from privfl.forest.psi import PsiComparer, PsiConfig, PsiParty
from privfl.messages import SESSION_ID_BYTES, Codec, Header, Reader, Writer

CONTROL = Codec("revfrf-node", 1)
SETS = ("train", "test")
MAX_BLOBS = 1 << 16
QUERIED = "queries-signed"  # a requester's state key: the run it signed its queries for


def psi_config(session: RevfrfSession, which: str, run: bytes) -> PsiConfig:
    """The PSI of the training ids (CS and participants) or of the test ids (participants):
    its own session id, derived from the run's."""
    if which not in SETS:
        raise InputError(f"unknown id set {which!r}")
    sid = hashlib.sha256(b"privfl-revfrf-psi" + run + which.encode()).digest()
    parties = (CS, *session.participants) if which == "train" else session.participants
    return PsiConfig(sid[:SESSION_ID_BYTES], parties, CC, session.identities())


def control(step: str, session: bytes, sender: str, w: Writer | None = None) -> bytes:
    return CONTROL.encode(step, session, sender, (w or Writer()).getvalue())


def read_control(data: bytes, step: str, session: bytes, sender: str) -> Reader:
    header, r = CONTROL.decode(data, step, session)
    if header.sender != sender:
        raise ProtocolError(f"a '{step}' from {header.sender!r}, expected {sender!r}")
    return r


def peek(data: bytes) -> Header:
    """The header of a message of any of the deployment's codecs (payload untouched)."""
    for codec in (FOREST_CODEC, PSI_CODEC, CONTROL):
        try:
            return codec.decode(data)[0]
        except WrongProtocolError:
            continue
    raise WrongProtocolError("not a RevFRF, PSI or node-control message")


def _is_upload(data: bytes) -> bool:
    """Whether a message is a ``split-request`` of the forest codec (unreadable: no)."""
    try:
        header = FOREST_CODEC.decode(data)[0]
    except (ProtocolError, ValueError):  # counted only; the handler reports it
        return False
    return header.step == "split-request"


def which_set(session: RevfrfSession, psi_session: bytes, run: bytes) -> str:
    for which in SETS:
        if psi_config(session, which, run).session == psi_session:
            return which
    raise ProtocolError("a PSI message of another session")


@dataclass(frozen=True)
class NodeFiles:
    """A node's own data: ``data-file`` (participant: its id column and feature columns;
    requester: one row per query, the features in the CS's layout order), a participant's
    ``test-file`` (same columns), the id column, where results go, and ``leave``: whether this
    participant signs a revocation request when the CS asks (its own consent to leave; a CS
    cannot revoke a participant that did not opt in on its own node)."""

    data_file: str | None = None
    test_file: str | None = None
    id_column: str = "id"
    output_dir: str = "."
    leave: bool = False


class Node:
    """Answers one batch of the CS's messages as ``role`` (participant, cc, requester)."""

    def __init__(
        self, role: str, keys: NodeKeys, files: NodeFiles, state: MutableMapping[str, bytes]
    ) -> None:
        if role not in ("participant", "cc", "requester"):
            raise InputError(f"unknown node role {role!r} (participant, cc or requester)")
        self.role, self.keys, self.files, self.state = role, keys, files, state
        self.session = keys.session
        self._participant: Participant | None = None
        self._changed = False  # the participant handled a message since its state was saved
        self._cc_role: ComputationProvider | None = None  # the CC of this batch (:meth:`_flush`)
        self._data: dict[str, tuple[list[str], np.ndarray]] = {}
        self.load_s = 0.0  # seconds spent loading tables and rebuilding the role

    @property
    def name(self) -> str:
        return self.keys.name

    @property
    def run(self) -> bytes:
        """This run's session id (:mod:`.revfrf_run`); nothing else is answered before it."""
        run = self.state.get(RUN)
        if run is None:
            raise ProtocolError(f"{self.name} has not started a run (run-nonce, run-start)")
        return run

    # ---------------------------------------------------------------- dispatch
    def handle_all(self, blobs: Sequence[bytes]) -> list[bytes]:
        """Answer every message, in order; the participant's state, the CC's state and its
        audit log are saved once per batch, also when a message fails (:meth:`_flush`). A
        participant draws the randomness of the batch's split uploads ahead
        (:meth:`~privfl.forest.participant.Participant.prepare_uploads`)."""
        if len(blobs) > MAX_BLOBS:
            raise MalformedMessageError(f"a batch of {len(blobs)} messages")
        try:
            if self.role == "participant" and (uploads := sum(map(_is_upload, blobs))):
                self._role().prepare_uploads(uploads)
            return [self._handle(b) for b in blobs]
        finally:
            self._flush()

    def handle(self, data: bytes) -> bytes:
        """Answer one message (a batch of one)."""
        return self.handle_all([data])[0]

    def _flush(self) -> None:
        """After every batch (even one that raised), the CC's state (revocations, the queries
        it opened and the comparisons it signed for them) and its audit log (signed alarms
        of out-of-range comparisons) to its state and audit file, whether or not the batch
        raised an alarm: the I/O never depends on which branch an answer took (secure_ops)."""
        self._save()
        if self.role != "cc" or self._cc_role is None:
            return
        cc, self._cc_role = self._cc_role, None
        self.state["cc-revocations"] = cc.export_revocations()
        log = Reader(self.state.get("cc-alarms", Writer().u32(0).getvalue()), "CC log")
        alarms = [*log.list_(), *cc.alarms]
        log.end()
        self.state["cc-alarms"] = Writer().list_(alarms).getvalue()
        self._write("alarms", {"holt-alarms": [a.hex() for a in alarms]})

    def _handle(self, data: bytes) -> bytes:
        header = peek(data)
        if header.protocol == PSI_CODEC.protocol:
            return self._psi(data, header.session)
        if header.protocol == CONTROL.protocol:
            return self._control(data, header.step)
        if self.role == "participant":
            participant, self._changed = self._role(), True  # saved after the batch
            return participant.handle(data)
        if self.role == "cc":
            return self._cc().handle(data)  # its state and alarms are saved after the batch
        raise ProtocolError(f"a requester answers no '{header.step}' message")

    def _save(self) -> None:
        """The participant's progress to ``state`` (once per batch, and before the role is
        rebuilt within one)."""
        if self._participant is not None and self._changed:
            self.state["participant"] = self._participant.export_state()
        self._changed = False

    # ---------------------------------------------------------------- roles
    def _table(self, which: str) -> tuple[list[str], np.ndarray]:
        if which not in self._data:
            start = time.perf_counter()
            path = self.files.data_file if which == "train" else self.files.test_file
            self._data[which] = cached_table(self.state, which, path, self.files.id_column)
            self.load_s += time.perf_counter() - start
        return self._data[which]

    def _role(self) -> Participant:
        if self._participant is None:
            start, loaded = time.perf_counter(), self.load_s
            rows = aligned_rows(self.state, "train")
            if rows is None:
                raise ProtocolError(f"{self.name} has not aligned its training ids yet")
            _, x = self._table("train")
            config = self.session.config(len(rows), self.run)
            p = Participant(self.name, x[rows], config, signing_key=self.keys.signing_key)
            p.install_keys(self.keys.grant)
            if "participant" in self.state:  # before the rows, whose identity may be new
                p.restore_state(self.state["participant"])
            test = aligned_rows(self.state, "test")
            if test is not None and test.size:  # identity: the aligned ids in agreed order
                ids, x_test = self._table("test")
                aligned = Writer().list_([ids[i].encode() for i in test]).getvalue()
                p.load_rows(x_test[test], hashlib.sha256(aligned).digest())
            self._participant = p
            self.load_s = loaded + time.perf_counter() - start  # the tables' time included
        return self._participant

    def _cc(self) -> ComputationProvider:
        """The CC, rebuilt from its keys and saved state once per batch."""
        if self._cc_role is not None:
            return self._cc_role
        config = self.session.config(run=self.run)
        cc = ComputationProvider(config, signing_key=self.keys.signing_key)
        cc.install_keys(self.keys.grant)
        for registration in self.keys.registrations.values():
            cc.register_requester(registration)
        if "cc-revocations" in self.state:
            cc.restore_revocations(self.state["cc-revocations"])
        self._cc_role = cc
        return cc

    # ---------------------------------------------------------------- PSI
    def _psi(self, data: bytes, psi_session: bytes) -> bytes:
        which = which_set(self.session, psi_session, self.run)
        config = psi_config(self.session, which, self.run)
        header, _ = PSI_CODEC.decode(data, None, psi_session)
        if self.role != "participant" or header.step not in ("psi-start", "psi-pass", "psi-result"):
            raise ProtocolError(f"{self.name} ({self.role}) answers no '{header.step}'")
        party = self._psi_party(which, config)
        if header.step == "psi-result":
            rows = party.finish(data)
            self.state[f"rows-{which}"] = np.asarray(rows, dtype=">u4").tobytes()
            ids = self._table(which)[0]
            self._write(f"{which}-ids", {"ids": [ids[i] for i in rows]})
            self._save()
            self._participant, self._data = None, {}
            return control("psi-done", self.run, self.name, Writer().u32(len(rows)))
        reply = party.pass_on(data, self.session.psi_comparer_key)
        self.state[f"psi-{which}"] = party.secret_state()  # the lists it keyed: once each
        return reply

    def _psi_party(self, which: str, config: PsiConfig, fresh: bool = False) -> PsiParty:
        ids, _ = self._table(which)
        key = f"psi-{which}"
        identity = self.keys.signing_key
        if identity is None:
            raise ProtocolError(f"{self.name} has no signing key")
        if fresh or key not in self.state:
            party = PsiParty(self.name, ids, config, identity)
            self.state[key] = party.secret_state()
            return party
        return PsiParty(self.name, ids, config, identity, self.state[key])

    # ---------------------------------------------------------------- control
    def _control(self, data: bytes, step: str) -> bytes:
        if step in ("run-nonce", "run-start"):
            return self._start(data, step)
        sid = self.run
        r = read_control(data, step, sid, CS)
        if self.role == "participant" and step == "psi-begin":
            which = r.str_(16)
            r.end()
            return self._psi_party(which, psi_config(self.session, which, sid), fresh=True).start()
        if self.role == "participant" and step == "revocation-please":
            r.end()
            if not self.files.leave:
                raise ProtocolError(f"{self.name} has not asked to leave (node config: leave)")
            request = (leaving := self._role()).revocation_request()  # drops its splits
            self.state["participant"] = leaving.export_state()
            return request
        if self.role == "cc" and step == "psi-compare":
            finals = r.list_(MAX_BLOBS)
            r.end()
            return self._compare(finals)
        if self.role == "cc" and step == "cc-revoke":
            request = r.bytes_(1 << 12)
            r.end()
            name = self._cc().revoke_by_request(request)  # saved after the batch
            return control("cc-revoked", sid, CC, Writer().str_(name))
        if self.role == "requester" and step == "query-request":
            return self._queries(r)
        if self.role == "requester" and step == "prediction":
            return self._prediction(r)
        raise ProtocolError(f"{self.name} ({self.role}) answers no '{step}' message")

    def _start(self, data: bytes, step: str) -> bytes:
        """``run-nonce`` / ``run-start`` (under the provisioning id): this node's part of
        drawing the run's fresh session id (:mod:`.revfrf_run`)."""
        provisioning = self.session.session
        r = read_control(data, step, provisioning, CS)
        if step == "run-nonce":
            r.end()
            if self.role == "requester":
                raise ProtocolError("a requester contributes no run nonce")
            nonce = draw_nonce(self.state)
            return control("run-nonce", provisioning, self.name, Writer().bytes_(nonce))
        start = RunStart.read(r)
        r.end()
        cs_key = self.session.identities().get(CS)
        if cs_key is None:
            raise ProtocolError("session.json pins no key of the CS")
        contributes = self.role != "requester"
        run = accept(self.state, start, self.name, cs_key, provisioning, contributes)
        self._save()
        self._participant = None
        return control("run-started", run, self.name)

    def _compare(self, finals: list[bytes]) -> bytes:
        if not finals:
            raise MalformedMessageError("no PSI list to compare")
        psi_session = peek(finals[0]).session
        config = psi_config(self.session, which_set(self.session, psi_session, self.run), self.run)
        senders = {PSI_CODEC.decode(f, "psi-final", config.session)[0].sender: f for f in finals}
        if len(senders) != len(finals):
            raise ProtocolError("two PSI lists from one sender")
        if self.keys.signing_key is None:
            raise ProtocolError("the CC has no signing key")
        results = PsiComparer(config, self.keys.signing_key, self.keys.psi_key).compare(senders)
        out = control("psi-results", self.run, CC, Writer().list_(
            [results[p] for p in config.parties]
        ))  # fmt: skip
        return out

    def _queries(self, r: Reader) -> bytes:
        """``query-request`` (requester): its file's rows encrypted and signed, once per run,
        as ``query-batch`` messages of up to :data:`~privfl.forest.packed_holt.MAX_BATCH_ROWS`
        rows (each row its own signed query, :meth:`Requester.query_batch`; the CS walks a
        batch level by level with packed comparisons). Each signed query lets the CS spend
        comparisons at the holders (:mod:`.budget`), so a CS that asks again is refused
        (the run it signed for is kept in ``state``)."""
        if self.state.get(QUERIED) == self.run:
            raise ProtocolError(f"{self.name} already signed its queries of this run")
        layout = [(r.str_(256), r.count(1 << 16, "columns")) for _ in range(r.count(4096, "ps"))]
        r.end()
        config = self.session.config(run=self.run)
        requester = Requester(self.name, config, signing_key=self.keys.signing_key)
        requester.install_keys(self.keys.grant)
        _, x = read_node_table(self.files.data_file, None, "data-file")
        sizes = [n for _, n in layout]
        if x.shape[1] != sum(sizes):
            raise InputError(f"the query file has {x.shape[1]} columns, the forest {sum(sizes)}")
        if len(x) == 0:
            raise InputError(f"the query file {self.files.data_file} has no row")
        bounds = np.cumsum([0, *sizes])
        batches = [
            requester.query_batch(layout, {
                name: x[s : s + MAX_BATCH_ROWS, bounds[i] : bounds[i + 1]]
                for i, (name, _) in enumerate(layout)
            })
            for s in range(0, len(x), MAX_BATCH_ROWS)
        ]  # fmt: skip
        self.state[QUERIED] = self.run
        return control("queries", self.run, self.name, Writer().list_(batches))

    def _prediction(self, r: Reader) -> bytes:
        values = [r.str_(256) for _ in range(r.count(1 << 20, "predictions"))]
        r.end()
        self._write("predictions", {"requester": self.name, "predictions": values})
        return control("ack", self.run, self.name)

    def _write(self, what: str, content: dict[str, object]) -> Path:
        """A result this node owns, in its own output folder."""
        out = Path(self.files.output_dir)
        out.mkdir(parents=True, exist_ok=True)
        path = out / f"revfrf-{self.session.session.hex()[:12]}-{self.name}-{what}.json"
        path.write_text(json.dumps(content, indent=2))
        return path
