"""Long lists stay a page at a time (keyset paging): the recordings list with 10,000 records,
an album grid with 10,000 items, the operator's halted list."""

from __future__ import annotations

import html
import re
import time
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import insert, select

from conveyor.db.tables import albums, audio_records, files, media_items
from conveyor.web.routes_albums import GRID_PAGE
from conveyor.web.routes_operator import HALTED_PAGE
from tests.support.web import HTML, MakeSite, sign_in


def test_ten_thousand_records_page_by_fifty(make_site: MakeSite) -> None:
    site = make_site()
    engine = site.runtime.engine
    now = 1_800_000_000.0
    with engine.begin() as conn:
        conn.execute(
            insert(files).values(
                id=1, key="u/1", mime_type="audio/wav", size=1, state="stored", created_at=now
            )
        )
        conn.execute(
            insert(audio_records),
            [
                {
                    "owner": "alice",
                    "original_name": f"note-{n}.ogg",
                    "created_at": now + n,
                    "original_file_id": 1,
                    "stage": "done",
                    "state_entered_at": now + n,
                    "attempts": 0,
                    "updated_at": now + n,
                }
                for n in range(10_000)
            ],
        )
    with TestClient(site.app) as client:
        sign_in(client, "alice")
        started = time.perf_counter()
        first = client.get("/records", headers=HTML)
        elapsed = time.perf_counter() - started
        assert first.status_code == 200
        assert first.text.count('class="record-row') == 50
        assert '<span id="count-total">10000</span>' in first.text
        assert "note-9999.ogg" in first.text
        older = re.search(r'href="/records\?before=(\d+)"', first.text)
        assert older is not None
        second = client.get(f"/records?before={older.group(1)}", headers=HTML)
        assert second.text.count('class="record-row') == 50
        assert "note-9949.ogg" in second.text and "note-9950.ogg" not in second.text
        last = client.get("/records?before=51", headers=HTML)
        assert last.text.count('class="record-row') == 50 and 'rel="next"' not in last.text
    # Not a timing test (that is bench's job); a page that read every row would show here.
    print(f"first page of 10,000 records: {elapsed * 1000:.0f} ms")


def _walk(client: TestClient, url: str, row: str, older: str) -> list[list[int]]:
    """Every page from ``url`` on, following its ``Older`` link: the ids each page shows."""
    pages: list[list[int]] = []
    seen: set[str] = set()
    while url:
        # A link back to a page already shown would walk forever: fail at once instead.
        assert url not in seen, f"the Older links loop at {url}"
        seen.add(url)
        page = client.get(url, headers=HTML)
        assert page.status_code == 200, page.text
        pages.append([int(i) for i in re.findall(row, page.text)])
        found = re.search(older, page.text)
        url = html.unescape(found.group(1)) if found else ""
    return pages


def _captured(n: int, now: float) -> float | None:
    """The small album's capture times: every third item unknown (placed at its upload time),
    the others scattered over years before and after the uploads, some equal."""
    if n < 10_000 or n % 3 == 0:
        return None
    return now + ((n * 7919) % 41 - 20) * 86_400.0


def test_album_grid_pages_newest_first_without_skipping_or_repeating(
    make_site: MakeSite,
) -> None:
    """10,000 items, uploaded three at a time (equal times): the grid shows GRID_PAGE a page
    newest first, and the Older links walk every item once. The grid sorts by capture time
    (the upload time where none is known; id breaks ties), as the API and the CLI do."""
    site = make_site()
    engine = site.runtime.engine
    now = 1_800_000_000.0
    with engine.begin() as conn:
        conn.execute(insert(albums).values(id=1, owner="alice", name="Big", created_at=now))
        conn.execute(insert(albums).values(id=2, owner="alice", name="Small", created_at=now))
        conn.execute(
            insert(media_items),
            [
                {
                    "owner": "alice",
                    "album_id": 1 if n < 10_000 else 2,
                    "kind": "photo",
                    "original_name": f"p-{n}.jpg",
                    # Three items share each upload time; the album order breaks ties by id.
                    "uploaded_at": now + (n % 10_000) // 3,
                    "captured_at": _captured(n, now),
                    "stage": "done",
                    "state_entered_at": now,
                    "attempts": 0,
                    "updated_at": now,
                }
                for n in range(10_000 + 200)
            ],
        )
        rows = conn.execute(
            select(
                media_items.c.id,
                media_items.c.uploaded_at,
                media_items.c.captured_at,
                media_items.c.album_id,
            )
        ).all()

    def taken(r: Any) -> float:
        return float(r.uploaded_at if r.captured_at is None else r.captured_at)

    expected = {
        album: [r.id for r in sorted(rows, key=lambda r: (-taken(r), -r.id)) if r.album_id == album]
        for album in (1, 2)
    }
    tile = r'<li class="tile[^"]*" id="item-(\d+)"'
    older = r'href="(/albums/\d+\?before=[^"]+)" rel="next"'
    with TestClient(site.app) as client:
        sign_in(client, "alice")
        first = client.get("/albums/1", headers=HTML)
        assert '(<span id="grid-total">10000</span>)' in first.text
        shown = [int(i) for i in re.findall(tile, first.text)]
        assert shown == expected[1][:GRID_PAGE]
        link = re.search(older, first.text)
        assert link is not None
        second = client.get(html.unescape(link.group(1)), headers=HTML)
        assert [int(i) for i in re.findall(tile, second.text)] == expected[1][
            GRID_PAGE : 2 * GRID_PAGE
        ]
        # The small album, walked to its end: every item exactly once, in order.
        pages = _walk(client, "/albums/2", tile, older)
        assert [len(p) for p in pages] == [60, 60, 60, 20]
        assert [i for p in pages for i in p] == expected[2]
        # The photo page's Newer and Older follow the same order.
        for at in (1, 70, 198):
            viewer = client.get(f"/items/{expected[2][at]}", headers=HTML).text
            assert f'href="/items/{expected[2][at - 1]}" rel="prev"' in viewer
            assert f'href="/items/{expected[2][at + 1]}" rel="next"' in viewer
        # Bob cannot page through alice's album; a forged cursor is a 400, not a 500.
        assert client.get("/albums/2?before=x_1", headers=HTML).status_code == 400
        assert client.get("/albums/2?before=nan_1", headers=HTML).status_code == 400
    with TestClient(site.app) as other:
        sign_in(other, "bob")
        assert other.get(html.unescape(link.group(1)), headers=HTML).status_code == 404


def test_operator_halted_list_pages_most_recent_first(make_site: MakeSite) -> None:
    """250 halted recordings of two owners, four halted at each instant: HALTED_PAGE a page,
    most recently halted first, and the Older links walk every one once."""
    site = make_site()
    engine = site.runtime.engine
    now = 1_800_000_000.0
    with engine.begin() as conn:
        conn.execute(
            insert(files).values(
                id=1, key="u/1", mime_type="audio/wav", size=1, state="stored", created_at=now
            )
        )
        conn.execute(
            insert(audio_records),
            [
                {
                    "owner": "alice" if n % 2 else "bob",
                    "original_name": f"h-{n}.ogg",
                    "created_at": now + n,
                    "original_file_id": 1,
                    "stage": "uploaded",
                    "state_entered_at": now + n,
                    "attempts": 0,
                    "updated_at": now + n,
                    "halted_at": now + 1000 + n // 4,
                    "halt_reason": "undecodable",
                }
                for n in range(250)
            ],
        )
        rows = conn.execute(select(audio_records.c.id, audio_records.c.halted_at)).all()
    expected = [r.id for r in sorted(rows, key=lambda r: (-r.halted_at, -r.id))]
    row = r'<tr class="halted-row"><td>(\d+)</td>'
    older = r'href="(/operator\?domain=audio&amp;before=[^"#]+)#halted-audio" rel="next"'
    with TestClient(site.app) as client:
        sign_in(client, "root")
        pages = _walk(client, "/operator", row, older)
        assert [len(p) for p in pages] == [HALTED_PAGE, HALTED_PAGE, 50]
        assert [i for p in pages for i in p] == expected
        assert client.get("/operator?domain=audio&before=1.5_x", headers=HTML).status_code == 400
        assert client.get("/operator?domain=nope", headers=HTML).status_code == 422
