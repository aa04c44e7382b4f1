"""Shared albums in the pages, route by route: every web route that names a thing is tried by
a viewer, a contributor, a stranger and a link's holder (no session). Outside what was shared
each answers as for a thing that does not exist (the same status, no existence revealed, and
nothing of the owner's changes); inside, each role gets what it gives. Both databases."""

from __future__ import annotations

import base64
import importlib
import json
import pkgutil
import re
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

import conveyor.web
from conveyor.accounts import add_user, create_token
from conveyor.accounts.passwords import set_password
from conveyor.kinds import ShareRole
from conveyor.media import sharing
from conveyor.testing import FakeClock
from conveyor.web import views
from conveyor.web.words import halt_words
from tests.support.api import SseReader, upload_media, wait_for
from tests.support.servers import LiveServer
from tests.support.web import HTML, MakeSite, Site, sign_in

PHOTO = "media/exif-samples__Canon_40D.jpg"
OTHER = "media/exif-samples__DSCN0010.jpg"
TUS = {"Tus-Resumable": "1.0.0"}


def _meta(**fields: str) -> str:
    return ",".join(f"{k} {base64.b64encode(v.encode()).decode()}" for k, v in fields.items())


def web_templates() -> set[tuple[str, str]]:
    """(method, path) of every page route with a path parameter, from the code."""
    found = set()
    for module in pkgutil.iter_modules(conveyor.web.__path__):
        if module.name.startswith("routes_"):
            router = importlib.import_module(f"conveyor.web.{module.name}").router
            for route in router.routes:
                path = str(getattr(route, "path", ""))
                if "{" in path:
                    found |= {(m, path) for m in getattr(route, "methods", ())}
    return found


class Person:
    """A browser: a client, signed in or not, and its CSRF token."""

    def __init__(self, client: TestClient, csrf: str | None) -> None:
        self.client = client
        self.csrf = csrf

    def call(self, method: str, url: str, extra: dict[str, Any]) -> Any:
        headers = {**HTML, **extra.get("headers", {})}
        kwargs = {k: v for k, v in extra.items() if k != "headers"}
        if self.csrf:
            headers["X-CSRF-Token"] = self.csrf
            if "data" in kwargs:
                kwargs["data"] = {**kwargs["data"], "csrf_token": self.csrf}
        return self.client.request(method, url, headers=headers, follow_redirects=False, **kwargs)


def requests_for(ids: dict[str, Any], photo: bytes) -> list[tuple[str, str, str, dict[str, Any]]]:
    """(method, template, url, request kwargs) of every page route naming a thing."""
    a, i, r, key, up, tok = (
        ids["album"], ids["item"], ids["record"], ids["key"], ids["upload"], ids["token_id"]
    )  # fmt: skip
    link, link_id = ids["link"], ids["link_id"]
    upload = {"files": {"file": ("x.jpg", photo, "image/jpeg")}}
    form: dict[str, Any] = {"data": {}}
    return [
        ("GET", "/albums/{album_id}", f"/albums/{a}", {}),
        ("POST", "/albums/{album_id}/upload", f"/albums/{a}/upload", upload),
        ("GET", "/albums/{album_id}/events", f"/albums/{a}/events", {}),
        ("GET", "/items/{item_id}/tile", f"/items/{i}/tile", {}),
        ("GET", "/items/{item_id}/view", f"/items/{i}/view", {}),
        ("GET", "/items/{item_id}", f"/items/{i}", {}),
        ("POST", "/items/{item_id}/resume", f"/items/{i}/resume", form),
        ("GET", "/files/{key:path}", f"/files/{key}", {}),
        ("HEAD", "/files/{key:path}", f"/files/{key}", {}),
        ("GET", "/records/{record_id}/delete", f"/records/{r}/delete", {}),
        ("GET", "/items/{item_id}/delete", f"/items/{i}/delete", {}),
        ("GET", "/albums/{album_id}/delete", f"/albums/{a}/delete", {}),
        ("GET", "/records/{record_id}/row", f"/records/{r}/row", {}),
        ("GET", "/records/{record_id}/status", f"/records/{r}/status", {}),
        ("GET", "/records/{record_id}", f"/records/{r}", {}),
        ("GET", "/records/{record_id}/text", f"/records/{r}/text", {}),
        ("POST", "/records/{record_id}/details", f"/records/{r}/details", {"data": {"title": "x"}}),
        ("POST", "/records/{record_id}/topics", f"/records/{r}/topics", {"data": {"topics": "x"}}),
        (
            "POST",
            "/records/{record_id}/proofread",
            f"/records/{r}/proofread",
            {"data": {"segment": "x"}},
        ),
        ("POST", "/records/{record_id}/resume", f"/records/{r}/resume", form),
        ("GET", "/records/{record_id}/audio", f"/records/{r}/audio", {}),
        ("GET", "/records/{record_id}/download/{fmt}", f"/records/{r}/download/srt", {}),
        ("HEAD", "/uploads/{upload_id}", f"/uploads/{up}", {"headers": TUS}),
        (
            "PATCH",
            "/uploads/{upload_id}",
            f"/uploads/{up}",
            {
                "content": b"x",
                "headers": {
                    **TUS,
                    "Upload-Offset": "0",
                    "Content-Type": "application/offset+octet-stream",
                },
            },
        ),
        ("POST", "/tokens/{token_id}/revoke", f"/tokens/{tok}/revoke", form),
        (
            "POST",
            "/albums/{album_id}/shares",
            f"/albums/{a}/shares",
            {"data": {"user": "bob", "role": "contributor"}},
        ),
        ("POST", "/albums/{album_id}/unshare", f"/albums/{a}/unshare", {"data": {"user": "carol"}}),
        ("POST", "/albums/{album_id}/links", f"/albums/{a}/links", form),
        (
            "POST",
            "/albums/{album_id}/links/{link_id}/revoke",
            f"/albums/{a}/links/{link_id}/revoke",
            form,
        ),
        # A link's pages: the link (of another album) does not reach this album's things.
        ("GET", "/s/{token}", f"/s/{link}", {}),
        ("GET", "/s/{token}/items/{item_id}", f"/s/{link}/items/{i}", {}),
        ("GET", "/s/{token}/items/{item_id}/tile", f"/s/{link}/items/{i}/tile", {}),
        ("GET", "/s/{token}/items/{item_id}/view", f"/s/{link}/items/{i}/view", {}),
        ("GET", "/s/{token}/events", f"/s/{link}/events", {}),
        ("GET", "/s/{token}/files/{key:path}", f"/s/{link}/files/{key}", {}),
        ("HEAD", "/s/{token}/files/{key:path}", f"/s/{link}/files/{key}", {}),
        # Deletions last (what they would take is checked afterwards).
        ("POST", "/records/{record_id}/delete", f"/records/{r}/delete", form),
        ("POST", "/items/{item_id}/delete", f"/items/{i}/delete", form),
        (
            "POST",
            "/albums/{album_id}/items/delete",
            f"/albums/{a}/items/delete",
            {"data": {"item": str(i)}},
        ),
        ("POST", "/albums/{album_id}/delete", f"/albums/{a}/delete", form),
    ]


def _people(site: Site, stack: ExitStack) -> dict[str, Person]:
    for name in ("carol", "dave"):
        add_user(site.runtime.engine, site.runtime.clock, name)
        set_password(site.runtime.engine, name, f"{name}-password-4")
    people = {}
    for name in ("alice", "carol", "dave", "bob"):
        client = stack.enter_context(TestClient(site.app))
        password = f"{name}-password-4" if name in ("carol", "dave") else None
        people[name] = Person(client, sign_in(client, name, password))
    people["link"] = Person(stack.enter_context(TestClient(site.app)), None)
    return people


def _upload(person: Person, album: int, photo: bytes) -> int:
    answer = person.call("POST", f"/albums/{album}/upload", {"files": {"file": ("p.jpg", photo)}})
    assert answer.status_code == 201, answer.text
    return int(answer.json()["id"])


@pytest.fixture
def shared_site(make_site: MakeSite, corpus: Path) -> Iterator[tuple[Site, dict[str, Any]]]:
    """Alice's shared album (Carol viewer, Dave contributor, a link) with a photo, and her
    private album with a photo, a recording and an unfinished resumable upload."""
    site = make_site(clock=FakeClock(1_800_000_000.0))
    photo = (corpus / PHOTO).read_bytes()
    with ExitStack() as stack:
        people = _people(site, stack)
        alice = people["alice"]
        engine, clock = site.runtime.engine, site.runtime.clock
        from conveyor.media.albums import create_album

        shared = create_album(engine, clock, owner="alice", name="Shared")
        private = create_album(engine, clock, owner="alice", name="Private")
        sharing.share_album(
            engine, clock, shared, owner="alice", user="carol", role=ShareRole.VIEWER
        )
        sharing.share_album(
            engine, clock, shared, owner="alice", user="dave", role=ShareRole.CONTRIBUTOR
        )
        link = sharing.create_link(engine, clock, shared, owner="alice")
        private_link = sharing.create_link(engine, clock, private, owner="alice")
        shared_item = _upload(alice, shared, photo)
        private_item = _upload(alice, private, (corpus / OTHER).read_bytes())
        wav = (corpus / "audio" / "jfk.wav").read_bytes()
        record = alice.client.post(
            "/records/upload",
            files={"file": ("jfk.wav", wav, "audio/wav")},
            headers={"X-CSRF-Token": alice.csrf or ""},
        )
        assert record.status_code == 201, record.text
        made = alice.call(
            "POST",
            "/uploads",
            {
                "headers": {
                    **TUS,
                    "Upload-Length": "1000",
                    "Upload-Metadata": _meta(filename="a.jpg", target=f"albums/{private}"),
                }
            },
        )
        assert made.status_code == 201, made.text
        token_id = create_token(engine, clock, "alice").id
        with engine.connect() as conn:
            from conveyor.media.albums import item_view

            keys = {
                n: item_view(conn, n)["roles"]["original"]["key"]
                for n in (shared_item, private_item)
            }
        yield (
            site,
            {
                "people": people,
                "photo": photo,
                "shared": shared,
                "private": private,
                "shared_item": shared_item,
                "private_item": private_item,
                "record": int(record.json()["id"]),
                "keys": keys,
                "upload": made.headers["Location"].rsplit("/", 1)[1],
                "token_id": token_id,
                "link": link,
                "private_link": private_link,
            },
        )


def test_outside_what_was_shared_every_page_answers_as_for_nothing(
    shared_site: tuple[Site, dict[str, Any]],
) -> None:
    site, s = shared_site
    people, photo = s["people"], s["photo"]
    theirs = requests_for(
        {
            "album": s["private"],
            "item": s["private_item"],
            "record": s["record"],
            "key": s["keys"][s["private_item"]],
            "upload": s["upload"],
            "token_id": s["token_id"],
            "link": s["link"].token,  # the shared album's link, asked for private things
            "link_id": s["private_link"].id,
        },
        photo,
    )
    nothing = requests_for(
        {
            "album": 999_999,
            "item": 999_999,
            "record": 999_999,
            "key": "uploads/media/nothing",
            "upload": "0" * 32,
            "token_id": 999_999,
            "link": "no-such-link",
            "link_id": 999_999,
        },
        photo,
    )
    assert {(m, t) for m, t, _u, _k in theirs} == web_templates()
    for who in ("carol", "dave", "bob", "link"):
        person = people[who]
        for (method, template, url, kwargs), (_m, _t, missing_url, _k) in zip(
            theirs, nothing, strict=True
        ):
            if (
                template.startswith("/s/{token}")
                and template != "/s/{token}"
                and ("{item_id}" not in template and "{key" not in template)
            ):
                continue  # the link's own album (its events): reached, not outside
            if template == "/s/{token}":
                continue  # the shared album itself: tried in the next test
            answer = person.call(method, url, kwargs)
            missing = person.call(method, missing_url, kwargs)
            assert answer.status_code == missing.status_code, (who, method, url, answer.text)
            assert not 200 <= answer.status_code < 300, (who, method, url)
    # Nothing of Alice's changed.
    alice = people["alice"]
    for url in (
        f"/albums/{s['private']}",
        f"/items/{s['private_item']}",
        f"/records/{s['record']}",
        f"/files/{s['keys'][s['private_item']]}",
    ):
        assert alice.call("GET", url, {}).status_code == 200, url
    with site.runtime.engine.connect() as conn:
        assert [x["user"] for x in sharing.list_shares(conn, s["private"], owner="alice")] == []
        assert [x["user"] for x in sharing.list_shares(conn, s["shared"], owner="alice")] == [
            "carol",
            "dave",
        ]
        links = sharing.list_links(conn, s["private"], owner="alice", now=0)
        assert [x["id"] for x in links] == [s["private_link"].id]


def test_inside_the_shared_album_each_role_gets_what_it_gives(
    shared_site: tuple[Site, dict[str, Any]], corpus: Path
) -> None:
    site, s = shared_site
    people = s["people"]
    album, item, key = s["shared"], s["shared_item"], s["keys"][s["shared_item"]]
    token = s["link"].token
    reads = [f"/albums/{album}", f"/items/{item}", f"/items/{item}/tile", f"/items/{item}/view"]
    owner_only: list[tuple[str, str, dict[str, Any]]] = [
        ("POST", f"/items/{item}/resume", {"data": {}}),
        ("GET", f"/items/{item}/delete", {}),
        ("POST", f"/items/{item}/delete", {"data": {}}),
        ("GET", f"/albums/{album}/delete", {}),
        ("POST", f"/albums/{album}/delete", {"data": {}}),
        ("POST", f"/albums/{album}/items/delete", {"data": {"item": str(item)}}),
        ("POST", f"/albums/{album}/shares", {"data": {"user": "bob", "role": "viewer"}}),
        ("POST", f"/albums/{album}/unshare", {"data": {"user": "carol"}}),
        ("POST", f"/albums/{album}/links", {"data": {}}),
        ("POST", f"/albums/{album}/links/{s['link'].id}/revoke", {"data": {}}),
    ]
    for who in ("carol", "dave"):
        person = people[who]
        for url in reads:
            assert person.call("GET", url, {}).status_code == 200, (who, url)
        for method in ("GET", "HEAD"):
            assert person.call(method, f"/files/{key}", {}).status_code == 200
        page = person.call("GET", f"/albums/{album}", {}).text
        assert 'id="sharing"' not in page and "Delete this album" not in page
        assert ('class="dropzone"' in page) is (who == "dave")
        for method, url, kwargs in owner_only:
            assert person.call(method, url, kwargs).status_code == 404, (who, method, url)
    other = (corpus / "media" / "pillow__transparent.png").read_bytes()
    carol_upload = people["carol"].call(
        "POST", f"/albums/{album}/upload", {"files": {"file": ("t.png", other)}}
    )
    assert carol_upload.status_code == 404
    added = _upload(people["dave"], album, other)
    assert people["alice"].call("GET", f"/items/{added}", {}).status_code == 200
    # Dave deletes what he added (Carol may not); it was Alice's item, now gone.
    assert "Delete this photo" in people["dave"].call("GET", f"/items/{added}", {}).text
    assert "Delete this photo" not in people["dave"].call("GET", f"/items/{item}", {}).text
    assert people["carol"].call("POST", f"/items/{added}/delete", {"data": {}}).status_code == 404
    assert people["dave"].call("GET", f"/items/{added}/delete", {}).status_code == 200
    assert people["dave"].call("POST", f"/items/{added}/delete", {"data": {}}).status_code == 303
    assert people["alice"].call("GET", f"/items/{added}", {}).status_code == 404
    # A stranger: the shared album is nothing to Bob.
    for url in reads:
        assert people["bob"].call("GET", url, {}).status_code == 404, url
    # The link's holder: the album, its items and files under the link, and nothing else.
    holder = people["link"]
    base = f"/s/{token}"
    for url in (
        base,
        f"{base}/items/{item}",
        f"{base}/items/{item}/tile",
        f"{base}/items/{item}/view",
    ):
        assert holder.call("GET", url, {}).status_code == 200, url
    grid = holder.call("GET", base, {}).text
    assert f'data-live="{base}/events"' in grid and 'id="sharing"' not in grid
    assert "dropzone" not in grid and "/sign-out" not in grid
    assert f'href="{base}/items/{item}"' in grid and f"{base}/files/" in grid
    assert holder.call("GET", f"{base}/files/{key}", {}).status_code == 200
    for url in reads:
        assert holder.call("GET", url, {}).status_code in (303, 401), url
    # Revoked, or expired: every page of the link answers 404.
    later = sharing.create_link(
        site.runtime.engine, site.runtime.clock, album, owner="alice", expires_in=3600
    )
    revoked = people["alice"].call(
        "POST", f"/albums/{album}/links/{s['link'].id}/revoke", {"data": {}}
    )
    assert revoked.status_code == 303
    assert isinstance(site.runtime.clock, FakeClock)
    assert holder.call("GET", f"/s/{later.token}", {}).status_code == 200
    site.runtime.clock.advance(3600)
    for gone in (token, later.token):
        for url in (
            f"/s/{gone}",
            f"/s/{gone}/items/{item}",
            f"/s/{gone}/files/{key}",
            f"/s/{gone}/events",
        ):
            assert holder.call("GET", url, {}).status_code == 404, url


def test_the_owner_shares_from_the_album_page(shared_site: tuple[Site, dict[str, Any]]) -> None:
    _site, s = shared_site
    alice, bob = s["people"]["alice"], s["people"]["bob"]
    album = s["shared"]
    page = alice.call("GET", f"/albums/{album}", {}).text
    assert 'id="sharing"' in page and 'id="share-carol"' in page and 'id="share-dave"' in page
    shared = alice.call(
        "POST", f"/albums/{album}/shares", {"data": {"user": "bob", "role": "viewer"}}
    )
    assert shared.status_code == 303 and shared.headers["location"] == f"/albums/{album}#sharing"
    listed = bob.call("GET", "/albums", {}).text
    assert re.search(rf'id="shared-albums".*href="/albums/{album}">Shared</a>', listed, re.S)
    refused = alice.call(
        "POST", f"/albums/{album}/shares", {"data": {"user": "nobody", "role": "viewer"}}
    )
    assert "share_error=" in refused.headers["location"]
    shown = alice.call("GET", refused.headers["location"].split("#")[0], {}).text
    assert "does not exist" in shown
    made = alice.call(
        "POST", f"/albums/{album}/links", {"data": {"label": "fam", "expires": "86400"}}
    )
    assert made.status_code == 200
    found = re.search(r'id="new-link" class="token" href="(/s/[^"]+)"', made.text)
    assert found is not None
    again = alice.call("GET", f"/albums/{album}", {}).text
    assert found.group(1) not in again, "a link's token is shown once"
    assert (
        alice.call("POST", f"/albums/{album}/unshare", {"data": {"user": "bob"}}).status_code == 303
    )
    assert bob.call("GET", f"/albums/{album}", {}).status_code == 404


def test_a_link_holder_sees_that_an_item_halted_but_not_why(
    make_site: MakeSite, corpus: Path
) -> None:
    """A photo the worker halts for real (a truncated JPEG): its owner reads the decoder's
    error on the pages and in the album's stream; a link's holder (no account) sees the item
    halted on the grid, its tile and its viewer, and the ``item.halted`` event, but neither
    the reason nor the error text (which can quote storage names, decoder and provider
    messages), in no page and no event."""
    site = make_site(run_workers=True, media={"short_workers": 1, "long_workers": 1})
    bearer = {"Authorization": f"Bearer {site.tokens['alice']}"}
    with (
        LiveServer(site.app) as server,
        server.client(bearer) as api,
        server.client() as alice,
        server.client() as holder,
    ):
        album = api.post("/api/albums", json={"name": "Trip"}).json()["id"]
        link = sharing.create_link(site.runtime.engine, site.runtime.clock, album, owner="alice")
        broken = corpus / "media" / "pillow__truncated_jpeg.jpg"
        item = upload_media(api, album, broken)["id"]
        view = wait_for(
            lambda: (v := api.get(f"/api/items/{item}").json())["halted"] and v, 120, "the halt"
        )
        reason, error = view["halt_reason"], view["halt_error"]
        assert reason == "undecodable" and broken.name in error, view
        words = halt_words(reason)
        sign_in(alice, "alice")
        owners = alice.get(f"/items/{item}", headers=HTML).text
        assert error in owners and words in owners, "the owner reads why"

        base = f"/s/{link.token}"
        for url in (base, f"{base}/items/{item}", f"{base}/items/{item}/tile"):
            page = holder.get(url, headers=HTML)
            assert page.status_code == 200, (url, page.text)
            assert f'id="item-{item}"' in page.text or "item-view" in page.text, url
            assert "Halted" in page.text and halt_words(None) in page.text, url
            for detail in (error, words, reason):
                assert detail not in page.text, (url, detail)
        shown = holder.get(f"{base}/items/{item}/view", headers=HTML).text
        assert 'data-halted="true"' in shown and "Halted" in shown
        assert error not in shown and words not in shown and reason not in shown

        def halted_event(client: httpx.Client, url: str) -> dict[str, Any]:
            with client.stream("GET", url, params={"last_event_id": 0}) as response:
                event = SseReader(response).next_event(30)
            assert (event["event"], event["item_id"]) == ("item.halted", item), event
            return event

        theirs = halted_event(holder, f"{base}/events")
        assert theirs["payload"] == {"item_id": item, "kind": "photo", "stage": "uploaded"}
        assert error not in json.dumps(theirs) and reason not in json.dumps(theirs)
        owners_event = halted_event(alice, f"/albums/{album}/events")
        assert owners_event["payload"]["error"] == error
        assert owners_event["payload"]["reason"] == reason


def test_what_a_link_holder_is_not_told_is_one_rule_for_its_pages_and_its_stream(
    make_site: MakeSite, corpus: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The pages and the album's stream hide from a link's holder what ``views.LINK_HIDDEN``
    names, and nothing else: with the error text alone named, the holder reads why the photo
    halted (the reason's words on the grid, the tile and the viewer; the reason in the
    ``item.halted`` event) and the error text nowhere. A second list of what to hide, for the
    pages or for the stream, fails here."""
    monkeypatch.setattr(views, "LINK_HIDDEN", frozenset({"error"}))
    site = make_site(run_workers=True, media={"short_workers": 1, "long_workers": 1})
    bearer = {"Authorization": f"Bearer {site.tokens['alice']}"}
    with LiveServer(site.app) as server, server.client(bearer) as api, server.client() as holder:
        album = api.post("/api/albums", json={"name": "Trip"}).json()["id"]
        link = sharing.create_link(site.runtime.engine, site.runtime.clock, album, owner="alice")
        broken = corpus / "media" / "pillow__truncated_jpeg.jpg"
        item = upload_media(api, album, broken)["id"]
        view = wait_for(
            lambda: (v := api.get(f"/api/items/{item}").json())["halted"] and v, 120, "the halt"
        )
        reason, error = view["halt_reason"], view["halt_error"]
        assert reason == "undecodable" and broken.name in error, view

        base = f"/s/{link.token}"
        for url in (base, f"{base}/items/{item}", f"{base}/items/{item}/tile"):
            page = holder.get(url, headers=HTML)
            assert page.status_code == 200, (url, page.text)
            assert halt_words(reason) in page.text and error not in page.text, url
        with holder.stream("GET", f"{base}/events", params={"last_event_id": 0}) as response:
            event = SseReader(response).next_event(30)
        assert event["event"] == "item.halted", event
        assert event["payload"] == {
            "item_id": item,
            "kind": "photo",
            "stage": "uploaded",
            "reason": reason,
        }


def test_pages_name_the_shell_user_as_a_name_and_tell_a_viewer_what_they_may_not_do(
    make_site: MakeSite, corpus: Path
) -> None:
    """An album of the shell's user ``me``, shared with Bob and by a link: the pages say
    "Shared with you by “me”" (not as if the reader had shared it); ``me`` signed in, opening
    their own link, is told it is their album; Bob, a viewer, dropping a photo or starting a
    resumable upload gets the same 404 as a stranger, in words that say he may see the album
    but not add to it."""
    site = make_site()
    engine, clock = site.runtime.engine, site.runtime.clock
    add_user(engine, clock, "me")
    set_password(engine, "me", "me-password-4")
    from conveyor.media.albums import create_album

    album = create_album(engine, clock, owner="me", name="Trip")
    sharing.share_album(engine, clock, album, owner="me", user="bob", role=ShareRole.VIEWER)
    link = sharing.create_link(engine, clock, album, owner="me")
    with TestClient(site.app) as signed_out, TestClient(site.app) as me_client:
        with TestClient(site.app) as bob_client:
            bob = Person(bob_client, sign_in(bob_client, "bob"))
            page = bob.call("GET", f"/albums/{album}", {}).text
            assert "Shared with you by \u201cme\u201d: you can see it." in page
            assert "by \u201cme\u201d" in bob.call("GET", "/albums", {}).text
            photo = (corpus / PHOTO).read_bytes()
            # As the page's script asks (JSON, whose message it shows; a page asked for as
            # HTML gets the generic "nothing here, or it is not yours").
            script = {"Accept": "application/json"}
            dropped = bob.call(
                "POST",
                f"/albums/{album}/upload",
                {"files": {"file": ("p.jpg", photo)}, "headers": script},
            )
            started = bob.call(
                "POST",
                "/uploads",
                {
                    "headers": {
                        **script,
                        **TUS,
                        "Upload-Length": "10",
                        "Upload-Metadata": _meta(filename="a.jpg", target=f"albums/{album}"),
                    }
                },
            )
            for refused in (dropped, started):
                assert refused.status_code == 404, refused.text
                error = refused.json()["error"]
                assert error["code"] == "not_found"
                assert (
                    "shared with you as a viewer: you may see it, but not add to it"
                    in (error["message"])
                )
        shown = Person(signed_out, None).call("GET", link.url, {}).text
        assert "Shared with you by \u201cme\u201d" in shown and 'id="link-own"' not in shown
        me = Person(me_client, sign_in(me_client, "me", "me-password-4"))
        own = me.call("GET", link.url, {}).text
        assert 'id="link-own"' in own and "Shared with you" not in own
