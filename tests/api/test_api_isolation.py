"""Owner isolation: a second owner gets 404 on every route that names another owner's thing.

The 404 is the same as for a thing that does not exist (status, code, shape), so existence is
never revealed; nothing of the first owner changes, and nothing is stored for the second.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from conveyor.audio.queries import record_by_id
from conveyor.objects import file_by_id
from tests.support.api import Api
from tests.support.stored import object_keys

Request = tuple[str, str, str, dict[str, Any]]


def requests_for(
    record: int, album: int, item: int, keys: list[str], photo: bytes
) -> list[Request]:
    """(method, route template, url, request kwargs) for every route naming a thing."""
    return [
        ("GET", "/api/records/{record_id}", f"/api/records/{record}", {}),
        ("PATCH", "/api/records/{record_id}", f"/api/records/{record}", {"json": {"title": "x"}}),
        ("GET", "/api/records/{record_id}/text", f"/api/records/{record}/text", {}),
        ("GET", "/api/records/{record_id}/events", f"/api/records/{record}/events", {}),
        ("GET", "/api/records/{record_id}/original", f"/api/records/{record}/original", {}),
        ("POST", "/api/records/{record_id}/resume", f"/api/records/{record}/resume", {}),
        (
            "PUT",
            "/api/records/{record_id}/proofread",
            f"/api/records/{record}/proofread",
            {"json": {"segments": ["x"]}},
        ),
        ("GET", "/api/records/{record_id}/topics", f"/api/records/{record}/topics", {}),
        (
            "PUT",
            "/api/records/{record_id}/topics",
            f"/api/records/{record}/topics",
            {"json": {"topics": ["x"]}},
        ),
        ("GET", "/api/albums/{album_id}", f"/api/albums/{album}", {}),
        ("POST", "/api/albums/{album_id}/items", f"/api/albums/{album}/items", {"content": photo}),
        ("GET", "/api/albums/{album_id}/events", f"/api/albums/{album}/events", {}),
        ("GET", "/api/items/{item_id}", f"/api/items/{item}", {}),
        ("POST", "/api/items/{item_id}/resume", f"/api/items/{item}/resume", {}),
        *[("GET", "/api/files/{key}", f"/api/files/{key}", {}) for key in keys],
        # Deleting answers 204 for a missing thing too (idempotent): the same, and harmless.
        ("DELETE", "/api/items/{item_id}", f"/api/items/{item}", {}),
        ("DELETE", "/api/albums/{album_id}", f"/api/albums/{album}", {}),
        ("DELETE", "/api/records/{record_id}/proofread", f"/api/records/{record}/proofread", {}),
        ("DELETE", "/api/records/{record_id}", f"/api/records/{record}", {}),
    ]


def test_a_second_owner_gets_404_everywhere(api: Api, client: TestClient, corpus: Path) -> None:
    wav = (corpus / "audio" / "jfk.wav").read_bytes()
    photo = (corpus / "media" / "exif-samples__Canon_40D.jpg").read_bytes()
    record = client.post("/api/records?title=mine", content=wav, headers=api.alice).json()
    assert record.pop("duplicate") is False  # the upload's answer says it was new
    album = client.post("/api/albums", json={"name": "Mine"}, headers=api.alice).json()
    item = client.post(f"/api/albums/{album['id']}/items", content=photo, headers=api.alice)
    item_view = item.json()
    assert item_view.pop("duplicate") is False
    with api.runtime.engine.connect() as conn:
        row = record_by_id(conn, record["id"])
        assert row is not None
        audio_file = file_by_id(conn, row["original_file_id"])
        assert audio_file is not None
    keys = [str(audio_file["key"]), item_view["roles"]["original"]["key"]]
    theirs = requests_for(record["id"], album["id"], item_view["id"], keys, photo)
    # One missing key per real key, so the two lists pair up one to one.
    missing_keys = [f"uploads/media/nothing-{n}" for n in range(len(keys))]
    nothing = requests_for(999_999, 999_999, 999_999, missing_keys, photo)
    objects_before = object_keys(api.runtime.store)

    # Every route with a path parameter is in the list, except the cluster-wide administrator
    # routes: they name no owner's thing and refuse every non-administrator with 403
    # (tests/api/test_api_admin.py).
    templates = {
        (method.upper(), path)
        for path, operations in api.app.openapi()["paths"].items()
        if "{" in path and not path.startswith("/api/admin/")
        for method in operations
    }
    assert {(m, t) for m, t, _, _ in theirs} == templates

    checked: list[tuple[str, str]] = []
    for (method, _t, url, kwargs), (_m, _t2, missing_url, _k) in zip(theirs, nothing, strict=True):
        if method == "GET" and not url.endswith(("/text", "/events")):
            assert client.get(url, headers=api.alice).status_code == 200, url
        response = client.request(method, url, headers=api.bob, **kwargs)
        missing = client.request(method, missing_url, headers=api.bob, **kwargs)
        if method == "DELETE":
            assert response.status_code == missing.status_code == 204, (method, url)
            assert response.content == missing.content == b""
            checked.append((method, url))
            continue
        assert response.status_code == 404, (method, url, response.text)
        assert missing.status_code == 404, (method, missing_url, missing.text)
        assert response.json()["error"]["code"] == missing.json()["error"]["code"] == "not_found"
        checked.append((method, url))
    # Every route and every one of Alice's objects (her recording and her photo) was tried.
    assert len(checked) == len(theirs) == len(templates) + len(keys) - 1
    assert {url for _m, url in checked if url.startswith("/api/files/")} == {
        f"/api/files/{key}" for key in keys
    }

    # Bob's lists are empty; Alice's things are unchanged; nothing was stored for Bob.
    listing = client.get("/api/records", headers=api.bob).json()
    assert (listing["items"], listing["next_cursor"]) == ([], None)
    assert client.get("/api/albums", headers=api.bob).json() == []
    assert client.get(f"/api/records/{record['id']}", headers=api.alice).json() == record
    assert client.get(f"/api/items/{item_view['id']}", headers=api.alice).json() == item_view
    assert object_keys(api.runtime.store) == objects_before
    # Album names are per owner: Bob may use Alice's.
    assert client.post("/api/albums", json={"name": "Mine"}, headers=api.bob).status_code == 201
