"""In-process drivers of threshold CKKS: :func:`make_roles` and one ``run_*`` function per
protocol (key generation, joint decryption, masked decryption, interactive bootstrapping).
Each drives the roles (:class:`~privfl.threshold.party.ThresholdParty`,
:class:`~privfl.threshold.server.ThresholdServer`) through an in-process runner
(:class:`privfl.runner.InProcessRunner`), which passes the real message bytes between them and
records time per role and bytes per channel::

    from privfl.threshold import make_roles, run_key_generation, run_joint_decryption
    from privfl.runner import InProcessRunner

    server, parties = make_roles("test", 3)
    runner = InProcessRunner()
    run_key_generation(server, parties, runner)
    ct = server.encrypt([0.25, -1.5])
    run_joint_decryption(parties[0], parties, ct, runner, length=2)   # ~[0.25, -1.5]

Channels: ``keygen_share`` and ``keygen_mult_share`` (party -> server), ``keygen_joint`` and
``eval_keys`` (server -> party), ``decrypt_request`` / ``decrypt_share`` /
``masked_result``, ``boot_request`` / ``boot_share``; one ``send`` per message and recipient.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ParamSpec, Protocol, TypeVar

import numpy as np
import numpy.typing as npt

from privfl.crypto.threshold.ciphertext import Ciphertext, CiphertextHolder
from privfl.crypto.threshold.context import ThresholdContext
from privfl.crypto.threshold.messages import (
    BootstrapRequest,
    BootstrapShare,
    DecryptionRequest,
    DecryptionShare,
    EvaluationKeys,
    JointPublicKeys,
    KeyGenShare,
    MaskedDecryption,
    MultKeyShare,
    _Message,
)
from privfl.crypto.threshold.params import ThresholdParameters, parameter_set
from privfl.messages import new_session_id
from privfl.threshold.party import ThresholdParty
from privfl.threshold.server import ThresholdServer

P = ParamSpec("P")
R = TypeVar("R")


class InProcessRunner(Protocol):
    """What the round drivers need from :class:`privfl.runner.InProcessRunner` (described,
    not imported, so a caller may pass any recorder): time a role's step, pass bytes along a
    named channel."""

    def run(self, key: str, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs) -> R: ...

    def send(self, channel: str, data: bytes) -> bytes: ...


def make_roles(
    params: ThresholdParameters | str,
    parties: int,
    session: bytes | None = None,
    names: Sequence[str] | None = None,
) -> tuple[ThresholdServer, list[ThresholdParty]]:
    """A server and ``parties`` parties for one session (nothing secret yet: each party
    samples its own share in :func:`run_key_generation`)."""
    if isinstance(params, str):
        params = parameter_set(params)
    ctx = ThresholdContext.for_parameters(params, parties)
    session = session or new_session_id()
    names = list(names) if names is not None else [f"party-{i}" for i in range(parties)]
    if len(names) != parties or len(set(names)) != parties:
        raise ValueError("names must be distinct, one per party")
    roles = [ThresholdParty(n, i, ctx, session) for i, n in enumerate(names)]
    return ThresholdServer("server", ctx, session), roles


M = TypeVar("M", bound=_Message)


def _exchange(
    runner: InProcessRunner,
    parties: Sequence[ThresholdParty],
    outgoing: bytes | None,
    step: tuple[str, str, str],
    reply_type: type[M],
    *extra: object,
) -> list[M]:
    """One star round: ``outgoing`` (if any) travels to every party on ``step[0]``, each
    party runs its method named ``step[1]`` on the decoded message (timed as
    ``party_<step[1]>``), and its reply travels back on ``step[2]`` and is decoded."""
    channel_in, method, channel_out = step
    ctx, session = parties[0].context, parties[0].session
    replies = []
    for p in parties:
        args: list[object] = []
        if outgoing is not None:
            in_type = _REQUEST_TYPES[method]
            args.append(in_type.from_bytes(runner.send(channel_in, outgoing), ctx, session))
        reply = runner.run(f"party_{method}", getattr(p, method), *args, *extra)
        data = runner.send(channel_out, reply.to_bytes())
        replies.append(reply_type.from_bytes(data, ctx, session))
    return replies


_REQUEST_TYPES: dict[str, type[_Message]] = {
    "keygen_mult_share": JointPublicKeys,
    "decryption_share": DecryptionRequest,
    "bootstrap_share": BootstrapRequest,
}


def run_key_generation(
    server: ThresholdServer,
    parties: Sequence[ThresholdParty],
    runner: InProcessRunner,
    evaluating_parties: bool = False,
) -> None:
    """The two key-generation rounds. With ``evaluating_parties`` the server also sends the
    joint evaluation keys to every party (SmartCryptNN's parties compute on ciphertexts)."""
    shares = _exchange(runner, parties, None, ("", "keygen_share", "keygen_share"), KeyGenShare)
    joint = runner.run("server_keygen_combine", server.combine_keygen_shares, shares)
    step = ("keygen_joint", "keygen_mult_share", "keygen_mult_share")
    mult = _exchange(runner, parties, joint.to_bytes(), step, MultKeyShare)
    keys = runner.run("server_keygen_mult_combine", server.combine_mult_shares, mult).to_bytes()
    if evaluating_parties:
        for p in parties:
            ek = EvaluationKeys.from_bytes(runner.send("eval_keys", keys), p.context, p.session)
            runner.run("party_install_keys", p.receive_evaluation_keys, ek)


_DECRYPT = ("decrypt_request", "decryption_share", "decrypt_share")


def run_joint_decryption(
    requester: ThresholdParty,
    parties: Sequence[ThresholdParty],
    ct: Ciphertext,
    runner: InProcessRunner,
    length: int,
) -> npt.NDArray[np.float64]:
    """``requester`` decrypts its ciphertext with the other parties' shares (lead/main/fusion):
    only the requester learns the plaintext; a relay sees ``c1`` and ``M - 1`` shares."""
    request = runner.run("party_decrypt_request", requester.request_decryption, ct)
    others = [p for p in parties if p is not requester]
    shares = _exchange(runner, others, request.to_bytes(), _DECRYPT, DecryptionShare)
    return runner.run("party_decrypt_fuse", requester.fuse, request, shares, length)


def run_masked_decryption(
    server: ThresholdServer,
    parties: Sequence[ThresholdParty],
    ct: Ciphertext,
    mask_seed: bytes,
    runner: InProcessRunner,
    length: int,
) -> list[npt.NDArray[np.float64]]:
    """The server's ciphertext decrypted for the parties only (FHAUC's threshold mode): the
    server relays ``c1``, adds ``c0`` and the shares, one of which carries the parties' mask
    ``R`` (from ``mask_seed``, which the server does not know), and broadcasts the masked
    result; each party removes ``R``. Per party: one ``c1`` down, one share up, one result
    down (O(1) in the number of parties)."""
    request = runner.run("server_decrypt_request", server.request_decryption, ct)
    shares = _exchange(runner, parties, request.to_bytes(), _DECRYPT, DecryptionShare, mask_seed)
    masked = runner.run("server_fuse_masked", server.fuse_masked, request, shares).to_bytes()
    out = []
    for p in parties:
        msg = MaskedDecryption.from_bytes(
            runner.send("masked_result", masked), p.context, p.session
        )
        out.append(runner.run("party_open_masked", p.open_masked, msg, mask_seed, length))
    return out


def run_interactive_bootstrap(
    owner: CiphertextHolder,
    parties: Sequence[ThresholdParty],
    ct: Ciphertext,
    runner: InProcessRunner,
) -> Ciphertext:
    """Refresh ``ct`` (owned by a party or the server) to level 0 with every party's shares."""
    request = runner.run("owner_boot_request", owner.start_bootstrap, ct)
    step = ("boot_request", "bootstrap_share", "boot_share")
    shares = _exchange(runner, parties, request.to_bytes(), step, BootstrapShare)
    return runner.run("owner_boot_finish", owner.finish_bootstrap, request, shares)
