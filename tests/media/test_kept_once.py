"""Each file kept once per owner (issue 21): intake knows a photo, video or recording it already
holds by content and says so; equal variant bytes are one object with one journal row (M1).
On SQLite and PostgreSQL, real files, a real store."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select

from conveyor.audio.intake import accept_audio, record_holding
from conveyor.db.tables import audio_records, files, media_items, media_objects, record_events
from conveyor.errors import Duplicate
from conveyor.media.albums import item_view
from conveyor.media.deletion import delete_item
from conveyor.media.intake import accept_media, item_holding
from conveyor.objects import LocalStore, ObjectStore, WorkFolder
from conveyor.testing import FakeClock
from tests.support.media import MEDIA, add, album, drain, make_photo, media_domain
from tests.support.stored import object_keys

CORPUS = Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus"
PHOTO = CORPUS / "media" / "exif-samples__landscape_6.jpg"
WAV = CORPUS / "audio" / "jfk.wav"


@pytest.fixture
def store(tmp_path: Path) -> ObjectStore:
    return LocalStore(tmp_path / "store", work=WorkFolder(tmp_path / "work"))


def counts(engine: Engine) -> tuple[int, ...]:
    with engine.connect() as conn:
        return tuple(
            conn.execute(select(func.count()).select_from(table)).scalar_one()
            for table in (files, media_items, media_objects, audio_records, record_events)
        )


def chunks(path: Path) -> Iterator[bytes]:
    data = path.read_bytes()
    for start in range(0, len(data), 65_536):
        yield data[start : start + 65_536]


def test_a_photo_added_again_is_a_duplicate_in_any_album_of_its_owner(
    engine: Engine, store: ObjectStore, clock: FakeClock, tmp_path: Path
) -> None:
    trip = album(engine, clock, "trip")
    home = album(engine, clock, "home")
    first = add(engine, store, clock, trip, PHOTO, keep_duplicate=False)
    before, objects = counts(engine), object_keys(store)
    # The same bytes under another name, as a file and as a stream, into either album.
    renamed = tmp_path / "IMG_0001.jpg"
    renamed.write_bytes(PHOTO.read_bytes())
    for album_id in (trip, home):
        for source in (PHOTO, renamed):
            with pytest.raises(Duplicate) as found:
                add(engine, store, clock, album_id, source, keep_duplicate=False)
            assert found.value.existing_id == first and found.value.noun == "item"
            assert source.name in str(found.value) and f"item {first}" in str(found.value)
        with pytest.raises(Duplicate):
            accept_media(
                engine,
                store,
                clock,
                chunks(PHOTO),
                album_id=album_id,
                owner="ann",
                original_name="stream.jpg",
                max_pixels=MEDIA.max_pixels,
            )
    assert counts(engine) == before  # no item, no journal row, no history
    assert object_keys(store) == objects  # nothing stored, not even for a moment's leftover
    assert item_holding(engine, "ann", renamed) == first
    assert item_holding(engine, "bob", renamed) is None
    # Another owner's copy is theirs; asking for a second copy keeps one.
    bobs = add(engine, store, clock, album(engine, clock, "b", owner="bob"), PHOTO, owner="bob")
    second = accept_media(
        engine,
        store,
        clock,
        PHOTO,
        album_id=home,
        owner="ann",
        max_pixels=MEDIA.max_pixels,
        keep_duplicate=True,
    )
    assert len({first, bobs, second}) == 3
    # A different photo is new, however alike its name.
    other = make_photo(tmp_path / "landscape_6.jpg", 3)
    assert add(engine, store, clock, trip, other) not in (first, second)


def test_a_recording_accepted_again_is_a_duplicate(
    engine: Engine, store: ObjectStore, clock: FakeClock
) -> None:
    def accept(source: Path | Iterator[bytes], *, keep_duplicate: bool = False) -> int:
        return accept_audio(
            engine, store, clock, source, owner="ann", strict=True, keep_duplicate=keep_duplicate
        )

    first = accept(WAV)
    before, objects = counts(engine), object_keys(store)
    for source in (WAV, chunks(WAV)):
        with pytest.raises(Duplicate) as found:
            accept(source)
        assert found.value.existing_id == first and found.value.noun == "record"
    assert counts(engine) == before and object_keys(store) == objects
    assert record_holding(engine, " ann ", WAV) == first
    assert record_holding(engine, "bob", WAV) is None
    assert accept(WAV, keep_duplicate=True) != first
    assert accept_audio(engine, store, clock, WAV, owner="bob") != first


def test_equal_variants_are_one_object_with_one_journal_row(
    engine: Engine, store: ObjectStore, clock: FakeClock, tmp_path: Path
) -> None:
    album_id = album(engine, clock)
    # 64×48: thumb, medium and preview are all the photo's own size, the same bytes.
    small = add(engine, store, clock, album_id, make_photo(tmp_path / "small.jpg", 1))
    # 600×450: the thumb is 320 px; medium and preview both stay at 600 px.
    landscape = add(engine, store, clock, album_id, PHOTO)
    drain(engine, media_domain(store), clock)
    with engine.connect() as conn:
        small_roles = item_view(conn, small)["roles"]
        land_roles = item_view(conn, landscape)["roles"]
        journal = conn.execute(select(files)).mappings().all()
        refs = conn.execute(select(media_objects)).mappings().all()
    assert set(small_roles) == set(land_roles) == {"original", "thumb", "medium", "preview"}
    assert small_roles["thumb"]["key"] == small_roles["medium"]["key"]
    assert small_roles["medium"]["key"] == small_roles["preview"]["key"]
    assert land_roles["medium"]["key"] == land_roles["preview"]["key"]
    assert land_roles["thumb"]["key"] != land_roles["medium"]["key"]
    assert land_roles["thumb"]["width"] == 320 and land_roles["preview"]["width"] == 600
    # M1: one journal row per physical object, and every object in the store has its row.
    assert len(refs) == 8 and len(journal) == 2 + 3
    assert sorted(r["key"] for r in journal) == object_keys(store)
    assert {r["file_id"] for r in refs} == {r["id"] for r in journal}
    # Deleting the item removes the shared object once, and nothing else.
    assert delete_item(engine, store, clock, small)
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(files)).scalar_one() == 3
    assert len(object_keys(store)) == 3


def _race(count: int, take: Callable[[int], int]) -> list[int | Duplicate]:
    """``take(i)`` on ``count`` threads released together: each one's id or its Duplicate."""
    gate = threading.Barrier(count)

    def one(index: int) -> int | Duplicate:
        gate.wait()
        try:
            return take(index)
        except Duplicate as exc:
            return exc

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(one, range(count)))


def _unjournaled(engine: Engine, store: ObjectStore) -> list[str]:
    with engine.connect() as conn:
        kept = set(conn.execute(select(files.c.key)).scalars())
    return [key for key in object_keys(store) if key not in kept]


@pytest.mark.parametrize("as_stream", [False, True], ids=["file", "stream"])
def test_the_same_recording_taken_in_at_once_is_kept_once(
    engine: Engine, store: ObjectStore, clock: FakeClock, as_stream: bool
) -> None:
    """Threads that each find the bytes new before storing them decide again in the inserting
    transaction: one record, the others told it is there, their objects removed."""

    def take(index: int, *, keep: bool = False) -> int:
        return accept_audio(
            engine,
            store,
            clock,
            chunks(WAV) if as_stream else WAV,
            owner="ann",
            original_name=f"par{index}.wav",
            keep_duplicate=keep,
        )

    outcomes = _race(6, take)
    made = [o for o in outcomes if isinstance(o, int)]
    assert len(made) == 1, outcomes
    told = [o for o in outcomes if isinstance(o, Duplicate)]
    assert [(d.existing_id, d.noun) for d in told] == [(made[0], "record")] * 5
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(audio_records)).scalar_one() == 1
    assert len(object_keys(store)) == 1 and _unjournaled(engine, store) == []
    # keep_duplicate keeps a copy each, racing or not.
    kept = _race(3, lambda i: take(i, keep=True))
    assert all(isinstance(o, int) for o in kept) and len(set(kept)) == 3
    assert len(object_keys(store)) == 4 and _unjournaled(engine, store) == []


@pytest.mark.parametrize("as_stream", [False, True], ids=["file", "stream"])
def test_the_same_photo_taken_in_at_once_is_kept_once(
    engine: Engine, store: ObjectStore, clock: FakeClock, as_stream: bool
) -> None:
    trip, home = album(engine, clock, "trip"), album(engine, clock, "home")

    def take(index: int, *, keep: bool = False) -> int:
        return accept_media(
            engine,
            store,
            clock,
            chunks(PHOTO) if as_stream else PHOTO,
            album_id=(trip, home)[index % 2],  # in any album of the owner: one copy
            owner="ann",
            original_name=f"p{index}.jpg",
            max_pixels=MEDIA.max_pixels,
            keep_duplicate=keep,
        )

    outcomes = _race(6, take)
    made = [o for o in outcomes if isinstance(o, int)]
    assert len(made) == 1, outcomes
    told = [o for o in outcomes if isinstance(o, Duplicate)]
    assert [(d.existing_id, d.noun) for d in told] == [(made[0], "item")] * 5
    with engine.connect() as conn:
        assert conn.execute(select(func.count()).select_from(media_items)).scalar_one() == 1
    assert len(object_keys(store)) == 1 and _unjournaled(engine, store) == []
    kept = _race(3, lambda i: take(i, keep=True))
    assert all(isinstance(o, int) for o in kept) and len(set(kept)) == 3
    assert len(object_keys(store)) == 4 and _unjournaled(engine, store) == []
