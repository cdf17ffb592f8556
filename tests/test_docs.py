"""Every code block of README.md and of every page in docs/ runs as written, and the site builds.

A page is run the way a reader pastes it: its ```bash blocks go, in order, into one bash
session (so ``cd``, ``export`` and ``. .venv/bin/activate`` carry over, and ``set -e`` stops at
the first failing command), its ```python blocks into one Python interpreter (one namespace
per page); both start in a fresh temporary folder that looks like a checkout (``examples/``,
``benchmarks/``, ``.venv`` are links to this repository's) with this environment's executables
first on PATH. Blocks alternate between the two interpreters in page order, so data made by a
bash block is there for the next python block. ```text, ```json, ```console, ```toml blocks
are output or file contents and are not run. A page that needs an optional extra says so in a
line ``<!-- requires: openfhe, torch -->`` and is skipped where it is not installed (Flower is
detected). A block whose fence is preceded, on the line just before, by
``<!-- not-run: REASON -->`` is skipped, and only with a non-empty reason; each such block is
listed as a skipped test with that reason. Every block must finish within a minute of CPU;
everything a page writes must be git-ignored; every process a page starts is killed at the end
(its process group), also on failure or timeout.
"""

from __future__ import annotations

import contextlib
import os
import queue
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from _shared import leftover_processes

REPO = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
DOCS = REPO / "docs"
RUN = {"bash", "python"}
OUTPUT = {"text", "json", "console", "toml", "yaml"}
# A block must finish in under a minute. Measured as CPU time (the interpreter's and that of
# every process it started and waited for), which parallel test workers and other load on
# the machine do not inflate, as the other time bounds in this suite; the wall-clock limit
# only stops a block that hangs.
BLOCK_CPU_LIMIT_S = 60.0
BLOCK_WALL_LIMIT_S = 900.0
LINKED = ("examples", "benchmarks", ".venv", "src", "pyproject.toml")


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    code: str
    not_run: str | None  # the reason, when the block carries a not-run marker


FENCE = re.compile(r"^```(\S*)\s*$")
NOT_RUN = re.compile(r"^<!--\s*not-run(?::\s*(.*?))?\s*-->\s*$")


def parse(page: str, text: str) -> list[Block]:
    """The fenced blocks of a Markdown page, in order (fences at the start of a line)."""
    lines = text.splitlines()
    out, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, lang = i, m.group(1)
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        if j == len(lines):
            raise AssertionError(f"{page}:{start + 1}: unclosed code fence")
        marker = NOT_RUN.match(lines[start - 1]) if start else None
        reason = (marker.group(1) or "").strip() if marker else None
        out.append(Block(page, start + 1, lang, "\n".join(lines[start + 1 : j]) + "\n", reason))
        i = j + 1
    return out


def pages() -> list[Path]:
    return [REPO / "README.md", *sorted(DOCS.rglob("*.md"))]


def page_id(path: Path) -> str:
    return str(path.relative_to(REPO))


def all_blocks() -> list[Block]:
    return [b for p in pages() for b in parse(page_id(p), p.read_text())]


# ----------------------------------------------------------------------------- the interpreters

PY_KERNEL = r"""
import sys, traceback
ns = {"__name__": "__main__"}
token = sys.argv[1]
for line in sys.stdin:
    path = line.strip()
    status = 0
    try:
        exec(compile(open(path).read(), path, "exec"), ns)
    except BaseException:
        traceback.print_exc()
        status = 1
    sys.stderr.flush()
    print(f"{token} {status}", flush=True)
"""


class Session:
    """One interpreter fed block by block; each block ends with a line carrying a token."""

    def __init__(self, argv: list[str], cwd: Path, env: dict[str, str], token: str) -> None:
        self.token = token
        self.proc = subprocess.Popen(
            argv, cwd=cwd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, start_new_session=True,
        )  # fmt: skip
        self.lines: queue.Queue[str | None] = queue.Queue()
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def cpu_seconds(self) -> float:
        """CPU time of the interpreter and of the children it has waited for."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rpartition(")")[2].split()
        utime, stime, cutime, cstime = (int(f) for f in fields[11:15])
        return (utime + stime + cutime + cstime) / os.sysconf("SC_CLK_TCK")

    def run(self, command: str, limit: float) -> tuple[bool, str]:
        """Send one command and collect its output until the token: (succeeded, output)."""
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(command)
            self.proc.stdin.flush()
        except BrokenPipeError:
            return False, "(the interpreter had exited)"
        out: list[str] = []
        deadline = time.monotonic() + limit
        while True:
            try:
                line = self.lines.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                return False, "".join(out) + f"\n(no end after {limit:.0f} s: timeout)"
            if line is None:
                return False, "".join(out) + "\n(the interpreter exited: a command failed)"
            if self.token in line:  # also after output that did not end its line
                before, _, status = line.partition(self.token)
                return status.split()[0] == "0", "".join([*out, before])
            out.append(line)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            assert self.proc.stdin is not None
            self.proc.stdin.close()  # bash runs its EXIT traps now
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=15)
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)  # anything the page left running
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=5)


def checkout_like(folder: Path) -> None:
    """Make ``folder`` look like the top of a checkout a reader pastes commands into."""
    for name in LINKED:
        if (REPO / name).exists():
            (folder / name).symlink_to(REPO / name)


def run_page(
    blocks: list[Block], folder: Path, outputs: list[str] | None = None
) -> list[tuple[Block, float, float]]:
    """Run the blocks in order in ``folder``: (block, wall seconds, CPU seconds) for each;
    each block's output is appended to ``outputs`` when given."""
    env = dict(os.environ, PATH=f"{BIN}:{os.environ['PATH']}", MPLBACKEND="Agg")
    for var in ("VIRTUAL_ENV", "FLWR_HOME", "PYTHONSTARTUP"):
        env.pop(var, None)
    token = "__privfl_docs_" + secrets.token_hex(8)
    sessions: dict[str, Session] = {}
    timings = []
    scripts = folder.parent / (folder.name + "-blocks")
    scripts.mkdir()
    try:
        for k, block in enumerate(blocks):
            path = scripts / f"{k}.{'sh' if block.lang == 'bash' else 'py'}"
            path.write_text(block.code)
            if block.lang not in sessions:
                argv = (
                    ["bash", "--noprofile", "--norc"]
                    if block.lang == "bash"
                    else [sys.executable, "-u", "-c", PY_KERNEL, token]
                )
                sessions[block.lang] = Session(argv, folder, env, token)
                if block.lang == "bash":
                    sessions["bash"].run(f"set -eo pipefail\necho {token} 0\n", 30)
            command = (
                f"source {path} < /dev/null\necho {token} 0\n"
                if block.lang == "bash"
                else f"{path}\n"
            )
            session = sessions[block.lang]
            started, cpu = time.monotonic(), session.cpu_seconds()
            ok, output = session.run(command, BLOCK_WALL_LIMIT_S)
            if not ok:
                raise AssertionError(
                    f"{block.page}:{block.line}: the {block.lang} block failed\n"
                    f"--- block ---\n{block.code}--- output ---\n{output[-6000:]}"
                )
            timings.append((block, time.monotonic() - started, session.cpu_seconds() - cpu))
            if outputs is not None:
                outputs.append(output)
    finally:
        for s in sessions.values():
            s.close()
    return timings


# ----------------------------------------------------------------------------- what pages leave


def check_readme_quickstart(folder: Path) -> None:
    """The quickstart's deployment: every site decrypted the AUC in-process FHAUC computes on the
    same rows, the ServerApp's log never holds it, and nothing it started is left running."""
    import json

    import pandas as pd

    import privfl

    res = json.loads((folder / "local.json").read_text())
    jsonschema = pytest.importorskip("jsonschema")
    from privfl.cli.schemas import schema

    jsonschema.validate(res, schema("cli.flower.local"))  # what `flower local --json` wrote
    df = pd.read_csv(folder / "scores.csv")
    parts = [(g.score.to_numpy(), g.label.to_numpy()) for _, g in df.groupby("site")]
    expected = privfl.federated_auc(parts, 100).auc
    assert set(res["parties"]) == {"site-a", "site-b", "site-c"}
    for r in res["parties"].values():
        assert r["auc"] == pytest.approx(expected, abs=1e-6)
        assert r["security"] == "semi-honest"
    workdir = Path(res["workdir"])
    try:
        assert not workdir.is_relative_to(REPO) and not (folder / "keys").exists()
        log = (workdir / "run.log").read_text()
        assert "fhauc: done" in log and f"{expected:.6f}"[:8] not in log  # never the AUC
        assert leftover_processes(str(workdir)) == []
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def check_simulation(folder: Path) -> None:
    """The simulation: one result per virtual party, all with the same AUC, SuperLink stopped."""
    import json

    aucs = [json.loads(f.read_text())["auc"] for f in (folder / "results").glob("*.json")]
    assert len(aucs) == 10 and len(set(aucs)) == 1
    assert leftover_processes(str(folder)) == []


PAGE_CHECKS = {"README.md": check_readme_quickstart, "docs/deploy/fhauc.md": check_simulation}


# ----------------------------------------------------------------------------- the tests


def runnable(page: Path) -> list[Block]:
    """The blocks of a page the runner executes, in order."""
    blocks = parse(page_id(page), page.read_text())
    return [b for b in blocks if b.lang in RUN and b.not_run is None]


def runnable_pages() -> list[Path]:
    return [p for p in pages() if runnable(p)]


REQUIRES = re.compile(r"^<!--\s*requires:\s*([\w, ]+?)\s*-->\s*$", re.M)


def requirements(page: Path) -> list[str]:
    """The optional modules a page needs: ``<!-- requires: openfhe, torch -->`` lines, and
    Flower for a page that runs it."""
    named = [m.strip() for found in REQUIRES.findall(page.read_text()) for m in found.split(",")]
    return [*named, *(["flwr"] if uses_flower(page) else [])]


def uses_flower(page: Path) -> bool:
    return any(re.search(r"\bflwr\b|\bflower[ -]", b.code) for b in runnable(page))


PAGE_PARAMS = [
    pytest.param(p, id=page_id(p), marks=[pytest.mark.flower] if uses_flower(p) else [])
    for p in runnable_pages()
]


@pytest.mark.parametrize("page", PAGE_PARAMS)
def test_every_code_block_of_the_page_runs_as_written(page: Path, tmp_path: Path) -> None:
    for module in requirements(page):
        pytest.importorskip(module)  # an optional extra this installation lacks
    blocks = runnable(page)
    folder = tmp_path / "work"
    folder.mkdir()
    checkout_like(folder)
    timings = run_page(blocks, folder)
    for block, wall, cpu in timings:
        print(f"{block.page}:{block.line} {block.lang}: {wall:.1f} s wall, {cpu:.1f} s CPU")
    slow = [f"{b.page}:{b.line} ({cpu:.0f} s)" for b, _, cpu in timings if cpu > BLOCK_CPU_LIMIT_S]
    assert not slow, "blocks over a minute of CPU: make them smaller or mark them not-run"
    assert not_ignored(folder) == [], "add what the page writes to .gitignore"
    if check := PAGE_CHECKS.get(page_id(page)):
        check(folder)
    shutil.rmtree(folder, ignore_errors=True)


def not_ignored(folder: Path) -> list[str]:
    """What a page wrote at the top of its folder that git would not ignore at the top of the
    checkout (the commands are pasted there)."""
    written = [
        p.name + ("/" if p.is_dir() and not p.is_symlink() else "")
        for p in folder.iterdir()
        if p.name not in LINKED
    ]
    if not written:
        return []
    done = subprocess.run(
        ["git", "check-ignore", "--no-index", "--verbose", "--non-matching", "--stdin"],
        cwd=REPO, input="\n".join(written) + "\n", capture_output=True, text=True,
    )  # fmt: skip
    return [line.split("\t")[-1] for line in done.stdout.splitlines() if line.startswith("::")]


NOT_RUN_BLOCKS = [b for b in all_blocks() if b.not_run is not None]


@pytest.mark.parametrize(
    "block", NOT_RUN_BLOCKS or [None], ids=lambda b: f"{b.page}:{b.line}" if b else "none"
)
def test_blocks_marked_not_run_are_listed_with_their_reason(block: Block | None) -> None:
    if block is None:
        return
    assert block.not_run, f"{block.page}:{block.line}: a not-run marker needs a reason"
    assert block.lang in RUN, f"{block.page}:{block.line}: not-run on a block that never runs"
    pytest.skip(f"{block.page}:{block.line} not-run: {block.not_run}")


def test_every_fence_names_a_known_language() -> None:
    known = RUN | OUTPUT
    unknown = [f"{b.page}:{b.line} ({b.lang or '-'})" for b in all_blocks() if b.lang not in known]
    assert not unknown, "name bash/python (run) or text/json/console/toml (output): " + ", ".join(
        unknown
    )


def test_the_parser_reads_markers_and_languages() -> None:
    text = (
        "x\n```bash\necho 1\n```\n<!-- not-run: needs two machines -->\n```python\n"
        "print(1)\n```\n<!-- not-run: -->\n```bash\nfalse\n```\n```text\nout\n```\n"
    )
    got = [(b.lang, b.line, b.not_run, b.code) for b in parse("p", text)]
    assert got == [
        ("bash", 2, None, "echo 1\n"),
        ("python", 6, "needs two machines", "print(1)\n"),
        ("bash", 10, "", "false\n"),
        ("text", 13, None, "out\n"),
    ]


def test_the_runner_fails_on_a_failing_block_and_keeps_state(tmp_path: Path) -> None:
    ok = [
        Block("p", 1, "bash", "export GREETING=hi\ncd sub 2>/dev/null || mkdir sub\n", None),
        Block("p", 2, "bash", 'echo "$GREETING" > out.txt\n', None),
        Block("p", 3, "python", "x = open('out.txt').read().strip()\n", None),
        Block("p", 4, "python", "if x != 'hi': raise SystemExit(1)\n", None),
        Block("p", 5, "python", "print('no newline', end='')\n", None),
        Block("p", 6, "bash", "printf 'no newline'\n", None),
    ]
    folder = tmp_path / "w"
    folder.mkdir()
    timings = run_page(ok, folder)
    assert len(timings) == 6 and all(cpu >= 0 for _, _, cpu in timings)
    for bad in ("false\necho never\n", "ls /nonexistent | cat\n"):
        folder = tmp_path / f"w{len(bad)}"
        folder.mkdir()
        with pytest.raises(AssertionError, match="the bash block failed"):
            run_page([Block("p", 1, "bash", bad, None)], folder)
    folder = tmp_path / "wcpu"
    folder.mkdir()
    spin = "python -c 'import time\nwhile time.process_time() < 1: pass'\n"
    [(_, _, cpu)] = run_page([Block("p", 1, "bash", spin, None)], folder)
    assert cpu >= 0.9  # a child's CPU time is counted
    folder = tmp_path / "wpy"
    folder.mkdir()
    with pytest.raises(AssertionError, match="ZeroDivisionError"):
        run_page([Block("p", 1, "python", "1 / 0\n", None)], folder)


def test_the_gitignore_check_sees_unignored_files(tmp_path: Path) -> None:
    (tmp_path / "scores.csv").write_text("x\n")
    (tmp_path / "keys").mkdir()
    assert not_ignored(tmp_path) == []
    (tmp_path / "notes.txt").write_text("x\n")
    (tmp_path / "newdir").mkdir()
    assert sorted(not_ignored(tmp_path)) == ["newdir/", "notes.txt"]


def test_the_docs_site_builds_with_warnings_as_errors(tmp_path: Path) -> None:
    """What ``make docs`` runs: mkdocs-material and mkdocstrings (the ``docs`` extra)."""
    done = subprocess.run(
        [str(BIN / "mkdocs"), "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "site" / "index.html").is_file()
