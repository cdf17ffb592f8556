"""What every ``privfl`` sub-command shares: the consoles, JSON output and error handling.

Bad input exits with code 2 and a one-line reason on stderr; a failed protocol run exits
with code 1.
"""

from __future__ import annotations

import functools
import json
import sys
from collections.abc import Callable
from typing import Any, TypeVar

import typer
from rich.console import Console

from privfl.errors import InputError, PrivflError

# Tables printed into a file or pipe get room for every column instead of 80 characters.
console = Console() if sys.stdout.isatty() else Console(width=170)
err_console = Console(stderr=True)
F = TypeVar("F", bound=Callable[..., Any])


def guard(fn: F) -> F:
    """Turn privfl errors into a one-line message and an exit code (2 = bad input)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except InputError as exc:
            err_console.print(f"error: {exc}", markup=False, highlight=False)
            raise typer.Exit(2) from None
        except PrivflError as exc:
            err_console.print(f"protocol error: {exc}", markup=False, highlight=False)
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]


def print_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=float) + "\n")
