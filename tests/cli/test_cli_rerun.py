"""A rerun of an interrupted ``records add`` / ``media add`` finishes what it finds already there
(waited for, carded and counted as what it accepts, by the same exit-code rules), and a stdout
whose reader goes away stops intake as Ctrl-C does: exit 141, the summary on stderr, no stored
object without its record. Real processes, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import math
import re
import struct
import subprocess
import wave
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, func, select

from conveyor.cli.exits import ExitCode
from conveyor.db.tables import audio_records, files
from conveyor.objects import LocalStore
from tests.support.cli_run import CONVEYOR, clean_env, run
from tests.support.media import make_photo
from tests.support.stored import object_keys

NO_WORKERS = {"CONVEYOR_PIPELINE__WORKERS": "0", "CONVEYOR_MEDIA__SHORT_WORKERS": "0"}


def _env(tmp_path: Path, engine: Engine) -> dict[str, str]:
    """The storage in ``tmp_path/data``; the test database."""
    (tmp_path / "conveyor.toml").write_text('[storage]\nroot = "data"\n')
    url = engine.url.render_as_string(hide_password=False)
    return {"CONVEYOR_DATABASE__URL": url.replace("postgresql+psycopg", "postgresql")}


def _events(out: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.splitlines()]


def _workers_started(tmp_path: Path, env: dict[str, str]) -> int:
    listed = run(["workers", "list", "--stopped", "--json"], tmp_path, **env)
    assert listed.returncode == 0, listed.stderr
    return len(json.loads(listed.stdout))


def test_a_rerun_waits_for_the_records_already_there_until_they_are_done(
    tmp_path: Path, corpus: Path, engine: Engine
) -> None:
    env = _env(tmp_path, engine)
    paths = [str(corpus / "audio" / "LDC93S1.flac"), str(corpus / "audio" / "jfk.wav")]
    # The first run accepts both and leaves them for a worker (as one interrupted after intake).
    first = run(["records", "add", *paths], tmp_path, **env, **NO_WORKERS)
    assert first.returncode == ExitCode.OK, first.stderr
    # The rerun stores nothing again, but runs them to done: it exited 0 at once, unfinished.
    again = run(["records", "add", "--json", *paths], tmp_path, **env)
    assert again.returncode == ExitCode.OK, again.stderr
    events = _events(again.stdout)
    assert [(e["event"], e["record"]) for e in events[:2]] == [("duplicate", 1), ("duplicate", 2)]
    states = {(e["record"], e["state"]) for e in events if e["event"] == "state"}
    assert {(1, "done"), (2, "done")} <= states  # the same progress as accepted ones
    results = {e["record"]: e["card"] for e in events if e["event"] == "result"}
    assert sorted(results) == [1, 2] and all(card["done"] for card in results.values())
    assert "ask not what your country can do for you" in results[2]["transcript"]
    summary = events[-1]
    assert summary["event"] == "summary"
    assert (summary["accepted"], summary["duplicates"], summary["records"]) == (0, 2, 2)
    assert (summary["done"], summary["halted"], summary["unfinished"]) == (2, 0, 0)
    assert "2 already there (records 1, 2); 2 records: 2 done, 0 halted" in again.stderr
    assert _workers_started(tmp_path, env) == 1
    # Done already: said at once, cards on stdout, no worker started for them.
    done = run(["records", "add", *paths], tmp_path, **env)
    assert done.returncode == ExitCode.OK, done.stderr
    assert "record 2  jfk.wav" in done.stdout and "ask not what your country" in done.stdout
    assert "record 1: done\nrecord 2: done\n" in done.stderr
    assert _workers_started(tmp_path, env) == 1
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(audio_records)).scalar_one() == 2


def test_a_record_already_there_that_halted_is_a_failure_as_one_accepted(
    tmp_path: Path, corpus: Path, engine: Engine
) -> None:
    env = _env(tmp_path, engine)
    corrupt = str(corpus / "audio" / "corrupt_bad_header.wav")  # halts undecodable at once
    first = run(["records", "add", corrupt], tmp_path, **env, **NO_WORKERS)
    assert first.returncode == ExitCode.OK, first.stderr
    again = run(["records", "add", "--json", corrupt], tmp_path, **env)
    assert again.returncode == ExitCode.HALTED, again.stderr
    events = _events(again.stdout)
    assert events[0] == {"event": "duplicate", "file": corrupt, "record": 1}
    (result,) = [e for e in events if e["event"] == "result"]
    assert result["card"]["halted"] is True and result["card"]["halt_reason"] == "undecodable"
    assert (events[-1]["halted"], events[-1]["done"], events[-1]["unfinished"]) == (1, 0, 0)
    # Halted already: exit 1 at once, with workers or without (it exited 0, "already there").
    for extra in ({}, NO_WORKERS):
        halted = run(["records", "add", corrupt], tmp_path, **env, **extra)
        assert halted.returncode == ExitCode.HALTED, (extra, halted.stderr)
        assert "1 already there (record 1); 1 record: 0 done, 1 halted" in halted.stderr


def test_a_media_rerun_waits_for_the_items_already_there(
    tmp_path: Path, corpus: Path, engine: Engine
) -> None:
    env = _env(tmp_path, engine)
    assert run(["albums", "create", "Trip"], tmp_path, **env).returncode == 0
    photos = [str(make_photo(tmp_path / f"p{index}.jpg", index)) for index in range(2)]
    broken = str(corpus / "media" / "pillow__truncated_jpeg.jpg")  # halts undecodable
    first = run(["media", "add", "Trip", *photos, broken], tmp_path, **env, **NO_WORKERS)
    assert first.returncode == ExitCode.OK, first.stderr
    again = run(["media", "add", "Trip", "--json", *photos], tmp_path, **env)
    assert again.returncode == ExitCode.OK, again.stderr
    events = _events(again.stdout)
    assert [e["event"] for e in events[:2]] == ["duplicate", "duplicate"]
    results = [e["card"] for e in events if e["event"] == "result"]
    assert [card["id"] for card in results] == [1, 2]
    assert all(card["done"] and card["roles"]["thumb"]["size"] > 0 for card in results)
    assert (events[-1]["items"], events[-1]["done"], events[-1]["unfinished"]) == (2, 2, 0)
    halted = run(["media", "add", "Trip", "--json", broken], tmp_path, **env)
    assert halted.returncode == ExitCode.HALTED, halted.stderr
    events = _events(halted.stdout)
    assert {"event": "state", "item": 3, "state": "halted: undecodable"} in events
    (result,) = [e["card"] for e in events if e["event"] == "result"]
    assert result["id"] == 3 and result["halted"] is True
    # Halted already: said at once, the same state event, exit 1.
    again = run(["media", "add", "Trip", "--json", broken], tmp_path, **env)
    assert again.returncode == ExitCode.HALTED, again.stderr
    assert {"event": "state", "item": 3, "state": "halted: undecodable"} in _events(again.stdout)


def _tone(path: Path, number: int) -> str:
    """A tenth of a second of a sine at 200 + ``number`` Hz, 16 kHz mono: distinct bytes."""
    frames = b"".join(
        struct.pack("<h", int(8000 * math.sin(2 * math.pi * (200 + number) * i / 16000)))
        for i in range(1600)
    )
    with wave.open(str(path), "wb") as sink:
        sink.setnchannels(1)
        sink.setsampwidth(2)
        sink.setframerate(16000)
        sink.writeframes(frames)
    return str(path)


SUMMARY = re.compile(
    r"^(\d+) files: (\d+) accepted as records \(0 done, 0 halted, \d+ unfinished\), "
    r"0 refused, (\d+) not tried$",
    re.MULTILINE,
)


def test_a_closed_stdout_stops_intake_as_ctrl_c_does_and_exits_141(
    tmp_path: Path, engine: Engine
) -> None:
    env = _env(tmp_path, engine)
    paths = [_tone(tmp_path / f"tone-{number:03d}.wav", number) for number in range(300)]
    process = subprocess.Popen(
        [CONVEYOR, "records", "add", "--json", *paths],
        cwd=tmp_path,
        env=clean_env(**env, **NO_WORKERS),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        bufsize=0,
    )
    assert process.stdout is not None and process.stderr is not None
    first = json.loads(process.stdout.readline())
    assert first == {"event": "accepted", "file": paths[0], "record": 1}
    process.stdout.close()  # the reader goes away, as `| head -1` does
    errors = process.stderr.read().decode()
    assert process.wait(timeout=300) == ExitCode.PIPE_CLOSED, errors
    assert "stdout closed by its reader: stopping…" in errors
    assert "Exception ignored" not in errors and "Traceback" not in errors
    found = SUMMARY.search(errors)
    assert found is not None, errors
    given, accepted, untried = map(int, found.groups())
    assert given == len(paths) and accepted + untried == given and untried > 0
    assert f"accepted records {', '.join(map(str, range(1, accepted + 1)))};" in errors
    # Each stored object has its record: as many records as objects, and no temporary left.
    with engine.connect() as conn:
        records = conn.execute(select(func.count()).select_from(audio_records)).scalar_one()
        journal = set(conn.execute(select(files.c.key)).scalars())
    assert records == accepted
    assert set(object_keys(LocalStore(tmp_path / "data"))) == journal and len(journal) == accepted
    assert [p for p in (tmp_path / "data").rglob("*.part")] == []
    # The same command again takes the rest, once each.
    rest = run(["records", "add", "--json", *paths], tmp_path, **env, **NO_WORKERS)
    assert rest.returncode == ExitCode.OK, rest.stderr
    summary = _events(rest.stdout)[-1]
    assert (summary["duplicates"], summary["accepted"]) == (accepted, untried)


def test_a_closed_stdout_while_the_cards_are_printed_exits_141_with_the_summary(
    tmp_path: Path, corpus: Path, engine: Engine
) -> None:
    env = _env(tmp_path, engine)
    photos = [str(make_photo(tmp_path / f"p{index}.jpg", index)) for index in range(2)]
    assert run(["albums", "create", "Trip"], tmp_path, **env).returncode == 0
    assert run(["media", "add", "Trip", *photos], tmp_path, **env).returncode == ExitCode.OK
    # Plain: the cards; --json: the duplicate event (intake stops there, the second photo is
    # not tried).
    for args, said in (
        (photos, "2 files: 0 accepted as items, 0 refused, 2 already there (items 1, 2); 2 items"),
        (["--json", *photos], "1 already there (item 1), 1 not tried; 1 item: 1 done, 0 halted"),
    ):
        process = subprocess.Popen(
            [CONVEYOR, "media", "add", "Trip", *args],
            cwd=tmp_path,
            env=clean_env(**env),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert process.stdout is not None
        process.stdout.close()  # gone before the command printed anything
        _, error_bytes = process.communicate(timeout=300)
        errors = error_bytes.decode()
        assert process.returncode == ExitCode.PIPE_CLOSED, (args, errors)
        assert "stdout closed by its reader: stopping…" in errors
        assert "Exception ignored" not in errors and "Traceback" not in errors
        assert said in errors, errors


def test_a_file_already_in_another_album_is_said_with_that_albums_name(
    tmp_path: Path, engine: Engine
) -> None:
    """Duplicates are found across the owner's albums: a file already in album K, added to K2,
    is not stored again, and the line says where it is; in the same album it says no album."""
    env = {**_env(tmp_path, engine), **NO_WORKERS}
    photo = str(make_photo(tmp_path / "p.jpg", 0))
    for name in ("K", "K2"):
        assert run(["albums", "create", name], tmp_path, **env).returncode == 0
    assert run(["media", "add", "K", photo], tmp_path, **env).returncode == ExitCode.OK
    elsewhere = run(["media", "add", "K2", photo], tmp_path, **env)
    assert elsewhere.returncode == ExitCode.OK, elsewhere.stderr
    assert 'p.jpg: already there as item 1 in album "K"; not stored again' in elsewhere.stderr
    same = run(["media", "add", "K", photo], tmp_path, **env)
    assert same.returncode == ExitCode.OK, same.stderr
    assert "p.jpg: already there as item 1; not stored again" in same.stderr
