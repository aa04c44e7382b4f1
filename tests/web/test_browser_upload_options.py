"""The recordings page's upload options and the vocabulary page in a real browser (Playwright
+ Debian's Chromium), once on SQLite and once on PostgreSQL.

The server runs no workers: these tests are about what the upload stores, so the record stays
at ``uploaded`` and no recognizer takes the machine from the other browser tests.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import select

from conveyor.audio import queries
from conveyor.audio.vocabulary import owner_vocabulary
from conveyor.db.tables import audio_records
from tests.support.browser import Browser, Served, new_page, served_site


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def site(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    with served_site(request, tmp_path_factory.mktemp("web-options")) as served:
        yield served


def test_upload_options_set_on_the_page_reach_the_record(
    browser: Browser, site: Served, corpus: Path
) -> None:
    """Set language, hints and channels, then choose jfk.wav: the record carries them and its
    page says so; a language the recognizer does not know is refused on the upload's row."""
    page = new_page(browser, site.url, "alice")
    jfk = str(corpus / "audio" / "jfk.wav")
    # A refused option: the row says why, nothing is stored.
    page.fill("#upload-language", "zz")
    page.set_input_files("#record-files", jfk)
    failed = page.locator(".uploads .upload-failed .upload-state")
    failed.wait_for()
    assert "'zz' is not a language code" in failed.inner_text()
    with site.site.runtime.engine.connect() as conn:
        assert conn.execute(select(audio_records.c.id)).all() == []
    # The options apply to the files chosen after they are set.
    page.fill("#upload-language", " en ")
    page.fill("#upload-hints", "Kennedy,\nSorensen")
    page.select_option("#upload-channels", "separate")
    page.set_input_files("#record-files", jfk)
    done = page.locator(".uploads .upload-done a")
    done.wait_for()
    href = done.get_attribute("href") or ""
    record_id = int(href.rsplit("/", 1)[1])
    with site.site.runtime.engine.connect() as conn:
        row = (
            conn.execute(select(audio_records).where(audio_records.c.id == record_id))
            .mappings()
            .one()
        )
        hints = [t["body"] for t in queries.texts_of(conn, record_id) if t["kind"] == "hints"]
    assert (row["owner"], row["language"], row["channels"]) == ("alice", "en", "separate")
    assert hints == ["Kennedy, Sorensen"]
    done.click()
    page.wait_for_url(re.compile(rf"/records/{record_id}$"))
    assert page.locator("#choice-language").inner_text() == "en"
    assert page.locator("#choice-channels").inner_text() == "separate"
    assert page.locator("#choice-hints").inner_text() == "Kennedy, Sorensen"
    page.context.close()


def test_vocabulary_is_edited_through_its_page(browser: Browser, site: Served) -> None:
    page = new_page(browser, site.url, "bob")
    page.click("nav >> text=Vocabulary")
    page.wait_for_url(re.compile(r"/vocabulary$"))
    assert "for every recording of yours" in page.locator("#vocabulary-about").inner_text()
    page.fill("#vocabulary-hints", "Grafana,\n  Anya Petrova")
    page.click("text=Save vocabulary")
    page.wait_for_url(re.compile(r"/vocabulary\?saved=vocabulary$"))
    assert page.locator(".notice").inner_text() == "Saved."
    assert page.locator("#vocabulary-hints").input_value() == "Grafana, Anya Petrova"
    with site.site.runtime.engine.connect() as conn:
        assert owner_vocabulary(conn, "bob") == "Grafana, Anya Petrova"
    # The recordings page names it beside the upload's own hints.
    page.goto("/records")
    assert page.locator("#upload-vocabulary").inner_text() == "Grafana, Anya Petrova"
    # Emptied, it is removed.
    page.goto("/vocabulary")
    page.fill("#vocabulary-hints", "")
    page.click("text=Save vocabulary")
    page.wait_for_url(re.compile(r"saved=removed$"))
    assert page.locator("#vocabulary-hints").input_value() == ""
    with site.site.runtime.engine.connect() as conn:
        assert owner_vocabulary(conn, "bob") is None
    page.context.close()
