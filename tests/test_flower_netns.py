"""A deployment that looks like separate machines: the SuperLink and each SuperNode in its own
network namespace, joined by veth pairs to a bridge in the SuperLink's namespace, addresses
from the benchmarking range 198.18.0.0/15 that this test assigns inside its own namespaces and
removes with them. TLS with a CA and a server certificate made here with ``cryptography``,
SuperNode authentication with one registered key per node, no ``--insecure`` anywhere; a rogue
SuperNode whose key was never registered is refused. Traffic goes only to addresses this test
created (or to each namespace's own loopback). The same deployment also serves the
launcher's checks: before the session, the SuperExecs' poll intervals; after its verdict, a
failed run reported with status 1 by ``privfl flower run``, and a party's SuperNode killed
after the join stopping the run with an error naming it, no result written (one federation
for all of it: each federation's SuperLink, SuperNodes and SuperExecs cost about 12 s of CPU,
issue 31). Those checks need OpenFHE here, as the whole module does (the deployment runs
threshold keys); ``make install`` installs it when its wheel folder holds the OpenFHE wheel.

Without the rights to create namespaces the test skips with the reason, and the loopback
variant (the same TLS and authentication on 127.0.0.1) runs instead.
"""

from __future__ import annotations

import datetime
import ipaddress
import json
import os
import secrets
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytestmark = pytest.mark.flower
pytest.importorskip("flwr")
pytest.importorskip("openfhe")  # the deployment runs threshold keys

from cryptography import x509  # noqa: E402
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import NameOID  # noqa: E402

from _shared import act_at_line  # noqa: E402
from privfl.evaluation.fhauc.policy import Security  # noqa: E402
from privfl.evaluation.fhauc.reveal import Reveal, RevealedCurve  # noqa: E402
from privfl.evaluation.metric_reference import binned_reference  # noqa: E402
from privfl.federation.flower.local import LinkSecurity, LocalFederation  # noqa: E402
from privfl.federation.flower.quickstart import APP_PYPROJECT, local_policy  # noqa: E402
from privfl.federation.provisioning import provision  # noqa: E402

# Two parties, the fewest FHAUC accepts: every extra node costs a SuperNode, its SuperExec and
# a fresh ClientApp process per round (issue 31); TLS, authentication and the rogue do not
# depend on the number of parties.
PARTIES = ("site-a", "site-b")
BIN = Path(sys.executable).parent
LINK_ADDRESS = "198.18.0.1"
SUBNET = ipaddress.ip_network("198.18.0.0/24")


# ---------------------------------------------------------------- certificates and keys
def _name(text: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, text)])


def make_tls(folder: Path, address: str) -> LinkSecurity:
    """A CA and a SuperLink certificate for ``address`` (its IP in the SAN), signed by it."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = (
        x509.CertificateBuilder().subject_name(_name("privfl test CA")).issuer_name(_name(
            "privfl test CA")).public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number()).not_valid_before(now)
        .not_valid_after(now + datetime.timedelta(hours=2))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder().subject_name(_name("superlink")).issuer_name(ca.subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now).not_valid_after(now + datetime.timedelta(hours=2))
        .add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address(address)), x509.DNSName("superlink")]
        ), critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    folder.mkdir(parents=True, exist_ok=True)
    pem = serialization.Encoding.PEM
    (folder / "ca.pem").write_bytes(ca.public_bytes(pem))
    (folder / "server.pem").write_bytes(cert.public_bytes(pem))
    (folder / "server.key").write_bytes(key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ))  # fmt: skip
    return LinkSecurity(folder / "ca.pem", folder / "server.pem", folder / "server.key", True)


def make_node_key(folder: Path, name: str) -> tuple[Path, Path]:
    """A SuperNode's authentication key pair (EC P-256, OpenSSH format, as Flower reads it)."""
    key = ec.generate_private_key(ec.SECP256R1())
    private, public = folder / f"{name}-auth", folder / f"{name}-auth.pub"
    private.write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
        serialization.NoEncryption(),
    ))  # fmt: skip
    private.chmod(0o600)
    public.write_bytes(key.public_key().public_bytes(
        serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
    ))  # fmt: skip
    return private, public


# ---------------------------------------------------------------- namespaces
def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


class Namespaces:
    """``link`` (the SuperLink's, holding bridge ``br0`` at 198.18.0.1/24) and one namespace
    per node, each joined to the bridge by a veth pair, address 198.18.0.(10+i)/24."""

    def __init__(self, nodes: list[str]) -> None:
        tag = secrets.token_hex(3)
        self.link = f"privfl-{tag}-link"
        self.of = {name: f"privfl-{tag}-n{i}" for i, name in enumerate(nodes)}
        self.created: list[str] = []

    def create(self) -> None:
        _ip("netns", "add", self.link)
        self.created.append(self.link)
        _ip("-n", self.link, "link", "set", "lo", "up")
        _ip("-n", self.link, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.link, "addr", "add", f"{LINK_ADDRESS}/24", "dev", "br0")
        _ip("-n", self.link, "link", "set", "br0", "up")
        for i, ns in enumerate(self.of.values()):
            _ip("netns", "add", ns)
            self.created.append(ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", self.link, "link", "add", f"v{i}", "type", "veth", "peer", "name", "eth0",
                "netns", ns)  # fmt: skip
            _ip("-n", self.link, "link", "set", f"v{i}", "master", "br0", "up")
            _ip("-n", ns, "addr", "add", f"{SUBNET[10 + i]}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")

    def remove(self) -> None:
        for ns in reversed(self.created):
            subprocess.run(["ip", "netns", "del", ns], check=False, capture_output=True)
        self.created.clear()

    def prefix(self) -> Callable[[str], list[str]]:
        def wrap(name: str) -> list[str]:
            return ["ip", "netns", "exec", self.of.get(name, self.link)]

        return wrap


def namespaces_unavailable() -> str | None:
    """Why this machine cannot run the namespace test (None: it can)."""
    if sys.platform != "linux" or os.geteuid() != 0:
        return "network namespaces need Linux and root"
    probe = Namespaces(["probe"])
    try:
        probe.create()
    except (OSError, subprocess.SubprocessError) as exc:
        err = getattr(exc, "stderr", b"") or b""
        return f"cannot create network namespaces here: {exc} {err.decode(errors='replace')}"
    finally:
        probe.remove()
    return None


# ---------------------------------------------------------------- the deployment
THRESHOLDS = 10  # N: small and fast; the keys, security and reveal are what users run


def _provision(root: Path) -> tuple[dict[str, Path], RevealedCurve]:
    """The hardest combination: threshold keys (the default 128-bit parameter set), a
    malicious aggregator, the curve reveal; provisioned as ``privfl flower local`` does."""
    rng = np.random.default_rng(3)
    parts, files = [], {}
    for name in PARTIES:
        y = rng.integers(0, 2, 200)
        s = np.clip(0.35 * y + 0.65 * rng.random(200), 0, 1)
        files[name] = root / "data" / f"{name}.csv"
        files[name].parent.mkdir(parents=True, exist_ok=True)
        pd.DataFrame({"score": s, "label": y}).to_csv(files[name], index=False)
        parts.append((s, y))
    labels = [y for _, y in parts]
    policy = local_policy(labels, Security.MALICIOUS, "threshold", THRESHOLDS, Reveal.CURVE)
    provision(list(PARTIES), root / "keys", policy, keys="threshold")
    (root / "app").mkdir()
    (root / "app" / "pyproject.toml").write_text(APP_PYPROJECT)
    return files, binned_reference(parts, THRESHOLDS)


def check_launcher_choices(fed: LocalFederation) -> None:
    """The SuperExecs poll for tasks every 0.25 s on the nodes (a round waits for it), every
    1 s (Flower's default) beside the SuperLink, whose SuperExec only picks up runs; the nodes
    were found up without a ``flwr supernode list`` (1.1 s of CPU each): the SuperLink's log."""
    assert "ListNodes" not in (fed.root / "superlink.log").read_text()
    polls = {
        name: dict(
            v.split(b"=", 1) for v in Path(f"/proc/{fed.procs[name].pid}/environ")
            .read_bytes().split(b"\0") if b"=" in v
        ).get(b"FLWR_SUPEREXEC_TASK_POLL_INTERVAL")
        for name in ("superlink", *PARTIES)
    }  # fmt: skip
    assert polls == {"superlink": b"1.0", **{p: b"0.25" for p in PARTIES}}, polls


def kill_a_party_mid_session(fed: LocalFederation, root: Path) -> None:
    """Two failing runs on the running deployment. ``flwr run`` exits 0 on a failed run;
    ``privfl flower run`` reports it with status 1 and the ServerApp's error. Then a party's
    SuperNode killed after the join round (which maps parties to nodes) stops the run with an
    error naming it as silent (no reply in time, or Flower's "Node Unavailable"), not as a
    node that refused; the caller checks that no party wrote a result."""
    bad = subprocess.run(
        [*fed.prefix("flwr"), str(BIN / "privfl"), "flower", "run", str(root / "app"), "local",
         "--json", "--run-config", f"aggregator-keys='{root / 'missing'}'"],
        env=fed.env, cwd=root, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert bad.returncode == 1, bad.stdout + bad.stderr
    report = json.loads(bad.stdout)
    assert report["status"] == "finished:failed" and "not found" in " ".join(report["errors"])

    proc = fed.start_run(root / "app", {
        "aggregator-keys": str(root / "keys" / "aggregator"), "thresholds": THRESHOLDS,
        "keys": "threshold", "security": "malicious", "reveal": "curve",
        "timeout": 60.0, "step-pause": 8.0,  # 60 s: a join under load, threshold keys
    })  # fmt: skip
    # the join maps the parties to nodes; one is killed after it
    lines = act_at_line(proc, "join round complete", 180, lambda: fed.kill("site-b"))
    outcome = fed.finish_run(proc, timeout=180, lines=lines)
    assert "join round complete" in outcome.log, outcome.log
    assert not outcome.ok and outcome.status == "finished:failed", outcome.status
    errors = outcome.errors()
    silent = [e for e in errors if "no reply from" in e and "site-b" in e]
    silent += [e for e in errors if "site-b" in e and "Node Unavailable" in e]
    assert silent, outcome.log


def run_authenticated_deployment(
    root: Path, address: str, prefix: Callable[[str], list[str]] | None
) -> None:
    """TLS + node authentication: two registered parties run FHAUC (threshold keys,
    malicious security, curve reveal), a rogue node with an unregistered key is refused;
    every check of the module docstring; each party's verified curve equals the binned
    reference within 1e-6, and the ServerApp's log holds no result (every node generated
    its own key share in the run: the aggregator's folder holds no key bundle)."""
    files, expected = _provision(root)
    security = make_tls(root / "tls", address)
    keys = {name: make_node_key(root / "tls", name) for name in (*PARTIES, "rogue")}
    with LocalFederation(root, address=address, security=security, prefix=prefix) as fed:
        fed.start_superlink(timeout=300)
        for name in PARTIES:
            fed.register_node(keys[name][1])
        for name in PARTIES:
            fed.start_supernode(name, {
                "keys-dir": str(root / "keys" / name), "data-file": str(files[name]),
                "output-dir": str(root / "results" / name), "reveals": "curve",
            }, auth_key=keys[name][0])  # fmt: skip
        fed.wait_for_nodes(len(PARTIES), timeout=180)
        check_launcher_choices(fed)
        # the rogue: a valid-looking SuperNode whose key the operator never registered; it
        # tries while the registered parties run FHAUC (it gives up in its own time)
        fed.start_supernode("rogue", {"keys-dir": str(root / "keys" / "site-a"),
                                      "data-file": str(files["site-a"])},
                            auth_key=keys["rogue"][0])  # fmt: skip
        assert all("--insecure" not in p.args for p in fed.procs.values())
        outcome = fed.run(root / "app", {
            "aggregator-keys": str(root / "keys" / "aggregator"), "thresholds": THRESHOLDS,
            "keys": "threshold", "security": "malicious", "reveal": "curve",
        }, timeout=300)  # fmt: skip
        assert outcome.ok, outcome.log[-3000:]
        assert f"{expected.auc():.6f}"[:8] not in outcome.log  # the ServerApp never sees it
        assert fed.procs["rogue"].wait(timeout=120) != 0  # refused: it gave up
        assert fed.online_nodes() == len(PARTIES)
        rogue_log = (root / "rogue.log").read_text(errors="replace")
        assert "SuperNode ID" not in rogue_log and "Failed to activate" in rogue_log, rogue_log
        assert not (root / "keys" / "aggregator" / "bundle.bin").exists()  # nothing secret
        written = {}
        for name in PARTIES:
            (found,) = (root / "results" / name).glob("fhauc-*.json")
            written[name] = found.name
            result = json.loads(found.read_text())
            assert result["verified"] is True and result["security"] == "malicious"
            assert result["curve"]["tp"] == pytest.approx(list(expected.tp), abs=1e-6)
            assert result["curve"]["fp"] == pytest.approx(list(expected.fp), abs=1e-6)
            assert result["auc"] == pytest.approx(expected.auc(), abs=1e-6)
        # then, on the same deployment, the failures (after the verdict on the session above)
        kill_a_party_mid_session(fed, root)
        after = {name: sorted(f.name for f in (root / "results" / name).glob("*.json"))
                 for name in PARTIES}  # fmt: skip
        assert after == {name: [f] for name, f in written.items()}, "a failed run wrote a result"
        assert not (root / "keys" / "aggregator" / "bundle.bin").exists()


@pytest.fixture(scope="module")
def netns_reason() -> str | None:
    return namespaces_unavailable()


def test_fhauc_across_namespaces_with_tls_and_node_authentication(tmp_path, netns_reason):
    if netns_reason:
        pytest.skip(netns_reason)
    spaces = Namespaces([*PARTIES, "rogue"])
    try:
        spaces.create()
        run_authenticated_deployment(tmp_path, LINK_ADDRESS, spaces.prefix())
    finally:
        spaces.remove()
    listed = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert spaces.link not in listed  # nothing of the test's network is left


def test_fhauc_on_loopback_with_tls_and_node_authentication(tmp_path, netns_reason):
    if not netns_reason:
        pytest.skip("namespaces work here: the namespace test covers TLS and authentication")
    run_authenticated_deployment(tmp_path, "127.0.0.1", None)
