"""The HTTP API keeps each file once per owner (issue 21): uploading content you already have
answers 200 with the existing record or item and ``duplicate: true``; ``keep_duplicate=true``
keeps a second copy. On both databases."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from tests.support.api import Api
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
