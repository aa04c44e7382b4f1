"""The object store: a local folder (S3-compatible stores later), addressed by key.

Objects are written to a temporary name beside their final place and renamed when complete,
so a crash never leaves half an object under a real key.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import uuid
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from conveyor.errors import RejectedInput

__all__ = ["ListedObject", "LocalStore", "StoredObject"]

_CHUNK = 1024 * 1024


@dataclass(frozen=True)
class ListedObject:
    """An object found by :meth:`LocalStore.list`: key, size in bytes, modification time
    (epoch seconds)."""

    key: str
    size: int
    modified: float


@dataclass(frozen=True)
class StoredObject:
    """An object as written: its key, size in bytes and SHA-256 (hex)."""

    key: str
    size: int
    sha256: str


class LocalStore:
    """Objects under ``root``; a key is a relative POSIX path such as ``audio/12/original``.

    Args:
        root: the storage folder (``[storage] root``); created when missing.
    """

    def __init__(self, root: Path) -> None:
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)

    @staticmethod
    def new_key(prefix: str, suffix: str = "") -> str:
        """A fresh unique key under ``prefix``."""
        return f"{prefix}/{uuid.uuid4().hex}{suffix}"

    def path(self, key: str) -> Path:
        """The file behind ``key``.

        Raises:
            ValueError: the key tries to leave the storage root.
        """
        path = (self.root / key).resolve()
        if not path.is_relative_to(self.root.resolve()):
            raise ValueError(f"object key escapes the store: {key!r}")
        return path

    def exists(self, key: str) -> bool:
        """True when an object is stored under ``key``."""
        return self.path(key).is_file()

    @contextmanager
    def writer(self, key: str) -> Iterator[Path]:
        """Yield a temporary path to write ``key`` into; it becomes the object on success.

        On an exception the temporary file is removed and the previous object (if any) stays.
        """
        final = self.path(key)
        final.parent.mkdir(parents=True, exist_ok=True)
        temp = final.with_name(f".{final.name}.{uuid.uuid4().hex}.part")
        try:
            yield temp
            os.replace(temp, final)
        finally:
            temp.unlink(missing_ok=True)

    def put_stream(
        self, key: str, source: BinaryIO | Iterable[bytes], *, max_bytes: int | None = None
    ) -> StoredObject:
        """Store ``source`` under ``key`` without holding it in memory.

        Args:
            source: a binary file object, or an iterable of byte chunks.
            max_bytes: refuse objects larger than this many bytes.

        Raises:
            RejectedInput: ``too_large`` past ``max_bytes`` (nothing is kept).
        """
        chunks: Iterable[bytes]
        if hasattr(source, "read"):
            stream = source
            chunks = iter(lambda: stream.read(_CHUNK), b"")
        else:
            chunks = source
        digest = hashlib.sha256()
        size = 0
        with self.writer(key) as temp, temp.open("wb") as out:
            for chunk in chunks:
                size += len(chunk)
                if max_bytes is not None and size > max_bytes:
                    raise RejectedInput(
                        "too_large", f"the upload is larger than the limit of {max_bytes} bytes"
                    )
                digest.update(chunk)
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        return StoredObject(key=key, size=size, sha256=digest.hexdigest())

    def put(
        self, key: str, source: Path | BinaryIO | Iterable[bytes], *, max_bytes: int | None = None
    ) -> StoredObject:
        """Store an upload given as a file path, a binary stream or byte chunks (see above)."""
        if isinstance(source, Path):
            return self.put_file(key, source)
        return self.put_stream(key, source, max_bytes=max_bytes)

    def put_file(self, key: str, src: Path) -> StoredObject:
        """Copy the file ``src`` into the store under ``key`` (``src`` is left untouched)."""
        with src.open("rb") as handle:
            return self.put_stream(key, handle)

    def describe(self, key: str) -> StoredObject:
        """Size and SHA-256 of a stored object."""
        digest = hashlib.sha256()
        size = 0
        with self.path(key).open("rb") as handle:
            for chunk in iter(lambda: handle.read(_CHUNK), b""):
                size += len(chunk)
                digest.update(chunk)
        return StoredObject(key=key, size=size, sha256=digest.hexdigest())

    def list(self, prefix: str = "") -> Iterator[ListedObject]:
        """Every object under the folder ``prefix`` (the whole store when empty), in no order.

        Includes what a killed writer left (``.*.part``) and scratch files, so a sweep can
        find every byte the store holds.
        """
        top = self.path(prefix) if prefix else self.root
        if not top.is_dir():
            return
        for path in top.rglob("*"):
            try:
                stat = path.stat()
            except FileNotFoundError:  # removed while we walked
                continue
            if path.is_file():
                key = path.relative_to(self.root).as_posix()
                yield ListedObject(key=key, size=stat.st_size, modified=stat.st_mtime)

    def delete(self, key: str) -> None:
        """Remove the object under ``key`` if present."""
        self.path(key).unlink(missing_ok=True)

    def delete_prefix(self, prefix: str) -> None:
        """Remove every object under the folder ``prefix``."""
        shutil.rmtree(self.path(prefix), ignore_errors=True)
