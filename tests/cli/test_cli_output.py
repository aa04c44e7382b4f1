"""One output style a person and a script can trust: data text printed literally (no markup),
``--json`` as plain JSON, wrong kinds refused at intake with the other command named, a summary
after each intake, a hint for another owner's album, and empty lists that say what to do."""

from __future__ import annotations

import json
from pathlib import Path

from cli_run import ANSI, run

from conveyor.cli.exits import ExitCode

BRACKETS = "[bold]note [pipeline] [b]"  # no slash: it is a file name


def test_bracketed_names_and_settings_are_printed_as_written(tmp_path: Path, corpus: Path) -> None:
    audio = tmp_path / f"{BRACKETS}.wav"
    audio.symlink_to(corpus / "audio" / "jfk.wav")
    result = run(
        ["ingest", "--title", "[red]x[/red]", str(audio)],
        tmp_path,
        CONVEYOR_PIPELINE__WORKERS="0",
    )
    assert result.returncode == 0, result.stderr
    assert "[pipeline] workers = 0" in result.stderr
    shown = run(["records", "show", "1"], tmp_path)
    assert f"{BRACKETS}.wav" in shown.stdout and "[red]x[/red]" in shown.stdout
    listing = run(["records", "list"], tmp_path)
    assert f"{BRACKETS}.wav" in listing.stdout
    photo = tmp_path / f"{BRACKETS}.jpg"
    photo.symlink_to(corpus / "media" / "exif-samples__Canon_40D.jpg")
    assert run(["albums", "create", "[Trip] 2026"], tmp_path).returncode == 0
    added = run(
        ["media", "add", "[Trip] 2026", str(photo)], tmp_path, CONVEYOR_MEDIA__SHORT_WORKERS="0"
    )
    assert added.returncode == 0, added.stderr
    items = run(["media", "list", "[Trip] 2026"], tmp_path)
    assert f"{BRACKETS}.jpg" in items.stdout
    albums = run(["albums", "list"], tmp_path)
    assert "[Trip] 2026" in albums.stdout


def test_json_outputs_are_plain_json_even_on_a_colour_terminal(
    tmp_path: Path, corpus: Path
) -> None:
    colour = {"FORCE_COLOR": "1", "TTY_COMPATIBLE": "1"}
    run(["ingest", str(corpus / "audio" / "corrupt_bad_header.wav")], tmp_path)
    record = run(["records", "show", "1", "--json"], tmp_path, **colour)
    assert not ANSI.search(record.stdout)
    card = json.loads(record.stdout)
    assert card["halted"] is True and card["halt_reason"] == "undecodable"
    assert card["halted_at"].endswith("Z") and card["attempts"] == 0
    run(["albums", "create", "a"], tmp_path)
    run(["media", "add", "a", str(corpus / "media" / "exif-samples__Canon_40D.jpg")], tmp_path)
    item = run(["media", "show", "1", "--json"], tmp_path, **colour)
    assert not ANSI.search(item.stdout)
    view = json.loads(item.stdout)
    assert view["done"] is True and view["roles"]["thumb"]["size"] > 0


def test_wrong_kinds_are_refused_at_intake_naming_the_other_command(
    tmp_path: Path, corpus: Path
) -> None:
    photo = corpus / "media" / "exif-samples__Canon_40D.jpg"
    audio = corpus / "audio" / "jfk.wav"
    ingest = run(["ingest", str(photo)], tmp_path)
    assert ingest.returncode == ExitCode.HALTED
    assert "`conveyor media add ALBUM" in ingest.stderr
    assert "1 file: 0 accepted as records (0 done, 0 halted), 1 refused" in ingest.stderr
    assert run(["records", "list"], tmp_path).stdout == ""  # no halted record left behind
    run(["albums", "create", "a"], tmp_path)
    media = run(["media", "add", "a", str(audio), str(photo)], tmp_path)
    assert media.returncode == ExitCode.HALTED
    assert f"`conveyor ingest {audio}`" in media.stderr
    assert "2 files: 1 accepted as items (1 done, 0 halted), 1 refused" in media.stderr


def test_another_owners_album_hints_at_owner_and_empty_lists_say_how_to_add(
    tmp_path: Path,
) -> None:
    records = run(["records", "list"], tmp_path)
    assert records.stdout == "" and "conveyor ingest FILE" in records.stderr
    albums = run(["albums", "list"], tmp_path)
    assert albums.stdout == "" and "conveyor albums create NAME" in albums.stderr
    run(["albums", "create", "Work", "--owner", "bob"], tmp_path)
    other = run(["media", "list", "Work"], tmp_path)
    assert other.returncode == ExitCode.NOT_FOUND
    assert "does not exist for owner 'me'" in other.stderr and "--owner bob" in other.stderr
    empty = run(["media", "list", "Work", "--owner", "bob"], tmp_path)
    assert empty.returncode == 0 and "conveyor media add Work" in empty.stderr
    none = run(["media", "list", "Holidays"], tmp_path)
    assert none.returncode == ExitCode.NOT_FOUND and "conveyor albums create" in none.stderr
    users = run(["users", "list"], tmp_path)
    assert "conveyor users add NAME" in users.stderr
