"""The words of counts and hints a script or a person reads: one of a thing is singular, a
record named several times is named once, a file given twice counts twice, and a hint gives the
command to run as written."""

from __future__ import annotations

import contextlib
import json
import os
import pty
import sqlite3
import subprocess
from pathlib import Path

import pytest
import typer

from conveyor.cli.exits import ExitCode
from conveyor.cli.intake import Intake
from conveyor.cli.intake_output import IntakeOutput
from tests.support.cli_run import CONVEYOR, clean_env, run

NO_WORKERS = {"CONVEYOR_PIPELINE__WORKERS": "0"}


def test_copies_of_one_file_name_its_record_once(tmp_path: Path, corpus: Path) -> None:
    jfk = str(corpus / "audio" / "jfk.wav")
    result = run(["records", "add", jfk, jfk, jfk], tmp_path, **NO_WORKERS)
    assert result.returncode == 0, result.stderr
    # The summary said "(records 1, 1)".
    assert "3 files: 1 accepted as records" in result.stderr
    assert ", 2 already there (record 1)" in result.stderr
    silence = str(corpus / "audio" / "silence_1s.wav")
    again = run(["records", "add", jfk, silence, jfk, silence], tmp_path, **NO_WORKERS)
    assert ", 3 already there (records 1, 2)" in again.stderr, again.stderr
    # A file given twice is two files skipped: the counts add up to the files given (it said
    # "3 files: 1 accepted …, 1 already there", one entry per name).
    lines = run(["records", "add", "--json", jfk, jfk], tmp_path, **NO_WORKERS).stdout
    summary = json.loads(lines.splitlines()[-1])
    assert summary["event"] == "summary"
    assert (summary["files"], summary["duplicates"], summary["accepted"]) == (2, 2, 0)


def test_one_record_to_resume_is_singular(tmp_path: Path, corpus: Path) -> None:
    added = run(["records", "add", str(corpus / "audio" / "jfk.wav")], tmp_path, **NO_WORKERS)
    assert added.returncode == 0, added.stderr
    dry = run(["records", "resume", "1", "--dry-run"], tmp_path)
    assert "1 record named would be resumed" in dry.stdout, dry.stdout + dry.stderr
    none = run(["records", "resume", "--all", "--dry-run"], tmp_path)
    assert "0 halted records would be resumed" in none.stdout


def test_a_token_for_a_missing_user_says_the_command_that_makes_it(tmp_path: Path) -> None:
    result = run(["tokens", "create", "nobody"], tmp_path)
    assert result.returncode == ExitCode.NOT_FOUND
    assert "add the user with `conveyor users create nobody`" in result.stderr


def test_the_other_command_is_given_as_the_shell_takes_it(tmp_path: Path, corpus: Path) -> None:
    photo = (corpus / "media" / "exif-samples__DSCN0010.jpg").read_bytes()
    (tmp_path / "my photo.jpg").write_bytes(photo)
    (tmp_path / "-dash.jpg").write_bytes(photo)
    result = run(["records", "add", "--", "my photo.jpg", "-dash.jpg"], tmp_path, **NO_WORKERS)
    assert result.returncode == 1
    # Pasted as written, the hint adds the file (it said `… ALBUM my photo.jpg`: two files).
    assert "`conveyor media add ALBUM 'my photo.jpg'`" in result.stderr, result.stderr
    assert "`conveyor media add ALBUM ./-dash.jpg`" in result.stderr
    run(["albums", "create", "Trip"], tmp_path)
    (tmp_path / "a note.wav").write_bytes((corpus / "audio" / "jfk.wav").read_bytes())
    media = run(["media", "add", "Trip", "a note.wav"], tmp_path, CONVEYOR_MEDIA__SHORT_WORKERS="0")
    assert "`conveyor records add 'a note.wav'`" in media.stderr, media.stderr


def _kept_before_limits(tmp_path: Path, sql: str, *values: str) -> None:
    """Write ``values`` into the embedded database as a version before text limits could (a
    one-line text is refused a newline or tab now, conveyor.limits; old rows still have them)."""
    with contextlib.closing(sqlite3.connect(tmp_path / "conveyor-data" / "conveyor.db")) as db:
        db.execute(sql, values)
        db.commit()


def test_a_name_with_a_newline_keeps_its_table_row_whole(tmp_path: Path) -> None:
    refused = run(["albums", "create", "a\nb"], tmp_path)
    assert refused.returncode == ExitCode.USAGE, refused.stderr
    assert "an album's name contains a control character ('\\n')" in refused.stderr
    for name in ("a", "tab"):
        assert run(["albums", "create", name], tmp_path).returncode == 0
    _kept_before_limits(tmp_path, "UPDATE albums SET name = ? WHERE id = 1", "a\nb")
    _kept_before_limits(tmp_path, "UPDATE albums SET name = ? WHERE id = 2", "tab\there")
    listing = run(["albums", "list"], tmp_path).stdout.splitlines()
    # It printed the newline as it is: a row 'a' and a row 'b' under the name column.
    assert len(listing) == 3, listing
    assert listing[1].split()[2] == "a\\nb" and listing[2].split()[2] == "tab\\there"
    assert [len(row.split()) for row in listing[1:]] == [5, 5]
    names = [
        album["name"] for album in json.loads(run(["albums", "list", "--json"], tmp_path).stdout)
    ]
    assert names == ["a\nb", "tab\there"]  # the JSON keeps the name as it is


def test_an_owner_no_user_could_have_is_a_usage_error(tmp_path: Path, corpus: Path) -> None:
    jfk = str(corpus / "audio" / "jfk.wav")
    # users create refuses 'bob smith'; records add made records no token could ever reach.
    assert run(["users", "create", "bob smith"], tmp_path).returncode == ExitCode.USAGE
    for args in (
        ["records", "add", "--owner", "bob smith", jfk],
        ["albums", "create", "Trip", "--owner", "bob smith"],
        ["media", "add", "Trip", jfk, "--owner", "bob smith"],
        ["records", "add", "--owner", "x" * 101, jfk],
    ):
        result = run(args, tmp_path, **NO_WORKERS)
        assert result.returncode == ExitCode.USAGE, (args, result.stderr)
        assert "printable characters without spaces" in result.stderr
    assert run(["records", "list", "--json"], tmp_path).stdout.strip() == "[]"
    assert run(["albums", "list", "--json"], tmp_path).stdout.strip() == "[]"
    assert run(["records", "add", "--owner", "bob", jfk], tmp_path, **NO_WORKERS).returncode == 0


def _finish(
    accepted: int, done: int, capsys: pytest.CaptureFixture[str]
) -> tuple[int, dict[str, object]]:
    out = IntakeOutput("record", accepted, as_json=True)
    with pytest.raises(typer.Exit) as ended:
        out.finish(Intake(ids=list(range(1, accepted + 1))), done, 0, 0, stopped=True)
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    return ended.value.exit_code, summary


def test_a_stop_signal_after_every_record_finished_stops_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # Ctrl-C while the cards were printed: it exited 130, "stopped before every record
    # finished", beside a summary of 30 done and "stopped": false.
    code, summary = _finish(3, 3, capsys)
    assert code == ExitCode.OK
    assert (summary["done"], summary["unfinished"], summary["stopped"]) == (3, 0, False)
    # Stopped with some unfinished: exit 130, and the summary says it was stopped (it said
    # false: only a stop during intake counted).
    code, summary = _finish(3, 1, capsys)
    assert code == ExitCode.INTERRUPTED
    assert (summary["done"], summary["unfinished"], summary["stopped"]) == (1, 2, True)


def test_end_of_input_at_a_terminal_prompt_is_exit_2(tmp_path: Path) -> None:
    # Ctrl-D at the terminal's password prompt is the end of input docs/cli.md gives exit
    # code 2 for; it was exit 130, "stopped at the password prompt", as for a Ctrl-C.
    assert run(["users", "create", "alice"], tmp_path).returncode == 0
    terminal, side = pty.openpty()
    asking = subprocess.Popen(
        [CONVEYOR, "users", "passwd", "alice"],
        cwd=tmp_path,
        env=clean_env(),
        stdin=side,
        stdout=subprocess.PIPE,
        stderr=side,
    )
    os.close(side)
    said = b""
    while b"password for 'alice'" not in said:
        said += os.read(terminal, 1024)
    # Ctrl-D, again until it ends: the prompt flushes what was typed before it turned echo off.
    for _ in range(100):
        os.write(terminal, b"\x04")
        with contextlib.suppress(subprocess.TimeoutExpired):
            asking.wait(timeout=0.5)
        if asking.returncode is not None:
            break
    assert asking.returncode == ExitCode.USAGE
    while b"nothing was changed" not in said:
        said += os.read(terminal, 1024)
    os.close(terminal)
    assert b"standard input ended before the password for 'alice' was given twice" in said
    listing = json.loads(run(["users", "list", "--json"], tmp_path).stdout)
    assert [user["password"] for user in listing] == [False]


def test_empty_lists_say_whose_and_how_to_add_as_the_shell_takes_it(tmp_path: Path) -> None:
    assert run(["albums", "create", "My Trip"], tmp_path).returncode == 0
    # Another owner's albums exist: it said "no albums yet" for --owner nobody.
    none = run(["albums", "list", "--owner", "nobody"], tmp_path)
    assert "no albums of owner 'nobody'; create one with" in none.stderr, none.stderr
    assert "`conveyor albums create NAME --owner nobody`" in none.stderr
    # It said `conveyor media add My Trip FILE…`: two arguments when pasted.
    empty = run(["media", "list", "My Trip"], tmp_path)
    assert "album 1 has no items yet; add some with `conveyor media add 1 FILE…`" in empty.stderr
    run(["users", "create", "bob"], tmp_path)
    run(["albums", "create", "Work", "--owner", "bob"], tmp_path)
    theirs = run(["media", "list", "Work", "--owner", "bob"], tmp_path)
    assert "`conveyor media add 2 FILE… --owner bob`" in theirs.stderr, theirs.stderr


def test_a_title_with_a_newline_keeps_the_card_one_line_a_field(
    tmp_path: Path, corpus: Path
) -> None:
    jfk = str(corpus / "audio" / "jfk.wav")
    refused = run(["records", "add", jfk, "--title", "first\nsecond"], tmp_path, **NO_WORKERS)
    assert refused.returncode == ExitCode.USAGE, refused.stderr
    added = run(["records", "add", jfk, "--title", "first"], tmp_path, **NO_WORKERS)
    assert added.returncode == 0, added.stderr
    title = "first\nsecond\tpart"
    _kept_before_limits(tmp_path, "UPDATE audio_records SET title = ? WHERE id = 1", title)
    shown = run(["records", "show", "1"], tmp_path).stdout.splitlines()
    assert "  title      first\\nsecond\\tpart" in shown, shown
    card = json.loads(run(["records", "show", "1", "--json"], tmp_path).stdout)
    assert card["title"] == "first\nsecond\tpart"  # the JSON keeps the title as it is


def test_a_wav_given_as_raw_pcm_is_refused_before_already_there(
    tmp_path: Path, corpus: Path
) -> None:
    """``--raw-pcm`` on a file already ingested says what is wrong with the option (exit 1,
    nothing kept), not that the file is already there; without it the file is."""
    jfk = str(corpus / "audio" / "jfk.wav")
    assert run(["ingest", jfk], tmp_path, **NO_WORKERS).returncode == 0
    raw = run(["ingest", "--raw-pcm", jfk], tmp_path, **NO_WORKERS)
    assert raw.returncode == ExitCode.HALTED, raw.stderr
    assert f"{jfk}: refused (not_media): this file is WAV audio, not headerless PCM" in raw.stderr
    assert "already there" not in raw.stderr
    assert "1 file: 0 accepted as records (0 done, 0 halted), 1 refused" in raw.stderr
    again = run(["ingest", jfk], tmp_path, **NO_WORKERS)
    assert again.returncode == 0, again.stderr
    assert f"{jfk}: already there as record 1; not stored again" in again.stderr
