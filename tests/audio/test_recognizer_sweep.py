"""The local recognizer's job folders of deleted and halted (stuck) records are swept: a queued
job stops taking a recognizer, a running one is stopped, and the live record's job is kept; a
resumed record is recognised again. Real recognizer processes, SQLite and PostgreSQL."""

from __future__ import annotations

import time
from pathlib import Path

from sqlalchemy import Engine, update

from conveyor.audio import queries
from conveyor.audio.deletion import delete_record
from conveyor.audio.intake import accept_audio
from conveyor.audio.recognizer_sweep import sweep_job_folders
from conveyor.config import Settings
from conveyor.db.tables import audio_records
from conveyor.pipeline import resume
from conveyor.providers import LocalWhisperProvider
from conveyor.runtime import Runtime


def _stage(runtime: Runtime, rid: int) -> str:
    with runtime.engine.connect() as conn:
        row = queries.record_by_id(conn, rid)
    assert row is not None
    return "halted" if row["halted_at"] is not None else str(row["stage"])


def _hold_at_submitted(engine: Engine, until: float | None) -> None:
    with engine.begin() as conn:
        conn.execute(
            update(audio_records)
            .where(audio_records.c.stage == "submitted", audio_records.c.claim_token.is_(None))
            .values(retry_at=until)
        )


def test_job_folders_of_deleted_and_stuck_records_are_swept_and_resume_recognises_again(
    engine: Engine, tmp_path: Path, corpus: Path
) -> None:
    settings = Settings(
        storage={"root": tmp_path / "data"},  # type: ignore[arg-type]
        pipeline={"workers": 1, "poll_interval": 0.1, "retry_base": 0.2},  # type: ignore[arg-type]
        transcription={"poll_delay": 0.2, "processes": 1, "idle_exit": 30},  # type: ignore[arg-type]
    )
    runtime = Runtime(settings, engine=engine)
    provider = runtime.provider
    assert isinstance(provider, LocalWhisperProvider)
    executor = runtime.pool({}).executor
    clip = corpus / "audio" / "jfk.wav"
    deleted, stuck, live = (
        accept_audio(engine, runtime.store, runtime.clock, clip, owner="ann", keep_duplicate=True)
        for _ in range(3)
    )
    while {_stage(runtime, r) for r in (deleted, stuck, live)} != {"submitted"}:
        assert executor.run_once(runtime.audio, "audio")
        # Submitted recordings wait for their poll: none is collected before all three are sent.
        _hold_at_submitted(engine, until=time.time() + 3600)
    keys = {}
    with engine.connect() as conn:
        for rid in (deleted, stuck, live):
            attempt = queries.latest_attempt(conn, rid)
            assert attempt is not None
            keys[rid] = str(attempt["operation_id"])
    assert {name for name, _ in provider.job_folders()} == set(keys.values())

    delete_record(engine, runtime.store, runtime.clock, deleted)
    with engine.begin() as conn:  # what the stuck watchdog does to a record that waited too long
        conn.execute(
            update(audio_records)
            .where(audio_records.c.id == stuck)
            .values(halted_at=time.time() - 10, halt_reason="stuck", halt_error="no progress")
        )
    # Within the grace nothing goes: a folder or a halt a moment old may be wanted yet.
    assert sweep_job_folders(engine, provider, grace=3600, now=time.time()) == []
    removed = sweep_job_folders(engine, provider, grace=1, now=time.time() + 2)
    assert sorted(removed) == sorted([keys[deleted], keys[stuck]])
    assert {name for name, _ in provider.job_folders()} == {keys[live]}
    assert sweep_job_folders(engine, provider, grace=1, now=time.time() + 2) == []

    resume(engine, runtime.audio, stuck, clock=runtime.clock)
    _hold_at_submitted(engine, until=None)
    deadline = time.monotonic() + 300
    while {_stage(runtime, r) for r in (stuck, live)} != {"done"}:
        assert time.monotonic() < deadline, "records did not finish"
        if not executor.run_once(runtime.audio, "audio"):
            time.sleep(0.1)
    with engine.connect() as conn:
        states = [a["state"] for a in queries.attempts_of(conn, stuck)]
        kept = [a["state"] for a in queries.attempts_of(conn, live)]
    # The swept job polls as unknown: that attempt failed, a new one recognised the recording.
    assert states == ["failed", "done"] and kept == ["done"]
    assert provider.job_folders() == []
