"""Owner isolation: a second owner gets 404 on every route that names another owner's thing,
and so do the users another album of the owner is shared with (a viewer, a contributor); in
the shared album each gets what their role gives and 404 for the rest. A link's holder has no
token: every API route answers them 401 (links open the web pages, tests/web).

The 404 is the same as for a thing that does not exist (status, code, shape), so existence is
never revealed; nothing of the first owner changes, and nothing is stored for the second.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from conveyor.accounts import add_user, create_token
from conveyor.audio.queries import record_by_id
from conveyor.objects import file_by_id
from tests.support.api import Api
from tests.support.stored import object_keys

Request = tuple[str, str, str, dict[str, Any]]


def requests_for(
    record: int, album: int, item: int, keys: list[str], photo: bytes, link: int = 1
) -> list[Request]:
    """(method, route template, url, request kwargs) for every route naming a thing."""
    return [
        *album_requests(album, item, keys, photo, link),
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
        # Deleting answers 204 for a missing thing too (idempotent): the same, and harmless.
        ("DELETE", "/api/records/{record_id}/proofread", f"/api/records/{record}/proofread", {}),
        ("DELETE", "/api/records/{record_id}", f"/api/records/{record}", {}),
    ]


def album_requests(
    album: int, item: int, keys: list[str], photo: bytes, link: int
) -> list[Request]:
    """The routes naming an album, an item or an item's object; deletions last."""
    return [
        ("GET", "/api/albums/{album_id}", f"/api/albums/{album}", {}),
        ("POST", "/api/albums/{album_id}/items", f"/api/albums/{album}/items", {"content": photo}),
        ("GET", "/api/albums/{album_id}/events", f"/api/albums/{album}/events", {}),
        ("GET", "/api/albums/{album_id}/shares", f"/api/albums/{album}/shares", {}),
        (
            "POST",
            "/api/albums/{album_id}/shares",
            f"/api/albums/{album}/shares",
            {"json": {"user": "bob", "role": "contributor"}},
        ),
        ("GET", "/api/albums/{album_id}/links", f"/api/albums/{album}/links", {}),
        ("POST", "/api/albums/{album_id}/links", f"/api/albums/{album}/links", {"json": {}}),
        ("GET", "/api/items/{item_id}", f"/api/items/{item}", {}),
        ("POST", "/api/items/{item_id}/resume", f"/api/items/{item}/resume", {}),
        *[("GET", "/api/files/{key}", f"/api/files/{key}", {}) for key in keys],
        (
            "DELETE",
            "/api/albums/{album_id}/links/{link_id}",
            f"/api/albums/{album}/links/{link}",
            {},
        ),
        ("DELETE", "/api/albums/{album_id}/shares/{user}", f"/api/albums/{album}/shares/carol", {}),
        ("DELETE", "/api/items/{item_id}", f"/api/items/{item}", {}),
        ("DELETE", "/api/albums/{album_id}", f"/api/albums/{album}", {}),
    ]


def _user(api: Api, name: str) -> dict[str, str]:
    add_user(api.runtime.engine, api.runtime.clock, name)
    token = create_token(api.runtime.engine, api.runtime.clock, name).token
    return {"Authorization": f"Bearer {token}"}


@pytest.mark.parametrize("who", ["stranger", "viewer", "contributor"])
def test_a_second_owner_gets_404_everywhere(
    api: Api, client: TestClient, corpus: Path, who: str
) -> None:
    wav = (corpus / "audio" / "jfk.wav").read_bytes()
    photo = (corpus / "media" / "exif-samples__Canon_40D.jpg").read_bytes()
    carol, dave = _user(api, "carol"), _user(api, "dave")
    # Another album of Alice's is shared with Carol (viewer) and Dave (contributor), and has a
    # link: none of that opens anything else of hers.
    shared = client.post("/api/albums", json={"name": "Shared"}, headers=api.alice).json()
    for user, role in (("carol", "viewer"), ("dave", "contributor")):
        answer = client.post(
            f"/api/albums/{shared['id']}/shares",
            json={"user": user, "role": role},
            headers=api.alice,
        )
        assert answer.status_code == 200, answer.text
    link = client.post(f"/api/albums/{shared['id']}/links", json={}, headers=api.alice).json()
    asking = {"stranger": api.bob, "viewer": carol, "contributor": dave}[who]
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
    theirs = requests_for(record["id"], album["id"], item_view["id"], keys, photo, link["id"])
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
        response = client.request(method, url, headers=asking, **kwargs)
        missing = client.request(method, missing_url, headers=asking, **kwargs)
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

    # Their lists are empty; Alice's things are unchanged; nothing was stored for them.
    listing = client.get("/api/records", headers=asking).json()
    assert (listing["items"], listing["next_cursor"]) == ([], None)
    assert client.get("/api/albums", headers=asking).json() == []
    assert [a["name"] for a in client.get("/api/shared-albums", headers=asking).json()] == (
        [] if who == "stranger" else ["Shared"]
    )
    assert client.get(f"/api/records/{record['id']}", headers=api.alice).json() == record
    assert client.get(f"/api/items/{item_view['id']}", headers=api.alice).json() == item_view
    assert client.get(f"/api/albums/{album['id']}/shares", headers=api.alice).json() == []
    assert client.get(f"/api/albums/{album['id']}/links", headers=api.alice).json() == []
    assert object_keys(api.runtime.store) == objects_before
    # Album names are per owner: they may use Alice's.
    assert client.post("/api/albums", json={"name": "Mine"}, headers=asking).status_code == 201


def test_in_a_shared_album_each_role_gets_its_own_and_404_for_the_rest(
    api: Api, client: TestClient, corpus: Path
) -> None:
    """Route by route in the shared album: a viewer reads, a contributor also adds (and
    deletes only what they added); the owner's routes answer both 404 (deletions 204 and
    nothing gone), saying they may see the album but not do that; a stranger gets 404
    everywhere, told nothing of a share; without a token (a link's holder) 401."""
    photo = (corpus / "media" / "exif-samples__Canon_40D.jpg").read_bytes()
    other = (corpus / "media" / "exif-samples__DSCN0010.jpg").read_bytes()
    carol, dave = _user(api, "carol"), _user(api, "dave")
    album = client.post("/api/albums", json={"name": "Shared"}, headers=api.alice).json()
    for user, role in (("carol", "viewer"), ("dave", "contributor")):
        client.post(
            f"/api/albums/{album['id']}/shares",
            json={"user": user, "role": role},
            headers=api.alice,
        )
    link = client.post(f"/api/albums/{album['id']}/links", json={}, headers=api.alice).json()
    item = client.post(f"/api/albums/{album['id']}/items", content=photo, headers=api.alice).json()
    keys = [item["roles"]["original"]["key"]]
    routes = album_requests(album["id"], item["id"], keys, other, link["id"])
    # What each role may do here; every other route answers 404, a deletion 204 with no effect.
    allowed = {
        "viewer": {"/api/albums/{album_id}", "/api/items/{item_id}", "/api/files/{key}"},
        "contributor": {
            "/api/albums/{album_id}",
            "/api/items/{item_id}",
            "/api/files/{key}",
            "/api/albums/{album_id}/items",
        },
    }
    shares_before = client.get(f"/api/albums/{album['id']}/shares", headers=api.alice).json()
    for who, headers in (("viewer", carol), ("contributor", dave), ("stranger", api.bob)):
        for method, template, url, kwargs in routes:
            if template.endswith("/events"):
                continue  # streams: tests/api/test_api_sharing.py reads them
            response = client.request(method, url, headers=headers, **kwargs)
            if method == "DELETE":
                assert response.status_code == 204, (who, url)
            elif template in allowed.get(who, set()):
                assert response.status_code in (200, 201), (who, method, url, response.text)
            else:
                assert response.status_code == 404, (who, method, url, response.text)
                assert response.json()["error"]["code"] == "not_found"
                # The same 404 as a stranger's; the words tell one who sees the album what
                # they may not do, where a stranger reads that it does not exist.
                message = response.json()["error"]["message"]
                if who == "stranger":
                    assert "shared with you" not in message, (url, message)
                else:
                    assert f"shared with you as a {who}: you may see it, but not" in message, (
                        method,
                        url,
                        message,
                    )
        # A link's holder has no token: the API answers 401 before anything is looked up.
        for method, _t, url, kwargs in routes:
            assert client.request(method, url, **kwargs).status_code == 401, url
    # Nothing of the owner's went: her item, her album, its shares and its link.
    assert client.get(f"/api/items/{item['id']}", headers=api.alice).status_code == 200
    assert client.get(f"/api/albums/{album['id']}/shares", headers=api.alice).json() == (
        shares_before
    )
    assert [
        x["id"] for x in client.get(f"/api/albums/{album['id']}/links", headers=api.alice).json()
    ] == [link["id"]]
    # The contributor's upload is in Alice's album, Alice's, added by Dave.
    listed = client.get(f"/api/albums/{album['id']}", headers=api.alice).json()
    added = [i for i in listed["items"] if i["added_by"] == "dave"]
    assert len(added) == 1 and added[0]["owner"] == "alice"
    assert listed["item_count"] == 2
    # Dave deletes his own addition; Carol could not, nor Bob.
    for headers in (carol, api.bob):
        client.delete(f"/api/items/{added[0]['id']}", headers=headers)
        assert client.get(f"/api/items/{added[0]['id']}", headers=api.alice).status_code == 200
    assert client.delete(f"/api/items/{added[0]['id']}", headers=dave).status_code == 204
    assert client.get(f"/api/items/{added[0]['id']}", headers=api.alice).status_code == 404
    # Unshared, the album is a stranger's to Carol.
    client.delete(f"/api/albums/{album['id']}/shares/carol", headers=api.alice)
    assert client.get(f"/api/albums/{album['id']}", headers=carol).status_code == 404
    assert client.get(f"/api/files/{keys[0]}", headers=carol).status_code == 404
