"""Helpers several test modules use: the CLI's leaf commands, and the Flower processes a run
left behind."""

from __future__ import annotations

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
