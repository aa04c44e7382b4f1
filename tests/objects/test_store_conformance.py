"""The ObjectStore contract, proven on both backends (``file:`` and ``s3://`` on moto).

Every object has one journal row (M1) only if a write is all or nothing: these tests show that
a failed, refused or interrupted write leaves nothing visible under its key, and that reads,
ranges, listings and deletes behave the same on a folder and on a bucket.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from conveyor.errors import RejectedInput
from conveyor.objects import ObjectMismatch, ObjectStore
from tests.support.s3server import PART


def _read(store: ObjectStore, key: str, start: int = 0, end: int | None = None) -> bytes:
    with store.open(key, start, end) as body:
        return body.read()


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_put_from_chunks_stream_and_file(object_store: ObjectStore, tmp_path: Path) -> None:
    """M1: a stored object is exactly the bytes given, with their size and SHA-256."""
    data = os.urandom(300_000)
    stored = object_store.put("a/chunks", [data[:1000], data[1000:]])
    assert (stored.key, stored.size, stored.sha256) == ("a/chunks", len(data), _sha(data))
    object_store.put("a/stream", io.BytesIO(data))
    src = tmp_path / "src.bin"
    src.write_bytes(data)
    object_store.put_file("a/file", src, size=len(data), sha256=_sha(data))
    assert src.read_bytes() == data  # the source is left untouched
    for key in ("a/chunks", "a/stream", "a/file"):
        assert _read(object_store, key) == data
        found = object_store.stat(key)
        assert found is not None and found.size == len(data)
        assert abs(found.modified - time.time()) < 120
        assert object_store.exists(key)
    assert object_store.stat("a/none") is None
    assert not object_store.exists("a/none")


def test_put_replaces_and_empty_object(object_store: ObjectStore) -> None:
    object_store.put("k/x", [b"first"])
    object_store.put("k/x", [b"second"])
    assert _read(object_store, "k/x") == b"second"
    stored = object_store.put("k/empty", [])
    assert stored.size == 0 and _read(object_store, "k/empty") == b""


@pytest.mark.parametrize("wrong", ["size", "sha256"])
def test_mismatch_keeps_nothing_and_the_old_object(object_store: ObjectStore, wrong: str) -> None:
    """A write whose bytes differ from the declared size or digest never becomes visible."""
    object_store.put("m/x", [b"old"])
    data = b"new bytes"
    declared = {"size": len(data) + 1} if wrong == "size" else {"sha256": _sha(b"other")}
    with pytest.raises(ObjectMismatch):
        object_store.put("m/x", [data], **declared)
    with pytest.raises(ObjectMismatch):
        object_store.put("m/y", [data], **declared)
    assert _read(object_store, "m/x") == b"old"
    assert not object_store.exists("m/y")
    assert [o.key for o in object_store.list("m")] == ["m/x"]


def test_too_large_keeps_nothing(object_store: ObjectStore) -> None:
    with pytest.raises(RejectedInput) as caught:
        object_store.put("big/x", [b"x" * 600, b"y" * 600], max_bytes=1000)
    assert caught.value.reason == "too_large"
    assert not object_store.exists("big/x")


def test_byte_ranges(object_store: ObjectStore) -> None:
    data = bytes(range(256)) * 40
    object_store.put("r/x", [data])
    assert _read(object_store, "r/x", 0) == data
    assert _read(object_store, "r/x", 5, 10) == data[5:10]
    assert _read(object_store, "r/x", 9000) == data[9000:]
    assert _read(object_store, "r/x", len(data) - 3, len(data) + 100) == data[-3:]
    assert _read(object_store, "r/x", 7, 7) == b""
    with store_open_chunks(object_store, "r/x", 100, 4100) as chunks:
        assert b"".join(chunks) == data[100:4100]


class store_open_chunks:
    """Read a range in small pieces (the HTTP routes stream it this way)."""

    def __init__(self, store: ObjectStore, key: str, start: int, end: int) -> None:
        self._cm = store.open(key, start, end)

    def __enter__(self) -> Iterator[bytes]:
        body = self._cm.__enter__()
        return iter(lambda: body.read(1000), b"")

    def __exit__(self, *exc: object) -> None:
        self._cm.__exit__(None, None, None)


def test_missing_object_raises_file_not_found(object_store: ObjectStore) -> None:
    with pytest.raises(FileNotFoundError), object_store.open("no/such"):
        pass
    with pytest.raises(FileNotFoundError), object_store.open("no/such", 3, 9):
        pass
    with pytest.raises(FileNotFoundError), object_store.local_copy("no/such"):
        pass


def test_local_copy_is_private_and_removed(object_store: ObjectStore) -> None:
    """Steps work on copies: changing a copy never changes the stored object."""
    object_store.put("c/clip.wav", [b"RIFF0000WAVE"])
    with object_store.local_copy("c/clip.wav") as copy:
        assert copy.read_bytes() == b"RIFF0000WAVE"
        assert copy.suffix == ".wav"
        copy.write_bytes(b"changed")
        kept = copy
    assert not kept.exists()
    assert _read(object_store, "c/clip.wav") == b"RIFF0000WAVE"


def test_list_is_by_folder_prefix(object_store: ObjectStore) -> None:
    for key in ("media/1/a.webp", "media/1/b.webp", "media/12/a.webp", "audio/1/n.wav"):
        object_store.put(key, [key.encode()])
    assert sorted(o.key for o in object_store.list("media/1")) == [
        "media/1/a.webp",
        "media/1/b.webp",
    ]
    assert len(list(object_store.list(""))) == 4
    assert list(object_store.list("nothing")) == []
    listed = {o.key: o.size for o in object_store.list("audio")}
    assert listed == {"audio/1/n.wav": len(b"audio/1/n.wav")}


def test_delete_and_delete_prefix(object_store: ObjectStore) -> None:
    for key in ("d/1/x", "d/1/y", "d/2/x"):
        object_store.put(key, [b"."])
    object_store.delete("d/1/x")
    object_store.delete("d/1/x")  # idempotent
    assert not object_store.exists("d/1/x")
    object_store.delete_prefix("d/1")
    assert [o.key for o in object_store.list("d")] == ["d/2/x"]


@pytest.mark.parametrize("key", ["", "../x", "/abs", "a//b", "a/./b", "a/../b", "a\\b", "a\x00"])
def test_invalid_keys_are_refused(object_store: ObjectStore, key: str) -> None:
    with pytest.raises(ValueError):
        object_store.put(key, [b"x"])
    with pytest.raises(ValueError):
        object_store.exists(key)


def test_large_object_round_trip(object_store: ObjectStore) -> None:
    """An object over one part (multipart on S3) arrives whole, and is verified."""
    data = os.urandom(2 * PART + 12345)
    stored = object_store.put("big/x", io.BytesIO(data), size=len(data), sha256=_sha(data))
    assert stored.size == len(data)
    assert _read(object_store, "big/x", PART - 10, PART + 10) == data[PART - 10 : PART + 10]
    with pytest.raises(ObjectMismatch):
        object_store.put("big/y", io.BytesIO(data), sha256=_sha(b"no"))
    assert not object_store.exists("big/y")
    assert object_store.abort_stale_writes(time.time() + 60) == 0  # the failed one aborted


def test_failing_source_leaves_nothing(object_store: ObjectStore) -> None:
    """A source that breaks after more than a part has been sent leaves nothing visible."""

    def source() -> Iterator[bytes]:
        yield os.urandom(PART + 1)
        raise OSError("the client went away")

    with pytest.raises(OSError, match="went away"):
        object_store.put("cut/x", source())
    assert not object_store.exists("cut/x")
    assert list(object_store.list("cut")) == []
    assert object_store.abort_stale_writes(time.time() + 60) == 0


_KILLED_WRITER = """
import json, os, sys, time
from pathlib import Path
from conveyor.config import StorageSettings
from conveyor.objects import open_store
store = open_store(StorageSettings(**json.loads(sys.argv[1])))
marker = Path(sys.argv[2])
def source():
    yield os.urandom({part} + 1)
    marker.write_text("a part is up")
    time.sleep(600)
    yield b"never"
store.put("killed/x", source())
"""


def test_killed_writer_leaves_nothing_visible(
    object_store: ObjectStore, storage_keys: dict[str, Any], tmp_path: Path
) -> None:
    """A process killed (SIGKILL) mid-upload leaves no object, only an unfinished write that
    abort_stale_writes removes once it is older than the grace."""
    marker = tmp_path / "marker"
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            _KILLED_WRITER.format(part=PART),
            json.dumps(storage_keys),
            str(marker),
        ],
    )
    try:
        deadline = time.monotonic() + 60
        while not marker.exists():
            assert child.poll() is None, "the writer died before it got going"
            assert time.monotonic() < deadline
            time.sleep(0.05)
        child.send_signal(signal.SIGKILL)
        child.wait()
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert not object_store.exists("killed/x")
    assert list(object_store.list("")) == []
    if "part_size" in storage_keys and storage_keys.get("url", "file:").startswith("file:"):
        # moto reports every upload as initiated in 2010 (a constant in its responses), so
        # only the folder can show that a write younger than the grace is spared.
        assert object_store.abort_stale_writes(time.time() - 3600) == 0
    assert object_store.abort_stale_writes(time.time() + 60) == 1
    assert object_store.abort_stale_writes(time.time() + 60) == 0


def test_presign(object_store: ObjectStore) -> None:
    """A presigned URL serves the object with the given type, disposition and ranges."""
    object_store.put("p/x.jpg", [b"0123456789"])
    url = object_store.presign("p/x.jpg", expires=60, mime_type="image/jpeg", disposition="inline")
    if object_store.describe_location().startswith("s3://"):
        assert url is not None
        whole = httpx.get(url)
        assert whole.status_code == 200 and whole.content == b"0123456789"
        assert whole.headers["content-type"] == "image/jpeg"
        assert whole.headers["content-disposition"] == "inline"
        part = httpx.get(url, headers={"Range": "bytes=2-4"})
        assert part.status_code == 206 and part.content == b"234"
    else:
        assert url is None
