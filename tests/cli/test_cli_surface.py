"""The command line's surface, generated from the code so that a new command is checked too:
help text on every option and argument, no spec ids in --help, boolean flags that take no value,
``--version``, a fast start (no heavy import for --help), and a clean "not found" for any id."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest
import typer
from typer.core import TyperArgument, TyperGroup, TyperOption
from typer.testing import CliRunner

from conveyor import __version__
from conveyor.cli.app import app
from conveyor.cli.exits import SUMMARY, ExitCode
from tests.support.cli_run import clean_env, commands, run

SPEC_ID = re.compile(r"\b[PDM]\d+(?:\s*[-–]\s*[PDM]?\d+)?\b")
ALL = dict(commands())


def test_every_option_and_argument_has_help_text() -> None:
    missing = [
        f"{name} {param.name}"
        for name, command in ALL.items()
        for param in command.params
        if not getattr(param, "help", None) and not getattr(param, "hidden", False)
    ]
    assert missing == []
    assert all(command.help for command in ALL.values())
    arguments = [p for c in ALL.values() for p in c.params if p.param_type_name == "argument"]
    assert all(p.metavar and p.metavar.isupper() for p in arguments)  # RECORD_ID, not {record_id}


def test_help_speaks_without_spec_ids() -> None:
    runner = CliRunner()
    for name in ["", *ALL]:
        result = runner.invoke(app, [*name.split(), "--help"], terminal_width=200)
        assert result.exit_code == 0, (name, result.output)
        found = SPEC_ID.findall(result.output)
        assert found == [], f"`conveyor {name} --help` shows spec ids {found}"


def test_boolean_options_are_flags_that_take_no_value() -> None:
    runner = CliRunner()
    for name, command in ALL.items():
        shown = runner.invoke(app, [*name.split(), "--help"], terminal_width=200).output
        assert "<bool>" not in shown and "\\[" not in shown, (name, shown)
        for param in command.params:
            if not isinstance(param, TyperOption):
                continue
            if param.type_descriptor.annotation is bool or getattr(param, "count", False):
                assert param.is_flag or param.count, f"{name} {param.opts} takes a value"
                for opt in [*param.opts, *param.secondary_opts]:
                    assert re.search(rf"{opt}(,| /|\s{{2,}}|\s*$)", shown, re.M), (name, opt, shown)
            else:  # a value option names its value, as docs/cli.md writes it
                assert param.metavar and f"{param.opts[0]} {param.metavar}" in shown, (
                    name,
                    param.opts,
                )


def test_a_group_help_that_lists_its_commands_lists_them_all_and_only_them() -> None:
    # `conveyor records -h` listed a `history` that was never a command (it is `events`).
    groups = typer.main.get_command(app)
    assert isinstance(groups, TyperGroup)
    listed = {}
    for name, group in groups.commands.items():
        if isinstance(group, TyperGroup) and group.help and ": " in group.help:
            words = {w.split()[0] for w in group.help.split(": ", 1)[1].rstrip(".").split(",")}
            shown = {n for n, c in group.commands.items() if not c.hidden}
            if words & shown:  # a list of commands, not a sentence after a colon
                assert words == shown, (name, group.help, shown)
                listed[name] = shown
    assert {"records", "workers", "lanes", "storage"} <= set(listed)


def test_help_lists_every_exit_code() -> None:
    assert set(SUMMARY) == set(ExitCode)
    result = CliRunner().invoke(app, ["--help"], terminal_width=400)
    for code in ExitCode:
        assert f"{int(code)} {SUMMARY[code]}" in " ".join(result.output.split())


def test_version_option_and_command(tmp_path: Path) -> None:
    for args in (["--version"], ["version"]):
        result = run(args, tmp_path)
        assert result.returncode == 0
        assert result.stdout.strip() == f"conveyor {__version__}"
        assert not (tmp_path / "conveyor-data").exists()  # no database was touched


def test_help_imports_no_heavy_module() -> None:
    """``--help`` and ``--version`` load only Typer and Rich: a fast start on any machine."""
    code = (
        "import sys\n"
        "from conveyor.cli.app import app\n"
        "heavy = ['sqlalchemy', 'av', 'pyvips', 'fastapi', 'uvicorn', 'pydantic_settings',"
        " 'faster_whisper', 'ctranslate2', 'alembic', 'numpy']\n"
        "print(sorted(m for m in heavy if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def _loaded(args: list[str], cwd: Path, watched: list[str]) -> list[str]:
    """Which of ``watched`` a ``conveyor`` run of ``args`` imported, run as the console script
    runs it (:mod:`conveyor.cli.entry`), in a fresh interpreter."""
    code = (
        "import json, sys\n"
        "sys.argv = ['conveyor', *sys.argv[1:]]\n"
        "from conveyor.cli.entry import main\n"
        "try:\n"
        "    main()\n"
        "except SystemExit as exit:\n"
        "    assert not exit.code, exit.code\n"
        f"print(json.dumps(sorted(m for m in {watched!r} if m in sys.modules)))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    loaded: list[str] = json.loads(out.stdout.strip().splitlines()[-1])
    return loaded


#: Libraries no command that only reads the database may load (bench/bench_cli_start.py times
#: the start, and lists which of these a command loaded).
HEAVY = [
    "av",
    "pyvips",
    "numpy",
    "faster_whisper",
    "ctranslate2",
    "boto3",
    "fastapi",
    "starlette",
    "uvicorn",
    "httpx",
    "jinja2",
    "argon2",
    "alembic",
    "prometheus_client",
]


def test_listing_records_loads_only_what_it_uses(tmp_path: Path) -> None:
    """``records list`` (with ``--stage`` too) reads the database: no heavy library, no worker
    pool, no search, and of the command modules only the records group's; ``records stats``
    reads the backlog from the domains as queues, without PyAV, pyvips, numpy or Prometheus."""
    assert run(["db", "upgrade"], tmp_path).returncode == 0
    ours = [
        "conveyor.cli.app",
        "conveyor.cli.media",
        "conveyor.cli.sharing",
        "conveyor.cli.users",
        "conveyor.cli.serve",
        "conveyor.cli.workers",
        "conveyor.audio.search",
        "conveyor.pipeline.pool",
        "conveyor.pipeline.metrics",
        "conveyor.providers.local",
    ]
    for args in (["records", "list"], ["records", "list", "--stage", "done", "--json"]):
        assert _loaded(args, tmp_path, HEAVY + ours) == [], args
    assert _loaded(["records", "stats", "--json"], tmp_path, HEAVY) == []


def test_a_sqlite_read_loads_no_postgresql_dialect(tmp_path: Path) -> None:
    """On the embedded database, ``records list`` and ``records stats`` do not load SQLAlchemy's
    PostgreSQL dialect (a tenth of their start): the tables name no PostgreSQL type or option at
    import (``conveyor.db.tables``)."""
    assert run(["db", "upgrade"], tmp_path).returncode == 0
    postgresql = ["sqlalchemy.dialects.postgresql", "psycopg"]
    for args in (["records", "list"], ["records", "stats"]):
        assert _loaded(args, tmp_path, postgresql) == [], args


def test_the_domains_as_queues_read_as_the_running_domains(tmp_path: Path) -> None:
    """``Runtime.queues`` (what ``records stats`` reads) has the table, stages, lanes, leases
    and terminal stages of the domains the workers run, so its backlog is theirs."""
    from conveyor.config import Settings, StorageSettings
    from conveyor.runtime import Runtime

    runtime = Runtime(Settings(storage=StorageSettings(root=tmp_path)))
    running = runtime.domains()
    queues = runtime.queues()
    assert [q.name for q in queues] == [d.name for d in running]
    for queue, domain in zip(queues, running, strict=True):
        assert queue.table is domain.table
        assert queue.terminal_stages == domain.terminal_stages
        assert [(s.name, s.lane, s.lease, s.terminal) for s in queue.stages] == [
            (s.name, s.lane, s.lease, s.terminal) for s in domain.stages
        ]
    with pytest.raises(RuntimeError):
        step = queues[0].stages[0].step
        assert step is not None
        step(None)  # type: ignore[arg-type]


def test_a_command_closes_its_database_and_runs_with_the_collector_back_on(
    tmp_path: Path,
) -> None:
    """The console script pauses the garbage collector while a command starts and skips the
    collector's walk at exit (conveyor.cli.collector): the command's SQLite connections are
    closed as it ends (nothing but the database file is left), and once its runtime is built
    the collector runs again, so a long command collects its garbage."""
    result = run(["records", "list"], tmp_path)
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in (tmp_path / "conveyor-data").iterdir()) == ["conveyor.db"]
    code = (
        "import gc\n"
        "from conveyor.cli import collector\n"
        "collector.pause()\n"
        "assert not gc.isenabled()\n"
        "from conveyor.cli.settings import make_runtime\n"
        "make_runtime()\n"
        "print(gc.isenabled())\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.strip() == "True", out.stderr


def _id_params() -> list[tuple[str, str]]:
    found = []
    for name, command in ALL.items():
        for param in command.params:
            if not isinstance(param, TyperArgument):
                continue
            annotation = param.type_descriptor.annotation
            if annotation in (int, list[int], list[int] | None) or param.name == "album":
                found.append((name, str(param.name)))
    return found


def test_the_id_arguments_are_found_from_the_code() -> None:
    names = {name for name, _ in _id_params()}
    assert {"records show", "records resume", "media show", "media resume"} <= names


@pytest.mark.parametrize("value", ["99999999999999999999", "0", "9223372036854775808"])
def test_any_id_a_user_can_type_is_a_clean_not_found(
    tmp_path: Path, value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    for name, param in _id_params():
        command = ALL[name]
        args = []
        for p in command.params:
            if p.param_type_name == "argument":
                args.append(value if p.name == param else str(tmp_path / "x.jpg"))
            elif p.required:
                args += [p.opts[0], "x"]
        result = runner.invoke(app, [*name.split(), *args])
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            name,
            result.exception,
        )
        assert result.exit_code == ExitCode.NOT_FOUND, (name, result.output)
        assert "does not exist" in result.output, (name, result.output)
        assert "Traceback" not in result.output


def test_an_odd_id_among_several_is_left_alone_cleanly(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    runner = CliRunner()
    several = [(n, p) for n, p in _id_params() if ALL[n].params[0].nargs == -1]
    assert {"records resume", "media resume", "records delete"} <= {n for n, _ in several}
    for name, _ in several:
        result = runner.invoke(app, [*name.split(), "7", "99999999999999999999", "0"])
        assert result.exception is None or isinstance(result.exception, SystemExit), (
            name,
            result.exception,
        )
        # Resuming named ids that are not halted is a conflict; deleting missing ones not found.
        assert result.exit_code in (ExitCode.NOT_FOUND, ExitCode.CONFLICT), (name, result.output)
        assert "99999999999999999999" in result.output, (name, result.output)


def test_no_settings_model_reads_its_source_at_import() -> None:
    """Every command imports the settings; a model with pydantic's ``use_attribute_docstrings``
    reads its source file as it is made (``inspect.getmodule`` over ``sys.modules``), which
    tripled the import of ``conveyor.config`` (bench/bench_cli_start.py). The docstrings
    under the keys are read from the source by the docs test and ``scripts/config-table``."""
    from pydantic import BaseModel

    from conveyor.config import Settings

    seen: list[type[BaseModel]] = []
    models: list[type[BaseModel]] = [Settings]
    while models:
        model = models.pop()
        seen.append(model)
        for field in model.model_fields.values():
            kind = field.annotation
            if isinstance(kind, type) and issubclass(kind, BaseModel) and kind not in seen:
                models.append(kind)
    assert len(seen) > 6  # every section, and the providers' own
    assert [m.__name__ for m in seen if m.model_config.get("use_attribute_docstrings")] == []
