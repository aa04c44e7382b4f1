"""Revision 0003 (idempotency keys) upgrades a 0002 database holding records in every stage and
finds them intact, on SQLite and PostgreSQL."""

from __future__ import annotations

from typing import Any

from sqlalchemy import Engine, insert, select, text

from conveyor.audio.stages import AUDIO
from conveyor.db.engine import is_postgresql
from conveyor.db.migrate import current_revision, upgrade
from conveyor.db.tables import (
    albums,
    audio_records,
    files,
    idempotency_keys,
    media_items,
    media_objects,
    metadata,
)
from conveyor.media.stages import MEDIA
from tests.support.old_database import AUDIO_ADDED, MEDIA_ADDED

# The columns this revision knows (0005 added `channels`).
AUDIO_COLUMNS = [c for c in audio_records.c if c.name not in {"channels", *AUDIO_ADDED}]
# (0011 adds `step_started_at` to both record tables.)
# (0012 adds `captured_offset` and `incomplete` to media items.)
MEDIA_COLUMNS = [c for c in media_items.c if c.name not in MEDIA_ADDED]


def _at_revision_0002(engine: Engine) -> None:
    with engine.begin() as conn:
        if is_postgresql(engine):
            conn.execute(text("DROP SCHEMA public CASCADE"))
            conn.execute(text("CREATE SCHEMA public"))
        else:
            # Virtual tables (the search's FTS5 index) are no table of the metadata; dropping
            # one drops its shadow tables too.
            virtual = conn.execute(
                text("SELECT name FROM sqlite_master WHERE sql LIKE 'CREATE VIRTUAL TABLE%'")
            ).scalars()
            for name in list(virtual):
                conn.execute(text(f"DROP TABLE IF EXISTS {name}"))
            for table in reversed(metadata.sorted_tables):
                conn.execute(text(f"DROP TABLE IF EXISTS {table.name}"))
            conn.execute(text("DROP TABLE IF EXISTS alembic_version"))
    upgrade(engine, "0002")
    assert current_revision(engine) == "0002"


def _queue(stage: str, **extra: Any) -> dict[str, Any]:
    return {"stage": stage, "state_entered_at": 1.0, "attempts": 0, "updated_at": 1.0, **extra}


def test_0003_upgrade_keeps_records_in_every_stage(engine: Engine) -> None:
    _at_revision_0002(engine)
    audio_stages = list(AUDIO.stage_names)
    media_stages = list(MEDIA.stage_names)
    with engine.begin() as conn:
        file_id = conn.execute(
            insert(files).values(
                key="uploads/x", mime_type="audio/wav", size=1, state="ready", created_at=1.0
            )
        ).inserted_primary_key[0]  # type: ignore[index]
        for stage in audio_stages:
            conn.execute(
                insert(audio_records).values(
                    owner="alice", created_at=1.0, original_file_id=file_id, **_queue(stage)
                )
            )
        conn.execute(
            insert(audio_records).values(
                owner="alice",
                created_at=1.0,
                original_file_id=file_id,
                **_queue("normalized", halted_at=2.0, halt_reason="stuck", claim_token="t"),
            )
        )
        album_id = conn.execute(
            insert(albums).values(owner="alice", name="a", created_at=1.0)
        ).inserted_primary_key[0]  # type: ignore[index]
        for stage in media_stages:
            item_id = conn.execute(
                insert(media_items).values(
                    owner="alice", album_id=album_id, kind="photo", uploaded_at=1.0, **_queue(stage)
                )
            ).inserted_primary_key[0]  # type: ignore[index]
            conn.execute(
                insert(media_objects).values(item_id=item_id, role="original", file_id=file_id)
            )
        before_audio = conn.execute(select(*AUDIO_COLUMNS).order_by(audio_records.c.id)).all()
        before_media = conn.execute(select(*MEDIA_COLUMNS).order_by(media_items.c.id)).all()
    upgrade(engine)
    assert (current_revision(engine) or "") >= "0003"
    with engine.begin() as conn:
        assert conn.execute(select(*AUDIO_COLUMNS).order_by(audio_records.c.id)).all() == (
            before_audio
        )
        assert conn.execute(select(*MEDIA_COLUMNS).order_by(media_items.c.id)).all() == before_media
        assert [r.stage for r in before_audio] == [*audio_stages, "normalized"]
        # The new table works with what was there: a key naming an old record.
        conn.execute(
            insert(idempotency_keys).values(
                owner="alice", scope="records", key="k", record_id=1, created_at=3.0
            )
        )
        assert conn.execute(select(idempotency_keys.c.record_id)).scalar_one() == 1
