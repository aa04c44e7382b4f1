"""Shared albums over the API: the owner's shares and links, the shared-with-me list, and a
viewer receiving the album's live events as the owner does (M5)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from conveyor.accounts import add_user, create_token
from conveyor.media.queries import insert_album_event
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


def test_an_unshared_viewers_open_stream_ends(make_api: MakeApi, live: Live) -> None:
    api = make_api()  # heartbeat 0.5 s: the streams' users are checked again that often
    runtime = api.runtime
    carol = _token(api, "carol")

    def album_event(album_id: int, n: int) -> None:
        with runtime.engine.begin() as conn:
            insert_album_event(
                conn, album_id=album_id, item_id=0, kind="item.note", payload={"n": n}, created_at=0
            )
        runtime.notifier.publish()

    with live(api.app) as server, server.client(api.alice) as alice, server.client(carol) as viewer:
        album_id = alice.post("/api/albums", json={"name": "Shared"}).json()["id"]
        alice.post(f"/api/albums/{album_id}/shares", json={"user": "carol", "role": "viewer"})
        with viewer.stream("GET", f"/api/albums/{album_id}/events") as response:
            reader = SseReader(response)
            album_event(album_id, 1)
            assert reader.next_event(10)["payload"] == {"n": 1}
            assert alice.delete(f"/api/albums/{album_id}/shares/carol").status_code == 204
            time.sleep(1.5)
            album_event(album_id, 2)
            rest, ended = reader.rest(10)
            assert ended, "the stream of an unshared viewer went on"
        assert ": the album is no longer shared with you" in rest
        assert not any(line.startswith("data:") for line in rest), rest
