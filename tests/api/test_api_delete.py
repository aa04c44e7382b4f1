"""DELETE routes: a record, an item, an album — gone with every object, idempotent, and another
owner's answers the same as a missing one while staying untouched."""

from __future__ import annotations

from pathlib import Path

from fastapi.testclient import TestClient

from conveyor.media.broadcast import AlbumBroadcast
from tests.support.api import Api, counts, stored_objects


def test_deleting_a_record_removes_it_and_its_objects(
    api: Api, client: TestClient, corpus: Path
) -> None:
    wav = (corpus / "audio" / "jfk.wav").read_bytes()
    mine = client.post("/api/records", content=wav, headers=api.alice).json()
    theirs = client.post("/api/records", content=wav, headers=api.bob).json()
    assert len(stored_objects(api)) == 2
    # Bob cannot delete alice's record; the answer does not tell him it exists.
    assert client.delete(f"/api/records/{mine['id']}", headers=api.bob).status_code == 204
    assert client.get(mine["links"]["self"], headers=api.alice).status_code == 200
    for _ in range(2):  # idempotent
        response = client.delete(mine["links"]["self"], headers=api.alice)
        assert response.status_code == 204 and response.content == b""
    assert client.get(mine["links"]["self"], headers=api.alice).status_code == 404
    assert client.get(mine["links"]["original"], headers=api.alice).status_code == 404
    assert client.get(theirs["links"]["self"], headers=api.bob).status_code == 200
    assert len(stored_objects(api)) == 1
    assert client.delete("/api/records/1").status_code == 401


def test_a_deleted_record_frees_its_idempotency_key(
    api: Api, client: TestClient, corpus: Path
) -> None:
    wav = (corpus / "audio" / "jfk.wav").read_bytes()
    headers = {**api.alice, "Idempotency-Key": "k1"}
    first = client.post("/api/records", content=wav, headers=headers).json()
    assert client.delete(first["links"]["self"], headers=api.alice).status_code == 204
    second = client.post("/api/records", content=wav, headers=headers)
    assert second.status_code == 201 and "idempotent-replayed" not in second.headers
    assert second.json()["created_at"] >= first["created_at"]
    assert len(stored_objects(api)) == 1


def test_deleting_an_item_tells_the_album_and_an_album_takes_its_items(
    api: Api, client: TestClient, corpus: Path
) -> None:
    photo = (corpus / "media" / "exif-samples__Canon_40D.jpg").read_bytes()
    album = client.post("/api/albums", json={"name": "a"}, headers=api.alice).json()
    items = [
        client.post(
            f"/api/albums/{album['id']}/items?keep_duplicate=true", content=photo, headers=api.alice
        ).json()
        for _ in range(3)
    ]
    assert client.delete(f"/api/items/{items[0]['id']}", headers=api.bob).status_code == 204
    assert client.get(f"/api/items/{items[0]['id']}", headers=api.alice).status_code == 200
    assert client.delete(f"/api/items/{items[0]['id']}", headers=api.alice).status_code == 204
    assert client.delete(f"/api/items/{items[0]['id']}", headers=api.alice).status_code == 204
    events = AlbumBroadcast(api.runtime.engine).events_after(album["id"], 0)
    assert [(e.kind, e.item_id) for e in events] == [("item.deleted", items[0]["id"])]
    detail = client.get(f"/api/albums/{album['id']}", headers=api.alice).json()
    assert [i["id"] for i in detail["items"]] == [items[2]["id"], items[1]["id"]]
    assert client.delete(f"/api/albums/{album['id']}", headers=api.bob).status_code == 204
    assert client.get(f"/api/albums/{album['id']}", headers=api.alice).status_code == 200
    assert client.delete(f"/api/albums/{album['id']}", headers=api.alice).status_code == 204
    assert client.delete(f"/api/albums/{album['id']}", headers=api.alice).status_code == 204
    assert client.get(f"/api/albums/{album['id']}", headers=api.alice).status_code == 404
    for item in items:
        assert client.get(f"/api/items/{item['id']}", headers=api.alice).status_code == 404
    assert counts(api.runtime.engine)[3] == 0
    assert stored_objects(api) == []
