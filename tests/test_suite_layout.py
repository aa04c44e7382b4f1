"""The test suite is a package: helpers live in ``tests.support`` and are imported by full name.

No test module imports another test module (or a ``conftest``), every folder is a package, and
any subset of the test folders collects, in any order, without an error.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent


def _modules() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if "__pycache__" not in p.parts)


def _folders() -> list[Path]:
    return sorted({p.parent for p in _modules()})


def _imported(path: Path) -> list[tuple[int, str]]:
    """Each absolute module name ``path`` imports, with its line; relative imports as ``.name``."""
    found: list[tuple[int, str]] = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            found.append((node.lineno, "." * node.level + (node.module or "")))
    return found


def test_every_test_folder_is_a_package() -> None:
    missing = [str(f.relative_to(ROOT)) for f in _folders() if not (f / "__init__.py").is_file()]
    assert missing == []


def test_no_test_module_imports_another_test_module_or_a_bare_helper() -> None:
    """Helpers are imported as ``tests.support.<module>``; test modules and conftests never."""
    local = {p.stem for p in _modules()} - {"__init__"}
    wrong = []
    for path in _modules():
        for line, name in _imported(path):
            top = name.split(".")[0]
            where = f"{path.relative_to(ROOT)}:{line} imports {name}"
            if name.startswith("."):
                wrong.append(f"{where} (relative)")
            elif top in local:
                wrong.append(f"{where} (a bare name of a module in tests/)")
            elif top == "tests" and not (
                name == "tests.support" or name.startswith("tests.support.")
            ):
                wrong.append(f"{where} (only tests.support is shared)")
    assert wrong == []


def test_support_holds_no_tests() -> None:
    support = TESTS / "support"
    assert [p.name for p in support.rglob("test_*.py")] == []
    assert not (support / "conftest.py").exists()


def test_the_test_folders_collect_together_in_reverse_order() -> None:
    """Two folders whose conftests and helpers once shadowed each other, then every folder
    backwards: each collection finishes without an error."""
    folders = [str(f.relative_to(ROOT)) for f in _folders() if f not in (TESTS, TESTS / "support")]
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    collect = [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider"]
    for selection in (["tests/web", "tests/api"], sorted(folders, reverse=True)):
        done = subprocess.run(
            [*collect, *selection],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert "error" not in done.stdout.splitlines()[-1], done.stdout[-3000:]
