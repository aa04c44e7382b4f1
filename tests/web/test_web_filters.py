"""The recordings list: counts per state, filters by state and stage, paging within a filter."""

from __future__ import annotations

import html
import re
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import insert

from conveyor.audio.stages import AUDIO
from conveyor.db.tables import audio_records, files
from conveyor.web.routes_records import PAGE_SIZE
from tests.support.web import HTML, MakeSite, sign_in

ROW = r'<li class="record-row[^"]*" id="record-(\d+)"'
STAGES = list(AUDIO.stage_names)


def _fill(site: Any, n: int) -> dict[str, set[int]]:
    """``n`` records of alice cycling through the stages, every seventh halted; 5 of bob's.
    Returns alice's ids per state."""
    now = 1_800_000_000.0
    rows: list[dict[str, Any]] = []
    for i in range(1, n + 6):
        rows.append(
            {
                "id": i,
                "owner": "alice" if i <= n else "bob",
                "original_name": f"r{i}.ogg",
                "created_at": now + i,
                "original_file_id": 1,
                "stage": STAGES[i % 5],
                "state_entered_at": now + i,
                "attempts": 0,
                "updated_at": now + i,
                "halted_at": now + i if i % 7 == 0 else None,
                "halt_reason": "undecodable" if i % 7 == 0 else None,
            }
        )
    with site.runtime.engine.begin() as conn:
        conn.execute(
            insert(files).values(
                id=1, key="u/1", mime_type="audio/wav", size=1, state="stored", created_at=now
            )
        )
        conn.execute(insert(audio_records), rows)
    mine = [r for r in rows if r["owner"] == "alice"]
    return {
        "halted": {r["id"] for r in mine if r["halted_at"]},
        "done": {r["id"] for r in mine if not r["halted_at"] and r["stage"] == "done"},
        "waiting": {r["id"] for r in mine if not r["halted_at"] and r["stage"] != "done"},
        "all": {r["id"] for r in mine},
        "stage:submitted": {r["id"] for r in mine if r["stage"] == "submitted"},
    }


def _all_pages(client: TestClient, url: str) -> list[int]:
    ids: list[int] = []
    while url:
        page = client.get(url, headers=HTML)
        assert page.status_code == 200, page.text
        ids += [int(i) for i in re.findall(ROW, page.text)]
        older = re.search(r'href="(/records\?[^"]*before=\d+)" rel="next"', page.text)
        url = html.unescape(older.group(1)) if older else ""
    return ids


def test_counts_per_state_and_filters_page_through_only_matching_records(
    make_site: MakeSite,
) -> None:
    site = make_site()
    expected = _fill(site, 3 * PAGE_SIZE + 10)
    with TestClient(site.app) as client:
        sign_in(client, "alice")
        first = client.get("/records", headers=HTML).text
        counts = {k: int(v) for k, v in re.findall(r'<span id="count-(\w+)">(\d+)</span>', first)}
        assert counts == {
            "total": len(expected["all"]),
            "waiting": len(expected["waiting"]),
            "done": len(expected["done"]),
            "halted": len(expected["halted"]),
        }
        fragment = client.get("/records/counts", headers=HTML).text
        assert f'data-total="{len(expected["all"])}"' in fragment
        for show in ("waiting", "done", "halted"):
            ids = _all_pages(client, f"/records?show={show}")
            assert ids == sorted(expected[show], reverse=True), show
        ids = _all_pages(client, "/records?stage=submitted")
        assert ids == sorted(expected["stage:submitted"], reverse=True)
        both = _all_pages(client, "/records?show=halted&stage=submitted")
        assert both == sorted(expected["stage:submitted"] & expected["halted"], reverse=True)
        # Bob's records never show, whatever the filter; the form's "all" and "any" are empty.
        everything = sorted(expected["all"], reverse=True)
        assert _all_pages(client, "/records") == everything
        assert _all_pages(client, "/records?show=&stage=") == everything


@pytest.mark.parametrize("query", ["show=stuck", "stage=nowhere", "show=all", "before=0"])
def test_a_filter_that_is_not_one_of_the_choices_is_refused(
    make_site: MakeSite, query: str
) -> None:
    site = make_site()
    with TestClient(site.app) as client:
        sign_in(client, "alice")
        assert client.get(f"/records?{query}", headers=HTML).status_code == 422
