"""Provisioning FHAUC nodes from files, the way FL operators provision them.

``provision(parties, out_dir, policy)`` runs the key holder's setup once and writes::

    out_dir/roster.json               # party -> public identity (X25519 || Ed25519, hex)
    out_dir/aggregator/public_setup.bin   # roster + public CKKS context + policy (no secret)
    out_dir/aggregator/roster.json
    out_dir/<party>/identity.key      # the party's private identity keys (mode 0600)
    out_dir/<party>/bundle.bin        # secret context + seed + policy, wrapped for it alone
    out_dir/<party>/roster.json

With ``keys="threshold"`` the aggregator's ``public_setup.bin`` holds the roster and policy
only and each ``bundle.bin`` the seed and policy only (no CKKS key exists at provisioning:
every party generates its own share in each session); ``roster.json`` says ``"keys":
"threshold"``.

The policy (:class:`~privfl.evaluation.fhauc.policy.Policy`: security mode, size bound,
executions, limits) is fixed here for every session these keys will run; the aggregator
cannot change it.

In a real deployment each party would create its own identity key and send only the public
half; ``--roster`` support for that is in :func:`provision` via ``identities``.
The in-process runner uses the same roles without files.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from privfl.crypto import keywrap
from privfl.crypto.identity import PUBLIC_BYTES
from privfl.datasets import check_party_names
from privfl.errors import InputError, MalformedMessageError
from privfl.evaluation import fhauc
from privfl.evaluation.fhauc.policy import Policy
from privfl.evaluation.fhauc.threshold import setup as threshold_setup

ROSTER_FILE = "roster.json"


@dataclass(frozen=True)
class PartyKeys:
    """What one party's node loads at start-up."""

    name: str
    identity: keywrap.IdentityKey
    roster: dict[str, bytes]
    key_holder: str
    bundle: bytes
    keys: str = "single"


@dataclass(frozen=True)
class AggregatorKeys:
    """What the aggregator loads at start-up: public material only."""

    roster: dict[str, bytes]
    key_holder: str
    public_setup: bytes
    keys: str = "single"


def _check_names(parties: Sequence[str]) -> list[str]:
    if isinstance(parties, str) or len(parties) < 2:
        raise InputError("provision at least 2 parties (e.g. --parties site-a,site-b)")
    names = check_party_names(parties)
    for n in names:
        if n == "aggregator" or "/" in n or n.startswith("."):
            raise InputError(f"invalid party name {n!r}")
    return names


def _write(path: Path, data: bytes, private: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC
    fd = os.open(path, flags, 0o600 if private else 0o644)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def provision(
    parties: Sequence[str],
    out_dir: str | Path,
    policy: Policy | None = None,
    *,
    key_holder: str | None = None,
    overwrite: bool = False,
    keys: str = "single",
) -> Path:
    """Create identity keys, run the key holder's setup and write every node's directory.

    ``keys="threshold"``: nothing of a CKKS key is created here; each party's bundle holds
    only the shared seed and the policy, and every party generates its own key share in
    each session (:mod:`privfl.evaluation.fhauc.threshold.party`)."""
    if keys not in ("single", "threshold"):
        raise InputError(f"--keys must be 'single' or 'threshold' (got {keys!r})")
    names = _check_names(parties)
    holder = key_holder or names[0]
    if holder not in names:
        raise InputError(f"key holder {holder!r} is not one of the parties")
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"{out} exists and is not a directory; choose another --out")
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise InputError(f"{out} is not empty; pass --force to overwrite")
    identities = {n: keywrap.IdentityKey() for n in names}
    roster = {n: k.public_bytes for n, k in identities.items()}
    if keys == "threshold":
        public, bundles = threshold_setup.provision(
            holder, identities[holder], roster, policy or Policy()
        )
    else:
        public, bundles = fhauc.KeyHolder(holder, identities[holder], roster).provision(
            policy or Policy()
        )
    entries = {"key_holder": holder, "parties": {n: k.hex() for n, k in roster.items()}}
    if keys == "threshold":
        entries["keys"] = keys
    roster_json = json.dumps(entries, indent=2).encode() + b"\n"
    _write(out / ROSTER_FILE, roster_json)
    _write(out / "aggregator" / "public_setup.bin", public)
    _write(out / "aggregator" / ROSTER_FILE, roster_json)
    for n in names:
        _write(out / n / "identity.key", identities[n].private_bytes(), private=True)
        _write(out / n / "bundle.bin", bundles[n], private=True)
        _write(out / n / ROSTER_FILE, roster_json)
    return out


def _read_keys_mode(directory: Path) -> str:
    """``"single"`` or ``"threshold"``: how the directory was provisioned."""
    try:
        mode = json.loads((directory / ROSTER_FILE).read_text()).get("keys", "single")
    except (ValueError, OSError, AttributeError) as exc:
        raise InputError(f"{directory / ROSTER_FILE} is not a valid roster") from exc
    if mode not in ("single", "threshold"):
        raise InputError(f"{directory / ROSTER_FILE} names an unknown key mode {mode!r}")
    return str(mode)


def _read_roster(directory: Path) -> tuple[dict[str, bytes], str]:
    path = directory / ROSTER_FILE
    if not path.is_file():
        raise InputError(f"{path} not found: is this a directory written by `privfl keys init`?")
    try:
        raw = json.loads(path.read_text())
        roster = {str(n): bytes.fromhex(k) for n, k in raw["parties"].items()}
        holder = str(raw["key_holder"])
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise InputError(f"{path} is not a valid roster") from exc
    if any(len(k) != PUBLIC_BYTES for k in roster.values()):
        raise InputError(
            f"{path} pins keys of another privfl version (public identities are "
            f"{PUBLIC_BYTES} bytes); re-provision with `privfl keys init`"
        )
    return roster, holder


def load_party_keys(directory: str | Path, name: str | None = None) -> PartyKeys:
    """Load a party's node directory (the party name defaults to the directory name)."""
    d = Path(directory)
    roster, holder = _read_roster(d)
    party = name or d.name
    if party not in roster:
        raise InputError(f"party {party!r} is not in the roster at {d}")
    for f in ("identity.key", "bundle.bin"):
        if not (d / f).is_file():
            raise InputError(f"{d / f} not found")
    try:
        identity = keywrap.IdentityKey.from_private_bytes((d / "identity.key").read_bytes())
    except MalformedMessageError as exc:
        raise InputError(f"{d / 'identity.key'}: {exc}") from None
    if identity.public_bytes != roster[party]:
        raise InputError(f"{d / 'identity.key'} does not match {party!r}'s key in the roster")
    bundle = (d / "bundle.bin").read_bytes()
    return PartyKeys(party, identity, roster, holder, bundle, _read_keys_mode(d))


def load_aggregator_keys(directory: str | Path) -> AggregatorKeys:
    """Load the aggregator's directory (public material only)."""
    d = Path(directory)
    roster, holder = _read_roster(d)
    path = d / "public_setup.bin"
    if not path.is_file():
        raise InputError(f"{path} not found")
    return AggregatorKeys(roster, holder, path.read_bytes(), _read_keys_mode(d))
