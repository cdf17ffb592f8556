"""Provisioning RevFRF nodes from files: the KGC's setup, run once, one folder per node.

``provision_revfrf(participants, out_dir, ...)`` plays the key generation center: it creates
the DT-PKC system, runs the CC's and every participant's hello (their Ed25519 keys are made
here and written to their own folders only), issues every key and then forgets p, q and λ
(the KGC goes offline; nothing of it is written). It writes::

    out/session.json                 public: provisioning id, forest settings, roles, key size,
                                     the CC's PSI sealing key (X25519 public), every
                                     role's Ed25519 identity key (public)
    out/CS/cs-keys.bin               θ_CS, λ1, the roster (the KGC's ``cs-keys`` message)   0600
    out/CS/signing.key               Ed25519 key signing the CS's PSI messages             0600
    out/CS/requesters/<r>.bin        the KGC's ``requester-registered`` (public keys)
    out/CC/cc-keys.bin               λ2 and the joint keys of the participants             0600
    out/CC/signing.key               Ed25519 key signing comparison results                0600
    out/CC/psi.key                   X25519 key opening the PSI's sealed final lists       0600
    out/CC/requesters/<r>.bin        the KGC's ``requester-registered`` (pins its query key)
    out/<participant>/participant-keys.bin   θ_u, h_CS, the CC's verification key         0600
    out/<participant>/signing.key    Ed25519 key signing its revocation request            0600
    out/<requester>/requester-keys.bin       θ_r, h_CS                                     0600
    out/<requester>/signing.key      Ed25519 key signing its queries                       0600

and ``session.json`` in every folder. Every ``.bin`` is the KGC's typed protocol message
(:mod:`privfl.forest.kgc`), decoded by the role that loads it; keys are raw 32-byte files.
No pickle, nothing a node may not hold. The provisioning id binds the KGC's messages; each
run draws a fresh session id that binds every message of that run (:mod:`.revfrf_run`); the
number of aligned samples is agreed at run time (after the PSI).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from privfl.crypto import dtpkc
from privfl.errors import InputError
from privfl.forest.computation_provider import ComputationProvider
from privfl.forest.kgc import KeyGenerationCenter
from privfl.forest.messages import CC, CS, KGC, RESERVED_NAMES, SessionConfig
from privfl.forest.participant import Participant, Requester, check_name
from privfl.messages import SESSION_ID_BYTES, new_session_id

SESSION_FILE = "session.json"
KEY_BYTES = 32


@dataclass(frozen=True)
class RevfrfSession:
    """The public settings every node loads from ``session.json``."""

    session: bytes
    participants: tuple[str, ...]
    requesters: tuple[str, ...]
    n_trees: int
    max_depth: int
    rho: int
    candidates: int
    key_bits: int
    allow_insecure_key_bits: bool
    psi_comparer_key: bytes
    min_node_size: int = 10  # forest.provenance.MIN_NODE_SIZE
    identity_keys: tuple[tuple[str, bytes], ...] = ()

    def identities(self) -> dict[str, Ed25519PublicKey]:
        """The Ed25519 keys of the CS, the CC and every participant (they sign the PSI's
        messages; a participant's also signs its split receipts and its revocation)."""
        return {n: Ed25519PublicKey.from_public_bytes(k) for n, k in self.identity_keys}

    def config(self, n_samples: int = 1, run: bytes | None = None) -> SessionConfig:
        """The config for ``n_samples`` aligned samples (known after the PSI) of the run
        ``run`` (its fresh session id, :mod:`.revfrf_run`; the KGC's messages stay sealed
        under the provisioning id)."""
        return SessionConfig(
            run or self.session, n_samples, self.n_trees, self.max_depth, self.rho,
            self.candidates, allow_insecure_key_bits=self.allow_insecure_key_bits,
            min_node_size=self.min_node_size, provisioning=self.session if run else b"",
        )  # fmt: skip

    def to_json(self) -> str:
        return json.dumps(
            {
                "protocol": "revfrf", "session": self.session.hex(),
                "participants": list(self.participants), "requesters": list(self.requesters),
                "n_trees": self.n_trees, "max_depth": self.max_depth, "rho": self.rho,
                "candidates": self.candidates, "key_bits": self.key_bits,
                "allow_insecure_key_bits": self.allow_insecure_key_bits,
                "psi_comparer_key": self.psi_comparer_key.hex(),
                "min_node_size": self.min_node_size,
                "identity_keys": {n: k.hex() for n, k in self.identity_keys},
            },
            indent=2,
        )  # fmt: skip

    @classmethod
    def load(cls, directory: str | Path) -> RevfrfSession:
        path = Path(directory) / SESSION_FILE
        if not path.is_file():
            raise InputError(f"{path} not found: is this a folder of `privfl forest keys init`?")
        try:
            raw: dict[str, Any] = json.loads(path.read_text())
            if raw.get("protocol") != "revfrf":
                raise ValueError("not a RevFRF session")
            out = cls(
                bytes.fromhex(raw["session"]),
                tuple(str(p) for p in raw["participants"]),
                tuple(str(r) for r in raw["requesters"]),
                int(raw["n_trees"]),
                int(raw["max_depth"]),
                int(raw["rho"]),
                int(raw["candidates"]),
                int(raw["key_bits"]),
                bool(raw["allow_insecure_key_bits"]),
                bytes.fromhex(raw["psi_comparer_key"]),
                int(raw.get("min_node_size", 10)),
                tuple((str(n), bytes.fromhex(k)) for n, k in raw["identity_keys"].items()),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise InputError(f"{path} is not a valid RevFRF session file: {exc}") from None
        if len(out.session) != SESSION_ID_BYTES or len(out.psi_comparer_key) != KEY_BYTES:
            raise InputError(f"{path}: session id or PSI key of a wrong length")
        if any(len(k) != KEY_BYTES for _, k in out.identity_keys):
            raise InputError(f"{path}: an identity key of a wrong length")
        if out.min_node_size < 1:
            raise InputError(f"{path}: min_node_size must be >= 1")
        return out


@dataclass(frozen=True)
class NodeKeys:
    """What one node loads: the session, its KGC message, its raw keys, and (CS, CC) the
    requesters' registrations."""

    name: str
    session: RevfrfSession
    grant: bytes
    signing_key: Ed25519PrivateKey | None = None
    psi_key: X25519PrivateKey | None = None
    registrations: dict[str, bytes] = field(default_factory=dict)


def _write(path: Path, data: bytes, private: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(path, 0o600 if private else 0o644)


def _names(names: Sequence[str], what: str) -> list[str]:
    out = [check_name(n.strip(), what) for n in names if n.strip()]
    for n in out:
        if "/" in n or n.startswith(".") or n in RESERVED_NAMES | {KGC}:
            raise InputError(f"invalid {what} name {n!r}")
    if len(set(out)) != len(out):
        raise InputError(f"{what} names must be distinct")
    return out


def provision_revfrf(
    participants: Sequence[str], columns: Sequence[int], out_dir: str | Path, *,
    requesters: Sequence[str] = (),
    key_bits: int = dtpkc.MIN_KEY_BITS, allow_insecure_key_bits: bool = False,
    n_trees: int = 10, max_depth: int = 10, rho: int = 32, candidates: int = 8,
    min_node_size: int = 10, overwrite: bool = False,
) -> Path:  # fmt: skip
    """Run the KGC's setup and write one folder per node (see the module docstring).
    ``columns``: each participant's number of feature columns (the KGC pins them in the
    roster, so the CS knows the forest's features before any data moves)."""
    names = _names(participants, "participant")
    if len(columns) != len(names) or any(int(c) < 1 for c in columns):
        raise InputError("give one column count >= 1 per participant (e.g. --columns 4,4,3)")
    asking = _names(requesters, "requester")
    if len(names) < 2:
        raise InputError("provision at least 2 participants (e.g. --participants a,b)")
    if set(names) & set(asking):
        raise InputError("a requester cannot also be a participant")
    checks = ((n_trees, "trees"), (max_depth, "depth"), (candidates, "candidates"),
              (min_node_size, "min_node_size"))  # fmt: skip
    for value, what in checks:
        if value < 1:
            raise InputError(f"{what} must be >= 1")
    if rho < 2:
        raise InputError("rho must be >= 2")
    bits = dtpkc.check_key_bits(key_bits, allow_insecure_key_bits)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"{out} exists and is not a directory; choose another --out")
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise InputError(f"{out} is not empty; pass --force to overwrite")
    psi_key = X25519PrivateKey.generate()
    cc_key, cs_key = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    keys = {n: Ed25519PrivateKey.generate() for n in names}
    identity_keys = tuple(
        (n, k.public_key().public_bytes_raw()) for n, k in ((CS, cs_key), (CC, cc_key),
                                                            *keys.items())
    )  # fmt: skip
    session = RevfrfSession(
        new_session_id(), tuple(names), tuple(asking), n_trees, max_depth, rho, candidates,
        bits, allow_insecure_key_bits, psi_key.public_key().public_bytes_raw(), min_node_size,
        identity_keys,
    )  # fmt: skip
    config = session.config()
    cc = ComputationProvider(config, signing_key=cc_key)
    roles = {
        n: Participant(n, np.zeros((1, int(c))), config, signing_key=keys[n])
        for n, c in zip(names, columns, strict=True)
    }
    kgc = KeyGenerationCenter(config, bits)
    grants = kgc.setup(cc.hello(), [p.hello() for p in roles.values()])
    asker_keys = {r: Ed25519PrivateKey.generate() for r in asking}
    issued = {
        r: kgc.issue_requester(Requester(r, config, signing_key=k).hello())
        for r, k in asker_keys.items()
    }
    del kgc  # p, q and λ are never written
    public = session.to_json().encode()
    _write(out / SESSION_FILE, public)
    for node in (CS, CC, *names, *asking):
        _write(out / node / SESSION_FILE, public)
    _write(out / CS / "cs-keys.bin", grants.cs, private=True)
    _write(out / CS / "signing.key", cs_key.private_bytes_raw(), private=True)
    for r, (_, registration) in issued.items():
        _write(out / CS / "requesters" / f"{r}.bin", registration)
        _write(out / CC / "requesters" / f"{r}.bin", registration)
    _write(out / CC / "cc-keys.bin", grants.cc, private=True)
    _write(out / CC / "signing.key", cc_key.private_bytes_raw(), private=True)
    _write(out / CC / "psi.key", psi_key.private_bytes_raw(), private=True)
    for n in names:
        _write(out / n / "participant-keys.bin", grants.participants[n], private=True)
        _write(out / n / "signing.key", keys[n].private_bytes_raw(), private=True)
    for r, (grant, _) in issued.items():
        _write(out / r / "requester-keys.bin", grant, private=True)
        _write(out / r / "signing.key", asker_keys[r].private_bytes_raw(), private=True)
    return out


def _raw_key(path: Path) -> bytes:
    if not path.is_file():
        raise InputError(f"{path} not found")
    raw = path.read_bytes()
    if len(raw) != KEY_BYTES:
        raise InputError(f"{path} is not a raw 32-byte key")
    return raw


def load_node(directory: str | Path, role: str, name: str | None = None) -> NodeKeys:
    """Load a node's folder: ``role`` is ``cs``, ``cc``, ``participant`` or ``requester``;
    the name defaults to the folder's name."""
    d = Path(directory)
    session = RevfrfSession.load(d)
    node = name or (CS if role == "cs" else CC if role == "cc" else d.name)
    files = {"cs": "cs-keys.bin", "cc": "cc-keys.bin", "participant": "participant-keys.bin",
             "requester": "requester-keys.bin"}  # fmt: skip
    if role not in files:
        raise InputError(f"unknown RevFRF role {role!r} (cs, cc, participant, requester)")
    listed = {"participant": session.participants, "requester": session.requesters}
    if role in listed and node not in listed[role]:
        raise InputError(f"{node!r} is not a {role} of this session ({d})")
    grant_path = d / files[role]
    if not grant_path.is_file():
        raise InputError(f"{grant_path} not found: is {d} the {role}'s folder?")
    keys = NodeKeys(node, session, grant_path.read_bytes())
    if role in ("cs", "cc", "participant", "requester"):
        keys = replace(
            keys, signing_key=Ed25519PrivateKey.from_private_bytes(_raw_key(d / "signing.key"))
        )
    if role == "cc":
        keys = replace(keys, psi_key=X25519PrivateKey.from_private_bytes(_raw_key(d / "psi.key")))
    if role in ("cs", "cc"):
        folder = d / "requesters"
        regs = (
            {p.stem: p.read_bytes() for p in sorted(folder.glob("*.bin"))}
            if folder.is_dir()
            else {}
        )
        keys = replace(keys, registrations=regs)
    return keys
