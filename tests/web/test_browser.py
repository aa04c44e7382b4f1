"""The web app in a real browser (Playwright + Debian's Chromium), as a person uses it.

One server with workers serves every test of this module, once on SQLite (the embedded
default) and once on PostgreSQL; each test signs in with its own browser context. Screenshots
of each page (from the SQLite run) go to ``docs/screenshots/`` so the docs show what the code
does.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import insert, update

from conveyor.audio.intake import accept_audio
from conveyor.db.tables import audio_records, media_items, record_events
from conveyor.media.albums import create_album
from conveyor.media.intake import accept_media
from conveyor.pipeline import resume
from conveyor.web.routes_albums import GRID_PAGE
from conveyor.web.routes_operator import HALTED_PAGE
from tests.support.browser import (
    PHONE,
    Browser,
    CuttableProxy,
    Page,
    Served,
    new_page,
    screenshot_folder,
    serious_violations,
    served_site,
)
from tests.support.web import PASSWORDS, Site


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def site(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    """One live server with workers per database; every test of the module uses it."""
    with served_site(
        request,
        tmp_path_factory.mktemp("web"),
        run_workers=True,
        pipeline={"workers": 1},
        media={"short_workers": 1, "long_workers": 0},
    ) as served:
        yield served


def shot(served: Served, page: Page, name: str) -> None:
    """A screenshot (from the SQLite run only: one picture per page), into the docs'
    pictures only when asked (:func:`screenshot_folder`)."""
    if served.backend != "sqlite":
        return
    page.screenshot(path=str(screenshot_folder() / f"{name}.png"), full_page=True)


def test_sign_in_and_sign_out(browser: Browser, site: Served) -> None:
    url = site.url
    page = new_page(browser, url, None)
    page.goto("/records")
    page.wait_for_url(re.compile(r"/sign-in\?next=/records"))
    shot(site, page, "sign-in")
    page.fill("#username", "alice")
    page.fill("#password", "not the password")
    page.click("button[type=submit]")
    assert page.locator("#sign-in-error").inner_text() == "Wrong user name or password."
    page.fill("#password", PASSWORDS["alice"])
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/records$"))
    assert page.locator(".who").inner_text() == "alice"
    page.click("text=Sign out")
    page.wait_for_url(re.compile(r"/sign-in$"))
    page.goto("/records")
    page.wait_for_url(re.compile(r"/sign-in"))
    page.context.close()


def test_upload_jfk_until_transcript_shows_then_play_correct_and_export(
    browser: Browser, site: Served, corpus: Path
) -> None:
    """Drop jfk.wav, watch the list and the record's page move live until the timed
    transcript shows on it, play from a line, correct it: the correction stays after a reload
    and is what the downloads hold."""
    url = site.url
    page = new_page(browser, url, "alice")
    total = int(page.locator("#count-total").inner_text())
    page.set_input_files("#record-files", str(corpus / "audio" / "jfk.wav"))
    page.locator(".uploads .upload-done a").wait_for()
    row = page.locator(".record-row").first
    row.wait_for()
    assert "jfk.wav" in row.inner_text()
    # The count above the list follows without a reload.
    page.wait_for_function(
        "n => document.getElementById('count-total').textContent === String(n)", arg=total + 1
    )
    # The record's own page, opened while it is still being worked on, in a second tab.
    record = page.context.new_page()
    record.goto(row.locator(".record-name").get_attribute("href") or "")
    assert record.locator("#record-text").get_attribute("data-has-text") == "false"
    record.evaluate("() => { window.sameDocument = true; }")
    # The list follows the record through its stages without a reload.
    page.locator(".record-row.is-done").first.wait_for(timeout=240_000)
    assert page.locator("#activity .activity-entry").count() >= 3
    assert page.locator("#activity-none").is_hidden()  # ("None yet." until the first change)
    said = page.locator("#activity").inner_text()
    assert "submitted to" not in said and "pcm_s16le" not in said, said  # no engine notes
    shot(site, page, "recordings")
    # The record page shows the transcript and the correction form when they arrive, in the
    # same document (no reload that would stop the player).
    page.close()
    page = record
    page.locator("#transcript .seg").first.wait_for(timeout=60_000)
    page.locator("#seg-1").wait_for()
    assert page.evaluate("() => window.sameDocument === true"), "the page was reloaded"
    assert page.locator("#record-status").get_attribute("data-stage") == "done"
    segments = page.locator("#transcript .seg")
    assert segments.count() >= 1
    assert "country" in page.locator("#transcript").inner_text().lower()
    shot(site, page, "record")
    # A line is a button: choose it (here with the keyboard) and the player jumps there; the
    # line being played is marked.
    last = segments.nth(segments.count() - 1)
    start = float(last.get_attribute("data-start") or 0)
    last.focus()
    page.keyboard.press("Enter")
    page.wait_for_function(
        "s => Math.abs(document.getElementById('player').currentTime - s) < 1.5", arg=start
    )
    page.locator("#transcript .seg.current").wait_for()
    # Each word is a target too: click one and the player jumps to it; the word being said is
    # marked as it plays.
    word = page.locator("#transcript .word").nth(5)
    at = float(word.get_attribute("data-start") or 0)
    word.click()
    page.wait_for_function(
        "s => Math.abs(document.getElementById('player').currentTime - s) < 0.5", arg=at
    )
    page.locator("#transcript .word.said").first.wait_for()
    # Correct the first line; it survives a reload and the exports carry it.
    page.fill("#seg-1", "And so, my fellow Americans (corrected):")
    page.click("text=Save correction")
    page.wait_for_url(re.compile(r"saved=proofread"))
    page.reload()
    assert "(corrected)" in page.locator("#transcript").inner_text()
    record_url = page.url.split("?")[0]
    for fmt in ("txt", "srt", "vtt", "json"):
        body = page.request.get(f"{record_url}/download/{fmt}").text()
        assert "(corrected)" in body, fmt
    page.context.close()


def test_second_page_on_an_album_sees_a_photo_appear_live(
    browser: Browser, site: Served, corpus: Path
) -> None:
    url = site.url
    uploader = new_page(browser, url, "alice")
    uploader.goto("/albums")
    uploader.fill("#album-name", "Holiday")
    uploader.click("text=Create")
    uploader.wait_for_url(re.compile(r"/albums/\d+$"))
    album_url = uploader.url
    watcher = new_page(browser, url, "alice", viewport=PHONE)
    watcher.goto(album_url)
    assert watcher.locator(".tile").count() == 0
    uploader.set_input_files("#item-files", str(corpus / "media" / "exif-samples__Canon_40D.jpg"))
    # The watcher never reloads: the tile arrives from the album's live stream with its thumb.
    watcher.locator(".tile[data-ready=true] img.thumb").wait_for(timeout=120_000)
    assert watcher.locator(".tile").count() == 1
    shot(site, watcher, "album-phone")
    shot(site, uploader, "album")
    watcher.click(".tile-link")
    watcher.locator(".viewer img").wait_for()
    src = watcher.locator(".viewer img").get_attribute("src") or ""
    assert "preview" in src or "medium" in src
    shot(site, watcher, "item-phone")
    uploader.context.close()
    watcher.context.close()


def halted_record(
    site: Site, corpus: Path, owner: str = "alice", reason: str = "undecodable"
) -> int:
    """A record of ``owner`` halted with ``reason`` (as a step would leave it)."""
    runtime = site.runtime
    with (corpus / "audio" / "corrupt_bad_header.wav").open("rb") as source:
        record_id = accept_audio(
            runtime.engine,
            runtime.store,
            runtime.clock,
            source,
            owner=owner,
            original_name="broken.wav",
            keep_duplicate=True,
        )
    with runtime.engine.begin() as conn:
        conn.execute(
            update(audio_records)
            .where(audio_records.c.id == record_id)
            .values(
                halted_at=runtime.clock.now(),
                halt_reason=reason,
                halt_error="the decoder found no audio stream",
                # A worker may have claimed it already: taking the claim away makes that
                # worker's save find no row (P6), so this halt is the one that stays.
                claim_token=None,
                claim_expires_at=None,
            )
        )
    return record_id


def test_resume_a_halted_record_from_its_page(browser: Browser, site: Served, corpus: Path) -> None:
    built, url = site.site, site.url
    record_id = halted_record(built, corpus)
    page = new_page(browser, url, "alice")
    page.goto(f"/records/{record_id}")
    status = page.locator("#record-status")
    assert "could not be read" in status.inner_text()
    # The file itself is the problem: the page says resuming will not help and offers deleting.
    assert "Resuming will not help" in status.inner_text()
    assert status.locator("button.primary").count() == 0
    shot(site, page, "record-halted")
    page.click("#record-status button:has-text('Resume')")
    page.wait_for_url(re.compile(r"saved=resumed"))
    assert page.locator("#record-status").get_attribute("data-halted") == "false" or (
        # A worker may have tried it again at once and halted it anew (the file is broken).
        "could not be read" in page.locator("#record-status").inner_text()
    )
    page.context.close()


def test_a_form_posted_without_its_csrf_token_is_refused(
    browser: Browser, site: Served, corpus: Path
) -> None:
    built, url = site.site, site.url
    record_id = halted_record(built, corpus)
    page = new_page(browser, url, "alice")
    page.goto(f"/records/{record_id}")
    page.evaluate(
        "() => document.querySelectorAll('input[name=csrf_token]').forEach(e => e.remove())"
    )
    page.fill("#title", "Forged")
    page.click("text=Save title and brief")
    assert "Refused" in page.locator("h1").inner_text()
    page.goto(f"/records/{record_id}")
    assert page.locator("#title").input_value() != "Forged"
    page.context.close()


def test_another_owners_record_url_answers_not_found(
    browser: Browser, site: Served, corpus: Path
) -> None:
    built, url = site.site, site.url
    record_id = halted_record(built, corpus)
    page = new_page(browser, url, "bob")
    response = page.goto(f"/records/{record_id}")
    assert response is not None and response.status == 404
    assert page.locator("h1").inner_text() == "Not found"
    assert "broken.wav" not in page.content()
    page.context.close()


def test_network_drop_and_return_shows_every_missed_change_once(
    browser: Browser, site: Served, corpus: Path
) -> None:
    built, url = site.site, site.url
    runtime = built.runtime
    ids = [halted_record(built, corpus, reason="stuck_test") for _ in range(3)]
    proxy = CuttableProxy(int(url.rsplit(":", 1)[1]))
    page = new_page(browser, proxy.url, "alice")
    page.goto("/records")
    time.sleep(1)  # the stream is open
    # The network drops: the open stream is cut and nothing new gets through.
    page.context.set_offline(True)
    proxy.cut()
    page.locator("#live-status:not([hidden])").wait_for(timeout=30_000)
    assert "reconnecting" in page.locator("#live-status").inner_text().lower()
    for record_id in ids:  # three changes while the page is cut off
        resume(runtime.engine, runtime.audio, record_id, clock=runtime.clock)
    runtime.notifier.publish()
    page.context.set_offline(False)
    page.locator("#live-status[hidden]").wait_for(state="attached", timeout=30_000)
    for record_id in ids:
        entry = page.locator(
            f"#activity .activity-entry[data-record='{record_id}']", has_text="broken.wav: resumed"
        )
        entry.first.wait_for()
    time.sleep(2)  # nothing arrives twice, even after more time
    for record_id in ids:
        entry = page.locator(
            f"#activity .activity-entry[data-record='{record_id}']", has_text="broken.wav: resumed"
        )
        assert entry.count() == 1
    page.context.close()


def test_operator_resumes_exactly_the_frozen_set(
    browser: Browser, site: Served, corpus: Path
) -> None:
    built, url = site.site, site.url
    runtime = built.runtime
    frozen = [
        halted_record(built, corpus, owner=o, reason="operator_test") for o in ("alice", "bob")
    ]
    page = new_page(browser, url, "root")
    page.goto("/operator")
    shot(site, page, "operator")
    row = page.locator("tr:not(.halted-row)", has_text="operator_test")
    assert row.locator("td").nth(1).inner_text() == "2"
    row.locator("button").click()
    assert "2" in page.locator("#frozen-count").inner_text()
    late = halted_record(built, corpus, reason="operator_test")  # halts after the count
    page.click("text=Resume these 2")
    assert "Resumed 2" in page.locator("#bulk-result").inner_text()
    from sqlalchemy import select

    with runtime.engine.connect() as conn:
        reasons = dict(
            conn.execute(
                select(audio_records.c.id, audio_records.c.halt_reason).where(
                    audio_records.c.id.in_([*frozen, late])
                )
            ).all()
        )
    assert reasons[late] == "operator_test"
    assert all(reasons[i] != "operator_test" for i in frozen)
    page.context.close()


def test_every_page_passes_an_accessibility_scan(
    browser: Browser, site: Served, corpus: Path
) -> None:
    """axe-core, run in each page, finds no serious or critical violation."""
    built, url = site.site, site.url
    record_id = halted_record(built, corpus, owner="root")
    page = new_page(browser, url, "root", bypass_csp=True)
    failures: dict[str, list[str]] = {}
    paths = ["/records", f"/records/{record_id}", "/albums", "/tokens", "/operator", "/vocabulary"]
    paths += ["/search?q=nothing+said"]
    page.goto("/albums")
    page.fill("#album-name", "Scan")
    page.click("text=Create")
    page.wait_for_url(re.compile(r"/albums/\d+$"))
    album_path = page.url.split(url, 1)[1]
    shot(site, page, "album-empty")
    item_id = halted_photo(built, corpus, int(album_path.rsplit("/", 1)[1]), owner="root")
    paths += [album_path, f"/items/{item_id}", "/records?show=halted"]
    # The pages that name what a delete takes with it.
    paths += [f"/records/{record_id}/delete", f"/items/{item_id}/delete", f"{album_path}/delete"]
    for path in paths:
        page.goto(path)
        if path.startswith("/items/"):
            shot(site, page, "item-halted")
        if path == "/vocabulary":
            shot(site, page, "vocabulary")
        found = serious_violations(page)
        if found:
            failures[path] = found
    page.goto("/tokens")
    shot(site, page, "tokens")
    page.click("text=Sign out")
    page.wait_for_url(re.compile(r"/sign-in$"))
    found = serious_violations(page)
    if found:
        failures["/sign-in"] = found
    assert failures == {}
    page.context.close()


def halted_photo(site: Site, corpus: Path, album_id: int, owner: str = "alice") -> int:
    """A photo of ``owner`` halted from the start (in the intake's own transaction, so no
    worker ever sees it waiting)."""
    runtime = site.runtime

    def halt(conn: Any, item_id: int) -> None:
        conn.execute(
            update(media_items)
            .where(media_items.c.id == item_id)
            .values(halted_at=runtime.clock.now(), halt_reason="step_error", halt_error="test")
        )

    return accept_media(
        runtime.engine,
        runtime.store,
        runtime.clock,
        corpus / "media" / "exif-samples__Canon_40D.jpg",
        album_id=album_id,
        owner=owner,
        original_name="live.jpg",
        max_pixels=runtime.settings.media.max_pixels,
        on_insert=halt,
        keep_duplicate=True,
    )


def test_the_item_viewer_fills_in_live_as_variants_arrive(
    browser: Browser, site: Served, corpus: Path
) -> None:
    """The viewer of a photo still waiting shows its original; when the preview is made the
    page swaps it in from the album's stream, without a reload."""
    built, url = site.site, site.url
    runtime = built.runtime
    album_id = create_album(runtime.engine, runtime.clock, owner="alice", name="Live viewer")
    item_id = halted_photo(built, corpus, album_id)
    page = new_page(browser, url, "alice", viewport=PHONE)
    page.goto(f"/items/{item_id}")
    assert page.locator("#item-view").get_attribute("data-halted") == "true"
    assert "(original)" in (page.locator("#item-figure img").get_attribute("alt") or "")
    page.evaluate("() => { window.sameDocument = true; }")
    time.sleep(1)  # the stream is open
    # Resumed elsewhere (another tab, the operator): the worker makes the variants.
    resume(runtime.engine, runtime.media, item_id, clock=runtime.clock)
    runtime.notifier.publish()
    page.locator("#item-view:not([data-roles=original]) #item-figure img").wait_for(timeout=120_000)
    src = page.locator("#item-figure img").get_attribute("src") or ""
    assert "preview" in src or "medium" in src
    assert page.locator("#item-view").get_attribute("data-halted") == "false"
    assert page.evaluate("() => window.sameDocument === true"), "the page was reloaded"
    assert "Halted" not in page.locator("#item-status").inner_text()
    page.context.close()


def test_album_grid_and_operator_list_page_in_the_browser(
    browser: Browser, site: Served, corpus: Path
) -> None:
    """An album of GRID_PAGE + 5 items shows GRID_PAGE tiles and an Older page with the other
    5. A photo taken in 2008
    uploaded on the first page shows at the top, then, once its capture time is read, leaves
    for its place by capture time on the Older page. The operator's halted list pages the
    same way. Both pass the accessibility scan."""
    built, url = site.site, site.url
    runtime = built.runtime
    album_id = create_album(runtime.engine, runtime.clock, owner="alice", name="Paged")
    now = runtime.clock.now()
    rows = [
        {
            "owner": "alice",
            "album_id": album_id,
            "kind": "photo",
            "original_name": f"old-{n}.jpg",
            "uploaded_at": now - 1000 + n,
            "stage": "done",
            "state_entered_at": now,
            "attempts": 0,
            "updated_at": now,
        }
        for n in range(GRID_PAGE + 5)
    ]
    halted = [
        {
            **rows[0],
            "original_name": f"halted-{n}.jpg",
            "stage": "uploaded",
            "halted_at": now - 1000 + n,
            "halt_reason": "paging_test",
        }
        for n in range(HALTED_PAGE + 3)
    ]
    with runtime.engine.begin() as conn:
        conn.execute(insert(media_items), rows)
    page = new_page(browser, url, "alice", bypass_csp=True)
    page.goto(f"/albums/{album_id}")
    assert page.locator(".tile").count() == GRID_PAGE
    assert page.locator("#grid-total").inner_text() == str(GRID_PAGE + 5)
    page.click("a[rel=next]")
    page.wait_for_url(re.compile(r"before="))
    assert page.locator(".tile").count() == 5
    assert serious_violations(page) == []
    page.click("text=Newest")
    page.wait_for_url(re.compile(rf"/albums/{album_id}$"))
    # Not the photo the album test of this site added: that one would be kept once.
    page.set_input_files("#item-files", str(corpus / "media" / "exif-samples__DSCN0010.jpg"))
    done = page.locator(".uploads .upload-done a")
    done.wait_for()
    new_id = int((done.get_attribute("href") or "").rsplit("/", 1)[1])
    ready = page.locator(f"#activity .activity-entry[data-item='{new_id}']", has_text="ready")
    ready.first.wait_for(timeout=120_000)
    page.locator(f"#item-{new_id}").wait_for(state="detached")
    assert page.locator(".tile").count() == GRID_PAGE
    assert page.locator("#grid-total").inner_text() == str(GRID_PAGE + 6)
    page.click("a[rel=next]")
    page.wait_for_url(re.compile(r"before="))
    assert page.locator(".tile").count() == 6
    assert page.locator(".tile").last.get_attribute("data-id") == str(new_id)
    page.context.close()
    with runtime.engine.begin() as conn:
        conn.execute(insert(media_items), halted)
    operator = new_page(browser, url, "root", bypass_csp=True)
    operator.goto("/operator")
    media = operator.locator("section", has=operator.locator("#op-media"))
    first = media.locator("tr.halted-row td:first-child").all_inner_texts()
    assert len(first) == HALTED_PAGE
    media.locator("a[rel=next]").click()
    operator.wait_for_url(re.compile(r"domain=media&before="))
    media = operator.locator("section", has=operator.locator("#op-media"))
    second = media.locator("tr.halted-row td:first-child").all_inner_texts()
    assert len(second) >= 3 and not set(first) & set(second)
    assert serious_violations(operator) == []
    operator.context.close()


def journal(site: Site, record_id: int, stage: str, outcome: str) -> None:
    """A journal row for a change made by hand, as the pipeline writes one (D14)."""
    runtime = site.runtime
    with runtime.engine.begin() as conn:
        conn.execute(
            insert(record_events).values(
                domain="audio",
                record_id=record_id,
                stage=stage,
                outcome=outcome,
                origin="pipeline",
                created_at=runtime.clock.now(),
            )
        )
    runtime.notifier.publish()


def test_a_filtered_list_and_its_counts_follow_live_changes(
    browser: Browser, site: Served, corpus: Path
) -> None:
    """Filtered to halted recordings, the list gains a record that halts and loses one that
    is done, live; the counts above it follow."""
    built, url = site.site, site.url
    runtime = built.runtime
    page = new_page(browser, url, "bob")
    page.select_option("#filter-show", "halted")
    page.click(".filters button")
    page.wait_for_url(re.compile(r"show=halted"))
    halted = int(page.locator("#count-halted").inner_text())
    time.sleep(1)  # the stream is open
    record_id = halted_record(built, corpus, owner="bob", reason="filter_test")
    journal(built, record_id, "uploaded", "halted")
    page.locator(f"#record-{record_id}[data-halted=true]").wait_for()
    page.wait_for_function(
        "n => document.getElementById('count-halted').textContent === String(n)",
        arg=halted + 1,
    )
    shot(site, page, "recordings-filtered")
    with runtime.engine.begin() as conn:
        conn.execute(
            update(audio_records)
            .where(audio_records.c.id == record_id)
            .values(halted_at=None, halt_reason=None, stage="done")
        )
    journal(built, record_id, "done", "advanced")
    page.locator(f"#record-{record_id}").wait_for(state="detached")
    page.wait_for_function(
        "n => document.getElementById('count-halted').textContent === String(n)", arg=halted
    )
    assert page.locator(".record-row[data-halted=false]").count() == 0
    page.context.close()


def test_the_schema_pages_render_from_the_server_alone(browser: Browser, site: Served) -> None:
    """/docs and /redoc load their code from Conveyor itself: with every other host cut off,
    Swagger UI lists the routes and ReDoc renders (a self-hosted service may have no CDN)."""
    page = new_page(browser, site.url, None)
    elsewhere: list[str] = []

    def only_the_site(route: Any) -> None:
        if route.request.url.startswith(site.url):
            route.continue_()
        else:
            # ReDoc's footer shows its maker's logo from their site: decoration, not the page.
            if route.request.resource_type != "image":
                elsewhere.append(route.request.url)
            route.abort()

    page.route("**/*", only_the_site)
    page.goto("/docs")
    page.wait_for_selector(".opblock")  # one block per route, drawn by Swagger UI's script
    assert page.locator(".opblock").count() > 10
    page.goto("/redoc")
    page.wait_for_selector("[data-section-id]")
    assert elsewhere == []
    page.context.close()
