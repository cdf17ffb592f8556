"""``privfl keys``: provisioning a real deployment."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from privfl.cli._kit import (
    AsJson,
    JsonOut,
    check_output_dir,
    check_output_path,
    guard,
    report_provisioned,
)
from privfl.cli._kit import (
    names as parse_names,
)
from privfl.errors import InputError
from privfl.evaluation.fhauc.policy import (
    DEFAULT_MAX_SAMPLES_PER_PARTY,
    DEFAULT_SPLITS,
    Policy,
    Security,
)
from privfl.evaluation.statistics import MAX_POINTS

keys_app = typer.Typer(help="Provision keys for a real deployment.", no_args_is_help=True)


@keys_app.command("init")
@guard
def keys_init(
    parties: Annotated[str, typer.Option(help="Comma-separated party names, e.g. site-a,site-b.")],
    out: Annotated[Path, typer.Option(help="Directory to write one folder per node into.")],
    key_holder: Annotated[
        str | None, typer.Option(help="Party that generates the CKKS keys (default: the first).")
    ] = None,
    security: Annotated[
        str,
        typer.Option(
            help="Weakest mode the parties accept: 'semi-honest', or 'malicious' (then they "
            "refuse semi-honest sessions: no downgrade by the aggregator)."
        ),
    ] = "semi-honest",
    max_samples_per_party: Annotated[
        int,
        typer.Option(
            help="Public bound on any party's sample count, fixed for every session (sizes the "
            "CKKS headroom and the malicious masks, hence the verification tolerance; with "
            "--keys threshold also the decryption noise: a bound far above the real sizes "
            "makes parties refuse an AUC less accurate than 1e-6)."
        ),
    ] = DEFAULT_MAX_SAMPLES_PER_PARTY,
    executions: Annotated[
        int,
        typer.Option(
            help="Independent executions of the malicious variant (the paper uses 2; each "
            "extra one shrinks the chance that a deviation goes unnoticed by 2^-5 to 2^-10)."
        ),
    ] = 3,
    min_pairs: Annotated[
        int,
        typer.Option(
            help="A lower bound on every session's global positives x negatives, known to the "
            "parties only: it sets how tight the malicious verification can be; required "
            "with --security malicious (each party's join check uses it, never its own "
            "counts, which a refusal would otherwise reveal)."
        ),
    ] = 0,
    min_guarantee_bits: Annotated[
        float,
        typer.Option(
            help="Parties refuse a verified AUC unless a deviation above 1e-6 would have been "
            "caught except with probability 2^-BITS."
        ),
    ] = 8.0,
    max_thresholds: Annotated[
        int | None,
        typer.Option(help="Largest N to support (fewer Galois keys); default: every N."),
    ] = None,
    max_splits: Annotated[
        int, typer.Option(help="Largest S the malicious variant may use (1..16).")
    ] = 16,
    min_parties: Annotated[
        int, typer.Option(help="Smallest session a party joins (default 2).")
    ] = 2,
    force: Annotated[bool, typer.Option(help="Overwrite a non-empty directory.")] = False,
    keys: Annotated[
        str,
        typer.Option(
            help="'single' (a key holder creates the CKKS key) or 'threshold' (no key is "
            "created here: every party generates its own share in each session; needs the "
            "\\[threshold] extra at run time)."
        ),
    ] = "single",
    as_json: AsJson = False,
    json_out: JsonOut = None,
) -> None:
    """Provision FHAUC: identity keys (X25519 + Ed25519), the wrapped CKKS secret, seed and
    policy for every party, and the aggregator's public context and policy. With --keys
    threshold: identities, roster, seed and policy only (nothing of a CKKS key)."""
    from privfl.federation.provisioning import provision

    check_output_path(json_out, "--json-out")
    check_output_dir(out, "--out")
    names = parse_names(parties, "party")
    if max_thresholds is not None and max_thresholds < 3:
        raise InputError("--max-thresholds must be at least 3")
    if min_parties > len(names):
        raise InputError(
            f"--min-parties {min_parties} is more than the {len(names)} parties provisioned: "
            "every party would refuse every session"
        )
    if Security.parse(security) is Security.MALICIOUS and max_splits < 2:
        raise InputError(
            "--security malicious needs --max-splits of at least 2 (the malicious variant "
            "splits every value into at least 2 shares)"
        )
    if Security.parse(security) is Security.MALICIOUS and min_pairs == 0:
        raise InputError(
            "--security malicious needs --min-pairs (a lower bound on every session's global "
            "positives x negatives, kept from the aggregator): each party's join check uses "
            "it, never its own counts, and without it every session is refused at join"
        )
    policy = Policy(
        security=Security.parse(security),
        max_samples_per_party=max_samples_per_party,
        executions=executions,
        max_points=max_thresholds if max_thresholds is not None else MAX_POINTS,
        max_splits=max_splits,
        min_parties=min_parties,
        min_pairs=min_pairs,
        min_guarantee_bits=min_guarantee_bits,
    )
    served = join_check(policy, len(names), keys)
    path = provision(names, out, policy, key_holder=key_holder, overwrite=force, keys=keys)
    advice = (
        "Give each party only its own folder; the aggregator gets 'aggregator/' "
        "(public material, it cannot decrypt)."
    )
    report_provisioned(
        path,
        f"provisioned {len(names)} parties in {path}",
        advice if served is None else f"{advice}\n{served_text(served)}",
        {"keys": keys} if served is None else {"keys": keys, "join_check": served},
        as_json,
        json_out,
    )


def join_check(policy: Policy, parties: int, keys: str) -> dict[str, int] | None:
    """Malicious policies: the largest N whose AUC and curve sessions of all ``parties`` at
    the deployment's default splits (4, or the policy's largest) pass every party's join
    check (:func:`~privfl.evaluation.fhauc.sizing.largest_points`; 0: none). The noise bound
    grows with the parties, so a session of fewer of them passes at least as far."""
    from privfl.evaluation.fhauc.reveal import Reveal
    from privfl.evaluation.fhauc.sizing import largest_points

    if policy.security is not Security.MALICIOUS:
        return None
    splits = min(DEFAULT_SPLITS, policy.max_splits)
    return {
        "parties": parties,
        "splits": splits,
        "auc_max_points": largest_points(policy, parties, splits, keys, Reveal.AUC),
        "curve_max_points": largest_points(policy, parties, splits, keys, Reveal.CURVE),
    }


def served_text(served: dict[str, int]) -> str:
    """One paragraph on which malicious sessions the provisioned policy serves."""
    splits = served["splits"]
    head = f"Join check of malicious sessions of all {served['parties']} parties at {splits} splits"
    if splits < DEFAULT_SPLITS:
        head += f" (run them with --run-config splits={splits}: the default {DEFAULT_SPLITS} "
        head += "exceeds --max-splits)"

    def part(n: int, what: str) -> str:
        if n:
            return f"{what} pass for every N up to {n:,}"
        return (
            f"{what} pass at no N (every party refuses at the join, before any upload, "
            "even at N = 3 decision points: provision a larger --min-pairs, more "
            "--executions or a --max-samples-per-party closer to the real sizes)"
        )

    auc = part(served["auc_max_points"], "AUC sessions")
    curve = part(served["curve_max_points"], "curve and metrics sessions")
    return (
        f"{head}: {auc}; {curve}. A larger N is refused at the join: more --executions or a "
        "larger --min-pairs serve more."
    )
