"""RevFRF's requester: someone with a KGC key who asks the CS to classify its own sample."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from privfl.crypto import dtpkc
from privfl.errors import InputError, ProtocolError
from privfl.forest.inputs import check_matrix, check_name
from privfl.forest.kgc import Hello, KeyGrant
from privfl.forest.messages import SessionConfig
from privfl.forest.packed_holt import MAX_BATCH_ROWS
from privfl.forest.packing import PACK_VALUE_BITS
from privfl.forest.query_auth import Query, QueryBatch, SignedQuery, digest_of


class Requester:
    """Someone with a KGC key who asks the CS to classify one sample (FRF-Predict); its
    Ed25519 key (pinned by the KGC) signs each query, so no one else can spend comparisons
    in its name (:mod:`.query_auth`)."""

    role = "requester"

    def __init__(
        self, name: str, config: SessionConfig, *, signing_key: Ed25519PrivateKey | None = None
    ) -> None:
        """``signing_key``: a provisioned query-signing key (default: a fresh one)."""
        self.name = check_name(name, "requester")
        self._config = config
        self._signing_key = signing_key or Ed25519PrivateKey.generate()
        self._sk: dtpkc.SecretKey | None = None

    def hello(self) -> bytes:
        """To the KGC: the key the CS and the CC will pin for this requester's queries."""
        key = self._signing_key.public_key().public_bytes_raw()
        return Hello(self.name, key).to_bytes(self._config, "requester-hello")

    def install_keys(self, data: bytes) -> None:
        if self._sk is not None:
            raise ProtocolError(f"{self.name} already holds its keys")
        self._sk = KeyGrant.from_bytes(data, "requester-keys", self._config).weak_key()

    def query(self, layout: Sequence[tuple[str, int]], sample: Mapping[str, object]) -> bytes:
        """Encrypt every feature of ``sample`` (participant -> its values) under the
        requester's key, in the order of ``layout`` ((participant, columns) as the CS's
        roster lists them)."""
        return self._signed(self._encrypt(layout, sample, 1, None)[0]).to_bytes(
            self._config, self.name
        )

    def query_batch(self, layout: Sequence[tuple[str, int]], rows: Mapping[str, object]) -> bytes:
        """Batched FRF-Predict: every row of ``rows`` (participant -> its rows, one matrix
        each) encrypted and signed as its own query (its own query id and allowance), all in
        one ``query-batch`` message. Values must be below 2^96 in fixed point (packed
        comparisons, :mod:`.packing`): an :class:`InputError` otherwise."""
        if not isinstance(rows, Mapping) or not rows:
            raise InputError("rows must map participant name -> that participant's rows")
        name, first = next(iter(rows.items()))
        n = check_matrix(first, str(name)).shape[0]
        if n > MAX_BATCH_ROWS:
            raise InputError(f"a query batch holds 1..{MAX_BATCH_ROWS} rows, got {n}")
        per_row = self._encrypt(layout, rows, n, 1 << PACK_VALUE_BITS)
        return QueryBatch(tuple(self._signed(v) for v in per_row)).to_bytes(self._config, self.name)

    def _signed(self, values: list[dtpkc.Ciphertext]) -> Query:
        digest = digest_of(values)
        signed = SignedQuery.sign(self._signing_key, self._config, self.name, digest)
        return Query(tuple(values), signed.signature)

    def _encrypt(
        self, layout: Sequence[tuple[str, int]], sample: Mapping[str, object], n_rows: int,
        bound: int | None,
    ) -> list[list[dtpkc.Ciphertext]]:  # fmt: skip
        """Per row, every feature in ``layout``'s order, encrypted under the requester's key
        (fixed point below ``bound`` when given)."""
        if self._sk is None:
            raise ProtocolError(f"{self.name} has no keys yet")
        unknown = sorted(set(sample) - {name for name, _ in layout})
        if unknown:
            raise InputError(f"unknown participant(s) in the query: {unknown}")
        prm, f = self._sk.public.params, self._config.fraction_bits
        values: list[list[int]] = [[] for _ in range(n_rows)]
        for name, n_columns in layout:  # every value checked before any encryption
            if name not in sample:
                raise InputError(f"the query lacks the columns of participant {name!r}")
            raw = sample[name]
            m = check_matrix(np.atleast_2d(np.asarray(raw, dtype=object)) if bound is None
                             else raw, name, n_rows)  # fmt: skip
            if m.shape[1] != n_columns:
                raise InputError(f"participant {name!r}: expected {n_columns} columns")
            for i in range(n_rows):
                for x in m[i]:
                    v = dtpkc.to_fixed_point(float(x), f, prm)
                    if bound is not None and abs(v) >= bound:
                        raise InputError(f"{x} is too large for a packed comparison")
                    values[i].append(v)
        fresh = iter(dtpkc.randomizers(self._sk.public, sum(map(len, values))))  # once each
        out = [[dtpkc.encrypt(self._sk.public, v, next(fresh)) for v in row] for row in values]
        return out
