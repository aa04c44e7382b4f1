"""``conveyor backup`` under load and ``conveyor restore``: a backup taken while recordings are
uploaded and others deleted restores to a database whose every record has its objects, and
whose every journal row names an object of its size (nothing missing, nothing extra)."""

from __future__ import annotations

import json
import subprocess
import threading
from pathlib import Path

from sqlalchemy import func, select

from conveyor.audio.deletion import delete_record
from conveyor.audio.intake import accept_audio
from conveyor.cli.exits import ExitCode
from conveyor.config import Settings
from conveyor.db.tables import audio_records, files
from conveyor.objects.backup import MANIFEST
from conveyor.objects.reconcile import check_storage
from conveyor.runtime import Runtime
from tests.support.cli_run import CONVEYOR, clean_env, run
from tests.support.full_disk import fill, limit_file_size, small_disk

NO_WORKERS = {"CONVEYOR_PIPELINE__WORKERS": "0", "CONVEYOR_MEDIA__SHORT_WORKERS": "0"}


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


def _one_record(tmp_path: Path, corpus: Path) -> None:
    # 2.8 MB: an object larger than the file size limit below, beside a database smaller.
    big = tmp_path / "big.wav"
    big.write_bytes((corpus / "audio" / "jfk.wav").read_bytes() * 8)
    added = run(["records", "add", str(big)], tmp_path, **NO_WORKERS)
    assert added.returncode == 0, added.stderr


def _backup(folder: Path, cwd: Path, limit: int | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CONVEYOR, "backup", str(folder)],
        cwd=cwd,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
        preexec_fn=None if limit is None else lambda: limit_file_size(limit),
    )


def test_a_backup_onto_a_full_disk_names_the_backup_folder_and_leaves_nothing(
    tmp_path: Path, corpus: Path
) -> None:
    _one_record(tmp_path, corpus)
    with small_disk(tmp_path / "usb", 8 * 1024 * 1024) as usb:
        filler = fill(usb)
        target = usb / "backup"
        refused = _backup(target, tmp_path)
        assert refused.returncode == ExitCode.UNAVAILABLE, refused.stderr
        assert (
            f"cannot back up: the backup folder {target} is full (No space left on device); "
            "nothing was left there" in refused.stderr
        )
        assert "embedded database failed" not in refused.stderr  # it is only read
        assert not target.exists()  # made by the backup, removed with what it held
        # The disk the backup is for, mounted on the folder it is given (empty): left empty.
        assert _backup(usb, tmp_path).returncode == ExitCode.USAGE  # the filler is in it
        filler.unlink()
        taken = _backup(target, tmp_path)
        assert taken.returncode == 0, taken.stderr
        assert sorted(p.name for p in target.iterdir()) == ["conveyor.db", MANIFEST, "objects"]


def test_a_failed_backup_leaves_the_folder_empty_and_a_rerun_works(
    tmp_path: Path, corpus: Path
) -> None:
    _one_record(tmp_path, corpus)
    target = tmp_path / "backup"
    target.mkdir()
    refused = _backup(target, tmp_path, limit=2 * 1024 * 1024)
    assert refused.returncode == ExitCode.UNAVAILABLE, refused.stderr
    assert (
        f"cannot back up: the backup folder {target} cannot take a file this large "
        "(File too large)" in refused.stderr
    )
    assert list(target.iterdir()) == []  # given empty, left empty
    # What a killed backup left (its hidden folder, no manifest) is not in the way either.
    killed = target / f".backup-{'0' * 32}.partial"
    (killed / "objects").mkdir(parents=True)
    (killed / "conveyor.db").write_bytes(b"half")
    taken = _backup(target, tmp_path)
    assert taken.returncode == 0, taken.stderr
    assert sorted(p.name for p in target.iterdir()) == ["conveyor.db", MANIFEST, "objects"]
    manifest = json.loads((target / MANIFEST).read_text())
    assert len(manifest["objects"]) == 1
