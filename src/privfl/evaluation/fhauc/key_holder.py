"""The key holder: the party that creates the CKKS keys and the shared seed (setup only)."""

from __future__ import annotations

from privfl.crypto import keywrap, prng
from privfl.crypto.ckks import DEFAULT_PARAMETERS, CKKSContext, CKKSParameters
from privfl.errors import UnknownPartyError
from privfl.evaluation.fhauc.layout import Layout
from privfl.evaluation.fhauc.messages import KeyBundle, PublicSetup
from privfl.evaluation.fhauc.policy import Policy
from privfl.messages import Writer

BUNDLE_PURPOSE = "fhauc-key-bundle-v2"


class KeyHolder:
    """Runs once, at setup. It learns nothing beyond what any party learns: it hands the
    secret key, the 256-bit shared seed and the policy to every party in the roster (wrapped
    for each one alone, X25519+HKDF+AES-GCM) and only evaluation keys, the roster and the
    policy to the aggregator."""

    def __init__(self, name: str, identity: keywrap.IdentityKey, roster: dict[str, bytes]) -> None:
        if name not in roster or roster[name] != identity.public_bytes:
            raise UnknownPartyError(f"key holder {name!r} must be in the roster with its own key")
        self.name = name
        self._identity = identity
        self.roster = dict(roster)

    def provision(
        self, policy: Policy, params: CKKSParameters = DEFAULT_PARAMETERS
    ) -> tuple[bytes, dict[str, bytes]]:
        """Generate keys; return (public setup for the aggregator, bundle per party).

        The Galois keys cover what ``policy.max_points`` decision points with
        ``policy.max_splits`` splits need (the malicious layout's rotations include the
        semi-honest ones), with the rotation by the window the joint layout needs (one
        ciphertext per party and execution, both variants)."""
        terms = max(policy.max_points * policy.max_splits, policy.max_points - 1, 2)
        layout = Layout.for_terms(min(terms, params.slots), params.slots, joint=True)
        ctx = CKKSContext.generate(params, layout.rotation_steps)
        seed = prng.new_seed()
        secret = (
            Writer()
            .bytes_(ctx.serialize_secret())
            .bytes_(seed)
            .bytes_(policy.to_bytes())
            .getvalue()
        )
        bundles = {}
        for party, pub in self.roster.items():
            wrapped = keywrap.wrap(
                secret,
                sender=self.name,
                sender_key=self._identity,
                recipient=party,
                recipient_public=pub,
                purpose=BUNDLE_PURPOSE,
            )
            bundles[party] = KeyBundle(self.name, wrapped).to_bytes()
        public = PublicSetup(
            self.name, self.roster, ctx.serialize_public(), policy.public()
        ).to_bytes()
        return public, bundles
