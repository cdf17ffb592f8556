"""Issue 29: what a newcomer meets before running anything, checked on the files themselves
(fast, no crypto): the README's order (activate before the first ``privfl``, data made before it
is read), a README short enough to read, links that stay inside the repository and resolve,
no internal issue numbers in the user pages, a LICENSE matching pyproject, no diffprivlib and no
scikit-learn ceiling, ``make bench`` with a quick mode, and ``make help`` with the times."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"
# the pages of issue 29's documentation owner; other pages are checked by their own owners
USER_PAGES = [
    README,
    *(
        REPO / "docs" / p
        for p in (
            "index.md",
            "getting-started.md",
            "guide/metrics.md",
            "guide/dpauc.md",
            "guide/audit.md",
            "deploy/across-machines.md",
            "deploy/private-eval.md",
            "architecture.md",
            "security/index.md",
            "security/dpauc.md",
        )
    ),
    *sorted((REPO / "docs" / "api").glob("*.md")),
]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")


def code_lines(text: str) -> list[str]:
    """The lines of the page's bash and python blocks, in order."""
    return [
        line
        for lang, body in FENCE.findall(text)
        if lang in ("bash", "python")
        for line in body.splitlines()
    ]


def first(lines: list[str], pattern: str) -> int:
    return next(i for i, line in enumerate(lines) if re.search(pattern, line))


def test_the_readme_is_short_and_in_the_order_a_newcomer_pastes_it():
    text = README.read_text()
    assert len(text.splitlines()) <= 250
    lines = code_lines(text)
    activate = first(lines, r"^\. \.venv/bin/activate")
    assert activate < first(lines, r"^privfl ") and activate < first(lines, r"^python ")
    assert first(lines, r"to_csv\('scores\.csv'") < first(lines, r"scores\.csv(?!')")
    # the columns the commands name are the columns the README's data has
    made = set(re.findall(r"'(\w+)': ", text[: text.index("to_csv('scores.csv'")]))
    named = set(re.findall(r"--(?:score|label|party)-column (\w+)", text))
    assert named and named <= made, named - made


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_links_stay_inside_the_repository_and_resolve(page):
    text = page.read_text()
    # links, and paths in code spans that a reader would open ("see `../shared/X.md`")
    for target in [*LINK.findall(text), *re.findall(r"`(\.\./[^`\s]+)`", text)]:
        if re.match(r"\w+://|mailto:", target):
            continue
        path = (page.parent / target).resolve()
        assert path.is_relative_to(REPO), f"{target} points outside the repository"
        assert path.exists(), f"{target} does not exist"


@pytest.mark.parametrize("page", USER_PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_user_pages_name_no_internal_issue_numbers(page):
    found = re.findall(r"\bissues? \d+|(?<![\w&])#\d{2,}\b", page.read_text(), re.I)
    assert not found, found


def test_the_license_file_is_the_one_pyproject_declares():
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert meta["license"] == "Apache-2.0" and meta["license-files"] == ["LICENSE"]
    assert "Apache License" in (REPO / "LICENSE").read_text()[:200]


def test_no_diffprivlib_and_no_scikit_learn_ceiling():
    meta = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    deps = [
        *meta["dependencies"],
        *(d for ds in meta["optional-dependencies"].values() for d in ds),
    ]
    assert not [d for d in deps if "diffprivlib" in d]
    assert all("<" not in d for d in deps if d.startswith("scikit-learn")), deps


def test_make_bench_has_a_quick_mode_and_make_help_gives_the_times():
    makefile = (REPO / "Makefile").read_text()
    assert "$(if $(QUICK),--quick)" in makefile
    help_lines = re.findall(r'@echo "make (\S+)\s+(.*)"', makefile)
    targets = dict(help_lines)
    assert {"install", "test", "docs", "bench"} <= set(targets)
    for target in ("docs", "bench", "install"):
        assert re.search(r"\d+ (s|min)", targets[target]), targets[target]
    out = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "fhauc_semi_honest.py"), "--help"],
        capture_output=True, text=True, check=True, timeout=60,
    )  # fmt: skip
    assert "--quick" in out.stdout
