"""Every id an API route takes in its path or query, generated from the app's routes: a number
no row can have answers 404 ``not_found``, on SQLite and PostgreSQL alike, never 422 or 500."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from conveyor.accounts import set_admin
from tests.support.api import Api, assert_error

HUGE = [0, 2**31, 2**63 - 1, 2**63, 10**20]
HUGE_IDS = ["0", "2^31", "2^63-1", "2^63", "10^20"]
#: The path parameters that are ids (``target`` is a worker's id or its host).
ID_NAMES = {"record_id", "item_id", "album_id", "link_id", "target"}
#: What the other path parameters are given.
OTHERS = {"user": "bob", "lane": "audio"}


def _id_routes(api: Api) -> list[tuple[str, str, str]]:
    """(method, path template, id parameter) of every route in the schema with an id."""
    return [
        (method.upper(), path, name)
        for path, operations in api.app.openapi()["paths"].items()
        for name in re.findall(r"\{(\w+)", path)
        if name in ID_NAMES
        for method in operations
    ]


def test_the_routes_with_ids_are_found_from_the_app(api: Api) -> None:
    paths = {path for _, path, _ in _id_routes(api)}
    assert {
        "/api/records/{record_id}",
        "/api/items/{item_id}",
        "/api/albums/{album_id}/links/{link_id}",
        "/api/admin/workers/{target}/drain",
    } <= paths
    unknown = [
        (path, name)
        for path in api.app.openapi()["paths"]
        for name in re.findall(r"\{(\w+)", path)
        if name not in ID_NAMES and name not in OTHERS and name != "key"
    ]
    assert unknown == []


@pytest.mark.parametrize("value", HUGE, ids=HUGE_IDS)
def test_an_id_no_row_can_have_is_not_found(
    api: Api, client: TestClient, engine: Engine, value: int
) -> None:
    set_admin(engine, "alice", True)
    album = client.post("/api/albums", json={"name": "Trip"}, headers=api.alice).json()
    for method, path, name in _id_routes(api):
        url = path
        for other in re.findall(r"\{(\w+)(?::\w+)?\}", path):
            given = str(value) if other == name else OTHERS.get(other, str(album["id"]))
            url = re.sub(r"\{" + other + r"(?::\w+)?\}", given, url)
        response = client.request(method, url, headers=api.alice)
        if method == "DELETE":  # idempotent: as for an id no row has, nothing to delete
            assert response.status_code == 204, (url, response.text)
            continue
        error = assert_error(response, 404, "not_found")
        assert str(value) in error["message"], (method, url, error)


@pytest.mark.parametrize("value", HUGE[1:], ids=HUGE_IDS[1:])
def test_an_event_id_no_row_can_have_is_not_found(api: Api, client: TestClient, value: int) -> None:
    album = client.post("/api/albums", json={"name": "Trip"}, headers=api.alice).json()
    where = f"/api/albums/{album['id']}/events"
    assert_error(client.get(f"{where}?last_event_id={value}", headers=api.alice), 404, "not_found")
    # The header by the same declaration: past 2**63 too, a number is no event's, not a 400.
    headers = {**api.alice, "Last-Event-ID": str(value)}
    error = assert_error(client.get(where, headers=headers), 404, "not_found")
    assert error["message"] == f"album event {value} does not exist"


def test_an_id_that_is_no_number_is_still_invalid(api: Api, client: TestClient) -> None:
    assert_error(client.get("/api/records/abc", headers=api.alice), 422, "invalid_request")
