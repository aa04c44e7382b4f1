"""Shared albums in a real browser (Playwright + Debian's Chromium): the owner shares from the
album page, a second user sees it among the albums shared with them, and a signed-out browser
holding a link sees the grid and the viewer, and a photo the owner adds appear live; axe-core
finds nothing serious on the new pages. One live server with workers per database."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.browser import Browser, Served, new_page, serious_violations, served_site


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def site(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    with served_site(
        request,
        tmp_path_factory.mktemp("web"),
        run_workers=True,
        pipeline={"workers": 0},
        media={"short_workers": 1, "long_workers": 0},
    ) as served:
        yield served


def test_a_shared_album_reaches_a_user_and_a_link_live(
    browser: Browser, site: Served, corpus: Path
) -> None:
    url = site.url
    failures: dict[str, list[str]] = {}

    def scan(name: str, page: object) -> None:
        found = serious_violations(page)
        if found:
            failures[name] = found

    owner = new_page(browser, url, "alice", bypass_csp=True)
    owner.goto("/albums")
    owner.fill("#album-name", "Summer")
    owner.click("text=Create")
    owner.wait_for_url(re.compile(r"/albums/\d+$"))
    album_path = owner.url.split(url, 1)[1]
    # The share panel: Bob as a viewer, then a link that expires in a week.
    owner.fill("#share-user", "bob")
    owner.select_option("#share-role", "viewer")
    owner.click("#share-form button[type=submit]")
    owner.wait_for_url(re.compile(r"/albums/\d+#sharing$"))
    assert "bob" in owner.locator("#shares").inner_text()
    owner.fill("#link-label", "family")
    owner.select_option("#link-expires", "604800")
    owner.click("#link-form button[type=submit]")
    link = owner.locator("#new-link").get_attribute("href") or ""
    assert link.startswith("/s/")
    assert "family" in owner.locator("#links").inner_text()
    scan("owner's album with the share panel", owner)

    viewer = new_page(browser, url, "bob", bypass_csp=True)
    viewer.goto("/albums")
    viewer.locator("#shared-albums a", has_text="Summer").click()
    viewer.wait_for_url(re.compile(re.escape(album_path) + "$"))
    assert "Shared with you by alice" in viewer.locator("#shared-role").inner_text()
    assert viewer.locator(".dropzone").count() == 0
    assert viewer.locator("#sharing").count() == 0
    scan("a viewer's album", viewer)
    viewer.goto("/albums")
    scan("albums with the shared list", viewer)
    viewer.goto(album_path)

    stranger = new_page(browser, url, None, bypass_csp=True)
    stranger.goto(link)
    assert stranger.locator("h1").inner_text() == "Summer"
    assert stranger.locator(".tile").count() == 0
    assert stranger.locator(".signout").count() == 0
    scan("a link's album (signed out)", stranger)

    # The owner adds a photo; neither the viewer nor the signed-out link page reloads.
    owner.set_input_files("#item-files", str(corpus / "media" / "exif-samples__Canon_40D.jpg"))
    for page in (stranger, viewer):
        page.locator(".tile[data-ready=true] img.thumb").wait_for(timeout=120_000)
        assert page.locator(".tile").count() == 1
    thumb = stranger.locator(".tile img.thumb").get_attribute("src") or ""
    assert thumb.startswith(f"{link}/files/")
    stranger.click(".tile-link")
    stranger.wait_for_url(re.compile(re.escape(link) + r"/items/\d+$"))
    stranger.locator(".viewer img").wait_for()
    src = stranger.locator(".viewer img").get_attribute("src") or ""
    assert src.startswith(f"{link}/files/")
    assert stranger.locator(".danger-zone").count() == 0
    scan("a link's viewer (signed out)", stranger)
    # Outside the link: the rest of the site asks a signed-out browser to sign in.
    stranger.goto(album_path)
    stranger.wait_for_url(re.compile(r"/sign-in\?next="))

    # Revoked, the link shows nothing any more.
    owner.goto(album_path)
    owner.locator("#links button[type=submit]").first.click()
    owner.wait_for_url(re.compile(r"/albums/\d+#sharing$"))
    gone = stranger.goto(link)
    assert gone is not None and gone.status == 404
    assert failures == {}
    for page in (owner, viewer, stranger):
        page.context.close()
