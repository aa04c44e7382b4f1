"""Topics (D9) and the proofread correction (D1, P7) through the API and the pages; exports."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import Engine, insert, select, update

from conveyor.audio.intake import accept_audio
from conveyor.db.tables import audio_records, texts
from tests.support.web import HTML, MakeSite, Site, sign_in

SEGMENTS = [
    {"start": 0.0, "end": 2.5, "text": " And so my fellow Americans"},
    {"start": 2.5, "end": 5.0, "text": " ask not"},
]


def bearer(site: Site, name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {site.tokens[name]}"}


def transcribed_record(site: Site, corpus: Path, owner: str = "alice") -> int:
    """A record of ``owner`` at ``done`` with a two-segment transcript (written as the
    pipeline's finish step writes it)."""
    runtime = site.runtime
    with (corpus / "audio" / "jfk.wav").open("rb") as source:
        record_id = accept_audio(
            runtime.engine,
            runtime.store,
            runtime.clock,
            source,
            owner=owner,
            original_name="jfk.wav",
            keep_duplicate=True,
        )
    with runtime.engine.begin() as conn:
        conn.execute(
            insert(texts).values(
                record_id=record_id,
                kind="transcript",
                body="And so my fellow Americans ask not",
                segments=SEGMENTS,
                language="en",
                created_at=runtime.clock.now(),
            )
        )
        conn.execute(
            update(audio_records).where(audio_records.c.id == record_id).values(stage="done")
        )
    return record_id


def test_d9_topics_api_at_most_five_from_the_owners_dictionary(
    make_site: MakeSite, corpus: Path
) -> None:
    site = make_site()
    record_id = transcribed_record(site, corpus)
    with TestClient(site.app) as client:
        alice = bearer(site, "alice")
        url = f"/api/records/{record_id}/topics"
        assert client.get(url, headers=alice).json() == {"topics": []}
        put = client.put(url, json={"topics": ["Speeches", " history ", "speeches"]}, headers=alice)
        assert put.status_code == 200 and put.json() == {"topics": ["Speeches", "history"]}
        assert client.get("/api/topics", headers=alice).json() == ["Speeches", "history"]
        six = client.put(url, json={"topics": [f"t{i}" for i in range(6)]}, headers=alice)
        assert six.status_code == 422
        assert client.get(url, headers=alice).json() == {"topics": ["Speeches", "history"]}
        # An existing topic is reused whatever its case; the dictionary does not double.
        again = client.put(url, json={"topics": ["HISTORY", "1961"]}, headers=alice)
        assert again.status_code == 200, again.text
        assert client.get(url, headers=alice).json() == {"topics": ["history", "1961"]}
        assert client.get("/api/topics", headers=alice).json() == ["1961", "Speeches", "history"]
        # Bob sees neither the record's topics nor Alice's dictionary.
        bob = bearer(site, "bob")
        assert client.get(url, headers=bob).status_code == 404
        assert client.put(url, json={"topics": ["x"]}, headers=bob).status_code == 404
        assert client.get("/api/topics", headers=bob).json() == []


def test_p7_proofread_is_a_text_of_its_own_and_exports_use_it(
    engine: Engine, make_site: MakeSite, corpus: Path
) -> None:
    site = make_site()
    record_id = transcribed_record(site, corpus)
    with TestClient(site.app) as client:
        alice = bearer(site, "alice")
        url = f"/api/records/{record_id}/proofread"
        assert client.put(url, json={"segments": ["one"]}, headers=alice).status_code == 422
        saved = client.put(
            url, json={"segments": ["And so, my fellow Americans,", "ask not."]}, headers=alice
        )
        assert saved.status_code == 200, saved.text
        assert saved.json()["kind"] == "proofread"
        text = client.get(f"/api/records/{record_id}/text", headers=alice).text
        assert text == "And so, my fellow Americans, ask not."
        srt = client.get(f"/api/records/{record_id}/text?format=srt", headers=alice).text
        assert "00:00:02,500 --> 00:00:05,000\nask not." in srt
        as_json: dict[str, Any] = client.get(
            f"/api/records/{record_id}/text?format=json", headers=alice
        ).json()
        assert as_json["kind"] == "proofread" and as_json["segments"][0]["start"] == 0.0
        with engine.connect() as conn:
            kinds = conn.execute(select(texts.c.kind).order_by(texts.c.kind)).scalars().all()
        assert kinds == ["proofread", "transcript"]
        assert (
            client.put(url, json={"segments": ["x", "y"]}, headers=bearer(site, "bob")).status_code
            == 404
        )
        assert client.delete(url, headers=alice).status_code == 204
        back = client.get(f"/api/records/{record_id}/text", headers=alice).text
        assert back == "And so my fellow Americans ask not"


def test_p7_the_pipeline_rewriting_its_transcript_leaves_the_correction(
    engine: Engine, make_site: MakeSite, corpus: Path
) -> None:
    """The real finish step runs again over a record that has a correction."""
    site = make_site(pipeline={"workers": 1})
    record_id = transcribed_record(site, corpus)
    with TestClient(site.app) as client:
        saved = client.put(
            f"/api/records/{record_id}/proofread",
            json={"segments": ["Corrected one.", "Corrected two."]},
            headers=bearer(site, "alice"),
        )
        assert saved.status_code == 200
    # Send the record back to `transcribed` (no speech, so finish needs no provider answer)
    # and let a worker run the finish step: it rewrites the transcript, never the correction.
    with engine.begin() as conn:
        conn.execute(
            update(audio_records)
            .where(audio_records.c.id == record_id)
            .values(stage="transcribed", no_speech=True)
        )
    pool = site.runtime.pool()
    pool.start()
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with engine.connect() as conn:
                stage = conn.execute(
                    select(audio_records.c.stage).where(audio_records.c.id == record_id)
                ).scalar_one()
            if stage == "done":
                break
            time.sleep(0.1)
        assert stage == "done"
    finally:
        pool.stop()
    with engine.connect() as conn:
        rows = dict(conn.execute(select(texts.c.kind, texts.c.body)).all())
    assert rows == {"transcript": "", "proofread": "Corrected one. Corrected two."}


def test_record_page_edits_topics_and_correction(make_site: MakeSite, corpus: Path) -> None:
    site = make_site()
    record_id = transcribed_record(site, corpus)
    with TestClient(site.app) as client:
        csrf = sign_in(client, "alice")
        page = client.get(f"/records/{record_id}", headers=HTML)
        assert page.status_code == 200
        assert page.text.count('class="seg"') == 2 and 'data-start="2.5"' in page.text
        client.post(
            f"/records/{record_id}/details",
            data={"title": "Inaugural", "brief": "1961", "csrf_token": csrf},
            headers=HTML,
        )
        client.post(
            f"/records/{record_id}/topics",
            data={"new_topics": "speeches, history", "csrf_token": csrf},
            headers=HTML,
        )
        client.post(
            f"/records/{record_id}/proofread",
            data={"segment": ["And so, my fellow Americans,", "ask not."], "csrf_token": csrf},
            headers=HTML,
        )
        shown = client.get(f"/records/{record_id}", headers=HTML).text
        assert "<h1>Inaugural</h1>" in shown and ">1961</textarea>" in shown
        assert re.search(r'value="speeches" checked', shown)
        assert "And so, my fellow Americans," in shown and "corrected" in shown
        vtt = client.get(f"/records/{record_id}/download/vtt")
        assert vtt.status_code == 200 and "ask not." in vtt.text
        assert "attachment" in vtt.headers["content-disposition"]
        too_many = client.post(
            f"/records/{record_id}/topics",
            data={"new_topics": "a,b,c,d,e,f", "csrf_token": csrf},
            headers=HTML,
        )
        assert "at most 5 topics" in too_many.text


def test_another_owners_pages_answer_not_found(make_site: MakeSite, corpus: Path) -> None:
    site = make_site()
    record_id = transcribed_record(site, corpus)
    with TestClient(site.app) as client:
        sign_in(client, "bob")
        for path in (
            f"/records/{record_id}",
            f"/records/{record_id}/row",
            f"/records/{record_id}/audio",
            f"/records/{record_id}/download/txt",
        ):
            reply = client.get(path, headers=HTML)
            assert reply.status_code == 404, path
        page = client.get(f"/records/{record_id}", headers=HTML)
        assert "not found" in page.text.lower() and "jfk" not in page.text.lower()


def test_the_record_pages_text_part_is_what_the_page_swaps_in(
    make_site: MakeSite, corpus: Path
) -> None:
    """``/records/ID/text``: the transcript with times and the correction form once there is
    a text, a plain "appears here" before; another owner's record answers 404."""
    site = make_site()
    runtime = site.runtime
    with (corpus / "audio" / "jfk.wav").open("rb") as source:
        waiting = accept_audio(
            runtime.engine,
            runtime.store,
            runtime.clock,
            source,
            owner="alice",
            original_name="w",
            keep_duplicate=True,
        )
    done = transcribed_record(site, corpus)
    with TestClient(site.app) as client:
        sign_in(client, "alice")
        before = client.get(f"/records/{waiting}/text", headers=HTML)
        assert before.status_code == 200
        assert 'data-has-text="false"' in before.text and "appears here" in before.text
        assert 'id="record-proofread"' in before.text and "seg-1" not in before.text
        after = client.get(f"/records/{done}/text", headers=HTML).text
        assert 'data-has-text="true"' in after
        assert after.count('class="seg"') == 2 and 'id="seg-2"' in after
        assert "csrf_token" in after and f"/records/{done}/proofread" in after
    with TestClient(site.app) as other:
        sign_in(other, "bob")
        assert other.get(f"/records/{done}/text", headers=HTML).status_code == 404
