"""Every id the command line takes, generated from the Typer app: a number no row can have is
"not found" (exit 3), on SQLite and PostgreSQL alike, never a traceback (exit 70)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine
from typer.core import TyperArgument, TyperOption

from conveyor.cli.exits import ExitCode
from conveyor.cli.ids import IdParser
from tests.support.cli_run import commands, invoke

#: Past INTEGER (PostgreSQL's integer, the ids' columns), the largest and one past SQLite's
#: 64-bit rowid, and a number past any integer type.
HUGE = [2**31, 2**63 - 1, 2**63, 10**20]
ALL = dict(commands())


def _reads_an_id(param: object) -> bool:
    # An IdParser, or an argument that is an id or a name (ALBUM, HOST|ID).
    assert isinstance(param, (TyperArgument, TyperOption)), param
    parser = param.type_descriptor.parameter_info.parser
    return isinstance(parser, IdParser) or param.name in ("album", "target")


ID_PARAMS = sorted(
    (name, str(param.name))
    for name, command in ALL.items()
    for param in command.params
    if _reads_an_id(param)
)


def test_every_id_the_brief_named_is_read_as_an_id() -> None:
    names = {name for name, _ in ID_PARAMS}
    assert {
        "records show",
        "records resume",
        "records events",
        "records delete",
        "media show",
        "media list",
        "media add",
        "media delete",
        "media resume",
        "albums delete",
        "albums watch",
        "tokens revoke",
        "workers show",
        "workers drain",
        "albums link revoke",
    } <= names
    assert ("albums watch", "since") in ID_PARAMS
    # No integer argument escapes the one parser.
    plain = [
        (name, p.name)
        for name, command in ALL.items()
        for p in command.params
        if isinstance(p, TyperArgument)
        and p.type_descriptor.annotation in (int, list[int], list[int] | None)
        and not _reads_an_id(p)
    ]
    assert plain == []


def _args(name: str, param_name: str, value: str, tmp_path: Path) -> list[str]:
    command = ALL[name]
    args = name.split()
    for p in command.params:
        if p.param_type_name == "argument":
            if p.name == param_name:
                args.append(value)
            elif p.name == "album":
                args.append("Trip")
            else:
                args.append(str(tmp_path / "x.jpg"))
        elif p.name == param_name:
            args += [p.opts[0], value]
        elif p.required:
            args += [p.opts[0], "x"]
    return args


@pytest.mark.parametrize("value", HUGE, ids=["2^31", "2^63-1", "2^63", "10^20"])
def test_an_id_no_row_can_have_is_not_found(
    engine: Engine, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, value: int
) -> None:
    monkeypatch.chdir(tmp_path)
    env = {"CONVEYOR_DATABASE__URL": engine.url.render_as_string(hide_password=False)}
    (tmp_path / "x.jpg").write_bytes(b"\xff\xd8\xff")
    assert invoke("albums", "create", "Trip", **env).exit_code == 0
    for name, param_name in ID_PARAMS:
        args = _args(name, param_name, str(value), tmp_path)
        result = invoke(*args, **env)
        shown = (args, result.output, result.exception)
        assert result.exit_code == ExitCode.NOT_FOUND, shown
        assert str(value) in result.output, shown  # the id, named as missing
        assert "Traceback" not in result.output, shown


def test_an_id_that_is_no_number_is_a_usage_error() -> None:
    result = invoke("records", "show", "7x")
    assert result.exit_code == ExitCode.USAGE, result.output
    assert "is not an id" in result.output
