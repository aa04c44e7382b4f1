"""Names and shapes the spec fixes (D1, D5, D9, D10), on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine, insert, inspect
from sqlalchemy.exc import IntegrityError

from conveyor.db.tables import (
    audio_records,
    files,
    record_events,
    record_topics,
    texts,
    topics,
)
from conveyor.pipeline.lifecycle import entry_values


def columns(engine: Engine, table: str) -> set[str]:
    return {c["name"] for c in inspect(engine).get_columns(table)}


def test_d1_record_centric_model(engine: Engine) -> None:
    record = columns(engine, "audio_records")
    assert {"owner", "title", "brief", "stage", "claim_token", "halted_at"} <= record
    # Everything that changes with the provider lives on the attempt row, not the record.
    attempt = columns(engine, "recognition_attempts")
    assert {"provider", "operation_id", "source_url", "model", "raw_response_file_id"} <= attempt
    assert not {"operation_id", "source_url", "model", "transcript"} & record
    assert {"record_id", "kind", "body"} <= columns(engine, "texts")


def test_d5_names(engine: Engine) -> None:
    assert audio_records.name == "audio_records"
    assert "kind" in columns(engine, "texts") and "format" not in columns(engine, "texts")
    assert "format" in columns(engine, "files")
    events = columns(engine, "record_events")
    assert "outcome_text" in events and "error_text" not in events
    assert {texts.name, files.name, record_events.name} == {"texts", "files", "record_events"}


def test_d9_at_most_five_topics_per_record(engine: Engine) -> None:
    with engine.begin() as conn:
        file_id = conn.execute(
            insert(files).values(
                key="k", mime_type="audio/wav", size=1, state="ready", created_at=0.0
            )
        ).inserted_primary_key[0]  # type: ignore[index]
        record_id = conn.execute(
            insert(audio_records).values(
                owner="ann", created_at=0.0, original_file_id=file_id, **entry_values("done", 0.0)
            )
        ).inserted_primary_key[0]  # type: ignore[index]
        topic_ids = [
            conn.execute(insert(topics).values(owner="ann", name=f"t{i}")).inserted_primary_key[0]  # type: ignore[index]
            for i in range(6)
        ]
        for position in range(5):
            conn.execute(
                insert(record_topics).values(
                    record_id=record_id, position=position, topic_id=topic_ids[position]
                )
            )
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(
            insert(record_topics).values(record_id=record_id, position=5, topic_id=topic_ids[5])
        )


def test_d10_the_final_stage_is_done() -> None:
    from conveyor.config import Settings
    from conveyor.runtime import Runtime

    runtime = Runtime(Settings())
    assert runtime.audio.stages[-1].name == "done"
    assert runtime.audio.terminal_stages == ["done"]
    # The spec's stages, verbatim and in this order; an optional stage may sit between them.
    names = iter(s.name for s in runtime.audio.stages)
    spec = ["uploaded", "normalized", "submitted", "transcribed", "done"]
    assert all(stage in names for stage in spec), "the spec's stages, in order"
