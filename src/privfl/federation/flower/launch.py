"""Pieces of a local Flower deployment: executables, free ports, Flower's config syntax, TLS
and SuperNode authentication settings, a run's outcome, a deadline watchdog
(:class:`~privfl.federation.flower.local.LocalFederation` puts them together)."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from privfl.errors import InputError

ConfigValue = str | int | float | bool


def flower_bin() -> Path:
    """The folder holding ``flower-superlink``, ``flower-supernode`` and ``flwr`` (this
    Python's environment)."""
    return Path(sys.executable).parent


# Where free_port looks: below the kernel's ephemeral range, so that no outgoing connection
# of any process (which the kernel numbers from that range) can take the port between the
# check and the server's own bind; a port another launcher picks at the same moment is still
# possible, hence PORT_IN_USE and the restart in LocalFederation.
_PORT_LOW = 20000
_EPHEMERAL = Path("/proc/sys/net/ipv4/ip_local_port_range")
PORT_IN_USE = "address already in use"


def _ephemeral_low() -> int:
    try:
        return int(_EPHEMERAL.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now, chosen at random below the
    kernel's ephemeral range (a port from ``bind(0)`` is one any process's next outgoing
    connection may take before the server binds it)."""
    low, high = _PORT_LOW, _ephemeral_low()
    if high - low < 1000:  # an unusual range: fall back to the kernel's choice
        low, high = 0, 1
    for _ in range(200):
        port = low + secrets.randbelow(high - low) if high > 1 else 0
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            return int(s.getsockname()[1])
    raise InputError(f"no free TCP port on 127.0.0.1 in {low}..{high - 1}")


def config_string(values: Mapping[str, ConfigValue]) -> str:
    """``--node-config`` / ``--run-config`` syntax: ``key='text' n=3 x=0.5 flag=true``."""
    parts = []
    for key, value in values.items():
        if isinstance(value, bool):
            parts.append(f"{key}={'true' if value else 'false'}")
        elif isinstance(value, int | float):
            parts.append(f"{key}={value!r}")
        else:
            text = str(value)
            if "'" in text or "\n" in text:
                raise InputError(f"config value for {key!r} may not contain quotes: {text!r}")
            parts.append(f"{key}='{text}'")
    return " ".join(parts)


def _toml_value(value: ConfigValue) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    text = str(value)
    if any(c in text for c in '"\\\n'):
        raise InputError(f"app config value may not contain quotes or newlines: {text!r}")
    return f'"{text}"'


def app_pyproject(
    name: str, description: str, module: str, config: Mapping[str, ConfigValue]
) -> str:
    """The ``pyproject.toml`` of a Flower App whose components come from the installed
    privfl: ``module`` is ``"SERVER:CLIENT"``, the modules of ``privfl.federation.flower``
    holding the ServerApp and the ClientApp (each as ``app``); ``config``: the run config's
    defaults (``[tool.flwr.app.config]``)."""
    server, client = module.split(":")
    base = "privfl.federation.flower"
    lines = [
        "[build-system]", 'requires = ["hatchling"]', 'build-backend = "hatchling.build"', "",
        "[project]", f'name = "{name}"', 'version = "1.0.0"', f'description = "{description}"',
        'license = "Apache-2.0"', 'dependencies = ["privfl[flower]"]', "",
        "[tool.hatch.build.targets.wheel]", 'packages = ["."]', "",
        "[tool.flwr.app]", 'publisher = "privfl"', "",
        "[tool.flwr.app.components]", f'serverapp = "{base}.{server}:app"',
        f'clientapp = "{base}.{client}:app"', "",
        "[tool.flwr.app.config]", *(f"{k} = {_toml_value(v)}" for k, v in config.items()),
    ]  # fmt: skip
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class LinkSecurity:
    """TLS and SuperNode authentication for a deployment (``None`` fields: off).

    ``ca``/``cert``/``key``: PEM files: the CA the SuperNodes and ``flwr`` trust, and the
    SuperLink's certificate (its address in the subject alternative names) and key; with them
    no process runs ``--insecure``. ``node_auth``: the SuperLink admits only SuperNodes whose
    public key was registered (``flwr supernode register``, :meth:`LocalFederation.
    register_node`); each SuperNode signs with its own private key (``start_supernode(...,
    auth_key=...)``)."""

    ca: Path | None = None
    cert: Path | None = None
    key: Path | None = None
    node_auth: bool = False

    @property
    def tls(self) -> bool:
        return self.ca is not None and self.cert is not None and self.key is not None


@dataclass(frozen=True)
class RunOutcome:
    """How a ``flwr run`` ended: the run id, the SuperLink's final status of the run
    (``finished:completed``, ``finished:failed``, ...) and the streamed log."""

    run_id: int | None
    status: str
    log: str

    @property
    def ok(self) -> bool:
        return self.status == "finished:completed"

    def errors(self) -> list[str]:
        """The ServerApp's error lines from the log (they name the failing party)."""
        return [ln.strip() for ln in self.log.splitlines() if "ERROR" in ln and "failed" in ln]


@contextlib.contextmanager
def alarm(deadline: float, proc: subprocess.Popen[Any]) -> Any:
    """Kill ``proc`` when ``deadline`` passes (so a blocked read of its output ends)."""
    import threading

    stop = threading.Event()

    def watch() -> None:
        while not stop.wait(0.5):
            if time.monotonic() > deadline and proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                return

    thread = threading.Thread(target=watch, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(timeout=2)
