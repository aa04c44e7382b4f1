"""Each record and item shows its place in its lane's queue, in the engine's claim order."""

from __future__ import annotations

import re
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import insert

from conveyor.audio.queries import record_by_id
from conveyor.db.tables import (
    albums,
    audio_records,
    files,
    media_items,
    media_objects,
    recognition_attempts,
)
from conveyor.media.albums import item_view
from conveyor.testing import FakeClock
from conveyor.web import queries
from conveyor.web.views import item_status, item_statuses, record_status, record_statuses
from tests.support.web import HTML, MakeSite, sign_in


def _record(n: int, created: float, stage: str, **queue: Any) -> dict[str, Any]:
    return {
        "id": n,
        "owner": "alice",
        "original_name": f"r{n}.ogg",
        "created_at": created,
        "original_file_id": 1,
        "stage": stage,
        "state_entered_at": created,
        "attempts": queue.pop("attempts", 0),
        "updated_at": created,
        "claim_token": None,
        "claim_expires_at": None,
        "retry_at": None,
        "halted_at": None,
        **queue,
    }


def test_a_recordings_place_counts_every_stage_of_the_audio_lane_in_claim_order(
    make_site: MakeSite,
) -> None:
    """The audio lane's workers claim from all four stages, oldest first: a recording waits
    behind older ones of any stage, not only of its own. Not counted: those being worked on,
    those in a retry pause, halted and done ones, and newer ones."""
    clock = FakeClock()
    site = make_site(clock=clock)
    now = clock.now()
    rows = [
        _record(1, now - 50, "uploaded"),  # oldest waiting: next
        _record(2, now - 40, "normalized"),  # another stage, same lane: ahead of 5
        _record(3, now - 35, "submitted", claim_token="t", claim_expires_at=now + 60),
        _record(4, now - 30, "transcribed", retry_at=now + 42, attempts=2),
        _record(5, now - 20, "uploaded"),
        _record(6, now - 20, "normalized"),  # same time as 5: the id breaks the tie
        _record(7, now - 90, "done"),
        _record(8, now - 80, "uploaded", halted_at=now - 1, halt_reason="undecodable"),
        _record(9, now - 45, "submitted", claim_token="old", claim_expires_at=now - 1),
    ]
    engine = site.runtime.engine
    audio = site.runtime.audio
    with engine.begin() as conn:
        conn.execute(
            insert(files).values(
                id=1, key="u/1", mime_type="audio/wav", size=1, state="stored", created_at=now
            )
        )
        conn.execute(insert(audio_records), rows)
    by_id = {r["id"]: r for r in rows}
    with engine.connect() as conn:
        places = {
            i: queries.place_in_queue(conn, audio, by_id[i], now)  # type: ignore[arg-type]
            for i in (1, 2, 5, 6, 9)
        }
        # 9's claim expired: a worker may take it again, so it waits in line like the others.
        assert places == {1: 0, 9: 1, 2: 2, 5: 3, 6: 4}
        status = {
            i: record_status(conn, audio, record_by_id(conn, i), now)  # type: ignore[arg-type]
            for i in (3, 4, 7, 8)
        }
    assert status[3]["working"] and status[3]["place"] is None
    assert status[4]["retrying"] and status[4]["retry_in"] == "42 s"
    assert status[7]["place"] is None and status[8]["place"] is None
    with TestClient(site.app) as client:
        sign_in(client, "alice")
        page = client.get("/records", headers=HTML).text
    row = {
        int(m.group(1)): m.group(0) for m in re.finditer(r'id="record-(\d+)".*?</li>', page, re.S)
    }
    assert "waiting: 3 ahead" in row[5]
    assert "waiting: next in line" in row[1]
    assert "being worked on now" in row[3]
    assert "failed 2 times; retrying in" in row[4] and ">42 s</time>" in row[4]


def test_an_items_place_counts_its_own_lane_newest_upload_first(make_site: MakeSite) -> None:
    """Media: the short lane (thumbnails) and the long lane (video playback) are separate
    queues, each newest upload first; an item waits only behind newer ones of its lane."""
    clock = FakeClock()
    site = make_site(clock=clock)
    now = clock.now()

    def item(n: int, uploaded: float, stage: str, kind: str = "photo") -> dict[str, Any]:
        return {
            "id": n,
            "owner": "alice",
            "album_id": 1,
            "kind": kind,
            "original_name": f"i{n}",
            "uploaded_at": uploaded,
            "stage": stage,
            "state_entered_at": uploaded,
            "attempts": 0,
            "updated_at": uploaded,
        }

    rows = [
        item(1, now - 30, "uploaded"),
        item(2, now - 10, "uploaded"),  # newer: claimed first
        item(3, now - 5, "transcoding", "video"),  # the long lane: not ahead of 1 or 2
        item(4, now - 50, "transcoding", "video"),
        item(5, now - 10, "uploaded"),  # same time as 2, larger id: ahead of 2
    ]
    engine = site.runtime.engine
    media = site.runtime.media
    with engine.begin() as conn:
        conn.execute(insert(albums).values(id=1, owner="alice", name="A", created_at=now))
        conn.execute(insert(media_items), rows)
    with engine.connect() as conn:
        places = {i: item_status(conn, media, i, "alice", now)["place"] for i in (1, 2, 3, 4, 5)}
    assert places == {5: 0, 2: 1, 1: 2, 3: 0, 4: 1}


def test_a_place_deep_in_a_long_queue_says_over_the_limit(make_site: MakeSite) -> None:
    """Counting stops past PLACE_LIMIT, so a page of records at the back of a queue of
    thousands stays cheap; the page says "over 1,000"."""
    clock = FakeClock()
    site = make_site(clock=clock)
    now = clock.now()
    engine = site.runtime.engine
    with engine.begin() as conn:
        conn.execute(
            insert(files).values(
                id=1, key="u/1", mime_type="audio/wav", size=1, state="stored", created_at=now
            )
        )
        conn.execute(
            insert(audio_records),
            [_record(n, now - 5000 + n, "uploaded") for n in range(1, queries.PLACE_LIMIT + 3)],
        )
    with engine.connect() as conn:
        last = record_by_id(conn, queries.PLACE_LIMIT + 2)
        before_last = record_by_id(conn, queries.PLACE_LIMIT + 1)
        assert last is not None and before_last is not None
        audio = site.runtime.audio
        assert queries.place_in_queue(conn, audio, before_last, now) == queries.PLACE_LIMIT
        assert queries.place_in_queue(conn, audio, last, now) == queries.PLACE_LIMIT + 1
    with TestClient(site.app) as client:
        sign_in(client, "alice")
        page = client.get("/records", headers=HTML).text
    assert "waiting: over 1,000 ahead" in page and "waiting: 1000 ahead" in page


def test_a_pages_statuses_read_together_equal_each_read_alone(make_site: MakeSite) -> None:
    """The list and the grid read a page's statuses together (objects in one query, places
    in claim order, counting stopped past the limit): the same as one at a time, and the
    grid's fields the same as the API's item view."""
    clock = FakeClock()
    site = make_site(clock=clock)
    now = clock.now()
    engine = site.runtime.engine
    media, audio = site.runtime.media, site.runtime.audio
    n_items = 30
    with engine.begin() as conn:
        conn.execute(insert(albums).values(id=1, owner="alice", name="A", created_at=now))
        conn.execute(
            insert(files),
            [
                {
                    "id": n,
                    "key": f"k/{n}",
                    "mime_type": "image/jpeg",
                    "size": n,
                    "width": 10 + n,
                    "height": 20,
                    "duration": 1.23456 if n % 2 else None,
                    "state": "stored",
                    "created_at": now,
                }
                for n in range(1, 2 * n_items + 1)
            ],
        )
        conn.execute(
            insert(media_items),
            [
                {
                    "id": n,
                    "owner": "alice",
                    "album_id": 1,
                    "kind": "video" if n % 3 == 0 else "photo",
                    "original_name": None if n == 4 else f"i{n}",
                    "uploaded_at": now - 100 + n // 2,
                    "stage": ["uploaded", "transcoding", "done"][n % 3],
                    "state_entered_at": now - 5,
                    "attempts": 0,
                    "updated_at": now,
                    "halted_at": now if n % 7 == 0 else None,
                    "halt_reason": "undecodable" if n % 7 == 0 else None,
                    "claim_token": "t" if n % 11 == 0 else None,
                    "claim_expires_at": now + 30 if n % 11 == 0 else None,
                }
                for n in range(1, n_items + 1)
            ],
        )
        conn.execute(
            insert(media_objects),
            [{"item_id": n, "role": "original", "file_id": n} for n in range(1, n_items + 1)]
            + [
                {"item_id": n, "role": "thumb", "file_id": n_items + n}
                for n in range(1, n_items + 1, 2)
            ],
        )
        conn.execute(
            insert(files).values(
                id=999, key="u/1", mime_type="audio/wav", size=1, state="stored", created_at=now
            )
        )
        conn.execute(
            insert(audio_records),
            [
                {
                    **_record(n, now - 3000 + n // 3, ["uploaded", "submitted", "done"][n % 3]),
                    "original_file_id": 999,
                }
                for n in range(1, 2 * queries.PLACE_LIMIT)
            ],
        )
    with engine.connect() as conn:
        rows = queries.album_page(conn, 1, after=None, limit=100)
        together = item_statuses(conn, media, rows, now)
        alone = [item_status(conn, media, int(r["id"]), "alice", now) for r in rows]
        assert together == alone
        assert {s["place"] for s in together} - {None} and any(s["urls"] for s in together)
        for status in together:
            api = item_view(conn, int(status["id"]), owner="alice")
            assert {k: status[k] for k in api} == api
        records = queries.records_page(conn, "alice", state=None, stage=None, before=None, limit=50)
        together = record_statuses(conn, audio, records, now)
        alone = [record_status(conn, audio, r, now) for r in records]
        assert together == alone
        assert {s["place"] for s in together if s["waiting"]} == {queries.PLACE_LIMIT + 1}
        front = queries.records_page(conn, "alice", state=None, stage=None, before=40, limit=39)
        assert record_statuses(conn, audio, front, now) == [
            record_status(conn, audio, r, now) for r in front
        ]


def test_a_record_refused_by_its_provider_says_why_on_its_page(make_site: MakeSite) -> None:
    """A record whose provider refused its tries (unreachable) is not failing (attempts 0):
    its page says what the provider said on the newest try, the tries, and the next one."""
    clock = FakeClock()
    site = make_site(clock=clock)
    now = clock.now()
    engine = site.runtime.engine
    with engine.begin() as conn:
        conn.execute(
            insert(files).values(
                id=1, key="u/1", mime_type="audio/wav", size=1, state="stored", created_at=now
            )
        )
        conn.execute(insert(audio_records), [_record(1, now - 60, "normalized", retry_at=now + 8)])
        conn.execute(
            insert(recognition_attempts),
            [
                {
                    "record_id": 1,
                    "provider": "openai",
                    "operation_id": f"op-{n}",
                    "claim_token": "t",
                    "state": "refused",
                    "error": f"openai is unreachable (ConnectError: try {n})",
                    "created_at": now - 30 + n,
                    "finished_at": now - 30 + n,
                }
                for n in (1, 2, 3)
            ],
        )
    with engine.connect() as conn:
        status = record_status(conn, site.runtime.audio, record_by_id(conn, 1), now)  # type: ignore[arg-type]
    assert status["retrying"] and status["attempts"] == 0
    assert status["provider_wait"]["tries"] == 3
    with TestClient(site.app) as client:
        sign_in(client, "alice")
        page = client.get("/records/1", headers=HTML).text
    assert "openai is unreachable (ConnectError: try 3) (3 tries so far; next at" in page
    assert "retrying in <time" in page and ">8 s</time>" in page


@pytest.mark.parametrize(
    ("reason", "resume_helps"), [("undecodable", False), ("original_missing", True)]
)
def test_a_halted_record_and_a_halted_item_offer_their_owner_the_same_ways_out(
    make_site: MakeSite, reason: str, resume_helps: bool
) -> None:
    """The record's status box and the item's viewer, halted for the same reason, give their
    owner the same controls at their own address: the error's details, Resume (and Delete),
    or, where resuming cannot help, why, Delete first and Resume anyway."""
    clock = FakeClock()
    site = make_site(clock=clock)
    now = clock.now()
    halt = {"halted_at": now - 1, "halt_reason": reason, "halt_error": "no stream in the file"}
    engine = site.runtime.engine
    with engine.begin() as conn:
        conn.execute(
            insert(files).values(
                id=1, key="u/1", mime_type="audio/wav", size=1, state="stored", created_at=now
            )
        )
        conn.execute(insert(audio_records), [_record(7, now - 60, "uploaded", **halt)])
        conn.execute(insert(albums).values(id=1, owner="alice", name="A", created_at=now))
        conn.execute(
            insert(media_items),
            [
                {
                    "id": 9,
                    "owner": "alice",
                    "album_id": 1,
                    "kind": "photo",
                    "original_name": "i9.jpg",
                    "uploaded_at": now - 60,
                    "stage": "uploaded",
                    "state_entered_at": now - 60,
                    "attempts": 0,
                    "updated_at": now - 60,
                    **halt,
                }
            ],
        )
    with TestClient(site.app) as client:
        sign_in(client, "alice")
        record = client.get("/records/7/status", headers=HTML).text
        item = client.get("/items/9/view", headers=HTML).text

    def ways_out(page: str, path: str) -> str:
        found = re.search(r"<details>.*</form>", page, re.S)
        assert found is not None, page
        return found.group(0).replace(path, "PATH")

    offered = ways_out(record, "/records/7")
    assert offered == ways_out(item, "/items/9")
    assert "no stream in the file" in offered and 'action="PATH/resume"' in offered
    assert 'href="PATH/delete"' in offered
    assert ("Resuming will not help" in offered) is not resume_helps
    assert ("Resume anyway" in offered) is not resume_helps
