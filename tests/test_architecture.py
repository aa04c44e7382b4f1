"""docs/architecture.md is held to the code: its layers, its module tables and its migrations.

A module added, moved or removed, a layer changed in ``[tool.importlinter]`` or a migration
added fails here until the page says so.
"""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "conveyor"
VERSIONS = PACKAGE / "db" / "migrations" / "versions"
PAGE = ROOT / "docs" / "architecture.md"


def _section(title: str) -> str:
    text = PAGE.read_text()
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start : end if end != -1 else len(text)]


def _contract_layers() -> list[set[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    [layers] = [c["layers"] for c in contracts if c["type"] == "layers"]
    return [
        {name.strip().removeprefix("conveyor.") for name in layer.split("|")} for layer in layers
    ]


def _page_layers() -> list[set[str]]:
    [block] = re.findall(r"```\n(.*?)```", _section("Layers"), re.DOTALL)
    return [
        {n.strip() for n in re.split(r"\s{2,}", line)[0].split("|")} for line in block.splitlines()
    ]


def test_the_layers_drawn_are_the_layers_enforced() -> None:
    """Top to bottom, the page's layer lines name the import-linter contract's layers."""
    assert _page_layers() == _contract_layers()


def test_every_top_level_module_sits_in_a_layer() -> None:
    tops = {p.stem for p in PACKAGE.glob("*.py") if p.stem != "__init__"}
    tops |= {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file()}
    placed = [name for layer in _contract_layers() for name in layer]
    assert sorted(placed) == sorted(tops)


def _code_modules() -> set[str]:
    """Every module of the package as a path below ``src/conveyor`` (``pipeline/pool.py``);
    migrations are listed apart, in the page's Migrations section."""
    return {
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if p.name != "__init__.py" and "migrations" not in p.relative_to(PACKAGE).parts
    }


def _page_modules() -> set[str]:
    """The modules of the page's tables: each ``### `folder/``` heading starts a table whose
    rows name that folder's modules (```conveyor/``` for the top level)."""
    found: set[str] = set()
    folder = None
    for line in _section("Modules").splitlines():
        heading = re.match(r"### `([\w/]+)/`", line)
        if heading:
            folder = "" if heading.group(1) == "conveyor" else heading.group(1) + "/"
        elif line.startswith("| `") and folder is not None:
            first = line.split("|")[1]
            found |= {folder + name for name in re.findall(r"`([\w.]+\.py)`", first)}
    return found


#: Folders of one module per name, found by their registry (a store per ``[storage] url``
#: scheme, a provider per ``[transcription] provider`` name): the page describes the folder and
#: what each module holds, and a row it has for one of them must name a module that exists, but a
#: new backend needs no row (the registry lists the folder, so adding a backend stays one module).
BACKEND_FOLDERS = ("objects/stores/", "providers/backends/")


def test_the_module_tables_name_every_module_and_only_modules_that_exist() -> None:
    code, page = _code_modules(), _page_modules()
    undescribed = {m for m in code - page if not m.startswith(BACKEND_FOLDERS)}
    assert sorted(undescribed) == [], "modules docs/architecture.md does not describe"
    for folder in BACKEND_FOLDERS:
        assert f"### `{folder}`" in _section("Modules"), f"no heading for {folder}"
    assert sorted(page - code) == [], "modules docs/architecture.md describes that do not exist"


def _revisions() -> list[tuple[str, str | None]]:
    found = []
    for path in sorted(VERSIONS.glob("*.py")):
        values: dict[str, str | None] = {}
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.AnnAssign | ast.Assign):
                target = node.target if isinstance(node, ast.AnnAssign) else node.targets[0]
                if isinstance(target, ast.Name) and isinstance(node.value, ast.Constant):
                    values[target.id] = node.value.value  # type: ignore[assignment]
        revision = values["revision"]
        assert revision is not None, path.name
        found.append((revision, values["down_revision"]))
    return found


def test_the_migrations_listed_are_the_chain_shipped() -> None:
    """The page lists every revision in order, each upgrading the one before it."""
    revisions = _revisions()
    chain = [revision for revision, _ in revisions]
    assert [down for _, down in revisions] == [None, *chain[:-1]]
    listed = re.findall(r"^\| `(\d{4})` \|", _section("Migrations"), re.MULTILINE)
    assert listed == chain


def test_no_script_regenerates_a_shipped_migration() -> None:
    """Every upgrade starts from a shipped revision: nothing may rewrite one from today's tables."""
    scripts = ROOT / "scripts"
    for script in scripts.iterdir():
        text = script.read_text()
        assert "autogenerate=True" not in text or "0001" not in text, script.name
        assert "versions/0001" not in text, script.name


def test_every_api_route_module_is_out_of_the_pages_reach() -> None:
    """A new ``api/routes_*.py`` joins the contract that keeps the pages off the API's routes."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    [pages] = [c for c in contracts if c.get("source_modules") == ["conveyor.web"]]
    routes = {f"conveyor.api.{p.stem}" for p in (PACKAGE / "api").glob("routes_*.py")}
    assert sorted(routes - set(pages["forbidden_modules"])) == []
