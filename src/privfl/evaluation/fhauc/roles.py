"""The one place FHAUC's roles are built, whatever the entry point and the key backend.

:func:`privfl.federated_auc`, the :mod:`privfl.metrics` functions (and through them
``privfl auc``) build an in-process federation with :func:`in_process` and provision it with
:func:`provision`; the Flower ServerApp and ClientApp build their one role from a key folder
with :func:`make_aggregator` and :func:`make_party`. Every (keys, security, reveal) combination
is built here; :func:`check_combination` refuses unknown options before anything is built.
Both roles are built by composition, never by subclassing per key mode: the one
:class:`~.aggregator.Aggregator` (inside a threshold aggregator with threshold keys) and the
one :class:`~.party.Party` with its key backend (:class:`~.single_keys.SingleKeys` or
:class:`~.threshold.party.ThresholdPartyKeys`), chosen here once from ``keys``.

Every party gets its own identity key (X25519 + Ed25519) and the roster pins them all; the
first party provisions: with single keys it is the key holder (it creates the CKKS keys and
wraps the secret context for each party), with threshold keys it creates only the shared
seed (every party generates its own key share in the session). The aggregator receives
public material only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
import numpy.typing as npt

from privfl.crypto import keywrap
from privfl.crypto.ckks import DEFAULT_PARAMETERS, CKKSParameters
from privfl.errors import InputError
from privfl.evaluation.fhauc.aggregator import Aggregator
from privfl.evaluation.fhauc.key_holder import KeyHolder
from privfl.evaluation.fhauc.party import Party
from privfl.evaluation.fhauc.party_keys import PartyKeys
from privfl.evaluation.fhauc.policy import Policy
from privfl.evaluation.fhauc.reveal import Reveal
from privfl.evaluation.fhauc.rounds import AnyAggregator
from privfl.evaluation.fhauc.single_keys import SingleKeys
from privfl.evaluation.fhauc.threshold import setup as threshold_setup
from privfl.evaluation.fhauc.threshold.aggregator import threshold_aggregator
from privfl.evaluation.fhauc.threshold.party import ThresholdPartyKeys
from privfl.runner import InProcessRunner

__all__ = [
    "KEYS",
    "Federation",
    "check_combination",
    "in_process",
    "make_aggregator",
    "make_party",
    "provision",
]

KEYS = ("single", "threshold")
KeyMode = Literal["single", "threshold"]
Data = Sequence[tuple[npt.NDArray[np.float64], npt.NDArray[np.int8]]]


def check_combination(keys: str | None, reveal: Reveal = Reveal.AUC) -> KeyMode:
    """``keys`` as the entry points take it (``None`` = ``"single"``), or
    :class:`~privfl.errors.InputError` naming the reason. Every (keys, security, reveal)
    combination runs; a session too large for the threshold key set's decryption budget is
    refused when the aggregator announces it, before any work."""
    Reveal.parse(reveal)
    if keys is None or keys == "single":
        return "single"
    if keys != "threshold":
        raise InputError(f"keys must be 'single' or 'threshold' (got {keys!r})")
    return "threshold"


def make_aggregator(keys: str, computation: AnyAggregator | None = None) -> AnyAggregator:
    """The aggregator for ``keys``. ``computation``: the :class:`Aggregator` whose
    :meth:`~Aggregator.aggregate` runs (default: the honest one; pass e.g. one of the tamper
    suite to test robustness). With threshold keys it is composed into a threshold
    aggregator (:class:`~.threshold.aggregator.ThresholdAggregator`, which holds it with the
    joint-key backend); the one schedule runs either (:mod:`~.rounds`)."""
    if check_combination(keys) == "threshold":
        return threshold_aggregator(computation)
    if isinstance(computation, Aggregator):
        return computation
    if computation is not None:
        raise InputError("keys='single' takes an Aggregator, not a threshold aggregator")
    return Aggregator()


@dataclass(frozen=True)
class Federation:
    """An in-process federation: one identity per party, the roster pinning them, the
    parties (the first provisions) and the aggregator."""

    names: tuple[str, ...]
    identities: dict[str, keywrap.IdentityKey]
    roster: dict[str, bytes]
    aggregator: AnyAggregator
    keys: KeyMode = "single"

    @property
    def provisioner(self) -> str:
        return self.names[0]

    def member(self, name: str) -> tuple[keywrap.IdentityKey, dict[str, bytes], str]:
        """``(identity, roster, provisioner)`` for :func:`make_party`."""
        return self.identities[name], self.roster, self.provisioner


def make_party(
    keys: str,
    name: str,
    identity: keywrap.IdentityKey,
    roster: dict[str, bytes],
    provisioner: str,
    scores: npt.ArrayLike,
    labels: npt.ArrayLike,
    weights: npt.ArrayLike | None = None,
    reveal: Reveal | Sequence[Reveal] = Reveal.AUC,
) -> Party:
    """Party ``name`` (its identity key, the roster pinning every party, the provisioning
    party whose bundle it accepts) holding its data, with the key backend for ``keys``; it
    consents to ``reveal`` only (one mode, or several: a deployed node consents to what its
    operator configured)."""
    reveals = (reveal,) if isinstance(reveal, str) else tuple(reveal)
    if not reveals:
        raise InputError("a party must consent to at least one reveal mode")
    for mode in reveals:
        check_combination(keys, mode)
    backend: PartyKeys = SingleKeys()
    if check_combination(keys) == "threshold":
        if weights is not None:
            raise InputError("keys='threshold' takes no sample weights yet")
        backend = ThresholdPartyKeys(name)
    return Party(
        name, identity, roster, provisioner, scores, labels, weights=weights, reveals=reveals,
        keys=backend,
    )  # fmt: skip


def in_process(names: Sequence[str], keys: str, computation: AnyAggregator | None) -> Federation:
    """Fresh identities for ``names`` (pinned in one roster) and the aggregator for
    ``keys`` (see :func:`make_aggregator`)."""
    identities = {n: keywrap.IdentityKey() for n in names}
    roster = {n: k.public_bytes for n, k in identities.items()}
    mode = check_combination(keys)
    return Federation(tuple(names), identities, roster, make_aggregator(mode, computation), mode)


def provision(
    fed: Federation,
    parties: Sequence[Party],
    policy: Policy,
    runner: InProcessRunner,
    params: CKKSParameters = DEFAULT_PARAMETERS,
) -> None:
    """The setup steps, timed and measured by ``runner``: the provisioning party creates the
    key material (single keys: the CKKS keys and bundles; threshold keys: the seed only), the
    aggregator receives the public setup and every party its own bundle, all as bytes."""
    name = fed.provisioner
    if fed.keys == "threshold":
        public, bundles = runner.run(
            "setup", threshold_setup.provision, name, fed.identities[name], fed.roster, policy
        )
        public_channel, bundle_channel = "setup_public", "setup_bundle"
    else:
        holder = KeyHolder(name, fed.identities[name], fed.roster)
        public, bundles = runner.run("setup", holder.provision, policy, params)
        public_channel, bundle_channel = "setup_public_context", "setup_key_bundle"
    agg = fed.aggregator
    runner.run("aggregator_setup", agg.receive_setup, runner.send(public_channel, public))
    for party in parties:
        data = runner.send(bundle_channel, bundles[party.name])
        runner.run("party_setup", party.receive_bundle, data)
