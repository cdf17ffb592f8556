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
from privfl.forest.query_auth import Query, SignedQuery, digest_of


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
        if self._sk is None:
            raise ProtocolError(f"{self.name} has no keys yet")
        unknown = sorted(set(sample) - {name for name, _ in layout})
        if unknown:
            raise InputError(f"unknown participant(s) in the query: {unknown}")
        values = []
        for name, n_columns in layout:
            if name not in sample:
                raise InputError(f"the query lacks the columns of participant {name!r}")
            row = check_matrix(np.atleast_2d(np.asarray(sample[name], dtype=object)), name, 1)
            if row.shape[1] != n_columns:
                raise InputError(f"participant {name!r}: expected {n_columns} columns")
            prm, f = self._sk.public.params, self._config.fraction_bits
            values += [
                dtpkc.encrypt(self._sk.public, dtpkc.to_fixed_point(float(x), f, prm))
                for x in row[0]
            ]
        digest = digest_of(values)
        signed = SignedQuery.sign(self._signing_key, self._config, self.name, digest)
        return Query(tuple(values), signed.signature).to_bytes(self._config, self.name)
