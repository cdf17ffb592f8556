"""privfl without OpenFHE: every module imports, threshold features name the extra."""

import subprocess
import sys
import textwrap
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def _run_without_openfhe(code: str) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter where ``import openfhe`` fails."""
    prelude = "import sys\nsys.modules['openfhe'] = None  # import openfhe -> ImportError\n"
    return subprocess.run(
        [sys.executable, "-c", prelude + textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=300,
        env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"},
    )


def test_every_privfl_module_imports_without_openfhe():
    out = _run_without_openfhe(
        """
        import importlib, pkgutil
        import privfl
        names = [m.name for m in pkgutil.walk_packages(privfl.__path__, "privfl.")]
        for name in names:
            importlib.import_module(name)
        assert "privfl.crypto.threshold" in names and "privfl.threshold.party" in names
        print(len(names))
        """
    )
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.split()[-1]) > 30


def test_using_threshold_ckks_without_openfhe_raises_input_error_naming_the_extra():
    out = _run_without_openfhe(
        """
        from privfl.errors import InputError
        from privfl.crypto.threshold import require_openfhe
        from privfl.threshold import make_roles
        for call in (lambda: make_roles("test", 3), require_openfhe):
            try:
                call()
            except InputError as exc:
                assert "privfl[threshold]" in str(exc), exc
            else:
                raise AssertionError("no InputError")
        print("ok")
        """
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
