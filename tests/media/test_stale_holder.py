"""A holder whose claim expired never replaces the live holder's objects (P2, P6, M1, M4).

Objects are stored under claim-unique keys, and the journal is pointed at them only inside the
fenced save. Here the first holder's lease runs out mid-step; a rival claims the item and
finishes it; only then does the stale holder store its variants and try to save. The live
holder's objects stay byte for byte what the journal says, the stale holder's save is refused,
and the sweep removes the stale objects nobody names. On SQLite and PostgreSQL, on a folder
and on an S3 bucket.
"""

from __future__ import annotations

import hashlib
import time
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select

from conveyor.db.tables import files, media_items, media_objects
from conveyor.media.domain import SHORT_LANE, MediaSteps, build_media_domain
from conveyor.objects import ObjectStore, sweep_orphans
from conveyor.pipeline import Executor, StepContext
from conveyor.pipeline.queries import now_of
from conveyor.pipeline.rescuer import rescue
from conveyor.testing import FakeClock
from tests.support.media import MEDIA, PIPELINE, add, album, media_domain
from tests.support.stored import object_keys, stored_bytes

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "media"
PHOTO = CORPUS / "exif-samples__landscape_6.jpg"


class _OvertakenBeforeStoring(MediaSteps):
    """Media steps that, before storing their first variant, lose their claim to a rival
    that runs the same step to its end (the stale holder then stores everything anyway)."""

    def __init__(self, engine: Engine, clock: FakeClock, store: ObjectStore) -> None:
        super().__init__(store, MEDIA)
        self.engine, self.clock = engine, clock
        self.kept: list[str] = []
        self.rival_token: str | None = None

    def _keep(self, ctx: StepContext, role: str, path: Path, *a: Any, **kw: Any) -> Any:
        if self.rival_token is None:
            self.clock.advance(ctx.stage.lease + 1)
            # Its worker counts as lost (D18); after the retry pause a rival claims the item.
            assert rescue(self.engine, ctx.domain, PIPELINE, now_of(self.clock)) == 1
            self.clock.advance(PIPELINE.retry_max)
            rival = Executor(self.engine, self.clock, PIPELINE)
            live = media_domain(self.store)
            claim = rival.claim(live, SHORT_LANE)
            assert claim is not None and claim.token != ctx.claim.token
            self.rival_token = claim.token
            rival.run_claimed(live, claim)
        kept = super()._keep(ctx, role, path, *a, **kw)
        self.kept.append(kept.key)
        return kept


def _journal(engine: Engine, item_id: int) -> dict[str, dict[str, Any]]:
    with engine.connect() as conn:
        rows = conn.execute(
            select(media_objects.c.role, files.c.key, files.c.sha256, files.c.size)
            .join(files, files.c.id == media_objects.c.file_id)
            .where(media_objects.c.item_id == item_id)
        ).mappings()
        return {str(r["role"]): dict(r) for r in rows}


def test_a_stale_holder_s_objects_never_replace_the_live_holder_s(
    engine: Engine, object_store: ObjectStore, clock: FakeClock
) -> None:
    store = object_store
    item = add(engine, store, clock, album(engine, clock), PHOTO)
    steps = _OvertakenBeforeStoring(engine, clock, store)
    stale = build_media_domain(steps)
    executor = Executor(engine, clock, PIPELINE)
    claim = executor.claim(stale, SHORT_LANE)
    assert claim is not None and claim.record_id == item
    executor.run_claimed(stale, claim)

    # The rival finished the item; the stale holder stored its variants afterwards.
    # Three roles, two objects: the 600 px photo's medium and preview are the same bytes.
    assert steps.rival_token is not None and len(steps.kept) == 2
    with engine.connect() as conn:
        stage = conn.execute(select(media_items.c.stage).where(media_items.c.id == item)).scalar()
    assert stage == "done"
    journal = _journal(engine, item)
    assert set(journal) == {"original", "thumb", "medium", "preview"}
    live_keys = {row["key"] for role, row in journal.items() if role != "original"}
    # Claim-unique keys: the stale holder wrote beside the live objects, never over them ...
    assert not live_keys & set(steps.kept)
    assert all(steps.rival_token[:16] in key for key in live_keys)
    # ... so every object the journal names is exactly the bytes it describes.
    for role, row in journal.items():
        data = stored_bytes(store, row["key"])
        assert (len(data), hashlib.sha256(data).hexdigest()) == (row["size"], row["sha256"]), role
    # The stale objects are named by no row (or were already discarded); the sweep removes
    # whatever is left of them once the grace has passed.
    sweep_orphans(engine, store, grace=60, now=time.time() + 120)
    with engine.connect() as conn:
        named = set(conn.execute(select(files.c.key)).scalars())
    assert set(object_keys(store)) == named
