"""Every id in a page's address, generated from the web app's routes, is read by
:mod:`conveyor.db.ids`: a value no row of its kind can have (0, -1, past its column's range,
not a number at all) is the page's normal 404, on SQLite and PostgreSQL alike, never a 422 or
a 500."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

import pytest
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient
from starlette.routing import BaseRoute

from tests.support.web import HTML, MakeSite, Site, sign_in

IMPOSSIBLE = ["0", "-1", str(2**31), str(2**63), str(10**20), "abc"]
#: The path parameters that are row ids.
ID_NAMES = {"record_id", "item_id", "album_id", "link_id", "token_id"}
#: Path parameters that are not ids (a share link's token, a file's key, a tus upload's id,
#: a text format): given a real value, or left out.
OTHERS = {"token", "key", "upload_id", "fmt"}


def _routes(routes: Sequence[BaseRoute]) -> Iterator[APIRoute]:
    """Every route, in included routers too (FastAPI keeps an included router whole)."""
    for route in routes:
        if isinstance(route, APIRoute):
            yield route
        included = getattr(route, "original_router", None)
        if included is not None:
            yield from _routes(included.routes)


def _page_routes(site: Site) -> list[tuple[str, str, str]]:
    """(method, path template, id parameter) of every web route with an id in its path."""
    found: list[tuple[str, str, str]] = []
    for route in _routes(site.app.routes):
        if route.path.startswith(("/api/", "/v1/")):
            continue
        names = re.findall(r"\{(\w+)", route.path)
        unknown = set(names) - ID_NAMES - OTHERS
        assert not unknown, (route.path, unknown)
        for name in set(names) & ID_NAMES:
            for method in sorted((route.methods or set()) - {"HEAD"}):
                found.append((method, route.path, name))
    return found


def _fill(path: str, parts: dict[str, str]) -> str:
    """``path`` with each ``{name}`` replaced by ``parts[name]`` (``1`` when not given)."""
    return re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: parts.get(m.group(1), "1"), path)


def test_the_page_routes_with_ids_are_found_from_the_app(make_site: MakeSite) -> None:
    paths = {path for _, path, _ in _page_routes(make_site())}
    assert {
        "/records/{record_id}",
        "/albums/{album_id}",
        "/items/{item_id}",
        "/records/{record_id}/delete",
        "/albums/{album_id}/links/{link_id}/revoke",
        "/tokens/{token_id}/revoke",
        "/s/{token}/items/{item_id}",
    } <= paths


@pytest.mark.parametrize("value", IMPOSSIBLE)
def test_an_id_no_row_can_have_is_the_pages_404(make_site: MakeSite, value: str) -> None:
    site = make_site()
    with TestClient(site.app, raise_server_exceptions=False) as client:
        csrf = sign_in(client, "alice")
        album = client.post(
            "/api/albums",
            json={"name": "Trip"},
            headers={"Authorization": f"Bearer {site.tokens['alice']}"},
        ).json()["id"]
        made = client.post(f"/albums/{album}/links", data={"csrf_token": csrf}, headers=HTML)
        link = re.search(r'id="new-link" class="token" href="/s/([^"]+)"', made.text)
        assert link is not None, made.text
        given = {"token": link.group(1), "fmt": "txt", "album_id": str(album)}
        for method, path, name in _page_routes(site):
            url = _fill(path, {**given, name: value})
            data = {"csrf_token": csrf} if method == "POST" else None
            headers = {**HTML, "X-CSRF-Token": csrf}
            answer = client.request(method, url, data=data, headers=headers)
            assert answer.status_code == 404, (method, url, answer.status_code, answer.text)
            assert "There is nothing here, or it is not yours." in answer.text, (method, url)
