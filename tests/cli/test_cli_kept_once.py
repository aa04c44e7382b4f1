"""Two ``records add`` (or ``media add``) runs over the same files at the same moment keep each
file once per owner: one record (item) per file, the other run told it is already there, no
stored object without its journal row. Real processes, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, func, select, text

from conveyor.db.tables import audio_records, files, media_items
from conveyor.objects import LocalStore
from tests.support.cli_run import CONVEYOR, clean_env, run
from tests.support.media import make_photo
from tests.support.stored import object_keys

COUNT = 12


def _env(tmp_path: Path, engine: Engine) -> dict[str, str]:
    """No workers in the commands (intake alone is raced); the test database."""
    (tmp_path / "conveyor.toml").write_text(
        '[storage]\nroot = "data"\n[pipeline]\nworkers = 0\n[media]\nshort_workers = 0\n'
    )
    url = engine.url.render_as_string(hide_password=False)
    return {"CONVEYOR_DATABASE__URL": url.replace("postgresql+psycopg", "postgresql")}


def _at_once(
    tmp_path: Path, engine: Engine, table: str, env: dict[str, str], *args: str
) -> list[list[dict[str, Any]]]:
    """``conveyor ARGS --json`` twice at once; each run's events.

    The runs are made to meet. On PostgreSQL, until each has stored its first file, the test
    holds an EXCLUSIVE lock on ``table``, which lets them read but not insert: both find that
    file new before either can add it (before the decision was locked, most files came
    twice). On SQLite every transaction takes the write lock, so the test holds it while both
    start (each waits for it at its schema check) and lets them go together.
    """
    store = LocalStore(tmp_path / "data")
    postgresql = engine.dialect.name == "postgresql"
    with engine.connect() as held:
        held.begin()  # on SQLite, BEGIN IMMEDIATE: the write lock
        if postgresql:
            held.execute(text(f"LOCK TABLE {table} IN EXCLUSIVE MODE"))
        procs = [
            subprocess.Popen(
                [CONVEYOR, *args, "--json"],
                cwd=tmp_path,
                env=clean_env(**env),
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(2)
        ]
        deadline = time.monotonic() + (60 if postgresql else 3)
        while len(object_keys(store)) < 2 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(object_keys(store)) == (2 if postgresql else 0)  # each held where said
        held.rollback()
    runs = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        assert "Traceback" not in err, err
        runs.append([json.loads(line) for line in out.splitlines()])
    return runs


def _check(runs: list[list[dict[str, Any]]], noun: str, engine: Engine, tmp_path: Path) -> None:
    accepted = {e["file"]: e[noun] for r in runs for e in r if e["event"] == "accepted"}
    duplicates = [(e["file"], e[noun]) for r in runs for e in r if e["event"] == "duplicate"]
    assert len(accepted) == COUNT  # each file accepted by one of the two runs
    assert sorted(duplicates) == sorted(accepted.items())  # and said there by the other
    table = audio_records if noun == "record" else media_items
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(table)).scalar_one() == COUNT
        journal = set(conn.execute(select(files.c.key)).scalars())
    store = LocalStore(tmp_path / "data")
    assert set(object_keys(store)) == journal and len(journal) == COUNT


def test_two_records_add_at_once_keep_each_file_once(
    tmp_path: Path, corpus: Path, engine: Engine
) -> None:
    env = _env(tmp_path, engine)
    wav = (corpus / "audio" / "jfk.wav").read_bytes()
    paths = []
    for index in range(COUNT):  # distinct bytes: a sample more each
        path = tmp_path / f"in{index}.wav"
        path.write_bytes(wav + b"\0\0" * index)
        paths.append(str(path))
    _check(
        _at_once(tmp_path, engine, "audio_records", env, "records", "add", *paths),
        "record",
        engine,
        tmp_path,
    )


def test_two_media_add_at_once_keep_each_file_once(tmp_path: Path, engine: Engine) -> None:
    env = _env(tmp_path, engine)
    made = run(["albums", "create", "Trip"], tmp_path, **env)
    assert made.returncode == 0, made.stderr
    paths = [str(make_photo(tmp_path / f"p{index}.jpg", index)) for index in range(COUNT)]
    _check(
        _at_once(tmp_path, engine, "media_items", env, "media", "add", "Trip", *paths),
        "item",
        engine,
        tmp_path,
    )
