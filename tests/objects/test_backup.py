"""``conveyor backup`` under load and ``conveyor restore``: a backup taken while recordings are
uploaded and others deleted restores to a database whose every record has its objects, and
whose every journal row names an object of its size (nothing missing, nothing extra)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from sqlalchemy import func, select

from conveyor.audio.deletion import delete_record
from conveyor.audio.intake import accept_audio
from conveyor.cli.exits import ExitCode
from conveyor.config import Settings
from conveyor.db.tables import audio_records, files
from conveyor.objects.reconcile import check_storage
from conveyor.runtime import Runtime
from tests.support.cli_run import run


def _runtime(root: Path) -> Runtime:
    return Runtime(Settings(storage={"root": root}))  # type: ignore[arg-type]


def test_a_backup_taken_under_load_restores_every_record_and_object(
    tmp_path: Path, corpus: Path
) -> None:
    live = _runtime(tmp_path / "conveyor-data")
    live.migrate()
    wav = corpus / "audio" / "jfk.wav"
    # One owner per upload: an owner's second copy of the same bytes is refused as a duplicate.
    ids = [
        accept_audio(
            live.engine, live.store, live.clock, wav, owner=f"early-{n}", keep_duplicate=True
        )
        for n in range(6)
    ]
    stop = threading.Event()
    made: list[int] = []

    def load() -> None:  # uploads arriving and records deleted while the backup runs
        n = 0
        while not stop.is_set():
            made.append(
                accept_audio(
                    live.engine,
                    live.store,
                    live.clock,
                    wav,
                    owner=f"under-load-{n}",
                    keep_duplicate=True,
                )
            )
            if n % 2 == 0 and ids:
                delete_record(live.engine, live.store, live.clock, ids.pop(0))
            n += 1

    thread = threading.Thread(target=load)
    thread.start()
    try:
        taken = run(["backup", str(tmp_path / "backup"), "--json"], tmp_path)
    finally:
        stop.set()
        thread.join()
    assert taken.returncode == 0, taken.stderr
    report = json.loads(taken.stdout)
    assert report["objects"] >= 1
    assert made, "uploads went on during the backup"
    manifest = json.loads((tmp_path / "backup" / "manifest.json").read_text())
    assert len(manifest["objects"]) == report["objects"]

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    restored = run(["restore", str(tmp_path / "backup")], elsewhere)
    assert restored.returncode == 0, restored.stderr
    back = _runtime(elsewhere / "conveyor-data")
    with back.engine.connect() as conn:
        records = conn.execute(select(audio_records.c.original_file_id)).scalars().all()
        journal = conn.execute(select(func.count()).select_from(files)).scalar_one()
    assert len(records) == journal == report["objects"], "one original per record, no strays"
    agreement = check_storage(back.engine, back.store, grace=0, now=1e12)
    assert agreement.agrees, agreement
    assert agreement.stored == journal
    checked = run(["storage", "check"], elsewhere)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # A second restore over a database with records is refused unless --replace.
    again = run(["restore", str(tmp_path / "backup")], elsewhere)
    assert again.returncode == ExitCode.CONFLICT and "--replace" in again.stderr
    assert run(["restore", str(tmp_path / "backup"), "--replace"], elsewhere).returncode == 0
    back.engine.dispose()
    live.engine.dispose()


def test_backup_refuses_a_folder_that_is_not_empty_and_restore_a_folder_that_is_no_backup(
    tmp_path: Path,
) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    assert run(["backup", "full"], tmp_path).returncode == ExitCode.USAGE
    refused = run(["restore", "full"], tmp_path)
    assert refused.returncode == ExitCode.USAGE and "not a conveyor backup" in refused.stderr
