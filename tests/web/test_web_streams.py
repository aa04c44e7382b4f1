"""The pages' live streams read ``Last-Event-ID`` by HTTP's rules, as the API's streams do."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.support.web import MakeSite, Site, sign_in


def _signed_in_with_album(client: TestClient, site: Site) -> int:
    """Sign alice in on ``client`` and make her an album; its id."""
    sign_in(client, "alice")
    album = client.post(
        "/api/albums",
        json={"name": "Trip"},
        headers={"Authorization": f"Bearer {site.tokens['alice']}"},
    )
    assert album.status_code == 201, album.text
    return int(album.json()["id"])


@pytest.mark.parametrize("odd", ["¹", "²3", "١٢", "1_0", "-1", "x"])
def test_a_last_event_id_that_is_not_ascii_digits_is_400_on_every_page_stream(
    make_site: MakeSite, odd: str
) -> None:
    site = make_site()
    with TestClient(site.app) as client:
        album_id = _signed_in_with_album(client, site)
        paths = ["/records/events", f"/albums/{album_id}/events"]
        answered = []
        for path in paths:
            headers: dict[str, Any] = {"Last-Event-ID": odd.encode()}
            response = client.get(path, headers=headers)
            assert response.status_code == 400, (path, response.status_code, response.text)
            assert response.json()["error"]["code"] == "bad_last_event_id"
            answered.append(path)
        assert answered == paths


@pytest.mark.parametrize("value", [2**31, 2**63, 10**20], ids=["2^31", "2^63", "10^20"])
def test_a_last_event_id_no_event_can_have_is_404_on_every_page_stream(
    make_site: MakeSite, value: int
) -> None:
    """Read by :mod:`conveyor.db.ids` as the API's stream reads it: not found, never a 400
    or a stream that waits for an id no event will ever have."""
    site = make_site()
    with TestClient(site.app) as client:
        album_id = _signed_in_with_album(client, site)
        for path, noun in [
            ("/records/events", "record event"),
            (f"/albums/{album_id}/events", "album event"),
        ]:
            response = client.get(path, headers={"Last-Event-ID": str(value)})
            assert response.status_code == 404, (path, response.status_code, response.text)
            error = response.json()["error"]
            assert error == {
                "status": 404,
                "code": "not_found",
                "message": f"{noun} {value} does not exist",
            }
