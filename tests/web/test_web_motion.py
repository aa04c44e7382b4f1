"""A motion photo's page plays its clip (issue 21): once the ``motion`` role is made, the item
page shows the still and, under it, the clip in a ``<video>``; before that it says the clip is
on its way."""

from __future__ import annotations

import re
from pathlib import Path

from fastapi.testclient import TestClient

from conveyor.media.albums import create_album
from conveyor.media.intake import accept_media
from tests.support.media import drain
from tests.support.motion import motion_photo
from tests.support.needs import MEDIA_CORPUS
from tests.support.web import HTML, MakeSite, sign_in


def test_a_motion_photos_page_plays_its_clip(make_site: MakeSite, tmp_path: Path) -> None:
    site = make_site()
    runtime = site.runtime
    album_id = create_album(runtime.engine, runtime.clock, owner="alice", name="Moving")
    path = motion_photo(
        tmp_path / "PXL_0001.MP.jpg",
        MEDIA_CORPUS / "exif-samples__DSCN0010.jpg",
        MEDIA_CORPUS / "moviepy__fire2.mp4",
        "container",
    )
    item_id = accept_media(
        runtime.engine,
        runtime.store,
        runtime.clock,
        path,
        album_id=album_id,
        owner="alice",
        max_pixels=runtime.settings.media.max_pixels,
    )
    drain(runtime.engine, runtime.media, runtime.clock, lanes=("short",))
    with TestClient(site.app) as client:
        sign_in(client, "alice")
        waiting = client.get(f"/items/{item_id}", headers=HTML).text
        assert 'id="item-motion-waiting"' in waiting and "<video" not in waiting
        drain(runtime.engine, runtime.media, runtime.clock)
        page = client.get(f"/items/{item_id}", headers=HTML).text
        video = re.search(r'<video [^>]*src="(/files/[^"]+)"', page)
        assert video is not None and 'id="viewer-img"' in page
        played = client.get(video.group(1))
        assert played.status_code == 200 and played.headers["content-type"] == "video/mp4"
    with TestClient(site.app) as other:
        sign_in(other, "bob")
        assert other.get(video.group(1)).status_code == 404
