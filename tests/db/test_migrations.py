"""Each schema change upgrades a database made by the revision before it, records intact (D15)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import Engine, inspect, text

from conveyor.audio.stages import AUDIO
from conveyor.db.engine import make_engine
from conveyor.db.migrate import current_revision, upgrade
from conveyor.media.stages import MEDIA

AUDIO_STAGES = list(AUDIO.stage_names)
MEDIA_STAGES = list(MEDIA.stage_names)
T0 = 1_800_000_000.0


@pytest.fixture(params=["sqlite", "postgresql"])
def old_database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
    """An empty database at revision 0001 (PostgreSQL: the test database, rebuilt after)."""
    if request.param == "sqlite":
        eng = make_engine(f"sqlite:///{tmp_path / 'old.db'}")
        upgrade(eng, "0001")
        yield eng
        eng.dispose()
        return
    eng = request.getfixturevalue("pg_engine")

    def rebuild(revision: str) -> None:
        with eng.begin() as conn:
            conn.execute(text("DROP SCHEMA IF EXISTS public CASCADE"))
            conn.execute(text("CREATE SCHEMA public"))
        upgrade(eng, revision)

    rebuild("0001")
    try:
        yield eng
    finally:
        rebuild("head")


def _rows(engine: Engine, table: str) -> list[dict[str, Any]]:
    with engine.connect() as conn:
        return [
            dict(r) for r in conn.execute(text(f"SELECT * FROM {table} ORDER BY id")).mappings()
        ]


def _fill_0001(engine: Engine) -> None:
    """Records in every stage of both domains, some claimed, failed, paused or halted."""
    queue = (
        "stage, state_entered_at, claim_token, claim_expires_at, attempts, retry_at, "
        "halted_at, halt_reason, halt_error, updated_at"
    )
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO files (id, key, mime_type, size, state, created_at) "
                "VALUES (1, 'uploads/a', 'audio/wav', 10, 'stored', :t)"
            ),
            {"t": T0},
        )
        conn.execute(
            text("INSERT INTO albums (id, owner, name, created_at) VALUES (1, 'ann', 'a', :t)"),
            {"t": T0},
        )
        n = 0
        for stage in AUDIO_STAGES:
            for variant in ("waiting", "claimed", "failed", "halted"):
                n += 1
                conn.execute(
                    text(
                        "INSERT INTO audio_records (id, owner, created_at, original_file_id, "
                        f"raw_pcm, {queue}) VALUES (:id, 'ann', :t, 1, false, :stage, :t, "
                        ":token, :expires, :attempts, :retry, :halted, :reason, :error, :t)"
                    ),
                    _queue_values(n, stage, variant),
                )
        for stage in MEDIA_STAGES:
            for variant in ("waiting", "claimed", "failed", "halted"):
                n += 1
                conn.execute(
                    text(
                        "INSERT INTO media_items (id, owner, album_id, kind, uploaded_at, "
                        f"{queue}) VALUES (:id, 'ann', 1, 'photo', :t, :stage, :t, :token, "
                        ":expires, :attempts, :retry, :halted, :reason, :error, :t)"
                    ),
                    _queue_values(n, stage, variant),
                )


def _queue_values(n: int, stage: str, variant: str) -> dict[str, Any]:
    return {
        "id": n,
        "t": T0 + n,
        "stage": stage,
        "token": f"{n:032x}" if variant == "claimed" else None,
        "expires": T0 + 600 if variant == "claimed" else None,
        "attempts": 2 if variant == "failed" else 0,
        "retry": T0 + 30 if variant == "failed" else None,
        "halted": T0 + 5 if variant == "halted" else None,
        "reason": "stuck" if variant == "halted" else None,
        "error": "in stage too long" if variant == "halted" else None,
    }


def test_d15_upgrade_from_0001_keeps_records_in_every_stage(old_database: Engine) -> None:
    engine = old_database
    _fill_0001(engine)
    before = {t: _rows(engine, t) for t in ("audio_records", "media_items")}
    assert {r["stage"] for r in before["audio_records"]} == set(AUDIO_STAGES)
    assert {r["stage"] for r in before["media_items"]} == set(MEDIA_STAGES)

    upgrade(engine)

    assert current_revision(engine) != "0001"
    for table, rows in before.items():
        after = _rows(engine, table)
        assert len(after) == len(rows)
        for old, new in zip(rows, after, strict=True):
            assert {k: new[k] for k in old} == old  # every column kept as it was
            claimed_before = old["claim_token"] is not None or old["attempts"] or old["retry_at"]
            # D3: records already worked on keep their countdown; backlog starts at a claim.
            expected = old["state_entered_at"] if claimed_before else None
            assert new["work_started_at"] == expected, (table, old["id"])
    indexes = {i["name"]: i for i in inspect(engine).get_indexes("audio_records")}
    assert indexes["ix_audio_records_claim"]["column_names"] == ["created_at", "id"]
