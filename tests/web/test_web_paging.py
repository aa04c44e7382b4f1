"""The recordings list stays a page at a time with 10,000 records (keyset paging by id)."""

from __future__ import annotations

import re
import time

from fastapi.testclient import TestClient
from sqlalchemy import insert
from web_helpers import HTML, MakeSite, sign_in

from conveyor.db.tables import audio_records, files


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
        assert "(10000)" in first.text and "note-9999.ogg" in first.text
        older = re.search(r'href="/records\?before=(\d+)"', first.text)
        assert older is not None
        second = client.get(f"/records?before={older.group(1)}", headers=HTML)
        assert second.text.count('class="record-row') == 50
        assert "note-9949.ogg" in second.text and "note-9950.ogg" not in second.text
        last = client.get("/records?before=51", headers=HTML)
        assert last.text.count('class="record-row') == 50 and 'rel="next"' not in last.text
    # Not a timing test (that is bench's job); a page that read every row would show here.
    print(f"first page of 10,000 records: {elapsed * 1000:.0f} ms")
