"""Repository-wide guards."""

import re
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "privfl"

# numpy's generator is allowed only for non-secret purposes (data splits, simulations),
# and each such line must say "not secret" in a comment.


def insecure_lines(text: str) -> list[int]:
    """Line numbers that draw randomness from `random` or numpy without saying why."""
    out = []
    for lineno, line in enumerate(text.splitlines(), 1):
        std_random = re.search(r"^\s*(import random\b|from random import)", line)
        numpy_random = "np.random" in line or "default_rng" in line
        if std_random or (numpy_random and "not secret" not in line):
            out.append(lineno)
    return out


def test_no_secret_value_comes_from_random_or_numpy_default_generator():
    offenders = [
        f"{path}:{n}" for path in SRC.rglob("*.py") for n in insecure_lines(path.read_text())
    ]
    assert not offenders, "insecure randomness in library code: " + ", ".join(offenders)


def test_the_randomness_guard_flags_violations():
    assert insecure_lines("import random\nx = 1") == [1]
    assert insecure_lines("x = 1\nmask = np.random.randint(0, 10)") == [2]
    assert insecure_lines("g = np.random.default_rng()") == [1]
    assert insecure_lines("g = np.random.default_rng(seed)  # not secret: a data split") == []


def test_library_code_does_not_print():
    offenders = [
        f"{p}:{i}"
        for p in SRC.rglob("*.py")
        if "cli" not in p.parts and "benchmarks" not in str(p)
        for i, line in enumerate(p.read_text().splitlines(), 1)
        if re.match(r"\s*print\(", line)
    ]
    assert not offenders


def test_protocol_code_never_imports_flower():
    for path in (SRC / "evaluation").rglob("*.py"):
        assert "flwr" not in path.read_text(), path
