"""Deleting from the pages: a confirmation that names what goes, then gone for good (rows and
stored objects), another owner's answering 404, and nothing deleted without the CSRF token."""

from __future__ import annotations

import html
from pathlib import Path

from fastapi.testclient import TestClient
from sqlalchemy import func, select

from conveyor.audio.intake import accept_audio
from conveyor.db.tables import albums, audio_records, media_items
from conveyor.media.albums import create_album
from conveyor.media.intake import accept_media
from tests.support.stored import object_keys
from tests.support.web import HTML, MakeSite, Site, sign_in


def _count(site: Site, table: object) -> int:
    with site.runtime.engine.connect() as conn:
        return int(conn.execute(select(func.count()).select_from(table)).scalar_one())  # type: ignore[arg-type]


def _recording(site: Site, corpus: Path, name: str | None = None) -> int:
    """Alice's recording of jfk.wav (a second copy of it when one is there already)."""
    runtime = site.runtime
    return accept_audio(
        runtime.engine,
        runtime.store,
        runtime.clock,
        corpus / "audio" / "jfk.wav",
        owner="alice",
        original_name=name,
        keep_duplicate=True,
    )


def _photo(site: Site, corpus: Path, album_id: int, name: str) -> int:
    runtime = site.runtime
    return accept_media(
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


def test_a_recording_is_deleted_after_a_page_that_names_it(
    make_site: MakeSite, corpus: Path
) -> None:
    site = make_site()
    runtime = site.runtime
    record_id = _recording(site, corpus, "Board meeting <b>.wav")
    assert object_keys(runtime.store)
    with TestClient(site.app) as client:
        csrf = sign_in(client, "alice")
        record_page = client.get(f"/records/{record_id}", headers=HTML).text
        assert f'href="/records/{record_id}/delete"' in record_page
        confirm = client.get(f"/records/{record_id}/delete", headers=HTML)
        assert confirm.status_code == 200
        text = html.unescape(confirm.text)
        assert "Delete the recording “Board meeting <b>.wav”?" in text
        assert "343.8 KiB" in text and "cannot be undone" in text
        assert "<b>.wav" not in confirm.text  # escaped
        assert _count(site, audio_records) == 1  # asking deletes nothing
        refused = client.post(f"/records/{record_id}/delete", data={}, headers=HTML)
        assert refused.status_code == 403
        gone = client.post(
            f"/records/{record_id}/delete",
            data={"csrf_token": csrf},
            headers=HTML,
            follow_redirects=False,
        )
        assert gone.status_code == 303
        assert gone.headers["location"].startswith("/records?deleted=Board")
        assert _count(site, audio_records) == 0
        assert object_keys(runtime.store) == []
        listing = client.get(gone.headers["location"], headers=HTML).text
        assert "Deleted “Board meeting &lt;b&gt;.wav”." in listing
        again = client.get(f"/records/{record_id}/delete", headers=HTML)
        assert again.status_code == 404


def test_another_owners_things_cannot_be_deleted(make_site: MakeSite, corpus: Path) -> None:
    site = make_site()
    runtime = site.runtime
    record_id = _recording(site, corpus)
    album_id = create_album(runtime.engine, runtime.clock, owner="alice", name="Hers")
    item_id = _photo(site, corpus, album_id, "hers.jpg")
    with TestClient(site.app) as client:
        csrf = sign_in(client, "bob")
        for path in (
            f"/records/{record_id}/delete",
            f"/items/{item_id}/delete",
            f"/albums/{album_id}/delete",
        ):
            assert client.get(path, headers=HTML).status_code == 404
            assert client.post(path, data={"csrf_token": csrf}, headers=HTML).status_code == 404
        chosen = client.post(
            f"/albums/{album_id}/items/delete",
            data={"csrf_token": csrf, "item": str(item_id), "confirmed": "yes"},
            headers=HTML,
        )
        assert chosen.status_code == 404
    assert (_count(site, audio_records), _count(site, media_items), _count(site, albums)) == (
        1,
        1,
        1,
    )


def test_photos_chosen_in_the_grid_then_the_album(make_site: MakeSite, corpus: Path) -> None:
    site = make_site()
    runtime = site.runtime
    album_id = create_album(runtime.engine, runtime.clock, owner="alice", name="Trip")
    first = _photo(site, corpus, album_id, "first.jpg")
    second = _photo(site, corpus, album_id, "second.jpg")
    kept = _photo(site, corpus, album_id, "kept.jpg")
    with TestClient(site.app) as client:
        csrf = sign_in(client, "alice")
        grid = client.get(f"/albums/{album_id}", headers=HTML).text
        assert f'name="item" value="{first}" form="grid-select"' in grid
        chosen = {"csrf_token": csrf, "item": [str(first), str(second)]}
        confirm = client.post(f"/albums/{album_id}/items/delete", data=chosen, headers=HTML)
        assert confirm.status_code == 200
        assert "Delete 2 photos?" in confirm.text
        assert '<li class="name">first.jpg</li>' in confirm.text
        assert '<li class="name">second.jpg</li>' in confirm.text
        assert "kept.jpg" not in confirm.text
        assert _count(site, media_items) == 3
        done = client.post(
            f"/albums/{album_id}/items/delete",
            data={**chosen, "confirmed": "yes"},
            headers=HTML,
            follow_redirects=False,
        )
        assert done.status_code == 303
        assert done.headers["location"] == f"/albums/{album_id}?deleted=2+items"
        with runtime.engine.connect() as conn:
            left = conn.execute(select(media_items.c.id)).scalars().all()
        assert left == [kept]
        nothing = client.post(
            f"/albums/{album_id}/items/delete", data={"csrf_token": csrf}, headers=HTML
        )
        assert nothing.status_code == 422
        whole = client.get(f"/albums/{album_id}/delete", headers=HTML)
        assert "Delete the album “Trip”?" in html.unescape(whole.text)
        assert "Every item in it: 1 photo, with" in whole.text
        gone = client.post(
            f"/albums/{album_id}/delete",
            data={"csrf_token": csrf},
            headers=HTML,
            follow_redirects=False,
        )
        assert gone.headers["location"] == "/albums?deleted=Trip"
        assert (_count(site, media_items), _count(site, albums)) == (0, 0)
        assert object_keys(runtime.store) == []
        assert "Deleted the album “Trip”." in html.unescape(
            client.get("/albums?deleted=Trip", headers=HTML).text
        )


def test_only_an_admin_resumes_or_deletes_rows_of_the_operator_view(
    make_site: MakeSite, corpus: Path
) -> None:
    site = make_site()
    runtime = site.runtime
    record_id = _recording(site, corpus)
    with TestClient(site.app) as client:
        csrf = sign_in(client, "bob")
        for action in ("resume", "delete"):
            form = {"csrf_token": csrf, "domain": "audio", "id": str(record_id), "confirmed": "yes"}
            refused = client.post(f"/operator/row/{action}", data=form, headers=HTML)
            assert refused.status_code == 404
    assert _count(site, audio_records) == 1
    with TestClient(site.app) as client:
        csrf = sign_in(client, "root")
        form = {"csrf_token": csrf, "domain": "audio", "id": str(record_id)}
        # Not halted: resuming says so and changes nothing.
        said = client.post("/operator/row/resume", data=form, headers=HTML)
        assert "is not halted any more" in html.unescape(said.text)
        confirm = client.post("/operator/row/delete", data=form, headers=HTML)
        assert f"Delete the recording {record_id}" in html.unescape(confirm.text)
        assert "of alice?" in confirm.text
        assert _count(site, audio_records) == 1
        gone = client.post("/operator/row/delete", data={**form, "confirmed": "yes"}, headers=HTML)
        assert f"Deleted the recording {record_id}" in html.unescape(gone.text)
    assert _count(site, audio_records) == 0
    assert object_keys(runtime.store) == []
