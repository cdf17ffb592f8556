"""What every ``privfl`` sub-command shares: consoles, the JSON rule, error handling and the
small parsers of comma-separated options.

The JSON rule (one for the whole CLI): ``--json`` prints one JSON object to stdout (and
nothing else there: tables and progress go to stderr or are skipped); ``--json-out FILE``
writes the same object to FILE, checked *before* any long work starts. Bad input exits with
code 2 and a one-line reason on stderr; a failed protocol run exits with code 1.
"""

from __future__ import annotations

import functools
import json
import math
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from privfl.errors import InputError, PrivflError

# Tables printed into a file or pipe get room for every column instead of 80 characters.
console = Console() if sys.stdout.isatty() else Console(width=170)
err_console = Console(stderr=True)
F = TypeVar("F", bound=Callable[..., Any])

AsJson = Annotated[bool, typer.Option("--json", help="Print one JSON object to stdout (no table).")]
JsonOut = Annotated[
    Path | None,
    typer.Option("--json-out", help="Also write the JSON object to this file (checked first)."),
]
PlotOut = Annotated[
    Path | None, typer.Option("--plot", help="Write a PNG figure to this file (checked first).")
]


def guard(fn: F) -> F:
    """Turn privfl errors into a one-line message and an exit code (2 = bad input).

    Floating-point warnings are silenced for the command (results are checked explicitly)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            with np.errstate(all="ignore"):
                return fn(*args, **kwargs)
        except InputError as exc:
            err_console.print(f"error: {exc}", markup=False, highlight=False, soft_wrap=True)
            raise typer.Exit(2) from None
        except PrivflError as exc:
            err_console.print(
                f"protocol error: {exc}", markup=False, highlight=False, soft_wrap=True
            )
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]


def to_jsonable(obj: Any) -> Any:
    """Result objects (``to_dict()``), numpy values and non-finite floats -> JSON values."""
    if hasattr(obj, "to_dict"):
        return to_jsonable(obj.to_dict())
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_jsonable(obj.tolist())
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, float | np.floating):
        value = float(obj)
        return value if math.isfinite(value) else None
    return obj


def dumps(obj: Any) -> str:
    return json.dumps(to_jsonable(obj), indent=2)


def print_json(obj: Any) -> None:
    sys.stdout.write(dumps(obj) + "\n")


def check_output_path(path: Path | None, what: str = "output") -> None:
    """Refuse an output file that cannot be written, before any long work starts.

    Refused: a folder, anything that exists but is not a regular file (``/dev/full``, a
    pipe), a missing parent folder, and a path where creating (or opening) the file fails
    (``/proc/x``, a read-only mount): a new file is probed by creating and removing it, an
    existing one by opening it for appending without writing, so nothing is changed."""
    if path is None:
        return
    if path.is_dir():
        raise InputError(f"{what} path {path} is a directory; give a file name")
    if path.exists() and not path.is_file():
        raise InputError(f"{what} path {path} is not a regular file; give a file name")
    parent = path.parent if str(path.parent) else Path(".")
    if not parent.is_dir():
        raise InputError(f"{what} folder {parent} does not exist; create it first")
    try:
        if path.exists():
            with path.open("ab"):
                pass
        else:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            os.close(fd)
            path.unlink()
    except OSError as exc:
        raise InputError(f"{what} path {path} is not writable ({exc.strerror})") from None


def check_input_file(path: Path, what: str) -> None:
    """Refuse an input path that is not a file, naming the option: a folder is not reported
    as "not found" (``privfl train --data /tmp``)."""
    if path.is_dir():
        raise InputError(f"{what} {path} is a directory, not a file; give the file's path")
    if not path.exists():
        raise InputError(f"{what} {path}: file not found")
    if not path.is_file():
        raise InputError(f"{what} {path} is not a regular file; give the file's path")


def check_output_dir(path: Path | None, what: str = "output folder") -> None:
    """Refuse an output folder that cannot be created or written, before any work: the path
    must not be a file, and its nearest existing ancestor must be a folder in which a file
    can be created (probed with a temporary file that is removed at once)."""
    if path is None:
        return
    if path.exists() and not path.is_dir():
        raise InputError(f"{what} {path} exists and is not a directory; give a folder")
    ancestor = path
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise InputError(f"{what} {path}: {ancestor} is not a folder")
    try:
        fd, probe = tempfile.mkstemp(dir=ancestor, prefix=".privfl-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise InputError(f"{what} {path} is not writable ({exc.strerror})") from None


def write_output(path: Path, text: str, what: str = "output") -> None:
    """Write ``text`` to ``path``; a failure (disk full since the check) is a one-line error."""
    try:
        path.write_text(text)
    except OSError as exc:
        raise InputError(f"cannot write {what} {path} ({exc.strerror})") from None


def emit(result: Any, as_json: bool, json_out: Path | None) -> None:
    """The JSON rule: ``--json`` prints the object, ``--json-out`` writes it."""
    if json_out is not None:
        write_output(json_out, dumps(result) + "\n", "--json-out")
        if not as_json:
            err_console.print(f"results written to {json_out}")
    if as_json:
        print_json(result)


def names(text: str, what: str = "party", minimum: int = 2) -> list[str]:
    """Parse comma-separated names (``--parties site-a,site-b``) strictly: no empty entry
    (``a,,b``), no surrounding whitespace, no repeats, at least ``minimum``
    (:func:`privfl.datasets.check_party_names`). An empty text is no name at all."""
    from privfl.datasets import check_party_names

    return check_party_names(text.split(",") if text else [], what, minimum)


def ints(text: str, what: str, *, minimum: int | None = None) -> list[int]:
    """Parse comma-separated integers (e.g. ``--sizes 100,1000``)."""
    try:
        vals = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise InputError(f"{what} must be comma-separated integers, got {text!r}") from None
    if not vals:
        raise InputError(f"{what} is empty")
    if minimum is not None and min(vals) < minimum:
        raise InputError(f"every value of {what} must be at least {minimum}, got {min(vals)}")
    return vals


def floats(text: str, what: str, *, positive: bool = True) -> list[float]:
    """Parse comma-separated finite numbers (positive unless told otherwise)."""
    try:
        vals = [float(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise InputError(f"{what} must be comma-separated numbers, got {text!r}") from None
    if not vals or not all(math.isfinite(v) for v in vals):
        raise InputError(f"{what} must be finite numbers, got {text!r}")
    if positive and any(v <= 0 for v in vals):
        raise InputError(f"{what} must be positive numbers, got {text!r}")
    return vals


def parse_score_range(text: str) -> tuple[float, float]:
    """Parse ``--score-range low,high``."""
    vals = floats(text, "--score-range", positive=False)
    if len(vals) != 2 or not vals[0] < vals[1]:
        raise InputError(f"--score-range must be 'low,high' with low < high, got {text!r}")
    return vals[0], vals[1]


def fmt_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.2f} {unit}"
        n /= 1000
    return f"{n:.2f} GB"


def report_provisioned(
    path: Path, title: str, advice: str, extra: dict[str, Any], as_json: bool, json_out: Path | None
) -> None:
    """The result of a provisioning command: every file written under ``path`` with its size
    (JSON by the one rule, else a table and the advice on who gets which folder)."""
    files = sorted(str(p.relative_to(path)) for p in path.rglob("*") if p.is_file())
    sizes = {f: (path / f).stat().st_size for f in files}
    emit({"out": str(path), **extra, "files": sizes}, as_json, json_out)
    if as_json:
        return
    table = Table(title=title)
    table.add_column("file")
    table.add_column("size", justify="right")
    for f in files:
        table.add_row(f, fmt_bytes(sizes[f]))
    console.print(table)
    console.print(advice)
