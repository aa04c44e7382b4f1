"""Statement apart from policy: SQL is built only in ``db/`` and the ``*/queries.py`` modules.

Read from each module's syntax tree, not its text (a method named ``update`` is no SQL):
elsewhere a module may import from SQLAlchemy only its types and errors (capitalised names:
``Engine``, ``Connection``, ``RowMapping``, ``IntegrityError``, and ``make_url``), never a
statement builder (``select``, ``insert``, ``update``, ``delete``, ``text``, ``func``,
``and_``...) nor the package itself, and may not call ``insert()``, ``update()``,
``delete()`` or ``select()`` on a table of ``conveyor.db.tables``. It may run what a queries
module built.
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "conveyor"
#: Not statement builders, though not capitalised.
HELPERS = frozenset({"make_url"})
TABLE_BUILDERS = frozenset({"insert", "update", "delete", "select"})


def _builds_sql(rel: Path) -> bool:
    return rel.parts[0] == "db" or rel.name == "queries.py"


def _offences(tree: ast.AST) -> list[str]:
    found = []
    tables: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "sqlalchemy" or alias.name.startswith("sqlalchemy."):
                    found.append(f"line {node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module == "sqlalchemy" or node.module.startswith("sqlalchemy."):
                if node.module == "sqlalchemy.exc":
                    continue
                for alias in node.names:
                    if alias.name[:1].islower() and alias.name not in HELPERS:
                        found.append(f"line {node.lineno}: {alias.name} from {node.module}")
            elif node.module == "conveyor.db.tables":
                tables |= {alias.asname or alias.name for alias in node.names}
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in TABLE_BUILDERS
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in tables
        ):
            found.append(f"line {node.lineno}: {node.func.value.id}.{node.func.attr}()")
    return found


def test_sql_is_built_only_in_db_and_queries_modules() -> None:
    offenders = []
    scanned = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE)
        if _builds_sql(rel):
            continue
        scanned.append(str(rel))
        offenders += [f"{rel}: {o}" for o in _offences(ast.parse(path.read_text()))]
    assert offenders == []
    # The check read the policy modules, where SQL would most likely creep in.
    assert {"pipeline/lifecycle.py", "pipeline/executor.py", "api/app.py"} <= set(scanned)


def test_the_check_sees_sql_and_only_sql() -> None:
    """It catches each kind of builder, and a method or variable named like one passes."""
    built = ast.parse(
        "import sqlalchemy as sa\n"
        "from sqlalchemy import select, Engine\n"
        "from sqlalchemy.sql import operators\n"
        "from conveyor.db.tables import files as f\n"
        "f.update().values(x=1)\n"
    )
    assert [o.split(":")[0] for o in _offences(built)] == ["line 1", "line 2", "line 3", "line 5"]
    innocent = ast.parse(
        "from sqlalchemy import Connection, RowMapping, make_url\n"
        "from sqlalchemy.exc import IntegrityError\n"
        "lines.update(3)\nsettings.select()\nupdate = 1\n"
    )
    assert _offences(innocent) == []
