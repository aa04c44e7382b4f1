"""The recordings page's upload options (language, hints, channels) and the vocabulary page:
checked as the API checks them, kept on the record, refused with nothing stored."""

from __future__ import annotations

import html
import re
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from conveyor.audio import queries
from conveyor.db.tables import audio_records, owner_vocabulary
from tests.support.api import counts
from tests.support.multipart_body import multipart
from tests.support.stored import object_keys
from tests.support.web import HTML, MakeSite, Site, sign_in


def upload(client: TestClient, csrf: str, wav: bytes, **fields: str) -> Any:
    """POST /records/upload as the page's script does: the text parts, then the file (the
    same file each time: a second copy is asked for)."""
    fields = {"keep_duplicate": "true", **fields}
    parts = [(name, None, value.encode()) for name, value in fields.items()]
    body, kind = multipart(*parts, ("file", "jfk.wav", wav))
    return client.post(
        "/records/upload",
        content=body,
        headers={"Content-Type": kind, "X-CSRF-Token": csrf, "Accept": "application/json"},
    )


def record_of(site: Site, record_id: int) -> tuple[dict[str, Any], list[str]]:
    """The record's row and its texts of kind ``hints``."""
    with site.runtime.engine.connect() as conn:
        row = conn.execute(select(audio_records).where(audio_records.c.id == record_id)).mappings()
        found = dict(row.one())
        hints = [str(t["body"]) for t in queries.texts_of(conn, record_id) if t["kind"] == "hints"]
    return found, hints


def test_upload_options_land_on_the_record(make_site: MakeSite, wav: bytes) -> None:
    site = make_site()
    with TestClient(site.app) as client:
        csrf = sign_in(client, "alice")
        page = client.get("/records", headers=HTML).text
        # The options come before the drop zone; the setting's channel choice is preselected.
        assert page.index('id="upload-options"') < page.index('class="dropzone"')
        assert re.search(r'<option value="mix" selected>mix: [^<]*\(default\)</option>', page)
        chosen = upload(
            client, csrf, wav, language="de", hints="Kennedy,\n  Sorensen", channels="separate"
        )
        assert chosen.status_code == 201, chosen.text
        record_id = chosen.json()["id"]
        assert chosen.json()["url"] == f"/records/{record_id}"
        row, hints = record_of(site, record_id)
        assert (row["owner"], row["language"], row["channels"]) == ("alice", "de", "separate")
        assert hints == ["Kennedy, Sorensen"]  # whitespace collapsed, as the API keeps it
        # Nothing chosen: detect the language, no hints, `[transcription] channels`.
        plain = upload(client, csrf, wav)
        assert plain.status_code == 201, plain.text
        row, hints = record_of(site, plain.json()["id"])
        assert (row["language"], row["channels"], hints) == (None, "mix", [])
        # The record's page says what was chosen; the API's card agrees.
        shown = client.get(f"/records/{record_id}", headers=HTML).text
        assert '<span id="choice-language">de</span>' in shown
        assert '<span id="choice-channels">separate</span>' in shown
        assert '<span id="choice-hints">Kennedy, Sorensen</span>' in shown
        card = client.get(
            f"/api/records/{record_id}", headers={"Authorization": f"Bearer {site.tokens['alice']}"}
        ).json()
        assert (card["language"], card["channels"]) == ("de", "separate")


def test_the_default_channel_choice_follows_the_setting(make_site: MakeSite, wav: bytes) -> None:
    site = make_site(transcription={"channels": "separate"})
    with TestClient(site.app) as client:
        csrf = sign_in(client, "alice")
        page = client.get("/records", headers=HTML).text
        assert re.search(r'<option value="separate" selected>[^<]*\(default\)</option>', page)
        plain = upload(client, csrf, wav)
        assert plain.status_code == 201, plain.text
        assert record_of(site, plain.json()["id"])[0]["channels"] == "separate"
        mixed = upload(client, csrf, wav, channels="mix")
        assert record_of(site, mixed.json()["id"])[0]["channels"] == "mix"


@pytest.mark.parametrize(
    ("fields", "status", "code", "words"),
    [
        ({"language": "english"}, 422, "invalid_request", "longer than 3"),
        ({"language": "ên"}, 422, "invalid_request", "ISO 639-1"),
        ({"language": "e n"}, 422, "invalid_request", "ISO 639-1"),
        ({"language": "e1"}, 422, "invalid_request", "ISO 639-1"),
        ({"language": "zz"}, 422, "unknown_language", "ISO 639-1"),
        ({"hints": "x" * 1001}, 422, "invalid_request", "hints is longer than 1,000"),
        # Refused as the field's text (conveyor.limits), before the hints are cleaned.
        ({"hints": "Kennedy\x01"}, 422, "invalid_request", "a control character ('\\x01')"),
        ({"hints": "Kennedy\x00"}, 422, "invalid_request", "NUL"),
        ({"channels": "both"}, 422, "bad_channels", "mix, separate"),
        ({"channels": "separately"}, 422, "invalid_request", "channels is longer"),
        (
            {"title": "Standup"},
            400,
            "unknown_field",
            "`channels`, `hints`, `keep_duplicate`, `language`",
        ),
    ],
)
def test_invalid_upload_options_are_refused_with_nothing_stored(
    make_site: MakeSite, wav: bytes, fields: dict[str, str], status: int, code: str, words: str
) -> None:
    site = make_site()
    with TestClient(site.app) as client:
        csrf = sign_in(client, "alice")
        before = counts(site.runtime.engine)
        refused = upload(client, csrf, wav, **fields)
        # The API's error shape: the page's script shows `error.message` on the upload's row.
        assert refused.status_code == status, refused.text
        error = refused.json()["error"]
        assert (error["status"], error["code"]) == (status, code)
        assert words in error["message"], error["message"]
        assert counts(site.runtime.engine) == before
        assert object_keys(site.runtime.store) == []


def test_upload_options_are_checked_as_the_api_checks_them(make_site: MakeSite, wav: bytes) -> None:
    """The same values through both routes: the same answer, status and code."""
    site = make_site()
    bearer = {"Authorization": f"Bearer {site.tokens['alice']}"}
    with TestClient(site.app) as client:
        csrf = sign_in(client, "alice")
        for fields in (
            {"language": " EN ", "hints": "Kennedy"},  # any case: stored lower case
            {"language": "zz"},
            {"hints": "x" * 1001},
            {"channels": "both"},
            {"language": "en", "hints": "Kennedy", "channels": "separate"},
        ):
            web = upload(client, csrf, wav, **fields)
            parts = [(name, None, value.encode()) for name, value in fields.items()]
            body, kind = multipart(*parts, ("file", "jfk.wav", wav))
            api = client.post(
                "/api/records?keep_duplicate=true",
                content=body,
                headers={**bearer, "Content-Type": kind},
            )
            assert web.status_code == api.status_code, (fields, web.text, api.text)
            if api.status_code == 201:
                web_row, web_hints = record_of(site, web.json()["id"])
                api_row, api_hints = record_of(site, api.json()["id"])
                for column in ("language", "channels"):
                    assert web_row[column] == api_row[column]
                assert web_row["language"] == "en"
                assert web_hints == api_hints == ["Kennedy"]
            else:
                assert web.json()["error"] == api.json()["error"]


def vocabulary_text(page: str) -> str:
    found = re.search(r'<textarea id="vocabulary-hints"[^>]*>(.*?)</textarea>', page, re.S)
    assert found, page
    return html.unescape(found.group(1))


def post_vocabulary(client: TestClient, hints: str, csrf: str | None) -> Any:
    data = {"hints": hints} if csrf is None else {"hints": hints, "csrf_token": csrf}
    return client.post("/vocabulary", data=data, headers=HTML, follow_redirects=False)


def test_vocabulary_form_saves_shows_and_clears(make_site: MakeSite) -> None:
    site = make_site()
    alice_api = {"Authorization": f"Bearer {site.tokens['alice']}"}
    with TestClient(site.app) as client:
        csrf = sign_in(client, "alice")
        records = client.get("/records", headers=HTML).text
        assert '<a href="/vocabulary">Vocabulary</a>' in records  # in the navigation
        page = client.get("/vocabulary", headers=HTML)
        assert page.status_code == 200
        assert "given to the recognizer for every recording of yours" in page.text
        assert "with a recording's own hints added" in html.unescape(page.text)
        assert vocabulary_text(page.text) == ""
        saved = post_vocabulary(client, " Kubernetes,\n  Anya Petrova ", csrf)
        assert saved.status_code == 303
        assert saved.headers["location"] == "/vocabulary?saved=vocabulary"
        page = client.get(saved.headers["location"], headers=HTML)
        assert "Saved." in page.text
        assert vocabulary_text(page.text) == "Kubernetes, Anya Petrova"
        # The same vocabulary the API and the recognizer see; the recordings page names it.
        assert client.get("/api/vocabulary", headers=alice_api).json() == {
            "hints": "Kubernetes, Anya Petrova"
        }
        records = client.get("/records", headers=HTML).text
        assert '<span id="upload-vocabulary">Kubernetes, Anya Petrova</span>' in records
        # Another owner's page shows none of it.
        with TestClient(site.app) as other:
            sign_in(other, "bob")
            assert vocabulary_text(other.get("/vocabulary", headers=HTML).text) == ""
        # Empty removes it.
        cleared = post_vocabulary(client, "   ", csrf)
        assert cleared.headers["location"] == "/vocabulary?saved=removed"
        page = client.get(cleared.headers["location"], headers=HTML)
        assert "Removed" in page.text and vocabulary_text(page.text) == ""
        assert client.get("/api/vocabulary", headers=alice_api).json() == {"hints": None}
        with site.runtime.engine.connect() as conn:
            assert conn.execute(select(func.count()).select_from(owner_vocabulary)).scalar() == 0


def test_vocabulary_form_refuses_a_missing_token_and_overlong_text(make_site: MakeSite) -> None:
    site = make_site()
    with TestClient(site.app) as client:
        csrf = sign_in(client, "alice")
        assert post_vocabulary(client, "Grafana", csrf).status_code == 303
        for token in (None, "x" + csrf):
            refused = post_vocabulary(client, "Prometheus", token)
            assert refused.status_code == 403
            assert "security token" in refused.text
        too_long = post_vocabulary(client, "x" * 1001, csrf)
        assert too_long.status_code == 303
        target = urlsplit(too_long.headers["location"])
        assert target.path == "/vocabulary"
        assert parse_qs(target.query)["error"] == ["vocabulary is longer than 1,000 characters"]
        page = client.get(too_long.headers["location"], headers=HTML).text
        assert '<p class="error" role="alert" id="vocabulary-error">' in page
        # Control characters are refused too; nothing changed either time.
        control = post_vocabulary(client, "Grafana\x07", csrf)
        assert "control" in parse_qs(urlsplit(control.headers["location"]).query)["error"][0]
        assert vocabulary_text(client.get("/vocabulary", headers=HTML).text) == "Grafana"
        # 1,000 characters after whitespace collapses is the limit, not before.
        spaced = "y " * 500 + "     "
        assert (
            post_vocabulary(client, spaced, csrf).headers["location"].endswith("saved=vocabulary")
        )
        assert vocabulary_text(client.get("/vocabulary", headers=HTML).text) == spaced.strip()
    # Signed out: the page asks to sign in.
    with TestClient(site.app) as anonymous:
        reply = anonymous.get("/vocabulary", headers=HTML, follow_redirects=False)
        assert reply.status_code == 303 and "/sign-in" in reply.headers["location"]
