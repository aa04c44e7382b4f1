"""A photo whose bucket is away while its step runs waits for the bucket, on SQLite and
PostgreSQL: a real S3-compatible server behind a proxy that answers every request 503 for more
tries than a failing record gets; no attempt is spent, nothing halts, and once the bucket
answers the photo gets its pictures."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import Engine, select

from conveyor.config import StorageSettings
from conveyor.db.tables import media_items
from conveyor.media.domain import SHORT_LANE
from conveyor.objects import STORAGE, open_store
from conveyor.pipeline import Executor
from conveyor.testing import FakeClock
from tests.support.http_fault_proxy import HttpFaultProxy
from tests.support.media import PIPELINE, add, album, drain, media_domain
from tests.support.s3server import PART, S3Server

PHOTO = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "media"
PHOTO = PHOTO / "exif-samples__landscape_6.jpg"


@pytest.fixture
def fresh_storage_state() -> Iterator[None]:
    """The process's storage outage state, fresh before and after (the test makes one)."""
    STORAGE.reset()
    yield
    STORAGE.reset()


def _item(engine: Engine, item_id: int) -> dict[str, object]:
    with engine.connect() as conn:
        row = conn.execute(select(media_items).where(media_items.c.id == item_id)).mappings()
        return dict(row.one())


def test_a_photo_waits_for_its_bucket_without_spending_attempts(
    engine: Engine,
    clock: FakeClock,
    s3_server: S3Server,
    tmp_path: Path,
    fresh_storage_state: None,
) -> None:
    bucket = s3_server.bucket()
    keys = {**s3_server.storage_settings(bucket, "outage"), "part_size": PART}
    direct = open_store(StorageSettings(**keys, work_dir=tmp_path / "direct"))
    proxy = HttpFaultProxy(s3_server.endpoint)
    try:
        through = open_store(
            StorageSettings(**{**keys, "endpoint": proxy.endpoint}, work_dir=tmp_path / "work")
        )
        item_id = add(engine, direct, clock, album(engine, clock), PHOTO)
        domain = media_domain(through)
        executor = Executor(engine, clock, PIPELINE)
        proxy.error_rate = 1.0  # every request: 503 SlowDown, the server never reached
        for _ in range(PIPELINE.max_attempts + 1):
            assert executor.run_once(domain, SHORT_LANE)
            row = _item(engine, item_id)
            assert row["halted_at"] is None, row["halt_error"]
            assert row["attempts"] == 0 and row["stage"] == "uploaded"
            retry_at = row["retry_at"]
            assert isinstance(retry_at, float)
            clock.advance(max(0.0, retry_at - clock.now()))
        assert STORAGE.down
        proxy.error_rate = 0.0
        drain(engine, domain, clock)
    finally:
        proxy.close()
    row = _item(engine, item_id)
    assert row["halted_at"] is None and row["stage"] == "done", row
