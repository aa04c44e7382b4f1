"""Upload bodies the service refuses instead of half-reading: stray multipart parts, and
refusal messages that name the upload as its owner knows it (never our storage key)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from tests.support.api import Api, counts, error_of, stored_objects
from tests.support.multipart_body import multipart


@pytest.fixture
def mp3(corpus: Path) -> bytes:
    return (corpus / "audio" / "jfk.mp3").read_bytes()


def test_a_second_file_part_is_400_and_nothing_is_kept(
    api: Api, client: TestClient, wav: bytes, mp3: bytes
) -> None:
    # `curl -F file=@a.wav -F file2=@b.mp3`, or a part `other` with a filename: not dropped.
    before = counts(api.runtime.engine)
    for second in ("file2", "other"):
        body, kind = multipart(("file", "a.wav", wav), (second, "b.mp3", mp3))
        response = client.post(
            "/api/records", content=body, headers={**api.alice, "Content-Type": kind}
        )
        message = error_of(response, 400, "bad_multipart")
        assert "one file per upload" in message and second in message
    assert counts(api.runtime.engine) == before
    assert stored_objects(api) == []


def test_a_file_part_under_another_name_is_400_no_file(
    api: Api, client: TestClient, wav: bytes
) -> None:
    # `curl -F upload=@jfk.wav`: not "form field 'upload' is too long" or "not UTF-8".
    for content in (wav, b"\xff\xfe short and not UTF-8"):
        body, kind = multipart(("title", None, b"x"), ("upload", "jfk.wav", content))
        response = client.post(
            "/api/records", content=body, headers={**api.alice, "Content-Type": kind}
        )
        message = error_of(response, 400, "no_file")
        assert "`file`" in message and "'upload'" in message
    album = client.post("/api/albums", json={"name": "Trip"}, headers=api.alice).json()
    body, kind = multipart(("photo", "a.jpg", b"\xff\xd8\xff" + b"\0" * 20_000))
    response = client.post(
        f"/api/albums/{album['id']}/items",
        content=body,
        headers={**api.alice, "Content-Type": kind},
    )
    error_of(response, 400, "no_file")
    assert stored_objects(api) == []


def test_text_fields_after_the_file_part_are_400_not_ignored(
    api: Api, client: TestClient, wav: bytes
) -> None:
    before = counts(api.runtime.engine)
    body, kind = multipart(("file", "jfk.wav", wav), ("title", None, b"Late title"))
    response = client.post(
        "/api/records", content=body, headers={**api.alice, "Content-Type": kind}
    )
    message = error_of(response, 400, "bad_multipart")
    assert "before the file part" in message and "'title'" in message
    assert counts(api.runtime.engine) == before
    assert stored_objects(api) == []
    # The same fields before the file are applied.
    body, kind = multipart(("title", None, b"Early title"), ("file", "jfk.wav", wav))
    response = client.post(
        "/api/records", content=body, headers={**api.alice, "Content-Type": kind}
    )
    assert response.status_code == 201, response.text
    assert response.json()["title"] == "Early title"


@pytest.mark.parametrize(
    "source, size",
    [("moviepy__fire2.mp4", 2000), ("file-type__fixture.mov", 2000)],
    ids=["no-frame-decodes", "codec-cannot-open"],
)
def test_an_undecodable_video_is_named_as_uploaded_never_by_its_key(
    api: Api, client: TestClient, corpus: Path, source: str, size: int
) -> None:
    head = (corpus / "media" / source).read_bytes()[:size]
    album = client.post("/api/albums", json={"name": "Clips"}, headers=api.alice).json()
    items = f"/api/albums/{album['id']}/items"
    before = counts(api.runtime.engine)
    named = client.post(items, files={"file": ("clip.mp4", head)}, headers=api.alice)
    raw = client.post(items, content=head, headers=api.alice)
    for response, shown in ((named, "clip.mp4"), (raw, "the upload")):
        message = error_of(response, 422, "undecodable")
        assert shown in message
        assert not re.search(r"[0-9a-f]{32}", message), message
        assert "uploads/" not in message and api.runtime.store.describe_location() not in message
    assert counts(api.runtime.engine) == before
    assert stored_objects(api) == []


def test_vocabulary_hints_are_kept_with_the_record(
    api: Api, client: TestClient, wav: bytes
) -> None:
    from conveyor.audio import queries

    body, kind = multipart(("hints", None, b"Kennedy, Sorensen"), ("file", "a.wav", wav))
    response = client.post(
        "/api/records", content=body, headers={**api.alice, "Content-Type": kind}
    )
    assert response.status_code == 201, response.text
    by_query = client.post(
        "/api/records",
        params={"hints": "Anya Petrova", "keep_duplicate": "true"},
        content=wav,
        headers={**api.alice, "Content-Type": "application/octet-stream"},
    )
    assert by_query.status_code == 201, by_query.text
    with api.runtime.engine.connect() as conn:
        for rid, expected in (
            (response.json()["id"], "Kennedy, Sorensen"),
            (by_query.json()["id"], "Anya Petrova"),
        ):
            hints = [t["body"] for t in queries.texts_of(conn, rid) if t["kind"] == "hints"]
            assert hints == [expected]
    too_long, kind = multipart(("hints", None, b"x" * 1001), ("file", "a.wav", wav))
    refused = client.post(
        "/api/records", content=too_long, headers={**api.alice, "Content-Type": kind}
    )
    assert refused.status_code in (400, 422)
