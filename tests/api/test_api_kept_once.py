"""The HTTP API keeps each file once per owner (issue 21): uploading content you already have
answers 200 with the existing record or item and ``duplicate: true``; ``keep_duplicate=true``
keeps a second copy. On both databases."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient
from sqlalchemy import select

from conveyor.db.tables import files
from tests.support.api import Api, Live, LiveServer
from tests.support.stored import object_keys


def test_a_photo_uploaded_again_answers_the_item_that_holds_it(
    api: Api, client: TestClient, corpus: Path
) -> None:
    photo = (corpus / "media" / "exif-samples__landscape_6.jpg").read_bytes()
    trip = client.post("/api/albums", json={"name": "Trip"}, headers=api.alice).json()["id"]
    home = client.post("/api/albums", json={"name": "Home"}, headers=api.alice).json()["id"]
    first = client.post(f"/api/albums/{trip}/items?name=a.jpg", content=photo, headers=api.alice)
    assert first.status_code == 201 and first.json()["duplicate"] is False
    stored = object_keys(api.runtime.store)
    again = client.post(f"/api/albums/{home}/items?name=b.jpg", content=photo, headers=api.alice)
    assert again.status_code == 200, again.text
    body = again.json()
    assert body["duplicate"] is True and body["id"] == first.json()["id"]
    assert body["album_id"] == trip and body["original_name"] == "a.jpg"
    assert again.headers["Location"] == f"/api/items/{body['id']}"
    assert object_keys(api.runtime.store) == stored
    kept = client.post(
        f"/api/albums/{home}/items?keep_duplicate=true", content=photo, headers=api.alice
    )
    assert kept.status_code == 201 and kept.json()["id"] != body["id"]
    bobs = client.post("/api/albums", json={"name": "Trip"}, headers=api.bob).json()["id"]
    theirs = client.post(f"/api/albums/{bobs}/items", content=photo, headers=api.bob)
    assert theirs.status_code == 201 and theirs.json()["duplicate"] is False


def test_a_recording_uploaded_again_answers_the_record_that_holds_it(
    api: Api, client: TestClient, corpus: Path
) -> None:
    wav = (corpus / "audio" / "jfk.wav").read_bytes()
    first = client.post("/api/records?name=jfk.wav", content=wav, headers=api.alice)
    assert first.status_code == 201 and first.json()["duplicate"] is False
    again = client.post("/api/records?name=copy.wav", content=wav, headers=api.alice)
    assert again.status_code == 200, again.text
    assert again.json()["duplicate"] is True and again.json()["id"] == first.json()["id"]
    assert again.headers["Location"] == f"/api/records/{first.json()['id']}"
    listed = client.get("/api/records", headers=api.alice).json()["items"]
    assert [r["id"] for r in listed] == [first.json()["id"]]
    kept = client.post("/api/records?keep_duplicate=true", content=wav, headers=api.alice)
    assert kept.status_code == 201 and kept.json()["id"] != first.json()["id"]
    theirs = client.post("/api/records", content=wav, headers=api.bob)
    assert theirs.status_code == 201


def test_keep_duplicate_is_a_multipart_field_too(
    api: Api, client: TestClient, corpus: Path
) -> None:
    """Like every upload choice, ``keep_duplicate`` may come as a text part before the file."""
    wav = (corpus / "audio" / "jfk.wav").read_bytes()
    photo = (corpus / "media" / "exif-samples__landscape_6.jpg").read_bytes()
    first = client.post("/api/records", files={"file": ("a.wav", wav)}, headers=api.alice)
    kept = client.post(
        "/api/records",
        data={"keep_duplicate": "true"},
        files={"file": ("b.wav", wav)},
        headers=api.alice,
    )
    assert kept.status_code == 201, kept.text
    assert kept.json()["id"] != first.json()["id"]
    said_no = client.post(
        "/api/records",
        data={"keep_duplicate": "false"},
        files={"file": ("c.wav", wav)},
        headers=api.alice,
    )
    assert said_no.status_code == 200 and said_no.json()["duplicate"] is True
    unclear = client.post(
        "/api/records",
        data={"keep_duplicate": "perhaps"},
        files={"file": ("d.wav", wav)},
        headers=api.alice,
    )
    assert unclear.status_code == 422  # as the query parameter answers
    assert unclear.json()["error"]["code"] == "invalid_request"
    album = client.post("/api/albums", json={"name": "Trip"}, headers=api.alice).json()["id"]
    url = f"/api/albums/{album}/items"
    one = client.post(url, files={"file": ("a.jpg", photo)}, headers=api.alice)
    two = client.post(
        url, data={"keep_duplicate": "true"}, files={"file": ("b.jpg", photo)}, headers=api.alice
    )
    assert (one.status_code, two.status_code) == (201, 201), two.text
    assert two.json()["id"] != one.json()["id"]


def _post_at_once(
    server: LiveServer, headers: dict[str, str], urls: list[str], body: bytes
) -> list[Any]:
    """POST ``body`` to each of ``urls`` from its own connection, all released together."""
    gate = threading.Barrier(len(urls))

    def post(url: str) -> Any:
        with server.client(headers) as http:
            gate.wait()
            return http.post(url, content=body)

    with ThreadPoolExecutor(len(urls)) as pool:
        return list(pool.map(post, urls))


def _unjournaled(api: Api) -> list[str]:
    with api.runtime.engine.connect() as conn:
        kept = set(conn.execute(select(files.c.key)).scalars())
    return [key for key in object_keys(api.runtime.store) if key not in kept]


def test_the_same_upload_sent_at_once_makes_one_record_and_duplicates(
    api: Api, live: Live, corpus: Path
) -> None:
    """Four uploads of one file by one owner at the same moment: one 201, three answered as a
    duplicate is (200, that record, ``duplicate: true``), one stored object."""
    wav = (corpus / "audio" / "jfk.wav").read_bytes()
    photo = (corpus / "media" / "exif-samples__landscape_6.jpg").read_bytes()
    with live(api.app) as server:
        answers = _post_at_once(
            server, api.alice, [f"/api/records?name=par{i}.wav" for i in range(4)], wav
        )
        with server.client(api.alice) as http:
            album = http.post("/api/albums", json={"name": "Trip"}).json()["id"]
            listed = http.get("/api/records").json()["items"]
        items = _post_at_once(
            server, api.alice, [f"/api/albums/{album}/items?name=p{i}.jpg" for i in range(4)], photo
        )
    for got in (answers, items):
        assert sorted(a.status_code for a in got) == [200, 200, 200, 201], [a.text for a in got]
        new = next(a.json() for a in got if a.status_code == 201)
        assert new["duplicate"] is False
        for again in (a for a in got if a.status_code == 200):
            assert again.json()["duplicate"] is True and again.json()["id"] == new["id"]
            assert again.headers["Location"] == new["links"]["self"]
    assert len(listed) == 1
    assert len(object_keys(api.runtime.store)) == 2 and _unjournaled(api) == []
