"""The docs match the code, both ways, generated from the code so that what is added is checked:
every configuration key, CLI command, option, default and exit code; every HTTP route, status,
error code and album event kind; every halt reason with its way forward; every command line
quoted anywhere in the docs; every link between the pages."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel
from typer.core import TyperOption

from conveyor.cli.exits import ExitCode
from conveyor.config import Settings, provider_sections
from conveyor.error_codes import ErrorCode
from conveyor.halts import HaltReason
from conveyor.runtime import DECLARATIONS, Runtime, halt_reasons
from conveyor.web import create_app
from tests.support.cli_run import commands

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
SRC = ROOT / "src" / "conveyor"
PAGES = [ROOT / "README.md", *sorted(DOCS.glob("*.md"))]


COMMANDS = dict(commands())
#: The options every command takes (conveyor.cli.groups), documented once in docs/cli.md.
SHARED_OPTIONS = {"shared_quiet", "shared_verbose", "shared_log_level"}


def _prose(text: str) -> str:
    """``text`` without fenced code blocks (whose ``#`` lines are comments, not headings)."""
    return re.sub(r"^```.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)


def _sections(text: str) -> dict[str, str]:
    """``### `heading` `` → the text up to the next heading of any level."""
    text = _prose(text)
    found: dict[str, str] = {}
    parts = re.split(r"^(#{1,6} .*)$", text, flags=re.MULTILINE)
    for heading, body in zip(parts[1::2], parts[2::2], strict=True):
        match = re.fullmatch(r"### `(.+)`", heading.strip())
        if match:
            found[match.group(1)] = body
    return found


def _source() -> dict[Path, str]:
    return {path: path.read_text() for path in SRC.rglob("*.py")}


def _keys(section: str, model: type[BaseModel]) -> list[tuple[str, str, object]]:
    """(section, key, default) of every key, sub-sections (``[transcription.openai]``) included."""
    keys: list[tuple[str, str, object]] = []
    for name, sub in model.model_fields.items():
        if isinstance(sub.annotation, type) and issubclass(sub.annotation, BaseModel):
            keys += _keys(f"{section}.{name}", sub.annotation)
        else:
            keys.append((section, name, sub.default))
    return keys


def test_every_config_key_is_documented_with_its_default() -> None:
    text = (DOCS / "operations.md").read_text()
    for section, field in Settings.model_fields.items():
        model = field.annotation
        assert isinstance(model, type) and issubclass(model, BaseModel)
        for where, name, default in _keys(section, model):
            assert f"`[{where}] {name}`" in text, f"[{where}] {name} is not documented"
            if default is not None:
                assert f"`{default}`" in text


def _key_docstrings(model: type[BaseModel]) -> dict[str, str]:
    """Key → the docstring under it in ``model``'s source, whitespace collapsed (as
    ``scripts/config-table`` reads them; the settings do not load their sources at import)."""
    import inspect

    docs: dict[str, str] = {}
    last = None
    (tree,) = ast.parse(inspect.getsource(model)).body
    assert isinstance(tree, ast.ClassDef)
    for node in tree.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            last = node.target.id
        elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and last:
            docs[last] = " ".join(str(node.value.value).split())
            last = None
        else:
            last = None
    return docs


def _provider_rows() -> list[str]:
    """The settings table's rows of every provider's own keys, as their declarations give them
    (``SETTINGS`` in each backend module: default, and the docstring under the key)."""
    rows = []
    for name, model in provider_sections().items():
        docs = _key_docstrings(model)
        for key, field in model.model_fields.items():
            default = "unset" if field.default is None else f"`{field.default}`"
            meaning = docs.get(key, "")
            variable = f"CONVEYOR_TRANSCRIPTION__{name.upper()}__{key.upper()}"
            rows.append(
                f"| `[transcription.{name}] {key}` | `{variable}` | {default} | {meaning} |"
            )
    return rows


def test_the_settings_table_has_each_providers_keys_as_its_backend_declares_them() -> None:
    """Both ways: every key a provider backend declares has its row, word for word (the
    message gives the rows to paste), and no row names a provider key that is not declared."""
    lines = (DOCS / "operations.md").read_text().splitlines()
    expected = _provider_rows()
    missing = [row for row in expected if row not in lines]
    assert not missing, "docs/operations.md lacks these rows:\n" + "\n".join(missing)
    documented = [line for line in lines if line.startswith("| `[transcription.")]
    stale = [line for line in documented if line not in expected]
    assert not stale, "docs/operations.md has provider rows no backend declares:\n" + "\n".join(
        stale
    )


def _default_shown(param: Any) -> str | None:
    default = param.default
    if default is None or isinstance(default, bool):
        return None
    return f"`{default}`"


def test_every_command_argument_option_and_default_is_in_the_cli_reference() -> None:
    sections = _sections((DOCS / "cli.md").read_text())
    conventions = (DOCS / "cli.md").read_text().split("## Exit codes")[0]
    for name, command in COMMANDS.items():
        if command.hidden:  # an old spelling: docs/cli.md lists it among the aliases
            assert f"`conveyor {name}`" in (DOCS / "cli.md").read_text(), name
            continue
        body = sections.get(f"conveyor {name}")
        assert body is not None, f"`conveyor {name}` has no section in docs/cli.md"
        for param in command.params:
            if param.name in SHARED_OPTIONS:  # every command's: documented once, up front
                for opt in param.opts:
                    assert f"`{opt}" in conventions, f"{opt} is not in docs/cli.md's conventions"
                continue
            if param.param_type_name == "argument":
                assert f"`{param.metavar}" in body, f"{name}: argument {param.metavar}"
                continue
            assert isinstance(param, TyperOption)
            for opt in [*param.opts, *param.secondary_opts]:
                assert f"`{opt}" in body, f"conveyor {name} {opt} is not in docs/cli.md"
            if not param.is_flag:
                value = f"`{param.opts[0]} {param.metavar}"
                assert value in body, f"conveyor {name}: {value}` is not in docs/cli.md"
            shown = _default_shown(param)
            if shown is not None:
                assert shown in body, f"conveyor {name} {param.opts[0]}: default {shown}"


def test_the_cli_reference_names_no_command_or_option_the_code_lacks() -> None:
    for heading, body in _sections((DOCS / "cli.md").read_text()).items():
        name = heading.removeprefix("conveyor ")
        assert name in COMMANDS, f"docs/cli.md documents `{heading}`, which does not exist"
        known = {o for p in COMMANDS[name].params for o in [*p.opts, *p.secondary_opts]}
        for opt in re.findall(r"`(--[a-z][a-z0-9-]*)", body):
            assert opt in known, f"docs/cli.md: `{heading}` has no option {opt}"


def test_an_order_a_command_says_in_help_is_the_order_its_reference_says() -> None:
    # `media list -h` said "newest upload first" where the page (and the code) say capture.
    sections = _sections((DOCS / "cli.md").read_text())
    order = re.compile(r"\b(?:newest|oldest)(?: \w+)? first\b")
    for name, command in COMMANDS.items():
        said = order.findall(" ".join((command.help or "").split()))
        page = " ".join(sections.get(f"conveyor {name}", "").split())
        for phrase in said:
            assert phrase in page, f"`conveyor {name} -h` says {phrase!r}; docs/cli.md does not"


def test_no_message_names_a_command_by_an_old_spelling() -> None:
    """The old verbs (``ingest``, ``users add``) are hidden aliases: a message, a hint or a
    help text names the current verb (``records add``, ``users create``)."""
    old = re.compile(r"\bingest\b|\busers add\b")
    found = []
    for path, text in _source().items():
        tree = ast.parse(text)
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
        }
        found += [
            f"{path.relative_to(SRC)}:{node.lineno}: {node.value[:80]!r}"
            for node in ast.walk(tree)
            if isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and id(node) not in docstrings
            and node.value not in ("ingest", "add")  # the alias's registration, __all__
            and old.search(node.value)
        ]
    assert found == []
    for page in PAGES:  # only where a page names the alias itself
        text = re.sub(r"`conveyor (ingest|users add)`|`ingest\.py`", "", page.read_text())
        assert old.findall(text) == [], page.name


def test_every_command_line_quoted_in_the_docs_exists() -> None:
    """``conveyor records resume ID`` anywhere in README or docs names a real command and
    only its real options."""
    groups = {name.split()[0] for name in COMMANDS if " " in name}
    for page in PAGES:
        for span in re.findall(r"`(conveyor [^`]+)`", page.read_text()):
            words = span.split()[1:]
            # The shared options may come before a group's command (`conveyor records -q list`).
            words = [w for w in words if not re.fullmatch(r"-q|--quiet|-v+|--verbose", w)]
            if not words or words[0].startswith("-") or words[0].isupper():
                continue  # `conveyor --version`, `conveyor COMMAND --help`: not one command
            # The longest run of words that names a command (`albums link create`: a group in
            # a group), else the group and the next word.
            name = next(
                (" ".join(words[:n]) for n in (3, 2) if " ".join(words[:n]) in COMMANDS),
                " ".join(words[:2]) if words[0] in groups else words[0],
            )
            assert name in COMMANDS, f"{page.name}: `{span}` is not a command"
            known = {o for p in COMMANDS[name].params for o in [*p.opts, *p.secondary_opts]}
            for opt in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", span):
                assert opt in known, f"{page.name}: `{span}`: {name} has no option {opt}"


def test_the_exit_code_table_matches_the_code() -> None:
    text = (DOCS / "cli.md").read_text()
    table = _sections_by_title(text)["Exit codes"]
    documented = {int(code) for code in re.findall(r"^\| `(\d+)` \|", table, re.MULTILINE)}
    assert documented == {int(code) for code in ExitCode}


def _sections_by_title(text: str) -> dict[str, str]:
    parts = re.split(r"^## (.*)$", text, flags=re.MULTILINE)
    return dict(zip(parts[1::2], parts[2::2], strict=True))


@pytest.fixture(scope="module")
def openapi(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("docs")
    settings = Settings(
        database={"url": f"sqlite:///{root / 'c.db'}"},  # type: ignore[arg-type]
        storage={"root": root},  # type: ignore[arg-type]
    )
    spec: dict[str, Any] = create_app(Runtime(settings), run_workers=False).openapi()
    return spec


def test_every_route_and_its_statuses_are_in_the_http_reference(openapi: dict[str, Any]) -> None:
    sections = _sections((DOCS / "http.md").read_text())
    routes = set()
    for path, operations in openapi["paths"].items():
        for method, operation in operations.items():
            route = f"{method.upper()} {path}"
            routes.add(route)
            body = sections.get(route)
            assert body is not None, f"`{route}` has no section in docs/http.md"
            for status in operation.get("responses", {}):
                assert re.search(rf"\b{status}\b", body), f"{route}: status {status} undocumented"
    documented = {h for h in sections if re.match(r"[A-Z]+ /", h)}
    assert documented <= routes, (
        f"docs/http.md documents routes that do not exist: {documented - routes}"
    )


def test_the_error_table_is_every_error_code_with_its_status_both_ways() -> None:
    """docs/http.md lists every code the API can answer with its status, and only those; the
    codes only the CLI meets are marked not HTTP (``—``)."""
    table = _sections_by_title((DOCS / "http.md").read_text())["Errors"]
    rows = set(re.findall(r"^\| (\d{3}|—) \| `([a-z_]+)` \|", table, re.MULTILINE))
    declared = {(str(c.status) if c.status else "—", c.value) for c in ErrorCode}
    assert rows - declared == set(), "docs/http.md: codes or statuses the code does not answer"
    assert declared - rows == set(), "docs/http.md: error codes missing from the table"


def test_every_error_code_is_answered_somewhere() -> None:
    """No code is declared that nothing raises: each member is named outside its enum."""
    named = set()
    for path, text in _source().items():
        if path.name == "error_codes.py":
            continue
        for node in ast.walk(ast.parse(text)):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id == "ErrorCode"
            ):
                named.add(node.attr)
    assert {c.name for c in ErrorCode} - named == set()


def test_every_album_event_kind_is_in_the_http_reference() -> None:
    kinds = set()
    for text in _source().values():
        kinds.update(re.findall(r'"(item\.[a-z_]+)"', text))
    table = _sections_by_title((DOCS / "http.md").read_text())["Album events"]
    assert kinds and all(f"| `{kind}` |" in table for kind in kinds), kinds


def _reasons() -> dict[str, list[HaltReason]]:
    """Every declared halt reason value → its members, one per owner that declares it."""
    found: dict[str, list[HaltReason]] = {}
    for owner in halt_reasons():
        for member in owner:
            found.setdefault(member.value, []).append(member)
    return found


def _domains_of(value: str) -> set[str]:
    return {d.name for d in DECLARATIONS for owner in d.halt_reasons if value in set(owner)}


def test_every_halt_reason_has_a_way_forward_and_plain_words_that_agree_across_owners() -> None:
    reasons = _reasons()
    assert {"undecodable", "stuck", "too_many_pixels", "attempts_exhausted"} <= set(reasons)
    for value, members in reasons.items():
        for member in members:
            assert member.meaning and member.action and member.words, member
        assert len({m.words for m in members}) == 1, f"{value}: owners word it differently"
        assert len({m.resume_helps for m in members}) == 1, f"{value}: resume_helps differs"


def test_the_troubleshooting_table_has_every_halt_reason_and_says_if_resume_helps() -> None:
    text = (DOCS / "troubleshooting.md").read_text()
    documented = set(re.findall(r"^\| `([a-z_]+)` \|", text, re.MULTILINE))
    assert documented == set(_reasons()), "docs/troubleshooting.md and the declared reasons"
    for reason, (member, *_) in _reasons().items():
        row = re.search(rf"^\| `{reason}` \|(.*)$", text, re.MULTILINE)
        assert row is not None, f"halt reason {reason} is not in docs/troubleshooting.md"
        cells = [c.strip() for c in row.group(1).split("|")]
        assert ("yes" if member.resume_helps else "no") in cells, reason
        domains = {"records": "audio", "items": "media"}
        assert {domains[w] for w in re.findall(r"records|items", cells[0])} == _domains_of(reason)


def test_the_lifecycle_names_every_halt_reason() -> None:
    text = (DOCS / "lifecycle.md").read_text()
    assert [r for r in _reasons() if r not in text] == []


def _slug(heading: str) -> str:
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def test_links_between_pages_resolve() -> None:
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#\s]+\.md)?(#[^)\s]+)?\)", page.read_text()):
            file, anchor = target
            if not file and not anchor:
                continue
            linked = (page.parent / file) if file else page
            assert linked.is_file(), f"{page.name} links to missing {file}"
            if anchor:
                headings = re.findall(r"^#{1,6} (.*)$", _prose(linked.read_text()), re.MULTILINE)
                slugs = {_slug(h) for h in headings}
                assert anchor[1:] in slugs, f"{page.name} links to missing {file}{anchor}"


def test_the_norms_test_map_names_only_tests_that_exist() -> None:
    """docs/norms-tests.md cites tests by name; each one is defined in tests/."""
    cited = set(re.findall(r"\btest_[a-z0-9_]+\b", (DOCS / "norms-tests.md").read_text()))
    tests = Path(__file__).resolve().parent
    defined = {
        name
        for path in tests.rglob("test_*.py")
        for name in re.findall(r"^def (test_[a-z0-9_]+)\(", path.read_text(), re.MULTILINE)
    }
    modules = {path.stem for path in tests.rglob("test_*.py")}
    assert len(cited - modules) > 20  # the map is read (a wrong path would cite nothing)
    assert cited - modules - defined == set()
