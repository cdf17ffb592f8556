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


# ----------------------------------------------------------------------------- layering
# ARCHITECTURE §1: crypto imports nothing of privfl but errors/messages; the protocol packages
# import crypto and the core modules, never federation/, studies/ or cli/; federation imports
# the protocols; studies the library; cli anything. Units are core modules or packages.
CORE = {"errors", "messages", "runner", "_typing", "datasets", "progress"}
PROTOCOLS = {"evaluation", "forest", "training", "audit"}
ALLOWED: dict[str, set[str] | None] = {
    "errors": set(),
    "_typing": set(),
    "runner": {"progress"},
    "progress": set(),
    "messages": {"errors"},
    "datasets": {"errors", "_typing"},
    "crypto": {"errors", "messages", "_typing"},
    # threshold CKKS roles and drivers (ThresholdParty, ThresholdServer, run_*): protocol code
    # shared by evaluation (threshold FHAUC) and training (SmartCryptNN), so it sits between
    # crypto (primitives only) and the protocols, importing neither protocol
    "threshold": CORE | {"crypto"},
    **{p: CORE | {"crypto", "threshold"} | PROTOCOLS for p in PROTOCOLS},
    "federation": CORE | {"crypto", "threshold"} | PROTOCOLS,
    "studies": CORE | {"crypto", "threshold", "federation"} | PROTOCOLS,
    "cli": None,  # anything
    "metrics": {"evaluation"},  # the privfl.metrics facade (issue 18)
}


def unit(module: str) -> str:
    """'privfl.crypto.ckks' -> 'crypto', 'privfl.errors' -> 'errors', 'privfl' -> ''."""
    return module.split(".")[1] if "." in module else ""


def privfl_imports(path: Path) -> set[str]:
    """Every privfl module a file imports (top level or inside functions)."""
    import ast

    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("privfl")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("privfl"):
            found.add(str(node.module))
    return found


def module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    return ".".join(p for p in rel.parts if p != "__init__")


def unit_edges() -> dict[str, set[str]]:
    """unit -> the other units its modules import (the facade privfl/__init__ excluded)."""
    graph: dict[str, set[str]] = {}
    for path in SRC.rglob("*.py"):
        src = unit(module_name(path))
        if not src:
            continue
        targets = {unit(t) for t in privfl_imports(path)} - {src, ""}
        graph.setdefault(src, set()).update(targets)
    return graph


def layering_violations(graph: dict[str, set[str]]) -> list[str]:
    out = []
    for src, targets in graph.items():
        allowed = ALLOWED.get(src, set())
        if allowed is not None:
            out += [f"{src} imports {t}" for t in sorted(targets - allowed)]
    return out


def test_imports_follow_the_layering():
    violations = layering_violations(unit_edges())
    assert not violations, "layering violations:\n" + "\n".join(violations)


def test_nothing_but_the_cli_imports_studies_or_the_cli():
    offenders = [
        f"{src} imports {t}"
        for src, targets in unit_edges().items()
        for t in targets
        if t in ("cli", "studies") and src != "cli"
    ]
    assert not offenders, offenders


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}

    def visit(node: str, path: list[str]) -> list[str] | None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return [*path, node, nxt]
            if state.get(nxt) is None and (cycle := visit(nxt, [*path, node])):
                return cycle
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node, [])):
            return cycle
    return None


def test_the_packages_form_no_cycle():
    cycle = find_cycle(unit_edges())
    assert cycle is None, "package cycle: " + " -> ".join(cycle or [])


def test_the_layering_checks_can_fail():
    assert layering_violations({"crypto": {"evaluation"}}) == ["crypto imports evaluation"]
    assert layering_violations({"evaluation": {"federation", "cli"}}) == [
        "evaluation imports cli",
        "evaluation imports federation",
    ]
    assert find_cycle({"a": {"b"}, "b": {"a"}}) == ["a", "b", "a"]


def test_no_library_module_is_over_400_lines():
    """Small, readable modules (issue 15): a file over 400 lines holds more than one job."""
    long = {
        str(p.relative_to(SRC)): n
        for p in SRC.rglob("*.py")
        if (n := len(p.read_text().splitlines())) > 400
    }
    assert not long, f"split these modules: {long}"


def assert_lines(text: str) -> list[int]:
    """Line numbers of ``assert`` statements (``python -O`` strips them: a state or input
    check written as an assert silently disappears)."""
    return [i for i, line in enumerate(text.splitlines(), 1) if re.match(r"\s*assert\b", line)]


def test_library_code_checks_state_with_errors_not_asserts():
    offenders = [f"{p}:{n}" for p in SRC.rglob("*.py") for n in assert_lines(p.read_text())]
    assert not offenders, "raise a typed privfl error instead of assert: " + ", ".join(offenders)


def test_the_assert_guard_flags_violations():
    assert assert_lines("x = 1\n    assert x is not None\nasserted = 2") == [2]


# ------------------------------------------------------------------ issue 27: one engine
def top_level_imports(path: Path) -> set[str]:
    """The privfl modules a file imports when it is imported (module level only: imports
    inside functions and ``if TYPE_CHECKING:`` blocks run later or never). ``from pkg import
    name`` counts as an import of ``pkg.name`` when that is a module, else of ``pkg``."""
    import ast

    found: set[str] = set()
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("privfl")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("privfl"):
            base = str(node.module)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if module_path(sub) is not None else base)
    return found


def module_path(module: str) -> Path | None:
    rel = Path(*module.split(".")[1:])
    for candidate in (SRC / rel.with_suffix(".py"), SRC / rel / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def module_edges() -> dict[str, set[str]]:
    """module -> the privfl modules it imports at module level."""
    return {
        module_name(path): top_level_imports(path) - {module_name(path)}
        for path in SRC.rglob("*.py")
    }


def test_no_module_level_import_cycle():
    """No two modules import each other, even through others (not only between packages):
    a cycle makes the import order matter and hides a layering mistake."""
    cycle = find_cycle(module_edges())
    assert cycle is None, "module import cycle: " + " -> ".join(cycle or [])


def class_creation_lines(text: str) -> list[int]:
    """Lines that build a class at run time (``type(name, bases, dict)``,
    ``types.new_class``), an object without its constructor (``object.__new__``) or graft
    one object's state or class onto another (``x.__dict__.update(...)``,
    ``x.__class__ = ...``)."""
    import ast

    out = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Call):
            f = node.func
            three_arg_type = isinstance(f, ast.Name) and f.id == "type" and len(node.args) == 3
            new = isinstance(f, ast.Attribute) and f.attr == "__new__"
            new = new and isinstance(f.value, ast.Name) and f.value.id == "object"
            new_class = isinstance(f, ast.Attribute) and f.attr == "new_class"
            graft = isinstance(f, ast.Attribute) and f.attr == "update"
            graft = graft and isinstance(f.value, ast.Attribute) and f.value.attr == "__dict__"
            if three_arg_type or new or new_class or graft:
                out.append(node.lineno)
        elif isinstance(node, ast.Assign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            swapped = any(
                isinstance(t, ast.Attribute) and t.attr in ("__class__", "__dict__")
                for t in targets
            )
            if swapped:
                out.append(node.lineno)
    return out


def test_library_code_creates_no_class_at_run_time():
    offenders = [f"{p}:{n}" for p in SRC.rglob("*.py") for n in class_creation_lines(p.read_text())]
    assert not offenders, "compose roles instead of building classes: " + ", ".join(offenders)


def test_the_one_engine_guards_can_fail():
    assert class_creation_lines("C = type('C', (A, B), {})\nx = object.__new__(C)") == [1, 2]
    assert class_creation_lines("t = type(x)") == []
    grafts = "C = types.new_class('C', (A,))\nx.__dict__.update(y.__dict__)\nx.__class__ = B"
    assert sorted(class_creation_lines(grafts)) == [1, 2, 3]
    assert class_creation_lines("x.__dict__ |= y.__dict__\nd.update(e)") == [1]
    assert find_cycle({"a.b": {"a.c"}, "a.c": {"a.b"}}) == ["a.b", "a.c", "a.b"]


def type_ignore_lines(text: str) -> list[int]:
    """Lines silencing the type checker (``# type: ignore``): how a stand-in object was once
    swapped for a ciphertext context in evaluation/ (a key backend is composed instead)."""
    import io
    import tokenize

    tokens = tokenize.generate_tokens(io.StringIO(text).readline)
    comments = (t for t in tokens if t.type == tokenize.COMMENT)
    return [t.start[0] for t in comments if "type:" in t.string and "ignore" in t.string]


def test_protocol_code_needs_no_type_ignore():
    offenders = [
        f"{p}:{n}"
        for p in (SRC / "evaluation").rglob("*.py")
        for n in type_ignore_lines(p.read_text())
    ]
    assert not offenders, "no stand-ins under type: ignore in evaluation/: " + ", ".join(offenders)


def test_the_type_ignore_guard_flags_violations():
    assert type_ignore_lines("x = f()  # type: ignore[assignment]\ny = 1\n") == [1]
    assert type_ignore_lines('s = "# type: ignore"\n') == []


def key_mode_leaks(modules: dict[str, set[str]], engine: tuple[str, ...]) -> list[str]:
    """The ``engine`` modules that import a key mode's own modules (threshold FHAUC, threshold
    CKKS or the single-key backend) at module level: the one party and the one schedule must
    reach keys only through their backend interfaces."""
    modes = (
        "privfl.evaluation.fhauc.threshold",
        "privfl.crypto.threshold",
        "privfl.threshold",
        "privfl.crypto.ckks",
    )
    return [
        f"{m} imports {t}"
        for m in engine
        for t in sorted(modules.get(m, set()))
        if t.startswith(modes)
    ]


def test_the_one_party_and_its_key_interface_know_no_key_mode():
    """``Party`` and ``PartyKeys`` are composed with a backend chosen by the role builder: they
    import no key mode (the single-key default backend is the one name the party knows)."""
    engine = ("privfl.evaluation.fhauc.party", "privfl.evaluation.fhauc.party_keys")
    leaks = key_mode_leaks(module_edges(), engine)
    assert not leaks, "key mode in the party engine: " + ", ".join(leaks)
    assert key_mode_leaks({"a": {"privfl.crypto.threshold.params"}}, ("a",)) == [
        "a imports privfl.crypto.threshold.params"
    ]
