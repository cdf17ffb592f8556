"""The computation provider CC: holds λ2 (one share of the strong key), its Ed25519 key for
signing comparison results, the holders the KGC registered (their joint keys with the
CS) and the requesters' pinned query-signing keys. It answers the CS's HoAdd, HoLT and
level-2 refresh requests (see :mod:`.secure_ops` for what it learns and why it cannot be
used to decrypt for the CS), and opens a requester's signed query before it signs any
comparison for it (:mod:`.query_auth`)."""

from __future__ import annotations

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from privfl.crypto import dtpkc
from privfl.crypto.parallel import thread_map
from privfl.errors import ProtocolError, UnknownPartyError
from privfl.forest import packed_holt, query_auth, secure_ops
from privfl.forest.alarm import HoLTAlarm
from privfl.forest.budget import MAX_QUERIES
from privfl.forest.freshness import ReplayGuard
from privfl.forest.kgc import Hello, KeyGrant, RequesterRegistration
from privfl.forest.messages import (
    CC,
    CS,
    KGC,
    RevocationRequest,
    SessionConfig,
    dispatch,
    seal,
    unseal,
)
from privfl.forest.secure_ops import BlindedRequest, RefreshBatch
from privfl.messages import Reader, Writer


class ComputationProvider:
    """CC: λ2, its signing key and the registry of holders' joint keys; nothing else."""

    role = "cc"
    name = CC

    def __init__(
        self, config: SessionConfig, *, signing_key: Ed25519PrivateKey | None = None,
        max_queries: int = MAX_QUERIES,
    ) -> None:  # fmt: skip
        """``signing_key``: a provisioned key for signing comparison results (default: new);
        ``max_queries``: signed queries it opens per requester per session (public)."""
        self._config = config
        self._signing_key = signing_key or Ed25519PrivateKey.generate()
        self._lam2: dtpkc.StrongKeyShare | None = None
        self._holders: dict[str, dtpkc.PublicKey] = {}
        self._revocation_keys: dict[str, Ed25519PublicKey] = {}
        self._alarms: list[bytes] = []
        self._logged = 0  # alarms already written to the log (:meth:`audit`)
        self._replays = ReplayGuard()
        self._revoked: list[str] = []
        self._queries = query_auth.QueryLedger(config, max_queries)

    def hello(self) -> bytes:
        """To the KGC: the key participants check comparison results against."""
        key = self._signing_key.public_key().public_bytes_raw()
        return Hello(CC, key).to_bytes(self._config)

    def install_keys(self, data: bytes) -> None:
        """The KGC's ``cc-keys``: λ2 and the registered holders' joint keys (accepted once)."""
        if self._lam2 is not None:
            raise ProtocolError("CC already holds its keys")
        grant = KeyGrant.from_bytes(data, "cc-keys", self._config)
        self._holders = {e.name: e.public for e in grant.roster}
        self._revocation_keys = {e.name: e.revocation_key for e in grant.roster}
        self._lam2 = grant.strong_share()

    def register_requester(self, data: bytes) -> None:
        """The KGC's ``requester-registered``: pin the requester's query-signing key."""
        reg = RequesterRegistration.from_bytes(data, self._config, self._share().params)
        self._queries.keys[reg.name] = reg.signing_key

    def revoke_key(self, data: bytes) -> None:
        """The KGC's ``key-revoked``: never re-encrypt to that holder again."""
        r = unseal(data, "key-revoked", self._config.setup(), KGC)
        name = r.str_(256)
        r.end()
        self._holders.pop(name, None)

    def revoke_by_request(self, data: bytes) -> str:
        """A participant's own signed revocation request (relayed by the CS when the KGC is
        offline): checked against the revocation key the KGC pinned, for this session, fresh
        and never seen before (the same :class:`~.freshness.ReplayGuard` as the CS's); CC
        then stops re-encrypting to that participant. Returns its name."""
        request = RevocationRequest.from_bytes(data, self._config)
        key = self._revocation_keys.get(request.participant)
        if key is None:
            raise UnknownPartyError(f"{request.participant!r} is not a registered participant")
        request.verify(key, self._config)
        self._replays.check(request)
        self._holders.pop(request.participant, None)
        self._revoked.append(request.participant)
        return request.participant

    def export_revocations(self) -> bytes:
        """Who left, the nonces seen and the requester queries opened and spent, for a node
        that rebuilds the CC per message."""
        names = [n.encode() for n in self._revoked]
        w = Writer().list_(names).bytes_(self._replays.to_bytes())
        return w.bytes_(self._queries.to_bytes()).getvalue()

    def restore_revocations(self, data: bytes) -> None:
        """Read back :meth:`export_revocations` (the node's own saved state)."""
        r = Reader(data, "CC revocations")
        names = [n.decode() for n in r.list_(len(self._revocation_keys))]
        self._replays = ReplayGuard.from_bytes(r.bytes_())
        self._queries.restore(r.bytes_())
        r.end()
        for name in names:
            self._holders.pop(name, None)
        self._revoked = names

    @property
    def alarms(self) -> tuple[bytes, ...]:
        """The CC's audit log: signed ``holt-alarm`` messages (out-of-range comparisons a
        CS sent), for the KGC or an auditor (:meth:`.secure_ops.HoLTAlarm.from_bytes`)."""
        return tuple(self._alarms)

    @property
    def comparisons_charged(self) -> int:
        """Requester-query comparisons signed so far (each slot of a pack counts one)."""
        return len(self._queries.spent)

    @property
    def holders(self) -> tuple[str, ...]:
        """The participants CC still re-encrypts to."""
        return tuple(self._holders)

    def handle(self, data: bytes) -> bytes:
        """Answer one request of the CS."""
        handlers = {
            "hoadd-request": self._hoadd,
            "holt-request": self._holt,
            "holt-batch": self._holt_batch,
            "refresh-request": self._refresh,
            "query-open": self._open_query,
        }
        return dispatch(data, self._config, handlers, CC)

    def _share(self) -> dtpkc.StrongKeyShare:
        if self._lam2 is None:
            raise ProtocolError("CC has no keys yet")
        return self._lam2

    def _hoadd(self, data: bytes) -> bytes:
        lam2 = self._share()
        request = BlindedRequest.from_bytes(data, "hoadd-request", self._config, lam2.params)
        reply = secure_ops.cc_hoadd(lam2, self._holders, request)
        return reply.to_bytes("hoadd-response", self._config, CC)

    def _open_query(self, data: bytes) -> bytes:
        """``query-open``: a requester's signed query, relayed by the CS (see
        :class:`.query_auth.QueryLedger`); answered with its query id."""
        self._share()
        r = unseal(data, "query-open", self._config, CS)
        query = query_auth.SignedQuery.read(r)
        r.end()
        qid = self._queries.open(query)
        return seal("query-opened", self._config, CC, Writer().bytes_(qid))

    def _holt(self, data: bytes) -> bytes:
        lam2 = self._share()
        request = BlindedRequest.from_bytes(data, "holt-request", self._config, lam2.params)
        self._queries.charge(request.ticket)  # before any work: public conditions only
        result, alarm, in_range = secure_ops.cc_holt(
            lam2, self._holders, self._signing_key, self._config, request
        )
        logged = alarm.to_bytes(self._config)  # serialised on both branches (the same work)
        self._alarms += [] if in_range else [logged]  # kept in memory: no I/O on either branch
        return result.to_bytes("holt-result", self._config, CC)

    def _holt_batch(self, data: bytes) -> bytes:
        """A level of batched FRF-Predict (:mod:`.packed_holt`): every slot's ticket charged
        first (all or nothing, public conditions), then one packed answer per pack."""
        lam2 = self._share()
        packs = packed_holt.read_requests(data, self._config, lam2.params)
        unknown = sorted({p.holder for p in packs} - set(self._holders))
        if unknown:  # before charging: a refused batch spends no ticket
            raise UnknownPartyError(f"CC re-encrypts only to registered holders, not {unknown}")
        self._queries.charge_all([t for p in packs for t in p.tickets])
        answers = thread_map(
            lambda p: packed_holt.cc_holt_pack(
                lam2, self._holders, self._signing_key, self._config, p
            ),
            packs,
        )
        results = []
        for result, alarm, in_range in answers:
            logged = alarm.to_bytes(self._config)  # serialised on both branches
            self._alarms += [] if in_range else [logged]
            results.append(result)
        return packed_holt.write_batch("holt-batch-result", self._config, CC, results)

    def audit(self) -> tuple[bytes, ...]:
        """Log (``logging`` warning) the alarms of out-of-range comparisons not logged yet
        and return the whole audit log. Called *between* answers (by the node after each
        batch, by the facade after each conversation), never on the path of one answer, so
        the time of an answer does not tell the CS which branch it took."""
        for data in self._alarms[self._logged :]:
            alarm = HoLTAlarm.from_bytes(data, self._config, self._signing_key.public_key())
            secure_ops.LOG.warning(
                "CC: HoLT operation %d for %r was out of range (answered with a random bit); "
                "alarm signed for the KGC", alarm.op, alarm.holder,
            )  # fmt: skip
        self._logged = len(self._alarms)
        return tuple(self._alarms)

    def _refresh(self, data: bytes) -> bytes:
        params = self._share().params
        batch = RefreshBatch.from_bytes(data, "refresh-request", self._config, CS, params)
        return secure_ops.cc_refresh(batch).to_bytes("refreshed", self._config, CC)
