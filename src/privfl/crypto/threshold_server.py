"""The threshold CKKS server (aggregator, coordinator): it adds the parties' public
contributions into the joint keys, evaluates, and relays decryptions; it never holds a secret
share. The protocols are described in :mod:`privfl.crypto.threshold_roles`."""

from __future__ import annotations

from collections.abc import Sequence

from privfl.crypto import threshold_messages as tm
from privfl.crypto import threshold_wire as wire
from privfl.crypto.threshold_ciphertext import CiphertextHolder
from privfl.crypto.threshold_context import ThresholdContext
from privfl.crypto.threshold_params import DECRYPTION_TOWERS
from privfl.crypto.threshold_rows import (
    check_senders,
    coefficient_rows,
    install_evaluation_keys,
    sum_rows,
)
from privfl.errors import ProtocolError

__all__ = ["ThresholdServer"]


class ThresholdServer(CiphertextHolder):
    """The server (aggregator, coordinator): adds the parties' public contributions, holds the
    joint public and evaluation keys, evaluates, relays. It never holds a secret share, so it
    can neither decrypt nor fuse a masked decryption."""

    def __init__(self, name: str, context: ThresholdContext, session: bytes) -> None:
        super().__init__(name, context, session)
        self._keygen_senders: tuple[str, ...] = ()
        self._joint_auto_b: bytes = b""
        self._mult_key: bytes = b""

    def combine_keygen_shares(self, shares: Sequence[tm.KeyGenShare]) -> tm.JointPublicKeys:
        """Round 1 (server): sum the parties' contributions into the joint public key, the
        joint key-switching key and the joint automorphism keys."""
        ctx = self.context
        names = [s.sender for s in shares]
        if len(shares) != ctx.parties or len(set(names)) != len(names):
            raise ProtocolError(
                f"key generation needs one share from each of {ctx.parties} parties"
            )
        self._keygen_senders = tuple(names)
        pk_shape, sw_shape = ctx.public_key_shape, ctx.switch_key_shape
        pk_b = sum_rows([s.public_key for s in shares], pk_shape.b_moduli, ctx.ring)
        sw_b = sum_rows([s.switch_key for s in shares], sw_shape.b_moduli, ctx.ring)
        self.public_key = self._load_joint_public_key(pk_b.tobytes())
        if ctx.automorphism_shape is not None:
            moduli = ctx.automorphism_shape.b_moduli
            self._joint_auto_b = sum_rows(
                [s.automorphism_keys for s in shares], moduli, ctx.ring
            ).tobytes()
        return tm.JointPublicKeys(self.session, self.name, pk_b.tobytes(), sw_b.tobytes())

    def combine_mult_shares(self, shares: Sequence[tm.MultKeyShare]) -> tm.EvaluationKeys:
        """Round 2 (server): sum the relinearisation-key shares, install the joint evaluation
        keys in this process and return them (for roles elsewhere that evaluate)."""
        ctx = self.context
        if sorted(s.sender for s in shares) != sorted(self._keygen_senders):
            raise ProtocolError("relinearisation shares must come from the parties of round 1")
        layout = ctx.switch_key_shape.layout
        joint = sum_rows([s.mult_key for s in shares], layout.moduli, ctx.ring)
        keys = tm.EvaluationKeys(self.session, self.name, joint.tobytes(), self._joint_auto_b)
        install_evaluation_keys(ctx, self.session, keys)
        return keys

    def lead_decryption(
        self, request: tm.DecryptionRequest, shares: Sequence[tm.DecryptionShare], lead: str
    ) -> tm.LeadDecryption:
        """Add the ``M - 1`` shares of every party but ``lead`` (one ciphertext-sized sum) and
        hand the lead the compressed ciphertext with that sum. The server cannot decrypt:
        the lead's share is missing, and it never receives it."""
        ctx = self.context
        compressed = self._pending_decryption(request)
        check_senders(ctx, shares, request.request_id, ctx.parties - 1, exclude=lead)
        layout = ctx.compressed_layout(request.level, request.deg)
        moduli = ctx.q_moduli[:DECRYPTION_TOWERS]
        total = sum_rows([s.share for s in shares], moduli, ctx.ring)
        return tm.LeadDecryption(
            self.session,
            self.name,
            request.level,
            request.deg,
            request.request_id,
            ctx.dump(layout, compressed),
            total.tobytes(),
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
