"""Driving the audio pipeline on a fake clock against a loopback provider."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, RowMapping, select

from conveyor.audio import queries
from conveyor.audio.intake import accept_audio
from conveyor.config import Settings
from conveyor.db.tables import audio_records, files, recognition_attempts, record_events
from conveyor.pipeline import Executor
from conveyor.pipeline.queries import now_of
from conveyor.pipeline.rescuer import rescue
from conveyor.providers import RecognitionProvider
from conveyor.runtime import Runtime
from conveyor.testing import FakeClock
from tests.support.stored import stored_bytes


def make_runtime(
    engine: Engine, tmp_path: Path, provider: RecognitionProvider, clock: FakeClock
) -> Runtime:
    settings = Settings(
        storage={"root": tmp_path / "data"},  # type: ignore[arg-type]
        pipeline={"workers": 1, "retry_base": 2.0, "retry_max": 60.0, "max_attempts": 3},  # type: ignore[arg-type]
    )
    return Runtime(settings, clock, engine=engine, provider=provider)


def ingest(runtime: Runtime, path: Path, **values: Any) -> int:
    return accept_audio(
        runtime.engine,
        runtime.store,
        runtime.clock,
        path,
        owner="ann",
        **values,
        keep_duplicate=True,
    )


def record(runtime: Runtime, rid: int) -> RowMapping:
    with runtime.engine.connect() as conn:
        row = queries.record_by_id(conn, rid)
    assert row is not None
    return row


def drive(
    runtime: Runtime, clock: FakeClock, rid: int, *, steps: int = 60, until: float | None = None
) -> tuple[RowMapping, list[float]]:
    """Run steps until the record is done or halted (or the fake time reaches ``until``); when
    nothing is claimable, jump the fake clock to the record's retry time. Returns the record and
    every pause the pipeline chose."""
    executor: Executor = runtime.pool({}).executor
    pauses: list[float] = []
    for _ in range(steps):
        row = record(runtime, rid)
        if row["stage"] == "done" or row["halted_at"] is not None:
            return row, pauses
        if until is not None and clock.now() >= until:
            return row, pauses
        if not executor.run_once(runtime.audio, "audio"):
            # As a live pool's rescuer would: a lapsed started claim is a failed attempt (D18).
            if rescue(runtime.engine, runtime.audio, runtime.settings.pipeline, now_of(clock)):
                continue
            row = record(runtime, rid)
            assert row["retry_at"] is not None, dict(row)
            pause = float(row["retry_at"]) - clock.now()
            pauses.append(pause)
            clock.advance(max(pause, 0.0) + 0.001)
    return record(runtime, rid), pauses


def attempts(runtime: Runtime, rid: int) -> list[RowMapping]:
    with runtime.engine.connect() as conn:
        return list(queries.attempts_of(conn, rid))


def everything_stored(runtime: Runtime) -> str:
    """Every text the database holds about records and attempts, and every stored raw response,
    for the D16 check."""
    parts: list[str] = []
    with runtime.engine.connect() as conn:
        for table in (audio_records, record_events, recognition_attempts, files):
            for row in conn.execute(select(table)).mappings():
                parts.append(json.dumps({k: str(v) for k, v in row.items()}))
        for key in conn.execute(select(files.c.key)).scalars():
            if key.endswith(".json"):
                parts.append(stored_bytes(runtime.store, key).decode("utf-8", "replace"))
    return "\n".join(parts)
