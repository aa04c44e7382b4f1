"""Idempotency-Key on the upload routes: a retry returns the first upload, never a duplicate,
also when the copies race; keys are per owner and per route."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from tests.support.api import Api, LiveServer, MakeApi, counts, stored_objects


def test_a_retried_upload_returns_the_first_record(
    api: Api, client: TestClient, corpus: Path
) -> None:
    wav = (corpus / "audio" / "jfk.wav").read_bytes()
    key = {"Idempotency-Key": "0b6f3c1e-upload-1"}
    first = client.post("/api/records?title=One", content=wav, headers={**api.alice, **key})
    assert first.status_code == 201 and "idempotent-replayed" not in first.headers
    again = client.post("/api/records?title=Two", content=wav, headers={**api.alice, **key})
    assert again.status_code == 201
    assert again.headers["idempotent-replayed"] == "true"
    assert again.json() == first.json()
    assert again.headers["location"] == first.headers["location"]
    # Another key, or none, is another upload: a second copy of the same file when asked for.
    other = client.post(
        "/api/records?keep_duplicate=true",
        content=wav,
        headers={**api.alice, "Idempotency-Key": "another"},
    )
    plain = client.post("/api/records?keep_duplicate=true", content=wav, headers=api.alice)
    assert len({first.json()["id"], other.json()["id"], plain.json()["id"]}) == 3
    assert counts(api.runtime.engine)[1] == 3
    assert len(stored_objects(api)) == 3


def test_keys_belong_to_their_owner_and_route(api: Api, client: TestClient, corpus: Path) -> None:
    wav = (corpus / "audio" / "jfk.wav").read_bytes()
    photo = (corpus / "media" / "exif-samples__Canon_40D.jpg").read_bytes()
    key = {"Idempotency-Key": "same"}
    alice = client.post("/api/records", content=wav, headers={**api.alice, **key})
    bob = client.post("/api/records", content=wav, headers={**api.bob, **key})
    assert alice.json()["id"] != bob.json()["id"] and "idempotent-replayed" not in bob.headers
    for name in ("a", "b"):
        assert client.post("/api/albums", json={"name": name}, headers=api.alice).status_code == 201
    one = client.post("/api/albums/1/items", content=photo, headers={**api.alice, **key})
    two = client.post(
        "/api/albums/2/items?keep_duplicate=true", content=photo, headers={**api.alice, **key}
    )
    again = client.post("/api/albums/1/items", content=photo, headers={**api.alice, **key})
    assert one.status_code == two.status_code == again.status_code == 201
    assert one.json()["id"] != two.json()["id"]
    assert again.json()["id"] == one.json()["id"]
    assert again.headers["idempotent-replayed"] == "true"


def test_a_malformed_key_is_refused(api: Api, client: TestClient, corpus: Path) -> None:
    wav = (corpus / "audio" / "jfk.wav").read_bytes()
    for bad in ("", "x" * 256, "with space", "ключ"):
        headers: dict[str, Any] = {**api.alice, "Idempotency-Key": bad.encode("utf-8")}
        response = client.post("/api/records", content=wav, headers=headers)
        assert response.status_code in (400, 422), (bad, response.text)
    assert counts(api.runtime.engine)[1] == 0
    assert stored_objects(api) == []


def test_racing_copies_with_one_key_create_one_record(make_api: MakeApi, corpus: Path) -> None:
    api = make_api()
    wav = (corpus / "audio" / "jfk.wav").read_bytes()
    headers = {**api.alice, "Idempotency-Key": "race-1"}
    with LiveServer(api.app) as server, server.client(headers) as client:

        def upload(_: int) -> tuple[int, int]:
            response = client.post("/api/records", content=wav)
            return response.status_code, int(response.json()["id"])

        with ThreadPoolExecutor(max_workers=4) as pool:
            results = list(pool.map(upload, range(4)))
    assert {status for status, _ in results} == {201}
    assert len({record for _, record in results}) == 1
    assert counts(api.runtime.engine)[1] == 1
    assert len(stored_objects(api)) == 1
