"""Search over an owner's recordings (titles, briefs, transcripts, corrections), on both
databases: ranked, the matched words marked, the moment they are said, indexed as the texts
are written, and the same answers in the API (``GET /api/records?q=``) and on the page."""

from __future__ import annotations

import html
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from conveyor.audio import queries
from conveyor.audio.deletion import delete_record
from conveyor.audio.intake import accept_audio
from conveyor.audio.search import queries as search_queries
from conveyor.audio.search import search_records
from conveyor.audio.texts import save_proofread
from conveyor.errors import RejectedInput
from tests.support.web import HTML, MakeSite, Site, sign_in

MEETING = [
    {"start": 0.0, "end": 4.0, "text": "Good morning everyone, thanks for coming."},
    {"start": 4.0, "end": 9.5, "text": "Today we talk about the harbour bridge budget."},
    {"start": 9.5, "end": 15.0, "text": "Margarethe Okonkwo will present the numbers."},
    {"start": 15.0, "end": 20.0, "text": "The meetings next week are cancelled."},
]


def _record(
    site: Site,
    corpus: Path,
    owner: str,
    name: str,
    segments: list[dict[str, Any]] | None = None,
    language: str | None = "en",
) -> int:
    runtime = site.runtime
    record_id = accept_audio(
        runtime.engine,
        runtime.store,
        runtime.clock,
        corpus / "audio" / "jfk.wav",
        owner=owner,
        original_name=name,
        language=language,
        keep_duplicate=True,
    )
    if segments is not None:
        with runtime.engine.begin() as conn:
            queries.upsert_text(
                conn,
                record_id=record_id,
                kind="transcript",
                body=" ".join(s["text"] for s in segments),
                segments=segments,
                language=language,
                now=runtime.clock.now(),
            )
    return record_id


def _marked(hit: Any) -> list[str]:
    return [text.lower() for text, matched in hit.snippet if matched]


def test_a_name_said_in_a_recording_is_found_at_its_moment(
    make_site: MakeSite, corpus: Path
) -> None:
    site = make_site()
    engine = site.runtime.engine
    meeting = _record(site, corpus, "alice", "monday.wav", MEETING)
    _record(site, corpus, "alice", "other.wav", [{"start": 0, "end": 3, "text": "Nothing here."}])
    hits = search_records(engine, "alice", "okonkwo")
    assert [h.record_id for h in hits] == [meeting]
    assert hits[0].kind == "transcript"
    assert _marked(hits[0]) == ["okonkwo"]
    assert hits[0].start == 9.5
    assert "Margarethe" in "".join(t for t, _ in hits[0].snippet)
    # Every word must be there; a word nobody said finds nothing.
    assert [h.record_id for h in search_records(engine, "alice", "harbour budget")] == [meeting]
    assert search_records(engine, "alice", "harbour zeppelin") == []
    assert search_records(engine, "alice", "   ") == []
    # Syntax of the database's query language is just text.
    for odd in ('"', "a OR", "NEAR(", "-", "*", "budget)", "'; drop table texts; --"):
        search_records(engine, "alice", odd)
    with pytest.raises(RejectedInput):
        search_records(engine, "alice", "x" * 201)


def test_the_language_dictionary_finds_other_forms_of_a_word(
    make_site: MakeSite, corpus: Path, engine: Engine
) -> None:
    site = make_site()
    meeting = _record(site, corpus, "alice", "monday.wav", MEETING)
    # "meeting" finds "meetings" (English stemming on both databases).
    hits = search_records(engine, "alice", "meeting")
    assert [h.record_id for h in hits] == [meeting]
    assert hits[0].start == 15.0
    if engine.dialect.name == "postgresql":
        russian = [{"start": 0.0, "end": 5.0, "text": "Завтра будет встреча с инвесторами."}]
        ru = _record(site, corpus, "alice", "ru.wav", russian, language="ru")
        # Russian's dictionary: "встречи" (another case) finds "встреча".
        assert [h.record_id for h in search_records(engine, "alice", "встречи")] == [ru]


def test_titles_briefs_and_corrections_are_indexed_as_they_are_written(
    make_site: MakeSite, corpus: Path
) -> None:
    site = make_site()
    runtime = site.runtime
    engine = runtime.engine
    meeting = _record(site, corpus, "alice", "monday.wav", MEETING)
    assert search_records(engine, "alice", "quarterly") == []
    with engine.begin() as conn:
        queries.update_owner_fields(
            conn, meeting, "alice", {"title": "Quarterly review", "brief": "Zanzibar plans"}
        )
    found = search_records(engine, "alice", "quarterly")
    assert [(h.record_id, h.kind, h.start, h.name) for h in found] == [
        (meeting, "title", None, "Quarterly review")
    ]
    assert search_records(engine, "alice", "zanzibar")[0].kind == "brief"
    # The owner's correction is found at once; its words replace none of the transcript's.
    corrected = [str(s["text"]) for s in MEETING]
    corrected[2] = "Margarethe Okonkwo-Smith will present the figures."
    save_proofread(engine, runtime.clock, meeting, "alice", corrected)
    hit = search_records(engine, "alice", "figures")
    assert [(h.record_id, h.kind, h.start) for h in hit] == [(meeting, "proofread", 9.5)]
    # Another owner finds none of it.
    assert search_records(engine, "bob", "okonkwo") == []
    delete_record(engine, runtime.store, runtime.clock, meeting, owner="alice")
    assert search_records(engine, "alice", "okonkwo") == []


def test_better_matches_come_first(make_site: MakeSite, corpus: Path) -> None:
    site = make_site()
    once = _record(site, corpus, "alice", "once.wav", [{"start": 0, "end": 9, "text": "A budget."}])
    often = _record(
        site,
        corpus,
        "alice",
        "often.wav",
        [{"start": 0, "end": 9, "text": "Budget, budget, budget: the budget again."}],
    )
    hits = search_records(site.runtime.engine, "alice", "budget")
    assert [h.record_id for h in hits] == [often, once]
    assert hits[0].rank > hits[1].rank


def test_only_the_newest_matches_are_ranked_when_more_match_than_that(
    make_site: MakeSite, corpus: Path, engine: Engine
) -> None:
    # A word in more of the owner's texts than search ranks (queries.RANKED; 3 here): the
    # most recently written are ranked, best first; the older ones are left out.
    site = make_site()
    said = [
        _record(site, corpus, "alice", f"r{n}.wav", [{"start": 0, "end": 9, "text": t}])
        for n, t in enumerate(["budget " * (5 - n) + "again." for n in range(5)])
    ]
    _record(site, corpus, "bob", "bob.wav", [{"start": 0, "end": 9, "text": "Budget."}])

    def found(ranked: int) -> list[int]:
        with engine.connect() as conn:
            rows, _ = search_queries.match(conn, "alice", ["budget"], "budget", 10, ranked=ranked)
        return [int(r["record_id"]) for r in rows]

    assert found(5) == said  # all ranked: the most budgets first (the oldest)
    assert found(3) == [said[2], said[3], said[4]]  # the newest three, still ranked
    assert search_queries.RANKED >= 500


def test_the_last_word_is_a_prefix_only_from_four_letters(
    make_site: MakeSite, corpus: Path, engine: Engine
) -> None:
    # (SQLite's FTS5; PostgreSQL's dictionaries match whole words.) "bud" would stand for
    # every word starting so; "budg" is a word being typed.
    site = make_site()
    meeting = _record(site, corpus, "alice", "monday.wav", MEETING)
    assert search_records(engine, "alice", "bud") == []
    prefixed = [meeting] if engine.dialect.name == "sqlite" else []
    assert [h.record_id for h in search_records(engine, "alice", "harbour budg")] == prefixed
    assert search_queries.fts5_query(["the", "bud"]) == '"the" "bud"'
    assert search_queries.fts5_query(["the", "budg"]) == '"the" "budg" *'


def test_the_api_and_the_page_answer_the_same_search(make_site: MakeSite, corpus: Path) -> None:
    site = make_site()
    meeting = _record(site, corpus, "alice", "monday <i>.wav", MEETING)
    with TestClient(site.app) as client:
        auth = {"Authorization": f"Bearer {site.tokens['alice']}"}
        reply = client.get("/api/records", params={"q": "okonkwo"}, headers=auth)
        assert reply.status_code == 200, reply.text
        body = reply.json()
        assert [c["id"] for c in body["items"]] == [meeting]
        assert body["next_cursor"] is None
        (hit,) = body["hits"]
        assert (hit["record_id"], hit["kind"], hit["start"]) == (meeting, "transcript", 9.5)
        assert [p["text"] for p in hit["snippet"] if p["match"]] == ["Okonkwo"]
        with_cursor = client.get(
            "/api/records", params={"q": "okonkwo", "cursor": "x"}, headers=auth
        )
        assert with_cursor.status_code == 400
        bob = {"Authorization": f"Bearer {site.tokens['bob']}"}
        assert (
            client.get("/api/records", params={"q": "okonkwo"}, headers=bob).json()["items"] == []
        )
        # Without q the list is as it was.
        assert client.get("/api/records", headers=auth).json()["hits"] is None
        sign_in(client, "alice")
        listing = client.get("/records", headers=HTML).text
        assert 'action="/search"' in listing
        page = client.get("/search", params={"q": "okonkwo"}, headers=HTML)
        assert page.status_code == 200
        assert "<mark>Okonkwo</mark>" in page.text
        assert f'href="/records/{meeting}?t=9.50"' in page.text
        assert "monday &lt;i&gt;.wav" in page.text
        assert "said at 0:09" in page.text
        nothing = client.get("/search", params={"q": "zeppelin"}, headers=HTML).text
        assert "Nothing found for “zeppelin”." in html.unescape(nothing)
