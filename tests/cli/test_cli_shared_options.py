"""The shared options (``-q``, ``-v``/``--log-level``, ``-h``) at every level of the command
line: before the root's command, before a group's command, and after the leaf command, with
the same meaning everywhere (docs/cli.md, "Conventions shared by every command")."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import typer
from typer.core import TyperGroup

from conveyor.cli.app import app
from conveyor.cli.exits import ExitCode
from tests.support.cli_run import invoke, run


def _groups() -> Iterator[tuple[list[str], str]]:
    """Every group below the root as (its words, the name of its first command)."""

    def walk(words: list[str], group: TyperGroup) -> Iterator[tuple[list[str], str]]:
        for name, sub in sorted(group.commands.items()):
            if isinstance(sub, TyperGroup):
                first = next(n for n, c in sub.commands.items() if not c.hidden)
                yield [*words, name], first
                yield from walk([*words, name], sub)

    root = typer.main.get_command(app)
    assert isinstance(root, TyperGroup)
    yield from walk([], root)


def test_every_group_takes_the_shared_options_before_its_command() -> None:
    groups = list(_groups())
    assert ["albums", "link"] in [words for words, _ in groups]  # a group inside a group
    for words, first in groups:
        help_text = invoke(*words, "-h")
        assert help_text.exit_code == 0, words
        for option in ("-q, --quiet", "-v, --verbose", "--log-level LEVEL", "-h, --help"):
            assert option in help_text.stdout, (words, option)
        # The group reads its options before its command's help: a bad level exits 2 there.
        bad = invoke(*words, "--log-level", "loud", first, "-h")
        assert bad.exit_code == ExitCode.USAGE, (words, bad.stdout)
        assert "'loud' is not one of debug, info, warning, error" in bad.stderr, words


def test_quiet_and_log_level_before_a_groups_command_mean_what_they_mean_after_it(
    tmp_path: Path,
) -> None:
    for args in (
        ["records", "list"],
        ["albums", "list"],
        ["users", "list"],
        ["workers", "list"],
        ["lanes", "list"],
        ["vocabulary", "show"],
        ["storage", "check"],
        ["db", "upgrade"],
    ):
        group, *rest = args
        loud = run(args, tmp_path)
        assert loud.returncode == 0 and "database" in loud.stderr, (args, loud.stderr)
        for options in (["-q"], ["--quiet"]):
            before = run([group, *options, *rest], tmp_path)
            after = run([*args, *options], tmp_path)
            assert before.returncode == after.returncode == 0, (args, before.stderr)
            assert before.stderr == after.stderr == "", args
            assert before.stdout == after.stdout, args
        # --log-level wins over -q at the group level as after the command.
        level = run([group, "-q", "--log-level", "debug", *rest], tmp_path)
        assert level.returncode == 0 and " DEBUG " in level.stderr, (args, level.stderr)
    linked = run(["albums", "create", "Trip"], tmp_path)
    assert linked.returncode == 0, linked.stderr
    links = run(["albums", "link", "-q", "list", "Trip"], tmp_path)
    assert links.returncode == 0 and links.stderr == "", links.stderr


def test_vv_logs_at_debug_and_v_at_info(tmp_path: Path) -> None:
    """``-vv`` shows the debug lines: where the settings come from (the variables by name, never
    a value) and the database's schema revision; ``-v`` does not."""
    env = {"CONVEYOR_PIPELINE__WORKERS": "1"}
    for args in (
        ["records", "list", "-vv"],
        ["records", "-vv", "list"],
        ["-vv", "records", "list"],
        ["records", "list", "-v", "-v"],
        ["records", "list", "--log-level", "debug"],
    ):
        done = run(args, tmp_path, **env)
        assert done.returncode == 0, (args, done.stderr)
        debug = [line for line in done.stderr.splitlines() if " DEBUG " in line]
        assert any(
            "settings from no config file" in line
            and "environment variables: CONVEYOR_PIPELINE__WORKERS" in line
            for line in debug
        ), (args, done.stderr)
        assert any("schema revision" in line for line in debug), (args, done.stderr)
    for args in (["records", "list", "-v"], ["records", "list"]):
        done = run(args, tmp_path, **env)
        assert done.returncode == 0 and " DEBUG " not in done.stderr, (args, done.stderr)
    config = tmp_path / "conveyor.toml"
    config.write_text("[pipeline]\nworkers = 1\n")
    done = run(["records", "list", "-vv"], tmp_path)
    assert f"settings from config file {config} (conveyor.toml in the working directory)" in (
        done.stderr
    ), done.stderr
