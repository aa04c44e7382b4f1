"""Every file of the shared media corpus through intake and the media pipeline (M1-M4).

Expected values come from ../shared/corpus/media/MANIFEST.md: upright dimensions and roles, or
the refusal at intake, or the halt with its readable reason (the original kept, the worker going
on). The corpus is read in place, never copied into the repository.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select

from conveyor.db.tables import files, media_items
from conveyor.errors import RejectedInput, UnsupportedMedia
from conveyor.media.albums import item_view
from conveyor.objects import LocalStore, ObjectStore, WorkFolder
from conveyor.testing import FakeClock
from tests.support.media import add, album, drain, media_domain
from tests.support.stored import object_keys

CORPUS = (Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "media").resolve()
PHOTO_ROLES = {"original", "thumb", "medium", "preview"}
VIDEO_ROLES = PHOTO_ROLES | {"poster", "playback"}

# name → (upright width, upright height) of a photo that reaches done
PHOTOS: dict[str, tuple[int, int]] = {
    **{f"exif-samples__landscape_{n}.jpg": (600, 450) for n in range(1, 9)},
    "exif-samples__Canon_40D.jpg": (100, 68),
    "exif-samples__DSCN0010.jpg": (640, 480),
    "pillow__pil_sample_cmyk.jpg": (100, 100),
    "pillow__i_trns.png": (64, 64),
    "pillow__apng_mode_16bit.png": (128, 64),
    "pillow__iss634.gif": (245, 245),
    "pillow__iss634.webp": (245, 245),
    "pillow__transparent.png": (200, 150),
    "pillow__app13-multiple.jpg": (256, 160),
    "pillow__hopper_orientation_6.webp": (128, 128),
    "pillow__avif_rot1mir0.avif": (640, 427),
    "pillow__avif_star.avifs": (159, 159),
    "immich-test-assets__10bit-HDR-P3-nclx.avif": (3681, 5594),
    "lychee__mongolia": (1280, 850),
}
# name → (upright width, upright height) of a video that reaches done
VIDEOS: dict[str, tuple[int, int]] = {
    "moviepy__fire2.mp4": (1280, 720),
    "lychee__train.mov": (1440, 1080),
    "file-type__fixture.mov": (268, 156),
}
# name → (exception type, reason): refused at intake, nothing kept
REFUSED: dict[str, tuple[type[RejectedInput], str]] = {
    "moviepy__result.webm": (RejectedInput, "empty_file"),
    "file-type__fixture-json.webp": (UnsupportedMedia, "not_media"),
    "file-type__fixture.m4a": (UnsupportedMedia, "not_media"),
    "pillow__decompression_bomb.gif": (RejectedInput, "too_many_pixels"),
}
# name → halt reason: accepted (the header is fine), halted by the short lane, original kept
HALTED: dict[str, str] = {"pillow__truncated_jpeg.jpg": "undecodable"}
# Done where libvips has an HEVC decoder; else halted unsupported_media (pyvips-binary has none).
HEIC = "immich-test-assets__IMG_2682.heic"

assert CORPUS.is_dir(), f"shared media corpus missing at {CORPUS}"


def test_every_corpus_file_is_covered() -> None:
    names = {p.name for p in CORPUS.iterdir() if p.name != "MANIFEST.md"}
    assert names == set(PHOTOS) | set(VIDEOS) | set(REFUSED) | set(HALTED) | {HEIC}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_bad_input_is_refused_at_intake_and_nothing_kept(
    name: str, engine: Engine, clock: FakeClock, tmp_path: Path
) -> None:
    store = LocalStore(tmp_path / "store", work=WorkFolder(tmp_path / "work"))
    album_id = album(engine, clock)
    kind, reason = REFUSED[name]
    with pytest.raises(kind) as caught:
        add(engine, store, clock, album_id, CORPUS / name)
    assert caught.value.reason == reason
    assert str(caught.value)  # a readable sentence
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(media_items)).scalar() == 0
        assert conn.execute(select(func.count()).select_from(files)).scalar() == 0
    assert object_keys(store) == []


def test_whole_corpus_through_the_pipeline(
    engine: Engine, clock: FakeClock, object_store: ObjectStore
) -> None:
    """One album, every acceptable file, one drain: bad files halt, the worker carries on.
    Runs on a folder and on an S3 bucket (moto): the steps see only the ObjectStore."""
    store = object_store
    album_id = album(engine, clock)
    items: dict[str, int] = {}
    for name in sorted(set(PHOTOS) | set(VIDEOS) | set(HALTED) | {HEIC}):
        items[name] = add(engine, store, clock, album_id, CORPUS / name)
        clock.advance(1)
    drain(engine, media_domain(store), clock)
    with engine.connect() as conn:
        views = {name: item_view(conn, item) for name, item in items.items()}
        journal_rows = conn.execute(select(func.count()).select_from(files)).scalar()
    keys: set[str] = set()
    for name, view in views.items():
        keys |= {obj["key"] for obj in view["roles"].values()}
        for role, obj in view["roles"].items():
            found = store.stat(obj["key"])
            assert found is not None and found.size == obj["size"], (name, role)
        if name in HALTED or (name == HEIC and view["halted"]):
            reason = HALTED.get(name, "unsupported_media")
            assert view["halted"] and view["halt_reason"] == reason, name
            assert view["halt_error"] and "uploads/" not in view["halt_error"]
            assert set(view["roles"]) == {"original"}  # the original is kept
            assert view["stage"] == "uploaded"
            continue
        want = PHOTOS.get(name) or VIDEOS.get(name) or (4032, 3024)
        assert not view["halted"], (name, view["halt_error"])
        assert view["stage"] == "done", name
        assert (view["width"], view["height"]) == want, name
        roles = view["roles"]
        if name in VIDEOS:
            assert view["kind"] == "video"
            assert set(roles) == VIDEO_ROLES, name
            assert (roles["poster"]["width"], roles["poster"]["height"]) == want
            playback = roles["playback"]
            assert playback["mime_type"] == "video/mp4"
            assert playback["width"] / playback["height"] == pytest.approx(
                want[0] / want[1], abs=0.02
            )
        else:
            assert view["kind"] == "photo"
            assert set(roles) == PHOTO_ROLES, name
        for role in ("thumb", "medium", "preview"):
            edge = max(roles[role]["width"], roles[role]["height"])
            assert edge <= max(want), (name, role)  # never upscaled
            # upright: the variant keeps the original's orientation
            assert (roles[role]["width"] >= roles[role]["height"]) == (want[0] >= want[1])
        assert max(roles["thumb"]["width"], roles["thumb"]["height"]) <= 320
    # Exactly one journal row per object (M1); roles with equal bytes name one object.
    assert journal_rows == len(keys)
    # ... and every stored object is named by one (nothing half-written or left over).
    with engine.connect() as conn:
        journal = set(conn.execute(select(files.c.key)).scalars())
    assert set(object_keys(store)) == journal
    assert store.abort_stale_writes(time.time() + 60) == 0
