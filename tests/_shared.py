"""Helpers several test modules use: the CLI's leaf commands, the Flower processes a run left
behind, a run's output read up to a line, a malicious AUC execution's measured error
against a noise model, and a threshold AUC forced onto the joint lanes layout."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import click
import typer

from privfl.cli import app


def leaf_commands() -> dict[str, click.Command]:
    """'auc', 'keys init', 'audit membership', ... -> the click command."""
    out: dict[str, click.Command] = {}

    def walk(cmd: click.Command, prefix: str) -> None:
        if isinstance(cmd, click.Group):
            for name, sub in cmd.commands.items():
                walk(sub, f"{prefix} {name}".strip())
        else:
            out[prefix] = cmd

    walk(typer.main.get_command(app), "")
    return out


def act_at_line(
    proc: subprocess.Popen[str], marker: str, within: float, action: Callable[[], None]
) -> list[str]:
    """Read ``proc``'s output up to the first line holding ``marker`` and then run ``action``
    (the failure-injection tests kill a node there); returns the lines read, that one
    included (all of them, and no action, if the output ended first or a line came after
    ``within`` seconds)."""
    if proc.stdout is None:
        raise ValueError("start the process with stdout=PIPE")
    lines: list[str] = []
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        lines.append(line)
        if marker in line:
            action()
            break
    return lines


def leftover_processes(marker: str) -> list[str]:
    """Command lines of Flower processes still running whose command line names ``marker``."""
    found = []
    for cmd in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmd.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if marker in text and "flower" in text:
            found.append(text)
    return found


def product_ratios(data, points, decoded, cs, view, sizes, sigmas, lanes=1) -> list[float]:
    """Each malicious AUC execution's measured ``|X/c - exact| / sigma_x`` and ``|Y/c -
    exact| / sigma_y``: ``decoded`` (X, Y) per execution as one party decoded them, ``cs`` the
    aggregator's multipliers (the last ones drawn: one per ciphertext group, shared by the
    ``lanes`` executions of a group), the exact values from the parties' data and the
    execution's randomness (``view``: the party's session view)."""
    import privfl
    from privfl.evaluation.fhauc import malicious

    sigma_x, sigma_y = sigmas
    p = sum(int(y.sum()) for _, y in data)
    n = sum(int(y.size) for _, y in data) - p
    auc = privfl.binned_auc(data, points)
    ratios = []
    groups = -(-len(decoded) // lanes)
    drawn = list(cs[-groups:])
    per_execution = [drawn[e // lanes] for e in range(len(decoded))]
    for e, ((x, y), c) in enumerate(zip(decoded, per_execution, strict=True)):
        rnd = malicious.derive(view.key, e, view.index, sizes)
        ratios.append(abs(x / c - (rnd.r0 * 2.0 * p * n * auc + rnd.r1 * p * n)) / sigma_x)
        ratios.append(abs(y / c - rnd.r2 * p * n) / sigma_y)
    return ratios


def record_calls(monkeypatch, owner, name: str) -> list:
    """Patch ``owner.name`` (a function) to record what every call returns, in call order."""
    seen: list = []
    original = getattr(owner, name)

    def recorded(*args, **kwargs):
        out = original(*args, **kwargs)
        seen.append(out)
        return out

    monkeypatch.setattr(owner, name, recorded)
    return seen


def force_joint_lanes(monkeypatch) -> None:
    """Every malicious threshold AUC session of the test on the joint lanes layout (T and F
    of several executions in one ciphertext per group), whether or not its noise bound would
    choose it (:func:`privfl.evaluation.fhauc.threshold.plan.malicious_layout`)."""
    from privfl.evaluation.fhauc.threshold import plan as plan_module

    def joint_lanes(config, policy, params, multiplier_bits):
        return plan_module.session_layout(
            params, len(config.parties), config.terms(), joint=True, lanes=True
        )

    monkeypatch.setattr(plan_module, "malicious_layout", joint_lanes)
