"""The key generation center (KGC) and its setup messages.

The KGC creates the DT-PKC system (it alone knows p, q and λ), issues a weak key pair to the
CS, every participant and every requester, splits the strong key (λ1 to the CS, λ2 to the
CC) and registers with the CC the holders it may re-encrypt to: the joint keys
``h_CS · h_u`` of the participants, never ``h_CS`` alone. It pins each participant's Ed25519
revocation key (sent in the participant's hello) for the CS and the CC's Ed25519 key (sent
in the CC's hello) for the participants. Its messages travel on the provisioning channel
(each role's ``install_*`` methods), never through the ``handle`` endpoint that serves the CS,
so the CS cannot pass off a registration as the KGC's. It keeps no secret key it issued.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from privfl.crypto import dtpkc
from privfl.errors import InputError, MalformedMessageError
from privfl.forest.messages import CC, CS, KGC, RESERVED_NAMES, SessionConfig, seal, unseal
from privfl.messages import Reader, Writer

MAX_PARTICIPANTS = 4096
ED25519_KEY_BYTES = 32


def read_ed25519(r: Reader, what: str) -> Ed25519PublicKey:
    raw = r.bytes_(ED25519_KEY_BYTES)
    if len(raw) != ED25519_KEY_BYTES:
        raise MalformedMessageError(f"{what} must be a 32-byte Ed25519 public key")
    return Ed25519PublicKey.from_public_bytes(raw)


def _name(r: Reader) -> str:
    name = r.str_(256)
    if not name or name in RESERVED_NAMES:
        raise MalformedMessageError(f"{name!r} is not a valid participant name")
    return name


@dataclass(frozen=True)
class Hello:
    """A role introduces itself to the KGC: ``cc-hello`` (its Ed25519 key for signing
    comparison results), ``participant-hello`` (its revocation key, its column count) or
    ``requester-hello`` (the key that signs its queries, :mod:`.query_auth`)."""

    name: str
    verify_key: bytes
    n_columns: int = 0

    def to_bytes(self, config: SessionConfig, step: str | None = None) -> bytes:
        step = step or ("cc-hello" if self.name == CC else "participant-hello")
        w = Writer().str_(self.name).bytes_(self.verify_key).u32(self.n_columns)
        return seal(step, config.setup(), self.name, w)

    @classmethod
    def from_bytes(cls, data: bytes, step: str, config: SessionConfig) -> Hello:
        r = unseal(data, step, config.setup(), None)
        name = r.str_(256) if step == "cc-hello" else _name(r)
        key = read_ed25519(r, "hello key")
        n_columns = r.count(1 << 16, "columns")
        r.end()
        columns_ok = (n_columns == 0) == (step != "participant-hello")
        if (step == "cc-hello") != (name == CC) or not columns_ok:
            raise MalformedMessageError(f"a {step} from {name!r} with {n_columns} columns")
        return cls(name, key.public_bytes_raw(), n_columns)


@dataclass(frozen=True)
class RequesterRegistration:
    """KGC -> CS and CC (``requester-registered``, the provisioning channel): a requester's
    name, its DT-PKC public key and its pinned Ed25519 query-signing key."""

    name: str
    public: dtpkc.PublicKey
    signing_key: Ed25519PublicKey

    @classmethod
    def from_bytes(
        cls, data: bytes, config: SessionConfig, params: dtpkc.PublicParams
    ) -> RequesterRegistration:
        r = unseal(data, "requester-registered", config.setup(), KGC)
        name, h = _name(r), params.read_unit(r, "requester key")
        key = read_ed25519(r, "requester signing key")
        r.end()
        return cls(name, dtpkc.PublicKey(params, h), key)


@dataclass(frozen=True)
class RosterEntry:
    """A participant as the CS knows it: its public key, column count and revocation key."""

    name: str
    public: dtpkc.PublicKey
    n_columns: int
    revocation_key: Ed25519PublicKey


@dataclass(frozen=True)
class KeyGrant:
    """KGC -> one role: the system parameters, that role's secret exponent(s) and the public
    material it needs. ``cs-keys``: θ_CS, λ1 and the roster; ``cc-keys``: λ2 and the
    registered holders' joint keys; ``participant-keys``: θ, h_CS, the CC's verification key
    and the roster (the other participants' keys that sign split receipts);
    ``requester-keys``: θ and h_CS."""

    step: str
    params: dtpkc.PublicParams
    theta: dtpkc.Mpz = 0
    share: dtpkc.Mpz = 0
    cs_public: dtpkc.Mpz = 0
    cc_key: bytes = b""
    roster: tuple[RosterEntry, ...] = ()

    def to_bytes(self, config: SessionConfig) -> bytes:
        w = self.params.write(Writer()).uint(int(self.theta)).uint(int(self.share))
        w.uint(int(self.cs_public))
        w.bytes_(self.cc_key).u32(len(self.roster))
        for e in self.roster:
            w.str_(e.name).uint(int(e.public.h)).u32(e.n_columns)
            w.bytes_(e.revocation_key.public_bytes_raw())
        return seal(self.step, config.setup(), KGC, w)

    @classmethod
    def from_bytes(cls, data: bytes, step: str, config: SessionConfig) -> KeyGrant:
        r = unseal(data, step, config.setup(), KGC)
        params = dtpkc.PublicParams.read(r, config.allow_insecure_key_bits)
        theta, share = r.uint(params.bits, "θ"), r.uint(3 * params.bits, "strong-key share")
        cs_public = params.read_unit(r, "h_CS")
        cc_key = r.bytes_(ED25519_KEY_BYTES)
        roster = []
        for _ in range(r.count(MAX_PARTICIPANTS, "participants")):
            name, h = _name(r), params.read_unit(r, "a holder's key")
            n_columns = r.count(1 << 16, "columns")
            roster.append(RosterEntry(name, dtpkc.PublicKey(params, h), n_columns,
                                      read_ed25519(r, "revocation key")))  # fmt: skip
        r.end()
        if len({e.name for e in roster}) != len(roster):
            raise MalformedMessageError("the roster names a participant twice")
        return cls(step, params, theta, share, cs_public, cc_key, tuple(roster))

    def weak_key(self, name: str | None = None) -> dtpkc.SecretKey:
        """θ's key pair (θ checked to lie in [1, N/4]); with ``name`` (a participant's own
        grant) the roster's entry of that name must be that same h = g^θ: a grant whose
        roster gives its holder another key (under which someone else could decrypt its
        split thresholds) is refused. One exponentiation (about 9 ms at 2,048 bits)."""
        sk = dtpkc.SecretKey.from_theta(self.params, int(self.theta))
        entry = next((e for e in self.roster if e.name == name), None)
        if entry is not None and entry.public != sk.public:
            raise MalformedMessageError(f"the grant's roster gives {name!r} a key that is not g^θ")
        return sk

    def strong_share(self) -> dtpkc.StrongKeyShare:
        return dtpkc.StrongKeyShare(self.params, self.share)

    def cs_key(self) -> dtpkc.PublicKey:
        return dtpkc.PublicKey(self.params, self.cs_public)


@dataclass(frozen=True)
class Provisioning:
    """The setup messages the KGC sends: to the CS, to the CC, to every participant."""

    cs: bytes
    cc: bytes
    participants: Mapping[str, bytes]


class KeyGenerationCenter:
    """KGC: holds p, q, λ (and the public keys it issued); trusted, offline after setup."""

    role = "kgc"

    def __init__(self, config: SessionConfig, key_bits: int = dtpkc.MIN_KEY_BITS) -> None:
        self.config = config
        self.params, self._secret = dtpkc.generate_system(key_bits, config.allow_insecure_key_bits)
        self._cs_public: dtpkc.PublicKey | None = None
        self.issued: dict[str, dtpkc.PublicKey] = {}

    def setup(self, cc_hello: bytes, participant_hellos: Sequence[bytes]) -> Provisioning:
        """Create every key and the messages that carry them (one per role)."""
        cfg, prm = self.config, self.params
        cc = Hello.from_bytes(cc_hello, "cc-hello", cfg)
        hellos = [Hello.from_bytes(h, "participant-hello", cfg) for h in participant_hellos]
        if len({h.name for h in hellos}) != len(hellos) or not hellos:
            raise InputError("participants must have distinct names (and there must be one)")
        sk_cs = dtpkc.new_key_pair(prm)
        self._cs_public = sk_cs.public
        lam1, lam2 = dtpkc.split_strong_key(prm, self._secret)
        keys = {h.name: dtpkc.new_key_pair(prm) for h in hellos}
        self.issued = {CS: sk_cs.public, **{name: k.public for name, k in keys.items()}}
        roster = tuple(
            RosterEntry(h.name, keys[h.name].public, h.n_columns,
                        Ed25519PublicKey.from_public_bytes(h.verify_key))
            for h in hellos
        )  # fmt: skip
        joint = tuple(
            RosterEntry(e.name, dtpkc.joint_public_key(sk_cs.public, e.public), e.n_columns,
                        e.revocation_key)
            for e in roster
        )  # fmt: skip
        h_cs = sk_cs.public.h
        grant = KeyGrant("participant-keys", prm, 0, 0, h_cs, cc.verify_key, roster)
        return Provisioning(
            cs=KeyGrant("cs-keys", prm, sk_cs.theta, lam1.value, h_cs, b"", roster).to_bytes(cfg),
            cc=KeyGrant("cc-keys", prm, 0, lam2.value, h_cs, b"", joint).to_bytes(cfg),
            participants={
                name: replace(grant, theta=k.theta).to_bytes(cfg) for name, k in keys.items()
            },
        )

    def issue_requester(self, hello: bytes) -> tuple[bytes, bytes]:
        """A requester's key pair, from its ``requester-hello``: (``requester-keys`` to it,
        ``requester-registered`` to the CS and the CC: its name, DT-PKC public key and the
        Ed25519 key that signs its queries, pinned)."""
        h = Hello.from_bytes(hello, "requester-hello", self.config)
        name = h.name
        if name in RESERVED_NAMES or name in self.issued or not name:
            raise InputError(f"{name!r} cannot be a requester name")
        if self._cs_public is None:
            raise InputError("the KGC has not set the system up yet")
        sk = dtpkc.new_key_pair(self.params)
        self.issued[name] = sk.public
        grant = KeyGrant("requester-keys", self.params, sk.theta, 0, self._cs_public.h)
        w = Writer().str_(name).uint(int(sk.public.h)).bytes_(h.verify_key)
        return grant.to_bytes(self.config), seal(
            "requester-registered", self.config.setup(), KGC, w
        )

    def revoke(self, name: str) -> bytes:
        """``key-revoked`` (to CC): CC stops re-encrypting to ``name``'s joint key."""
        self.issued.pop(name, None)
        return seal("key-revoked", self.config.setup(), KGC, Writer().str_(name))

    def strong_decrypt(self, c: dtpkc.Ciphertext) -> int:
        """Decrypt with λ (the KGC's own power; used to test the identities)."""
        return dtpkc.strong_decrypt(self.params, self._secret, c)
