"""Uploads of real size from the page (Playwright + Debian's Chromium), on both databases.

A 12 MP photo, a 40 MB video and a 10-minute recording go through the page's queue at desktop
size; eleven recordings dropped at once at phone size all arrive without the page ever sending
more than the owner's upload slots; and a page that sends more than the server allows (its slot
count overridden) sees 429s, waits for their ``Retry-After`` and still gets every file in. The
files are made in the test's folder (noise, so nothing compresses them small): no server work
runs (no workers), the point is the upload path.
"""

from __future__ import annotations

import hashlib
import threading
import time
import wave
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any, NamedTuple

import av
import numpy as np
import pytest
import pyvips
from sqlalchemy import func, select, update

from conveyor.audio import queries as audio_queries
from conveyor.audio.intake import accept_audio
from conveyor.db.tables import audio_records, files, media_items, media_objects
from conveyor.media.albums import create_album
from conveyor.media.intake import accept_media
from tests.support.browser import (
    DESKTOP,
    PHONE,
    Browser,
    CuttableProxy,
    Served,
    new_page,
    serious_violations,
    served_site,
)
from tests.support.needs import CORPUS, need_corpus

MiB = 1024 * 1024
SLOTS = 4


class RealFiles(NamedTuple):
    photo: Path
    video: Path
    recording: Path
    eleven: list[Path]


def _photo(path: Path) -> Path:
    """4000 x 3000 (12 MP) JPEG of coloured noise over a gradient, as a camera might."""
    gradient = pyvips.Image.xyz(4000, 3000)[0] * (255 / 4000)
    noise = pyvips.Image.gaussnoise(4000, 3000, sigma=30, mean=0)
    bands = [(gradient + noise.rot180() * k).cast("uchar") for k in (0.5, 1.0, 0.8)]
    bands[0].bandjoin(bands[1:]).write_to_file(str(path), Q=90)
    return path


def _video(path: Path, at_least: int = 40 * MiB) -> Path:
    """An H.264 MP4 of 720p noise (lossless, so it stays large) of ``at_least`` bytes."""
    rng = np.random.default_rng(7)
    with av.open(str(path), "w") as out:
        stream = out.add_stream("libx264", rate=25, options={"crf": "0", "preset": "ultrafast"})
        stream.width, stream.height, stream.pix_fmt = 1280, 720, "yuv420p"
        stream.time_base = Fraction(1, 25)
        n = written = 0
        while written < at_least or n < 25:
            pixels = rng.integers(0, 256, (720, 1280, 3), dtype=np.uint8)
            frame = av.VideoFrame.from_ndarray(pixels, format="rgb24")
            frame.pts = n
            n += 1
            for packet in stream.encode(frame):
                written += packet.size
                out.mux(packet)
        for packet in stream.encode():
            out.mux(packet)
    return path


def _recording(path: Path, source: Path, seconds: int = 600) -> Path:
    """``source`` (a 16-bit WAV) said again and again for ``seconds``."""
    with wave.open(str(source)) as w:
        params = w.getparams()
        frames = w.readframes(w.getnframes())
    needed = seconds * params.framerate * params.sampwidth * params.nchannels
    body = (frames * (needed // len(frames) + 1))[:needed]
    with wave.open(str(path), "wb") as out:
        out.setparams(params)
        out.writeframes(body)
    return path


@pytest.fixture(scope="module")
def real_files(tmp_path_factory: pytest.TempPathFactory) -> RealFiles:
    folder = tmp_path_factory.mktemp("real-files")
    jfk = need_corpus(CORPUS / "audio") / "jfk.wav"  # a failure under CI=true, not a skip
    eleven = []
    for n in range(11):
        # Different bytes each (the same upload twice is fine too, but names should differ).
        eleven.append(
            _recording(folder / f"take-{n:02d} of a rather long meeting name.wav", jfk, 20 + n)
        )
    return RealFiles(
        photo=_photo(folder / "IMG_4000x3000.jpg"),
        video=_video(folder / "VID_noise_720p.mp4"),
        recording=_recording(folder / "ten-minutes.wav", jfk),
        eleven=eleven,
    )


@pytest.fixture(scope="module", params=["sqlite", "postgresql"])
def site(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Served]:
    with served_site(
        request, tmp_path_factory.mktemp("web"), api={"uploads_per_owner": SLOTS}
    ) as served:
        yield served


class MostArriving:
    """The most uploads of one owner arriving at once, watched from the server's own count."""

    def __init__(self, served: Served, owner: str) -> None:
        self.state = served.site.app.state.conveyor
        self.owner = owner
        self.most = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self.stop.is_set():
            self.most = max(self.most, self.state.uploads_by_owner.get(self.owner, 0))
            time.sleep(0.002)

    def __enter__(self) -> MostArriving:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop.set()
        self.thread.join()


def _throttle(page: Any, bytes_per_second: int) -> None:
    """Slow the page's uploads as a phone network would (Chromium's own throttling)."""
    cdp = page.context.new_cdp_session(page)
    cdp.send("Network.enable")
    cdp.send(
        "Network.emulateNetworkConditions",
        {
            "offline": False,
            "latency": 20,
            "downloadThroughput": -1,
            "uploadThroughput": bytes_per_second,
        },
    )


# Elements reaching past the right edge of the window (tag.class#id), when the page is wider.
_WIDER = """() => document.documentElement.scrollWidth <= window.innerWidth ? [] : [
    'page ' + document.documentElement.scrollWidth + ' px wide in ' + window.innerWidth,
    ...Array.from(document.querySelectorAll('body *'))
        .filter(e => !e.parentElement.closest('.table-wrap'))
        .filter(e => e.getBoundingClientRect().right > window.innerWidth + 1)
        .map(e => e.tagName + '.' + e.className + '#' + e.id)]"""


def sideways(page: Any) -> list[str]:
    """What makes ``page`` scroll sideways (empty when nothing does)."""
    found: list[str] = page.evaluate(_WIDER)
    return found


def _record_count(served: Served, owner: str) -> int:
    with served.site.runtime.engine.connect() as conn:
        query = select(func.count()).select_from(audio_records)
        return int(conn.execute(query.where(audio_records.c.owner == owner)).scalar_one())


def test_a_photo_a_video_and_a_ten_minute_recording_of_real_size(
    browser: Browser, site: Served, real_files: RealFiles
) -> None:
    assert real_files.video.stat().st_size >= 40 * MiB
    page = new_page(browser, site.url, "alice", DESKTOP)
    pieces: list[str] = []
    page.on(
        "request",
        lambda r: (
            pieces.append(r.headers.get("upload-offset", ""))
            if r.method == "PATCH" and "/uploads/" in r.url
            else None
        ),
    )
    page.goto("/records")
    page.set_input_files("#record-files", str(real_files.recording))
    page.locator(".uploads .upload-done a").wait_for(timeout=120_000)
    page.goto("/albums")
    page.fill("#album-name", "Real sizes")
    page.click("text=Create")
    page.wait_for_url("**/albums/*")
    page.set_input_files("#item-files", [str(real_files.photo), str(real_files.video)])
    done = page.locator(".uploads .upload-done a")
    deadline = time.monotonic() + 180
    while done.count() < 2:
        failed = page.locator(".upload-failed").all_text_contents()
        assert not failed, failed
        assert time.monotonic() < deadline
        time.sleep(0.2)
    by_name: dict[str, int] = {}
    with site.site.runtime.engine.connect() as conn:
        records = audio_records.join(files, files.c.id == audio_records.c.original_file_id)
        originals = media_items.join(
            media_objects,
            (media_objects.c.item_id == media_items.c.id) & (media_objects.c.role == "original"),
        ).join(files, files.c.id == media_objects.c.file_id)
        for table, joined in ((audio_records, records), (media_items, originals)):
            query = select(table.c.original_name, files.c.size).select_from(joined)
            by_name.update({str(n): int(size) for n, size in conn.execute(query)})
    for path in (real_files.photo, real_files.video, real_files.recording):
        assert by_name[path.name] == path.stat().st_size
    # The recording (19 MB) and the video (40 MB) went in resumable 8 MiB pieces; the photo
    # in one request.
    expected = sum(
        -(-p.stat().st_size // (8 * MiB)) for p in (real_files.recording, real_files.video)
    )
    assert len(pieces) == expected and pieces.count("0") == 2
    page.context.close()


def test_eleven_recordings_dropped_at_once_on_a_phone_all_arrive_within_the_slots(
    browser: Browser, site: Served, real_files: RealFiles
) -> None:
    page = new_page(browser, site.url, "bob", PHONE)
    page.goto("/records")
    _throttle(page, 4 * MiB)
    refused: list[int] = []
    page.on("response", lambda r: refused.append(r.status) if r.status >= 400 else None)
    with MostArriving(site, "bob") as watch:
        page.set_input_files("#record-files", [str(p) for p in real_files.eleven])
        page.locator(".uploads li").nth(10).wait_for()
        deadline = time.monotonic() + 120
        while page.locator(".uploads .upload-done").count() < 11:
            assert not page.locator(".upload-failed").count()
            assert time.monotonic() < deadline
            time.sleep(0.1)
    assert refused == []
    assert 1 < watch.most <= SLOTS
    assert _record_count(site, "bob") == 11
    # No upload line scrolls the phone's page sideways, however long the name.
    assert sideways(page) == []
    page.context.close()


def test_a_page_that_sends_more_than_the_slots_waits_out_each_429_and_gets_all_in(
    browser: Browser, site: Served, real_files: RealFiles
) -> None:
    page = new_page(browser, site.url, "root", DESKTOP)
    page.goto("/records")
    _throttle(page, 4 * MiB)
    # As if another tab of the same person held the other slots: this page believes in 11.
    page.evaluate("document.body.dataset.uploadSlots = '11'")
    statuses: list[int] = []
    page.on("response", lambda r: statuses.append(r.status) if "/upload" in r.url else None)
    page.set_input_files("#record-files", [str(p) for p in real_files.eleven])
    page.get_by_text("retrying in", exact=False).first.wait_for()
    deadline = time.monotonic() + 120
    while page.locator(".uploads .upload-done").count() < 11:
        assert not page.locator(".upload-failed").count()
        assert time.monotonic() < deadline
        time.sleep(0.1)
    assert 429 in statuses
    assert statuses.count(201) == 11
    assert _record_count(site, "root") == 11
    page.context.close()


def test_choose_two_photos_on_a_phone_and_delete_them_after_the_page_naming_them(
    browser: Browser, site: Served, corpus: Path
) -> None:
    runtime = site.site.runtime
    album_id = create_album(runtime.engine, runtime.clock, owner="alice", name="Choosing")
    for name in ("keep-me.jpg", "drop-one.jpg", "drop-two.jpg"):
        accept_media(
            runtime.engine,
            runtime.store,
            runtime.clock,
            corpus / "media" / "exif-samples__Canon_40D.jpg",
            album_id=album_id,
            owner="alice",
            original_name=name,
            max_pixels=runtime.settings.media.max_pixels,
            keep_duplicate=True,
        )
    page = new_page(browser, site.url, "alice", PHONE, bypass_csp=True)
    page.goto(f"/albums/{album_id}")
    assert page.locator("#delete-chosen").is_disabled()
    page.get_by_label("Choose drop-one.jpg").check()
    page.get_by_label("Choose drop-two.jpg").check()
    assert page.locator("#chosen-count").text_content() == "2 chosen"
    assert page.locator("#download-chosen").is_visible()
    assert serious_violations(page) == []
    assert sideways(page) == []
    page.click("#delete-chosen")
    page.locator("h1", has_text="Delete 2 photos?").wait_for()
    assert page.locator(".goes li").all_text_contents() == ["drop-two.jpg", "drop-one.jpg"]
    assert serious_violations(page) == []
    assert sideways(page) == []
    page.click("button.danger")
    page.wait_for_url(f"**/albums/{album_id}?deleted=2+items")
    assert page.locator(".notice").text_content() == "Deleted 2 items."
    assert page.locator(".tile-name").all_text_contents() == ["keep-me.jpg"]
    page.context.close()


LONG = "2026-11-30 Quarterly planning with the whole regional team and guests from abroad"


@pytest.mark.parametrize("width", [360, 414])
def test_no_page_scrolls_sideways_on_a_phone(
    browser: Browser, site: Served, corpus: Path, width: int
) -> None:
    """Every page at 360 and 414 px, with long names everywhere: nothing reaches past the
    right edge; a long name is cut short, and whole when focused."""
    runtime = site.site.runtime
    record_id = accept_audio(
        runtime.engine,
        runtime.store,
        runtime.clock,
        corpus / "audio" / "jfk.wav",
        owner="root",
        original_name=f"{LONG}.wav",
        keep_duplicate=True,
    )
    album_id = create_album(runtime.engine, runtime.clock, owner="root", name=f"{LONG} {width}")
    item_id = accept_media(
        runtime.engine,
        runtime.store,
        runtime.clock,
        corpus / "media" / "exif-samples__Canon_40D.jpg",
        album_id=album_id,
        owner="root",
        original_name=f"{LONG.replace(' ', '_')}.jpg",
        max_pixels=runtime.settings.media.max_pixels,
        keep_duplicate=True,
    )
    page = new_page(browser, site.url, "root", {"width": width, "height": 800})
    paths = [
        "/records",
        f"/records/{record_id}",
        f"/records/{record_id}/delete",
        "/search?q=planning",
        "/albums",
        f"/albums/{album_id}",
        f"/albums/{album_id}/delete",
        f"/items/{item_id}",
        f"/items/{item_id}/delete",
        "/vocabulary",
        "/tokens",
        "/operator",
    ]
    wide = {}
    for path in paths:
        page.goto(path)
        found = sideways(page)
        if found:
            wide[path] = found
    assert wide == {}
    page.goto("/records")
    name = page.locator(f"#record-{record_id} .record-name")
    cut = name.bounding_box()
    assert cut is not None and cut["height"] < 40  # one line, cut short
    assert name.get_attribute("title") == f"{LONG}.wav"
    name.focus()
    whole = name.bounding_box()
    assert whole is not None and whole["height"] > cut["height"]  # all of it, wrapped
    page.context.close()


def test_the_viewer_zooms_steps_by_keys_and_swipes_and_offers_the_original(
    browser: Browser, site: Served, corpus: Path, real_files: RealFiles
) -> None:
    runtime = site.site.runtime
    album_id = create_album(runtime.engine, runtime.clock, owner="bob", name="Viewer")
    ids = [
        accept_media(
            runtime.engine,
            runtime.store,
            runtime.clock,
            path,
            album_id=album_id,
            owner="bob",
            original_name=path.name,
            max_pixels=runtime.settings.media.max_pixels,
            keep_duplicate=True,
        )
        for path in (
            corpus / "media" / "exif-samples__Canon_40D.jpg",
            real_files.photo,
            corpus / "media" / "exif-samples__DSCN0010.jpg",
        )
    ]
    page = new_page(browser, site.url, "bob", DESKTOP, bypass_csp=True)
    # The grid's order (newest capture first; the made-up photo says none, so its upload
    # time counts) is the order the viewer steps through.
    page.goto(f"/albums/{album_id}")
    order = [
        int(i) for i in page.eval_on_selector_all("#grid .tile", "ts => ts.map(t => t.dataset.id)")
    ]
    assert sorted(order) == sorted(ids)
    newest, middle, oldest = order
    page.goto(f"/items/{ids[1]}")  # the 12 MP photo
    assert serious_violations(page) == []
    # Full size: the 12 MP original at its own size, in a box that scrolls.
    fitted = page.locator("#viewer-img").bounding_box()
    page.click("#zoom")
    assert page.locator("#zoom").get_attribute("aria-pressed") == "true"
    page.wait_for_function(
        "() => document.getElementById('viewer-img').naturalWidth === 4000"
        " && document.getElementById('viewer-img').complete"
    )
    zoomed = page.locator("#viewer-img").bounding_box()
    assert fitted is not None and zoomed is not None and zoomed["width"] > 2 * fitted["width"]
    page.click("#zoom")
    assert page.locator("#zoom").get_attribute("aria-pressed") == "false"
    # The original is offered as a download under its own name.
    with page.expect_download() as download:
        page.click("#item-figure a[download]")
    assert download.value.suggested_filename == real_files.photo.name
    # While zoomed, the arrow keys pan the picture and stay on it.
    page.click("#zoom")
    page.wait_for_function("() => document.getElementById('viewer-img').complete")
    page.keyboard.press("ArrowRight")
    page.wait_for_function("() => document.getElementById('zoom-box').scrollLeft > 0")
    assert page.url.endswith(f"/items/{ids[1]}")
    page.click("#zoom")
    # Arrow keys step through the album in the grid's order, one step per press: a key held
    # down (its repeats) fetches the neighbour once and goes there, no further.
    page.goto(f"/items/{newest}")
    fetched: list[str] = []
    page.on("request", lambda r: fetched.append(r.url) if r.resource_type == "document" else None)
    page.keyboard.down("ArrowRight")
    for _ in range(5):
        page.keyboard.down("ArrowRight")  # (Playwright sends these as repeats)
    page.keyboard.up("ArrowRight")
    page.wait_for_url(f"**/items/{middle}")
    page.keyboard.press("ArrowRight")
    page.wait_for_url(f"**/items/{oldest}")
    assert page.locator("#older").count() == 0  # nothing older
    page.keyboard.press("ArrowLeft")
    page.wait_for_url(f"**/items/{middle}")
    assert [u.rsplit("/", 1)[1] for u in fetched] == [str(middle), str(oldest), str(middle)]
    page.context.close()
    # On a phone, a swipe to the left goes to the older one.
    phone = browser.new_context(viewport=PHONE, base_url=site.url, has_touch=True, is_mobile=True)
    phone_page = phone.new_page()
    phone_page.goto("/sign-in")
    phone_page.fill("#username", "bob")
    phone_page.fill("#password", "bob-password-22")
    phone_page.click("button[type=submit]")
    phone_page.wait_for_url("**/records")
    phone_page.goto(f"/items/{middle}")
    assert sideways(phone_page) == []
    phone_page.evaluate(
        """() => {
            const at = (x) => [new Touch({identifier: 1, target: document.body, clientX: x,
                                          clientY: 300})];
            document.dispatchEvent(new TouchEvent('touchstart', {touches: at(300),
                                                                 changedTouches: at(300)}));
            document.dispatchEvent(new TouchEvent('touchend', {touches: [],
                                                               changedTouches: at(100)}));
        }"""
    )
    phone_page.wait_for_url(f"**/items/{oldest}")
    phone.close()


def _halt(site: Served, corpus: Path, owner: str, name: str) -> int:
    runtime = site.site.runtime
    record_id = accept_audio(
        runtime.engine,
        runtime.store,
        runtime.clock,
        corpus / "audio" / "jfk.wav",
        owner=owner,
        original_name=name,
        keep_duplicate=True,
    )
    with runtime.engine.begin() as conn:
        conn.execute(
            update(audio_records)
            .where(audio_records.c.id == record_id)
            .values(halted_at=runtime.clock.now(), halt_reason="step_error", halt_error="test")
        )
    return record_id


def test_the_operator_view_is_live_with_resume_and_delete_per_row(
    browser: Browser, site: Served, corpus: Path
) -> None:
    page = new_page(browser, site.url, "root", PHONE, bypass_csp=True)
    page.goto("/operator")
    # Halted after the page opened: it appears without a reload.
    first = _halt(site, corpus, "alice", "first-halted.wav")
    second = _halt(site, corpus, "bob", "second-halted.wav")
    page.locator(f"button[aria-label='Resume recording {second}']").wait_for(timeout=20_000)
    assert serious_violations(page) == []
    assert sideways(page) == []
    page.click(f"button[aria-label='Resume recording {first}']")
    page.locator(".notice", has_text=f"Resumed the recording {first}").wait_for()
    assert "first-halted.wav" in (page.locator(".notice").text_content() or "")
    assert page.locator(f"button[aria-label='Resume recording {first}']").count() == 0
    page.click(f"button[aria-label='Delete recording {second}…']")
    page.locator("h1", has_text=f"Delete the recording {second}").wait_for()
    assert "of bob?" in (page.locator("h1").text_content() or "")
    page.click("button.danger")
    page.locator(".notice", has_text=f"Deleted the recording {second}").wait_for()
    with site.site.runtime.engine.connect() as conn:
        left = conn.execute(select(audio_records.c.id, audio_records.c.halted_at)).all()
    assert (second, None) not in left and all(i != second for i, _ in left)
    assert dict(left)[first] is None  # resumed: no longer halted
    page.context.close()


def test_search_finds_what_was_said_and_plays_from_that_moment(
    browser: Browser, site: Served, corpus: Path
) -> None:
    runtime = site.site.runtime
    record_id = accept_audio(
        runtime.engine,
        runtime.store,
        runtime.clock,
        corpus / "audio" / "jfk.wav",
        owner="alice",
        original_name="inaugural.wav",
        language="en",
        keep_duplicate=True,
    )
    segments = [
        {"start": 0.0, "end": 3.5, "text": "And so, my fellow Americans,"},
        {"start": 3.5, "end": 8.0, "text": "ask not what your country can do for you,"},
        {"start": 8.0, "end": 11.0, "text": "ask what you can do for your country."},
    ]
    with runtime.engine.begin() as conn:
        audio_queries.upsert_text(
            conn,
            record_id=record_id,
            kind="transcript",
            body=" ".join(str(s["text"]) for s in segments),
            segments=segments,
            language="en",
            now=runtime.clock.now(),
        )
    page = new_page(browser, site.url, "alice", PHONE, bypass_csp=True)
    page.goto("/records")
    page.fill("#search-q", "Americans")
    page.press("#search-q", "Enter")
    page.wait_for_url("**/search?q=Americans")
    hit = page.locator(".hit").first
    assert hit.locator("mark").all_text_contents() == ["Americans"]
    assert serious_violations(page) == []
    assert sideways(page) == []
    page.goto("/search?q=country+ask")
    page.locator(".hit a").first.click()
    page.wait_for_url(f"**/records/{record_id}?t=3.50")
    page.wait_for_function("() => document.getElementById('player').currentTime >= 3.4")
    assert (
        page.locator("#transcript .seg.current")
        .text_content()
        .strip()
        .endswith("ask not what your country can do for you,")
    )
    page.context.close()


def test_a_large_upload_cut_off_midway_goes_on_from_where_it_was(
    browser: Browser, site: Served, real_files: RealFiles
) -> None:
    proxy = CuttableProxy(int(site.url.rsplit(":", 1)[1]))
    page = new_page(browser, proxy.url, "bob", PHONE)  # (alice sent this file before)
    page.goto("/records")
    sent: list[tuple[str, str]] = []
    page.on(
        "request",
        lambda r: (
            sent.append((r.method, r.headers.get("upload-offset", "")))
            if "/uploads" in r.url
            else None
        ),
    )
    storage = site.site.runtime.settings.storage
    folder = (storage.work_dir or storage.root / "work") / "resumable"

    def stored_past_the_first_piece() -> bool:
        return any(p.stat().st_size > 8 * MiB for p in folder.glob("*.part"))

    # Once the first piece is in, the network drops 1 MiB into the second (counted in bytes,
    # so whatever the machine's speed the cut lands inside the piece, after the server has
    # stored some of it).
    proxy.cut_inside("PATCH", 2, MiB, kept=stored_past_the_first_piece)
    page.set_input_files("#record-files", str(real_files.recording))
    deadline = time.monotonic() + 120
    while not proxy.cut_done.is_set():
        assert time.monotonic() < deadline, sent
        page.wait_for_timeout(20)  # (events reach the listener while Playwright is called)
    page.locator(".uploads .upload-done a").wait_for(timeout=120_000)
    page.wait_for_timeout(100)
    methods = [m for m, _ in sent]
    offsets = [int(o) for m, o in sent if m == "PATCH"]
    # Never begun again: one creation, one piece from byte 0; after the cut the page went on
    # from the byte the server had (asked by a HEAD, or named by the server's 409 when the
    # browser sent the cut piece again itself), which is no multiple of the piece size.
    assert methods.count("POST") == 1 and offsets.count(0) == 1, sent
    assert any(8 * MiB < o <= 9 * MiB for o in offsets), sent
    href = page.locator(".uploads .upload-done a").get_attribute("href") or ""
    record_id = int(href.rsplit("/", 1)[1])
    with site.site.runtime.engine.connect() as conn:
        digest = conn.execute(
            select(files.c.sha256)
            .select_from(audio_records.join(files, files.c.id == audio_records.c.original_file_id))
            .where(audio_records.c.id == record_id)
        ).scalar_one()
    assert digest == hashlib.sha256(real_files.recording.read_bytes()).hexdigest()
    page.context.close()
    proxy.close()
