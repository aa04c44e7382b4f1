"""Shared albums over the API: the owner's shares and links, the shared-with-me list, and a
viewer receiving the album's live events as the owner does (M5)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from conveyor.accounts import add_user, create_token
from tests.support.api import Api, Live, MakeApi, SseReader, error_of, upload_media


def _token(api: Api, name: str) -> dict[str, str]:
    add_user(api.runtime.engine, api.runtime.clock, name)
    return {
        "Authorization": f"Bearer {create_token(api.runtime.engine, api.runtime.clock, name).token}"
    }


def test_a_viewer_receives_the_owners_live_events(
    make_api: MakeApi, live: Live, corpus: Path
) -> None:
    api = make_api(run_workers=True, media={"short_workers": 1, "long_workers": 1})
    carol = _token(api, "carol")
    with live(api.app) as server, server.client(api.alice) as alice, server.client(carol) as viewer:
        album = alice.post("/api/albums", json={"name": "Holidays"}).json()
        shared = alice.post(
            f"/api/albums/{album['id']}/shares", json={"user": "carol", "role": "viewer"}
        )
        assert shared.status_code == 200, shared.text
        listed = viewer.get("/api/shared-albums").json()
        assert [(a["id"], a["owner"], a["role"]) for a in listed] == [
            (album["id"], "alice", "viewer")
        ]
        seen = viewer.get(f"/api/albums/{album['id']}").json()
        assert (seen["role"], seen["items"]) == ("viewer", [])
        with viewer.stream("GET", f"/api/albums/{album['id']}/events") as response:
            reader = SseReader(response)
            photo = upload_media(
                alice, album["id"], corpus / "media" / "exif-samples__Canon_40D.jpg"
            )
            event: dict[str, Any] = reader.next_event(60)
        assert (event["event"], event["item_id"]) == ("item.ready", photo["id"])
        item = viewer.get(f"/api/items/{photo['id']}").json()
        thumb = viewer.get(item["roles"]["thumb"]["url"])
        assert thumb.status_code == 200 and thumb.content[:4] == b"RIFF"


def test_the_owner_manages_shares_and_links(api: Api, client: TestClient) -> None:
    _token(api, "carol")
    album = client.post("/api/albums", json={"name": "Trip"}, headers=api.alice).json()
    url = f"/api/albums/{album['id']}"
    first = client.post(
        f"{url}/shares", json={"user": "carol", "role": "viewer"}, headers=api.alice
    )
    assert first.json()["role"] == "viewer"
    again = client.post(
        f"{url}/shares", json={"user": "carol", "role": "contributor"}, headers=api.alice
    )
    assert (again.status_code, again.json()["role"]) == (200, "contributor")
    assert again.json()["created_at"] == first.json()["created_at"]
    assert [
        (s["user"], s["role"]) for s in client.get(f"{url}/shares", headers=api.alice).json()
    ] == [("carol", "contributor")]
    error_of(
        client.post(f"{url}/shares", json={"user": "nobody", "role": "viewer"}, headers=api.alice),
        404,
        "not_found",
    )
    error_of(
        client.post(f"{url}/shares", json={"user": "alice", "role": "viewer"}, headers=api.alice),
        422,
        "share_with_owner",
    )
    error_of(
        client.post(f"{url}/shares", json={"user": "carol", "role": "owner"}, headers=api.alice),
        422,
        "invalid_request",
    )
    assert client.delete(f"{url}/shares/carol", headers=api.alice).status_code == 204
    assert client.get(f"{url}/shares", headers=api.alice).json() == []

    issued = client.post(
        f"{url}/links", json={"expires_in": 3600, "label": "family"}, headers=api.alice
    )
    assert issued.status_code == 201, issued.text
    link = issued.json()
    assert link["url"] == f"/s/{link['token']}" and len(link["token"]) >= 43
    listed = client.get(f"{url}/links", headers=api.alice).json()
    assert [(x["id"], x["label"], x["expired"]) for x in listed] == [(link["id"], "family", False)]
    assert "token" not in listed[0] and listed[0]["expires_at"] == link["expires_at"]
    for expires_in in (0, -5, 11 * 365 * 86_400):
        error_of(
            client.post(f"{url}/links", json={"expires_in": expires_in}, headers=api.alice),
            422,
            "invalid_request",
        )
    assert client.delete(f"{url}/links/{link['id']}", headers=api.alice).status_code == 204
    assert client.get(f"{url}/links", headers=api.alice).json() == []
