"""The threshold CKKS server (aggregator, coordinator): it adds the parties' public
contributions into the joint keys, evaluates, and relays decryptions; it never holds a secret
share. The protocols are described in :mod:`privfl.threshold.party`."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from privfl.crypto.threshold import messages as tm
from privfl.crypto.threshold import wire
from privfl.crypto.threshold.ciphertext import CiphertextHolder
from privfl.crypto.threshold.context import ThresholdContext
from privfl.crypto.threshold.params import DECRYPTION_TOWERS
from privfl.errors import ProtocolError
from privfl.threshold.rows import (
    check_senders,
    coefficient_rows,
    install_evaluation_keys,
    payload_rows,
    sum_rows,
)

__all__ = ["ThresholdServer"]


class ThresholdServer(CiphertextHolder):
    """The server (aggregator, coordinator): adds the parties' public contributions, holds the
    joint public and evaluation keys, evaluates, relays. It never holds a secret share, so it
    can neither decrypt nor fuse a masked decryption."""

    def __init__(self, name: str, context: ThresholdContext, session: bytes) -> None:
        super().__init__(name, context, session)
        self._keygen_senders: list[str] = []
        self._keygen_sums: tuple[npt.NDArray[np.uint64], ...] = ()
        self._round_one_done = False
        self._joint_auto_b: bytes = b""
        self._mult_senders: list[str] = []
        self._mult_sum: npt.NDArray[np.uint64] | None = None
        self.joint_evaluation_keys: tm.EvaluationKeys | None = None  # public, kept to reuse

    # ------------------------------------------------------------------ key generation
    def add_keygen_share(self, share: tm.KeyGenShare) -> None:
        """Round 1 (server), one party's contribution: add its ``b`` halves into the running
        sums (the share itself is not kept, so ``M`` shares never sit in memory at once)."""
        ctx = self.context
        if share.sender in self._keygen_senders or len(self._keygen_senders) >= ctx.parties:
            raise ProtocolError(f"a second round-1 key share from {share.sender!r}")
        parts = [
            (share.public_key, ctx.public_key_shape.b_moduli),
            (share.switch_key, ctx.switch_key_shape.b_moduli),
        ]
        if ctx.automorphism_shape is not None:
            parts.append((share.automorphism_keys, ctx.automorphism_shape.b_moduli))
        rows = [payload_rows(raw, len(moduli), ctx.ring) for raw, moduli in parts]
        if not self._keygen_sums:
            self._keygen_sums = tuple(r.copy() for r in rows)
        else:
            self._keygen_sums = tuple(
                wire.add_mod(total, r, moduli)
                for total, r, (_, moduli) in zip(self._keygen_sums, rows, parts, strict=True)
            )
        self._keygen_senders.append(share.sender)

    def joint_public_keys(self) -> tm.JointPublicKeys:
        """Round 1 (server), once every party's contribution was added: the joint public key
        (kept for encryption here) and the joint key-switching key (input of round 2)."""
        if self._round_one_done:
            raise ProtocolError("the joint public keys of this session were already made")
        if len(self._keygen_senders) != self.context.parties:
            raise ProtocolError(
                f"key generation needs one share from each of {self.context.parties} parties; "
                f"{len(self._keygen_senders)} arrived"
            )
        self._round_one_done = True
        pk_b, sw_b, *auto = self._keygen_sums
        self.public_key = self._load_joint_public_key(pk_b.tobytes())
        self._joint_auto_b = auto[0].tobytes() if auto else b""
        self._keygen_sums = ()
        return tm.JointPublicKeys(self.session, self.name, pk_b.tobytes(), sw_b.tobytes())

    def combine_keygen_shares(self, shares: Sequence[tm.KeyGenShare]) -> tm.JointPublicKeys:
        """Round 1 (server): every party's contribution summed into the joint public key, the
        joint key-switching key and the joint automorphism keys."""
        for share in shares:
            self.add_keygen_share(share)
        return self.joint_public_keys()

    def add_mult_share(self, share: tm.MultKeyShare) -> None:
        """Round 2 (server), one party's relinearisation-key share, added into the sum."""
        ctx = self.context
        if not self._round_one_done:
            raise ProtocolError("relinearisation shares come after the joint public keys")
        if share.sender not in self._keygen_senders or share.sender in self._mult_senders:
            raise ProtocolError(
                f"relinearisation shares must come once from each party of round 1, not "
                f"{share.sender!r}"
            )
        moduli = ctx.switch_key_shape.layout.moduli
        rows = payload_rows(share.mult_key, len(moduli), ctx.ring)
        self._mult_sum = (
            rows.copy() if self._mult_sum is None else wire.add_mod(self._mult_sum, rows, moduli)
        )
        self._mult_senders.append(share.sender)

    def evaluation_keys(self) -> tm.EvaluationKeys:
        """Round 2 (server), once every share was added: install the joint evaluation keys in
        this process and return them (for roles elsewhere that evaluate)."""
        if (
            len(self._mult_senders) != self.context.parties
            or sorted(self._mult_senders) != sorted(self._keygen_senders)
            or self._mult_sum is None
        ):
            raise ProtocolError(
                "the relinearisation key needs one share from each party of round 1, once"
            )
        joint = self._mult_sum.tobytes()
        keys = tm.EvaluationKeys(self.session, self.name, joint, self._joint_auto_b)
        install_evaluation_keys(self.context, self.session, keys, self)
        self._mult_sum = None
        self.joint_evaluation_keys = keys
        return keys

    def reuse_keys(
        self, public_key_rows: bytes, keys: tm.EvaluationKeys, last_request_id: int
    ) -> None:
        """Install a key set generated in an earlier session (public material only: the joint
        public key's ``b`` half and the joint evaluation keys, this server's own copy), so a
        later session evaluates and relays decryptions without key rounds. Request ids go on
        after ``last_request_id``: each party answers an id once per key set."""
        if self.public_key is not None or self._keygen_senders:
            raise ProtocolError("this server already holds or is generating a key set")
        self.use_joint_public_key(public_key_rows)
        install_evaluation_keys(self.context, self.session, keys, self)
        self._round_one_done = True
        self.joint_evaluation_keys = keys
        self._next_id = last_request_id

    def combine_mult_shares(self, shares: Sequence[tm.MultKeyShare]) -> tm.EvaluationKeys:
        """Round 2 (server): sum the relinearisation-key shares, install the joint evaluation
        keys in this process and return them (for roles elsewhere that evaluate)."""
        for share in shares:
            self.add_mult_share(share)
        return self.evaluation_keys()

    # ------------------------------------------------------------------ decryption
    def lead_decryption(
        self, request: tm.DecryptionRequest, shares: Sequence[tm.DecryptionShare], lead: str
    ) -> tm.LeadDecryption:
        """Add ``c0`` and the ``M - 1`` shares of every party but ``lead`` (one
        ciphertext-sized sum) and hand the lead that sum with ``c1``. The server cannot
        decrypt: the lead's share ``s_L c1 + e_L`` is missing, and it never receives it (the
        sum is an RLWE sample under ``s_L``). The lead learns no more than from ``c0`` and
        the sum apart."""
        ctx = self.context
        compressed = self._pending_decryption(request)
        check_senders(ctx, shares, request.request_id, ctx.parties - 1, exclude=lead)
        layout = ctx.compressed_layout(request.level, request.deg)
        moduli = ctx.q_moduli[:DECRYPTION_TOWERS]
        rows = coefficient_rows(layout, ctx.dump(layout, compressed))
        towers = len(moduli)
        total = wire.add_mod(
            rows[:towers], sum_rows([s.share for s in shares], moduli, ctx.ring), moduli
        )
        return tm.LeadDecryption(
            self.session,
            self.name,
            request.level,
            request.deg,
            request.request_id,
            total.tobytes(),
            rows[towers:].tobytes(),
        )

    def fuse_masked(
        self, request: tm.DecryptionRequest, shares: Sequence[tm.DecryptionShare]
    ) -> tm.MaskedDecryption:
        """Add ``c0`` and all ``M`` shares (one of them masked by the parties): the result is
        uniformly random to the server and is broadcast to the parties."""
        ctx = self.context
        compressed = self._pending_decryption(request)
        check_senders(ctx, shares, request.request_id, ctx.parties)
        layout = ctx.ciphertext_layout(request.level, request.deg, DECRYPTION_TOWERS)
        moduli = ctx.q_moduli[:DECRYPTION_TOWERS]
        c0 = coefficient_rows(layout, ctx.dump(layout, compressed))[: len(moduli)]
        total = sum_rows([s.share for s in shares], moduli, ctx.ring)
        masked = wire.add_mod(c0, total, moduli)
        return tm.MaskedDecryption(
            self.session,
            self.name,
            request.level,
            request.deg,
            request.request_id,
            masked.tobytes(),
        )
