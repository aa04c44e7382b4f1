"""Bulk resume (P9 by the hundred): freeze the halted set by reason and stage, resume exactly
that set, on SQLite and PostgreSQL; and the CLI's --reason/--stage/--all/--dry-run."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine, select, update
from typer.testing import CliRunner, Result

from conveyor.audio.intake import accept_audio
from conveyor.cli.app import app
from conveyor.config import Settings
from conveyor.db.tables import audio_records, record_events
from conveyor.pipeline import halted_ids, resume_many
from conveyor.runtime import Runtime
from conveyor.testing import FakeClock

WAV = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "audio" / "jfk.wav"


def halt(engine: Engine, record_id: int, stage: str, reason: str) -> None:
    with engine.begin() as conn:
        conn.execute(
            update(audio_records)
            .where(audio_records.c.id == record_id)
            .values(stage=stage, halted_at=5.0, halt_reason=reason, halt_error="x", attempts=3)
        )


def test_p9_resume_many_resumes_exactly_the_frozen_set(engine: Engine, tmp_path: Path) -> None:
    clock = FakeClock()
    runtime = Runtime(Settings(storage={"root": tmp_path / "data"}), clock, engine=engine)  # type: ignore[arg-type]
    ids = [
        accept_audio(engine, runtime.store, clock, WAV, owner="a", keep_duplicate=True)
        for _ in range(7)
    ]
    plan = {
        ids[0]: ("uploaded", "stuck"),
        ids[1]: ("normalized", "stuck"),
        ids[2]: ("normalized", "stuck"),
        ids[3]: ("normalized", "attempts_exhausted"),
        ids[4]: ("submitted", "stuck"),
    }
    for record_id, (stage, reason) in plan.items():
        halt(engine, record_id, stage, reason)
    domain = runtime.audio
    assert halted_ids(engine, domain) == ids[:5]
    assert halted_ids(engine, domain, reason="stuck") == [ids[0], ids[1], ids[2], ids[4]]
    assert halted_ids(engine, domain, reason="stuck", stage="normalized") == ids[1:3]
    frozen = halted_ids(engine, domain, reason="stuck")
    # After freezing: one is resumed by someone else, one more halts with the same reason.
    resume_many(engine, domain, [ids[4]], clock=clock)
    halt(engine, ids[5], "normalized", "stuck")
    clock.advance(10)
    done = resume_many(engine, domain, [*frozen, ids[6], 999], clock=clock)
    assert done.resumed == [ids[0], ids[1], ids[2]]
    assert done.skipped == [ids[4], ids[6], 999]
    with engine.connect() as conn:
        rows = {r.id: r for r in conn.execute(select(audio_records))}
        events = (
            conn.execute(
                select(record_events.c.record_id).where(record_events.c.outcome == "resumed")
            )
            .scalars()
            .all()
        )
    for record_id in done.resumed:
        row = rows[record_id]
        assert row.halted_at is None and row.halt_reason is None and row.attempts == 0
        assert row.stage == plan[record_id][0]  # continues from the stage it reached
        assert row.state_entered_at == clock.now()
    assert rows[ids[3]].halted_at is not None  # another reason: untouched
    assert rows[ids[5]].halted_at is not None  # halted after the set was frozen: untouched
    assert sorted(events) == sorted([ids[4], *done.resumed])


def test_p9_records_resume_takes_reason_stage_all_and_dry_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    url = f"sqlite:///{tmp_path / 'data' / 'conveyor.db'}"
    monkeypatch.setenv("CONVEYOR_DATABASE__URL", url)
    monkeypatch.setenv("CONVEYOR_STORAGE__ROOT", str(tmp_path / "data"))
    monkeypatch.setenv("COLUMNS", "200")
    monkeypatch.chdir(tmp_path)
    settings = Settings(database={"url": url}, storage={"root": tmp_path / "data"})  # type: ignore[arg-type]
    runtime = Runtime(settings)
    runtime.migrate()
    engine = runtime.engine
    ids = [
        accept_audio(engine, runtime.store, runtime.clock, WAV, owner="a", keep_duplicate=True)
        for _ in range(4)
    ]
    halt(engine, ids[0], "normalized", "stuck")
    halt(engine, ids[1], "normalized", "stuck")
    halt(engine, ids[2], "uploaded", "stuck")
    halt(engine, ids[3], "uploaded", "undecodable")
    runner = CliRunner()

    def run(*args: str) -> Result:
        return runner.invoke(app, list(args))

    dry = run("records", "resume", "--reason", "stuck", "--dry-run")
    assert dry.exit_code == 0, dry.output
    assert "3 halted records (reason stuck) would be resumed" in dry.output
    assert "ids: 1, 2, 3" in dry.output
    assert halted_ids(engine, runtime.audio) == ids  # a dry run changes nothing
    assert run("records", "resume").exit_code == 2
    assert run("records", "resume", "1", "--all").exit_code == 2
    bad_stage = run("records", "resume", "--stage", "nowhere")
    assert bad_stage.exit_code == 2
    some = run("records", "resume", "--reason", "stuck", "--stage", "normalized")
    assert some.exit_code == 0, some.output
    assert "resumed 2 of 2 halted records (reason stuck, stage normalized)" in some.output
    assert halted_ids(engine, runtime.audio) == ids[2:]
    rest = run("records", "resume", "--all")
    assert "resumed 2 of 2 halted records" in rest.output
    assert "resumed 0 of 0 halted records" in run("records", "resume", "--all").output
    single = run("records", "resume", "1")
    assert single.exit_code == 4  # ExitCode.CONFLICT: not halted
    media = run("media", "resume", "--all", "--dry-run")
    assert media.exit_code == 0 and "0 halted items would be resumed" in media.output
    engine.dispose()
