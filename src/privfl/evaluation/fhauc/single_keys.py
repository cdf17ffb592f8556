"""A party's single-key backend (:class:`~.party_keys.PartyKeys`): the CKKS secret context.

The key holder wraps the secret context, the shared seed and the policy for each party
(:mod:`~.key_holder`); this backend unwraps them (only from the pinned key holder), encrypts
the party's packed statistics under the context and, in ``result``, decrypts the
aggregator's reply itself. It adds no step to the schedule (:class:`~.rounds.SingleKeyRounds`
on the aggregator side). It holds the party's CKKS secret key and nothing else; its node-local
state is the party's progress alone (:class:`~.party_state.SessionState`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from privfl.crypto import keywrap, prng
from privfl.crypto.ckks import CKKSContext
from privfl.errors import MalformedMessageError, ProtocolError, VerificationError
from privfl.evaluation.fhauc import curve, malicious, sizing
from privfl.evaluation.fhauc.ciphertext import as_seal
from privfl.evaluation.fhauc.key_holder import BUNDLE_PURPOSE
from privfl.evaluation.fhauc.layout import Layout
from privfl.evaluation.fhauc.messages import KeyBundle, SessionConfig
from privfl.evaluation.fhauc.party_keys import Finished, PartySide, Restored
from privfl.evaluation.fhauc.party_state import SessionState, Stage
from privfl.evaluation.fhauc.policy import Policy
from privfl.evaluation.fhauc.reveal import Reveal
from privfl.evaluation.fhauc.session import new_nonce
from privfl.evaluation.fhauc.shape import tolerances, vectors_shape_ok
from privfl.evaluation.fhauc.steps import Step
from privfl.evaluation.fhauc.uploads import PartyUpload, Result, Upload
from privfl.evaluation.fhauc.variant import Malicious, variant_for
from privfl.evaluation.statistics import PartyCounts

__all__ = ["SingleKeys"]


class SingleKeys:
    """The CKKS secret context a party received from the key holder (module docstring)."""

    mode = "single"
    upload_after = Stage.JOINED
    finish_after = Stage.UPLOADED

    def __init__(self) -> None:
        self._context: CKKSContext | None = None

    def receive_bundle(
        self,
        data: bytes,
        name: str,
        identity: keywrap.IdentityKey,
        roster: Mapping[str, bytes],
        provisioner: str,
    ) -> tuple[bytes, Policy]:
        """Unwrap the secret context, seed and policy (must come from the pinned key holder)."""
        r = KeyBundle.open(data, BUNDLE_PURPOSE, name, identity, roster, provisioner)
        context = CKKSContext.deserialize(r.bytes_())
        seed = r.bytes_(prng.SEED_BYTES)
        policy = Policy.from_bytes(r.bytes_(256))
        r.end()
        if not context.is_private or len(seed) != prng.SEED_BYTES:
            raise MalformedMessageError("key bundle lacks the secret key or the seed")
        self._context = context
        return seed, policy

    def check_config(self, config: SessionConfig, policy: Policy) -> None:
        """A session these keys can run: no threshold key set named, multipliers and
        upload scale within the context's headroom, a layout that fits its slots."""
        if config.key_set:  # public: a single-key party holds no threshold key set
            raise ProtocolError(
                "the session names a threshold key set to reuse; this party holds single keys "
                "(provision threshold keys, or announce a single-key session)"
            )
        params = self._ctx().params
        if config.reveal is Reveal.AUC:
            variant = variant_for(config.security)
            variant.multiplier_range(params, config, policy)  # raises if too big
            variant.upload_scale_bits(params, config, policy)
        else:
            curve.multiplier_range(params, config, policy)  # raises if too big
            curve.upload_scale_bits(params, config, policy)
        self._layout(config)

    def abandon(self, config: SessionConfig, stage: Stage) -> None:
        """Nothing to record: single keys have no budget an abandoned session could spend."""

    def begin(self, config: SessionConfig, policy: Policy) -> bytes:
        """Malicious: refuse at join what the verification could refuse after decryption;
        a fresh random nonce for the join."""
        sizing.check_join(config, policy, "single")  # public sizes and min_pairs
        return new_nonce()

    def handlers(self, party: PartySide) -> dict[Step, Callable[[bytes], bytes]]:
        """No key rounds and no decryption step."""
        return {}

    def upload(self, party: PartySide, data: bytes) -> bytes:
        """Check every party's join in the start message, derive the session key and
        encrypt every execution's packed statistics, signed."""
        checked = party.open_start(data)
        party.set_transcript(checked.transcript)
        config = party.config()
        ctx, packed = self._ctx(), party.pack(self._layout(config))
        uploads = [
            Upload(
                party.name,
                config.session,
                [ctx.encrypt(v, p.scale_bits) for v in p.t],
                [ctx.encrypt(v, p.scale_bits) for v in p.f],
                [ctx.encrypt(v, p.scale_bits) for v in p.d],
                e,
            )
            for e, p in enumerate(packed)
        ]
        return party.seal(
            PartyUpload.build(config.session, party.name, checked.transcript, uploads)
        )

    def finish(self, party: PartySide, data: bytes) -> Finished:
        """Decrypt every execution's reply and recover the outcome (the variant's or the
        curve's checks)."""
        state, config = party.progress(), party.config()
        ctx, layout = self._ctx(), self._layout(config)
        variant = variant_for(config.security)
        executions = variant.executions(party.policy)
        groups = layout.groups(executions)  # one reply per ciphertext group
        extra = 2 * (layout.chunks - 1) if config.reveal is not Reveal.AUC else 0
        result = Result.from_bytes(data, ctx, config.session, extra, groups)
        party.advance(Stage.FINISHED)
        if [r.execution for r in result.replies] != list(range(groups)):
            raise ProtocolError(
                f"the result must hold replies 0..{groups - 1} in order, got "
                f"{[r.execution for r in result.replies]}"
            )
        view = party.view()
        if config.reveal is not Reveal.AUC:
            if not isinstance(layout, curve.CurveLayout):
                raise ProtocolError("a curve session needs a curve layout")
            vectors = [curve.reply_vectors(r.decrypt(ctx), layout) for r in result.replies]
            return Finished(curve.recover(vectors, party.curve_total(), view), executions)
        full = [
            [ctx.decrypt_complex(as_seal(c)) for c in (r.numerator, r.denominator)]
            for r in result.replies
        ]
        plain = [[v.real for v in pair] for pair in full]
        if isinstance(variant, Malicious):  # every slot this party decrypted, not only its pairs
            sigmas = variant.sigma_products(variant.sizes(config, party.policy))
            high = malicious.multiplier_bounds(party.policy.multiplier_bits)[1]
            tol = tolerances(sigmas, high)
            for g, v in enumerate(full):
                if not vectors_shape_ok(v[0], v[1], layout, layout.lanes_used(g, executions), tol):
                    raise VerificationError(
                        "the aggregator's reply carries other values than the agreed ones in "
                        "slots this party decrypted: it deviated from the protocol"
                    )
        ds = layout.denominator_slot  # each execution's pair, in its group's lane
        decoded = [
            (float(v[0][layout.slot(0, lane)]), float(v[1][layout.slot(ds, lane)]))
            for g, v in enumerate(plain)
            for lane in range(layout.lanes_used(g, executions))
        ]
        counts = PartyCounts(
            np.array([0, state.positives], dtype=np.int64),
            np.array([0, state.negatives], dtype=np.int64),
        )
        return Finished(variant.recover(decoded, counts, view), executions)

    def export_kept(self) -> bytes:
        """Nothing: the secret context comes from the key holder's bundle every time."""
        return b""

    def import_kept(self, data: bytes) -> None:
        """Nothing to reload (:meth:`export_kept`); anything else is refused."""
        if data:
            raise MalformedMessageError("a single-key party keeps no key set")

    def export_state(self, state: SessionState | None, abandoned: Sequence[str]) -> bytes:
        """The party's progress (:class:`~.party_state.SessionState`); empty before a join."""
        return state.to_bytes() if state is not None else b""

    def restore(
        self, data: bytes | None, check: Callable[[bytes], SessionConfig], policy: Policy | None
    ) -> Restored:
        """:meth:`export_state` read back, its config checked again."""
        if not data:
            return Restored(None)
        restored = SessionState.from_bytes(data)
        check(restored.config)
        return Restored(restored)

    def _layout(self, config: SessionConfig) -> Layout:
        ctx = self._ctx()
        return curve.layout_for(config, ctx.params.slots, True, ctx.rotation_steps)

    def _ctx(self) -> CKKSContext:
        if self._context is None:
            raise ProtocolError("this party has no key bundle yet")
        return self._context
