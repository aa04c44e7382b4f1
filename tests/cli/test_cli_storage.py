"""``conveyor storage check`` and ``sweep`` as a user runs them: the exit code says which
differences were found (8 missing, 16 sizes, 32 orphans, summed), ``--json`` lists every key,
``sweep`` removes the orphans and ``--dry-run`` nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path

from conveyor.cli.exits import ExitCode
from conveyor.config import Settings
from conveyor.objects import put_file_row
from conveyor.runtime import Runtime
from tests.support.cli_run import run


def test_storage_check_and_sweep(tmp_path: Path) -> None:
    clean = run(["storage", "check"], tmp_path)
    assert clean.returncode == 0, clean.stderr
    assert "the journal and the store agree" in clean.stderr
    runtime = Runtime(Settings(storage={"root": tmp_path / "conveyor-data"}))  # type: ignore[arg-type]
    runtime.migrate()
    runtime.store.put("uploads/audio/orphan", [b"x" * 3])
    runtime.store.put("uploads/audio/short", [b"x" * 3])
    os.utime(tmp_path / "conveyor-data" / "uploads/audio/orphan", (1, 1))  # long ago
    with runtime.engine.begin() as conn:
        for key in ("uploads/audio/short", "audio/1/normalized.wav"):
            put_file_row(conn, key=key, mime_type="audio/wav", size=4, now=1.0)
    runtime.engine.dispose()
    checked = run(["storage", "check", "--json"], tmp_path)
    want = ExitCode.MISSING_OBJECTS | ExitCode.SIZE_MISMATCHES | ExitCode.ORPHANS
    assert checked.returncode == want == 56, checked.stderr
    report = json.loads(checked.stdout)
    assert report["missing"] == ["audio/1/normalized.wav"]
    assert report["mismatched"] == [
        {"key": "uploads/audio/short", "journal_size": 4, "stored_size": 3}
    ]
    assert report["orphans"] == ["uploads/audio/orphan"]
    shown = run(["storage", "check"], tmp_path)
    assert shown.returncode == 56
    assert "orphan    uploads/audio/orphan" in shown.stdout
    assert "conveyor storage sweep" in shown.stderr
    dry = run(["storage", "sweep", "--dry-run", "--json"], tmp_path)
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["removed"] == ["uploads/audio/orphan"]
    assert (tmp_path / "conveyor-data" / "uploads/audio/orphan").exists()
    swept = run(["storage", "sweep"], tmp_path)
    assert swept.returncode == 0, swept.stderr
    assert "removed  uploads/audio/orphan" in swept.stdout
    assert not (tmp_path / "conveyor-data" / "uploads/audio/orphan").exists()
    after = run(["storage", "check"], tmp_path)
    assert after.returncode == ExitCode.MISSING_OBJECTS | ExitCode.SIZE_MISMATCHES
