"""A Flower deployment on 127.0.0.1, as child processes: one SuperLink, SuperNodes, `flwr run`.

Used by ``privfl flower local`` (the quickstart) and by the integration tests, so the tests
exercise exactly what a newcomer runs. Everything binds to loopback on free ports; every
process is started in its own session and killed (process group, SIGKILL after SIGTERM) by
:meth:`LocalFederation.close`, which the context manager calls also on failure or Ctrl-C; if
this process dies first (SIGKILL, a crash), a watchdog (:mod:`.reaper`) kills them. The
processes Flower itself starts in sessions of their own (the SuperLink's SuperExec and each
run's ``flwr-serverapp``) are not in those groups: every process carries a mark in its
environment, and ``close`` (and the watchdog) kill whatever still carries it.

Readiness, without a start-up race: the SuperLink counts as up when its port accepts
connections; the SuperNodes when the SuperLink's log shows the expected number of nodes
activated, or ``flwr supernode list`` as many online (:meth:`LocalFederation.wait_for_nodes`).
``flwr run`` itself exits with status 0 whatever the run's outcome (Flower 1.41), so
:meth:`run` asks the SuperLink for the run's final status (``flwr ls --run-id``) and
:class:`RunOutcome` says whether the ServerApp failed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import IO

from privfl.errors import InputError, ProtocolError
from privfl.federation.flower.launch import (
    PORT_IN_USE,
    ConfigValue,
    LinkSecurity,
    RunOutcome,
    alarm,
    config_string,
    flower_bin,
    free_port,
)
from privfl.federation.flower.ready import activated_nodes, port_open
from privfl.federation.flower.reaper import Reaper

CONNECTION = "local"
# How often each SuperNode's SuperExec looks for a message to start a ClientApp for (Flower's
# default is 1 s, a second of every round; Flower accepts 0.01..60). An operator's own
# FLWR_SUPEREXEC_TASK_POLL_INTERVAL wins.
TASK_POLL_ENV = "FLWR_SUPEREXEC_TASK_POLL_INTERVAL"
TASK_POLL_S = 0.25
# The SuperLink's SuperExec only picks up runs (once per `flwr run`): Flower's default 1 s.
RUN_POLL_S = 1.0
# How often a SuperLink or SuperNode is started again when its port was taken first.
_RESTARTS = 3
# How often wait_for_nodes asks the SuperLink while its log shows fewer nodes than awaited (a log
# in another format, or lines a registered client forged into it). Each `flwr` call costs about
# 1.1 s of CPU, and on a loaded machine (load average 10 to 15) the first SuperNode took over
# 10 s to come up: asking every 10 s then cost a call per start.
_ASK_EVERY_S = 60.0


class LocalFederation:
    """``with LocalFederation(root) as fed: fed.start_superlink(); fed.start_supernode(...)``.

    ``root`` gets ``flwr-home/`` (Flower's config, with a connection named ``local``) and one
    ``<name>.log`` per process."""

    def __init__(
        self,
        root: str | Path,
        *,
        bin_dir: Path | None = None,
        connection: str = CONNECTION,
        private_home: bool = True,
        address: str = "127.0.0.1",
        security: LinkSecurity | None = None,
        prefix: Callable[[str], list[str]] | None = None,
    ) -> None:
        """``private_home=False`` (with the user's ``connection``, "" = Flower's default):
        no processes of its own, only ``flwr run`` against an existing deployment, with the
        user's ``FLWR_HOME``. ``address``: where the SuperLink listens and the SuperNodes and
        ``flwr`` reach it; ``security``: TLS and node authentication (default: loopback
        without TLS); ``prefix(name)``: a command put before each process's own (``name`` is
        the process's, ``"flwr"`` for the CLI), e.g. ``ip netns exec NS`` to run it in a
        network namespace."""
        self.address = address
        self.security = security or LinkSecurity()
        self.prefix = prefix or (lambda _name: [])
        self.root = Path(root)
        self.root.mkdir(parents=True, exist_ok=True)
        self.bin = bin_dir or flower_bin()
        self.connection = connection
        for exe in ("flower-superlink", "flower-supernode", "flwr"):
            if not (self.bin / exe).is_file():
                raise InputError(
                    f"{exe} not found next to {sys.executable}: install Flower with "
                    "pip install 'privfl[flower]'"
                )
        self.env = dict(os.environ)
        if private_home:
            self.home = self.root / "flwr-home"
            self.home.mkdir(exist_ok=True)
            self.env["FLWR_HOME"] = str(self.home)
        self.env["PATH"] = f"{self.bin}{os.pathsep}{os.environ.get('PATH', '')}"
        self.env.setdefault(TASK_POLL_ENV, str(TASK_POLL_S))
        self.env.pop("VIRTUAL_ENV", None)
        self.port = free_port()
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        self._logs: list[IO[bytes]] = []
        # what each server process was started with, to start it again on a fresh port when
        # another process took its port first (PORT_IN_USE in its log; at most _RESTARTS)
        self._simulation = 0
        self._supernodes: dict[str, tuple[dict[str, ConfigValue], Path | None]] = {}
        self._restarts: dict[str, int] = {}
        # kills every process group it watches (a group's id is its leader's pid: each process
        # has its own session) if this process dies before close(); told to forget a group
        # once this object killed it whole
        self._reaper = Reaper()
        # the processes Flower starts in sessions of their own (the SuperExec, each run's
        # flwr-serverapp) inherit this mark; close() and the watchdog kill them by it
        self._reaper.mark(self.env)

    # ------------------------------------------------------------------ processes
    def _write_connection(self, num_supernodes: int = 0) -> None:
        ca = self.security.ca
        trust = f'root-certificates = "{ca}"\n' if self.security.tls else "insecure = true\n"
        text = (
            f'[superlink]\ndefault = "{CONNECTION}"\n\n[superlink.{CONNECTION}]\n'
            f'address = "{self.address}:{self.port}"\n{trust}'
        )
        if num_supernodes:
            text += f"options.num-supernodes = {num_supernodes}\n"
        (self.home / "config.toml").write_text(text)

    def _start(self, name: str, args: list[str], env: Mapping[str, str] | None = None) -> None:
        log = open(self.root / f"{name}.log", "wb")  # noqa: SIM115 - closed in close()
        self._logs.append(log)
        self.procs[name] = subprocess.Popen(  # noqa: S603 - fixed executables, no shell
            [*self.prefix(name), *args], env=env or self.env, stdout=log, stderr=subprocess.STDOUT,
            cwd=self.root, start_new_session=True,
        )  # fmt: skip
        self._reaper.watch(self.procs[name].pid)

    def start_superlink(self, *, simulation: int = 0, timeout: float = 60.0) -> None:
        """Start the SuperLink (``simulation=K``: a simulation runtime with K virtual nodes)
        and wait until it answers."""
        self._simulation = simulation
        self._launch_superlink()
        self.wait_for_superlink(timeout)

    def _launch_superlink(self) -> None:
        self._write_connection(self._simulation)
        sec = self.security
        tls = (["--ssl-ca-certfile", str(sec.ca), "--ssl-certfile", str(sec.cert),
                "--ssl-keyfile", str(sec.key)] if sec.tls else ["--insecure"])  # fmt: skip
        args = [str(self.bin / "flower-superlink"), *tls, "--host", self.address,
                "--port", str(self.port), "--disable-runtime-dependency-installation"]  # fmt: skip
        if sec.node_auth:
            args.append("--enable-supernode-auth")
        if self._simulation:
            args.append("--simulation")
        poll = {} if TASK_POLL_ENV in os.environ else {TASK_POLL_ENV: str(RUN_POLL_S)}
        self._start("superlink", args, {**self.env, **poll})  # an operator's own value wins

    def start_supernode(
        self, name: str, node_config: Mapping[str, ConfigValue], *, auth_key: Path | None = None
    ) -> None:
        """Start a SuperNode named ``name`` (its log: ``<root>/<name>.log``); ``auth_key``:
        its private key (PEM) when the SuperLink authenticates SuperNodes."""
        self._supernodes[name] = (dict(node_config), auth_key)
        self._launch_supernode(name)

    def _launch_supernode(self, name: str) -> None:
        node_config, auth_key = self._supernodes[name]
        sec = self.security
        trust = ["--root-certificates", str(sec.ca)] if sec.tls else ["--insecure"]
        auth = ["--auth-supernode-private-key", str(auth_key)] if auth_key else []
        self._start(
            name,
            [str(self.bin / "flower-supernode"), *trust, *auth, "--superlink",
             f"{self.address}:{self.port}", "--port", str(free_port()),
             "--node-config", config_string(node_config)],
        )  # fmt: skip

    def _restart_on_taken_port(self, name: str, log: str) -> bool:
        """Start ``name`` again on a fresh port if it died because another process bound its
        port first (a race no port choice can exclude); False when that was not the cause or
        it already happened ``_RESTARTS`` times."""
        if PORT_IN_USE not in log.lower() or self._restarts.get(name, 0) >= _RESTARTS:
            return False
        with contextlib.suppress(ProcessLookupError, PermissionError):  # its children too
            os.killpg(self.procs[name].pid, signal.SIGKILL)
        self._reaper.forget(self.procs[name].pid)
        if name == "superlink":
            self._restarts[name] = self._restarts.get(name, 0) + 1
            self.port = free_port()
            self._launch_superlink()
            return True
        if name in self._supernodes:
            self._restarts[name] = self._restarts.get(name, 0) + 1
            self._launch_supernode(name)
            return True
        return False

    def register_node(self, public_key: Path) -> str:
        """``flwr supernode register``: admit the SuperNode holding this key's private half
        (OpenSSH-format EC public key); returns ``flwr``'s output."""
        done = subprocess.run(  # noqa: S603 - fixed executable, no shell
            [*self.prefix("flwr"), str(self.bin / "flwr"), "supernode", "register",
             str(public_key), *self._conn()],
            env=self.env, cwd=self.root, capture_output=True, text=True, timeout=300, check=False,
        )  # fmt: skip
        if done.returncode != 0:
            raise ProtocolError(
                f"flwr supernode register {public_key.name} failed: "
                f"{(done.stdout + done.stderr).strip()[-800:]}"
            )
        return done.stdout

    def _alive(self, name: str) -> None:
        proc = self.procs.get(name)
        if proc is not None and proc.poll() is not None:
            tail = (self.root / f"{name}.log").read_text(errors="replace")[-2000:]
            if self._restart_on_taken_port(name, tail):
                return
            raise ProtocolError(f"{name} exited with status {proc.returncode}:\n{tail}")

    def wait_for_superlink(self, timeout: float = 60.0) -> None:
        """Until the SuperLink's port accepts connections (probed through the prefix, e.g.
        inside its network namespace, when there is one)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            self._alive("superlink")
            if port_open(self.address, self.port, self.prefix("superlink")):
                return
            time.sleep(0.2)
        where = f"{self.address}:{self.port}"
        raise ProtocolError(f"the SuperLink did not listen on {where} in {timeout:g} s")

    def online_nodes(self) -> int:
        """SuperNodes the SuperLink lists as online (``flwr supernode list``; on a loaded
        machine one ``flwr`` call alone can take a minute, hence its long timeout)."""
        out = self.flwr(["supernode", "list", *self._conn(), "--format", "json"], timeout=180)
        try:
            nodes = json.loads(out).get("nodes", [])
        except (ValueError, AttributeError):
            return 0
        return sum(1 for n in nodes if str(n.get("status", "online")).startswith("online"))

    def wait_for_nodes(self, count: int, timeout: float = 600.0) -> None:
        """Block until ``count`` SuperNodes are online (a dead one fails at once): until the
        SuperLink's own log shows ``count`` nodes activated, read from the file this object
        writes it to. While it shows fewer, the SuperLink is also asked (:meth:`online_nodes`,
        a ``flwr`` process of about 1.1 s of CPU and 2 to 3 s of wall time) every
        ``_ASK_EVERY_S`` seconds."""
        start = time.monotonic()
        last = start
        while True:
            for name in self.procs:
                self._alive(name)
            seen = activated_nodes(self.root / "superlink.log")
            if seen >= count:
                return
            now = time.monotonic()
            if now - last >= _ASK_EVERY_S:
                last = now
                if self.online_nodes() >= count:
                    return
            if now - start > timeout:
                raise ProtocolError(f"fewer than {count} SuperNodes came online in {timeout:g} s")
            time.sleep(0.2)

    def flwr(self, args: list[str], timeout: float = 60.0) -> str:
        """Run one ``flwr`` command against this federation; its stdout ("" if it did not
        answer within ``timeout``: the callers poll, and a loaded machine can be slow)."""
        try:
            done = subprocess.run(  # noqa: S603 - fixed executable, no shell
                [*self.prefix("flwr"), str(self.bin / "flwr"), *args], env=self.env, cwd=self.root,
                capture_output=True, text=True, timeout=timeout, check=False,
            )  # fmt: skip
        except subprocess.TimeoutExpired:
            return ""
        return done.stdout

    # ------------------------------------------------------------------ runs
    def _conn(self) -> list[str]:
        return [self.connection] if self.connection else []

    def start_run(
        self, app: str | Path, run_config: Mapping[str, ConfigValue] | str
    ) -> subprocess.Popen[str]:
        """``flwr run APP local --stream --run-config ...`` (stdout and stderr merged)."""
        args = [*self.prefix("flwr"), str(self.bin / "flwr"), "run", str(app), *self._conn(),
                "--stream"]  # fmt: skip
        if run_config:
            text = run_config if isinstance(run_config, str) else config_string(run_config)
            args += ["--run-config", text]
        proc = subprocess.Popen(  # noqa: S603 - fixed executable, no shell
            args, env=self.env, cwd=self.root, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )  # fmt: skip
        self.procs[f"flwr-run-{len(self.procs)}"] = proc  # type: ignore[assignment]
        self._reaper.watch(proc.pid)
        return proc

    def run(
        self,
        app: str | Path,
        run_config: Mapping[str, ConfigValue] | str,
        *,
        timeout: float = 600.0,
        on_line: Callable[[str], None] | None = None,
    ) -> RunOutcome:
        """Run the app to its end (``timeout`` bounds the whole run) and report its status."""
        proc = self.start_run(app, run_config)
        return self.finish_run(proc, timeout=timeout, on_line=on_line)

    def finish_run(
        self,
        proc: subprocess.Popen[str],
        *,
        timeout: float = 600.0,
        on_line: Callable[[str], None] | None = None,
        lines: list[str] | None = None,
    ) -> RunOutcome:
        """Read a started run's stream to its end, then ask the SuperLink for its status."""
        deadline = time.monotonic() + timeout
        got = list(lines or [])
        if proc.stdout is None:
            raise ValueError("start the run with stdout=PIPE (LocalFederation.start_run)")
        with alarm(deadline, proc):
            for line in proc.stdout:
                got.append(line)
                if on_line is not None:
                    on_line(line.rstrip("\n"))
        if time.monotonic() > deadline:
            raise ProtocolError(f"the run did not finish in {timeout:g} s:\n{''.join(got)[-3000:]}")
        proc.wait(timeout=30)
        text = "".join(got)
        match = re.search(r"started run (\d+)", text)
        run_id = int(match.group(1)) if match else None
        return RunOutcome(run_id, self.run_status(run_id), text)

    def run_status(self, run_id: int | None, wait: float = 60.0) -> str:
        """The SuperLink's status of a run, once it is finished (``unknown`` without an id)."""
        if run_id is None:
            return "unknown"
        deadline = time.monotonic() + wait
        status = "unknown"
        while time.monotonic() < deadline:
            out = self.flwr(["ls", *self._conn(), "--run-id", str(run_id), "--format", "json"], 30)
            with contextlib.suppress(ValueError, AttributeError, IndexError, KeyError):
                status = str(json.loads(out)["runs"][0]["status"])
            if status.startswith("finished"):
                break
            time.sleep(0.5)
        return status

    # ------------------------------------------------------------------ teardown
    def kill(self, name: str) -> None:
        """Kill one process (and its children) at once."""
        proc = self.procs.get(name)
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
            self._reaper.forget(proc.pid)

    def close(self) -> None:
        """Stop everything this object started: SIGTERM, then SIGKILL after 5 s."""
        running = [p for p in self.procs.values() if p.poll() is None]
        for proc in running:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
        deadline = time.monotonic() + 5
        for proc in running:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(timeout=10)
        for log in self._logs:
            log.close()
        self._logs.clear()
        self._reaper.close()

    def __enter__(self) -> LocalFederation:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["CONNECTION", "ConfigValue", "LinkSecurity", "LocalFederation", "RunOutcome",
           "config_string", "flower_bin", "free_port"]  # fmt: skip
