"""One output style a person and a script can trust: data text printed literally (no markup),
``--json`` as plain JSON, wrong kinds refused at intake with the other command named, a summary
after each intake, a hint for another owner's album, and empty lists that say what to do."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conveyor.cli.exits import ExitCode
from tests.support.cli_run import ANSI, invoke, run

BRACKETS = "[bold]note [pipeline] [b]"  # no slash: it is a file name


def test_bracketed_names_and_settings_are_printed_as_written(
    tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    audio = tmp_path / f"{BRACKETS}.wav"
    audio.symlink_to(corpus / "audio" / "jfk.wav")
    result = invoke("ingest", "--title", "[red]x[/red]", str(audio), CONVEYOR_PIPELINE__WORKERS="0")
    assert result.exit_code == 0, result.stderr
    assert "[pipeline] workers = 0" in result.stderr
    shown = invoke("records", "show", "1")
    assert f"{BRACKETS}.wav" in shown.stdout and "[red]x[/red]" in shown.stdout
    listing = invoke("records", "list")
    assert f"{BRACKETS}.wav" in listing.stdout
    photo = tmp_path / f"{BRACKETS}.jpg"
    photo.symlink_to(corpus / "media" / "exif-samples__Canon_40D.jpg")
    assert invoke("albums", "create", "[Trip] 2026").exit_code == 0
    added = invoke("media", "add", "[Trip] 2026", str(photo), CONVEYOR_MEDIA__SHORT_WORKERS="0")
    assert added.exit_code == 0, added.stderr
    items = invoke("media", "list", "[Trip] 2026")
    assert f"{BRACKETS}.jpg" in items.stdout
    albums = invoke("albums", "list")
    assert "[Trip] 2026" in albums.stdout


def test_json_outputs_are_plain_json_even_on_a_colour_terminal(
    tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    corrupt = corpus / "audio" / "corrupt_bad_header.wav"
    invoke("ingest", str(corrupt))  # halts undecodable at once
    invoke("albums", "create", "a")
    invoke("media", "add", "a", str(corpus / "media" / "exif-samples__Canon_40D.jpg"))
    colour = {"FORCE_COLOR": "1", "TTY_COMPATIBLE": "1"}  # what a terminal would get
    record = run(["records", "show", "1", "--json"], tmp_path, **colour)
    assert not ANSI.search(record.stdout)
    card = json.loads(record.stdout)
    assert card["halted"] is True and card["halt_reason"] == "undecodable"
    assert card["halted_at"].endswith("Z") and card["attempts"] == 0
    item = run(["media", "show", "1", "--json"], tmp_path, **colour)
    assert not ANSI.search(item.stdout)
    view = json.loads(item.stdout)
    assert view["done"] is True and view["roles"]["thumb"]["size"] > 0


def test_wrong_kinds_are_refused_at_intake_naming_the_other_command(
    tmp_path: Path, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    photo = corpus / "media" / "exif-samples__Canon_40D.jpg"
    audio = corpus / "audio" / "jfk.wav"
    ingest = invoke("ingest", str(photo))
    assert ingest.exit_code == ExitCode.HALTED
    assert "`conveyor media add ALBUM" in ingest.stderr
    assert "1 file: 0 accepted as records (0 done, 0 halted), 1 refused" in ingest.stderr
    assert invoke("records", "list").stdout == ""  # no halted record left behind
    invoke("albums", "create", "a")
    media = invoke("media", "add", "a", str(audio), str(photo))
    assert media.exit_code == ExitCode.HALTED
    assert f"`conveyor records add {audio}`" in media.stderr
    assert "2 files: 1 accepted as items (1 done, 0 halted), 1 refused" in media.stderr


def test_another_owners_album_hints_at_owner_and_empty_lists_say_how_to_add(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    cli = invoke
    records = cli("records", "list")
    assert records.stdout == "" and "conveyor records add FILE" in records.stderr
    albums = cli("albums", "list")
    assert albums.stdout == "" and "conveyor albums create NAME" in albums.stderr
    cli("albums", "create", "Work", "--owner", "bob")
    other = cli("media", "list", "Work")
    assert other.exit_code == ExitCode.NOT_FOUND
    assert "does not exist for owner 'me'" in other.stderr and "--owner bob" in other.stderr
    empty = cli("media", "list", "Work", "--owner", "bob")
    # By id, which pastes as one argument whatever the album's name.
    assert empty.exit_code == 0 and "conveyor media add 1 FILE… --owner bob" in empty.stderr
    none = cli("media", "list", "Holidays")
    assert none.exit_code == ExitCode.NOT_FOUND and "conveyor albums create" in none.stderr
    users = cli("users", "list")
    assert "conveyor users create NAME" in users.stderr


def test_an_accepted_files_size_is_said_in_binary_units(tmp_path: Path, corpus: Path) -> None:
    """The event text of an accepted file gives its size as people read sizes (``KiB``), not
    ``352078 bytes``."""
    jfk = corpus / "audio" / "jfk.wav"
    added = run(["records", "add", str(jfk)], tmp_path, CONVEYOR_PIPELINE__WORKERS="0")
    assert added.returncode == 0, added.stderr
    events = run(["records", "events", "1", "--json"], tmp_path)
    (accepted,) = json.loads(events.stdout)
    size = jfk.stat().st_size
    assert accepted["text"] == f"jfk.wav: {size / 1024:.1f} KiB, audio/wav"
    assert "bytes" not in run(["records", "events", "1"], tmp_path).stdout
