"""The HTTP file routes on an S3 bucket (a real moto server): streamed with the same Range,
ETag and 304 behaviour as from a folder, or a redirect to a presigned URL when ``[storage]
presign = true``. The photo and video pipelines run on the bucket behind the API."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import httpx
from fastapi.testclient import TestClient

from tests.support.api import MakeApi, check_ranges, upload_media, wait_for
from tests.support.s3server import S3Server
from tests.support.stored import object_keys


def _s3(server: S3Server, **extra: Any) -> dict[str, Any]:
    return {**server.storage_settings(server.bucket(), "conveyor"), **extra}


def test_files_stream_from_the_bucket_with_ranges_and_etags(
    make_api: MakeApi, s3_server: S3Server, corpus: Path
) -> None:
    api = make_api(
        run_workers=True,
        storage=_s3(s3_server),
        media={"short_workers": 1, "long_workers": 1},
    )
    with TestClient(api.app) as client:
        client.headers.update(api.alice)
        album_id = client.post("/api/albums", json={"name": "On S3"}).json()["id"]
        video = upload_media(client, album_id, corpus / "media" / "file-type__fixture.mov")

        def done() -> dict[str, Any] | None:
            item = client.get(f"/api/items/{video['id']}").json()
            assert not item["halted"], item
            return item if item["done"] else None

        item = wait_for(done, 120, "the video's playback")
        assert set(item["roles"]) == {
            "original",
            "thumb",
            "medium",
            "preview",
            "poster",
            "playback",
        }
        check_ranges(client, item["roles"]["playback"])
        original = client.get(item["roles"]["original"]["url"])
        wanted = (corpus / "media" / "file-type__fixture.mov").read_bytes()
        assert original.status_code == 200 and original.content == wanted
        assert original.headers["etag"] == f'"{hashlib.sha256(wanted).hexdigest()}"'
        bob = client.get(item["roles"]["original"]["url"], headers=api.bob)
        assert bob.status_code == 404  # another owner's object stays unseen
    # Every object in the bucket is one a journal row names (M1); the small poster's thumb,
    # medium and preview are the same bytes, stored once.
    assert len(object_keys(api.runtime.store)) == 4


def test_presign_redirects_to_the_bucket(
    make_api: MakeApi, s3_server: S3Server, corpus: Path
) -> None:
    api = make_api(storage=_s3(s3_server, presign=True, presign_expires=60))
    photo_path = corpus / "media" / "exif-samples__Canon_40D.jpg"
    with TestClient(api.app, follow_redirects=False) as client:
        client.headers.update(api.alice)
        album_id = client.post("/api/albums", json={"name": "Signed"}).json()["id"]
        photo = upload_media(client, album_id, photo_path)
        url = photo["roles"]["original"]["url"]
        answer = client.get(url)
        assert answer.status_code == 307, answer.text
        assert answer.headers["cache-control"] == "no-store"
        location = answer.headers["location"]
        assert location.startswith(s3_server.endpoint) and "Signature" in location
        # The owner check comes first: another owner gets no URL.
        assert client.get(url, headers=api.bob).status_code == 404
        etag = client.head(url).headers.get("etag")
        assert etag is None  # a redirect carries no validator of its own ...
        cached = client.get(url, headers={"If-None-Match": f'"{photo_sha(photo_path)}"'})
        assert cached.status_code == 304  # ... but a cached copy still revalidates here
    signed = httpx.get(location)
    assert signed.status_code == 200 and signed.content == photo_path.read_bytes()
    assert signed.headers["content-type"] == "image/jpeg"
    assert signed.headers["content-disposition"].startswith("inline")
    part = httpx.get(location, headers={"Range": "bytes=10-19"})
    assert (part.status_code, part.content) == (206, photo_path.read_bytes()[10:20])


def photo_sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_presign_on_a_folder_streams(make_api: MakeApi, corpus: Path) -> None:
    """A folder has no URLs to sign: with presign on, the API streams the bytes itself."""
    api = make_api(storage={"presign": True})
    photo_path = corpus / "media" / "exif-samples__Canon_40D.jpg"
    with TestClient(api.app, follow_redirects=False) as client:
        client.headers.update(api.alice)
        album_id = client.post("/api/albums", json={"name": "Local"}).json()["id"]
        photo = upload_media(client, album_id, photo_path)
        answer = client.get(photo["roles"]["original"]["url"])
        assert answer.status_code == 200 and answer.content == photo_path.read_bytes()
