"""Provisioning for FHAUC with threshold keys: identities, roster, shared seed and policy.

Nothing of the CKKS key is provisioned: every party generates its own key share in each
session (:mod:`.party`), so no dealer exists and no step ever sees two secret
shares. The provisioning party only creates the 256-bit shared seed (from which every
session key is derived with the parties' fresh nonces, as in single-key mode) and wraps it
with the policy for each party alone (X25519 + HKDF + AES-GCM); the aggregator receives the
roster and the public policy.
"""

from __future__ import annotations

from dataclasses import dataclass

from privfl.crypto import keywrap, prng
from privfl.errors import MalformedMessageError, UnknownPartyError
from privfl.evaluation.fhauc.messages import (
    CODEC,
    PROVISIONING_SESSION,
    KeyBundle,
    read_roster,
)
from privfl.evaluation.fhauc.policy import Policy
from privfl.messages import Writer

THRESHOLD_BUNDLE_PURPOSE = "fhauc-threshold-bundle-v1"
KEYS_THRESHOLD = "threshold"
KEYS_SINGLE = "single"


@dataclass(frozen=True)
class ThresholdPublicSetup:
    """Provisioning -> aggregator: roster and public policy (no key material at all)."""

    sender: str
    roster: dict[str, bytes]
    policy: Policy

    STEP = "setup-public-threshold"

    def to_bytes(self) -> bytes:
        w = Writer().u32(len(self.roster))
        for name, key in sorted(self.roster.items()):
            w.str_(name).bytes_(key)
        w.bytes_(self.policy.to_bytes())
        return CODEC.encode(self.STEP, PROVISIONING_SESSION, self.sender, w.getvalue())

    @classmethod
    def from_bytes(cls, data: bytes) -> ThresholdPublicSetup:
        header, r = CODEC.decode(data, cls.STEP)
        roster = read_roster(r)
        policy = Policy.from_bytes(r.bytes_(256))
        r.end()
        return cls(header.sender, roster, policy)


def provision(
    name: str, identity: keywrap.IdentityKey, roster: dict[str, bytes], policy: Policy
) -> tuple[bytes, dict[str, bytes]]:
    """Run by the provisioning party once: (public setup for the aggregator, bundle per
    party). The bundle holds the shared seed and the policy, wrapped for one party."""
    if roster.get(name) != identity.public_bytes:
        raise UnknownPartyError(f"provisioning party {name!r} must be in the roster")
    seed = prng.new_seed()
    secret = Writer().bytes_(seed).bytes_(policy.to_bytes()).getvalue()
    bundles = {}
    for party, pub in roster.items():
        wrapped = keywrap.wrap(
            secret,
            sender=name,
            sender_key=identity,
            recipient=party,
            recipient_public=pub,
            purpose=THRESHOLD_BUNDLE_PURPOSE,
        )
        bundles[party] = KeyBundle(name, wrapped).to_bytes()
    public = ThresholdPublicSetup(name, dict(roster), policy.public()).to_bytes()
    return public, bundles


def open_bundle(
    data: bytes, me: str, identity: keywrap.IdentityKey, roster: dict[str, bytes], holder: str
) -> tuple[bytes, Policy]:
    """A party unwraps its bundle (from the pinned provisioning party): (seed, policy)."""
    r = KeyBundle.open(data, THRESHOLD_BUNDLE_PURPOSE, me, identity, roster, holder)
    seed = r.bytes_(prng.SEED_BYTES)
    policy = Policy.from_bytes(r.bytes_(256))
    r.end()
    if len(seed) != prng.SEED_BYTES:
        raise MalformedMessageError("threshold key bundle lacks the seed")
    return seed, policy
