"""The object store seam: bytes by key, on a local folder or an S3-compatible bucket.

Everything outside :mod:`conveyor.objects` sees an :class:`ObjectStore` and nothing else: it
never learns whether the store is a folder. Steps read an object through a local working copy
(:meth:`ObjectStore.local_copy`, in the process's own work folder) and store what they made with
:meth:`ObjectStore.put_file`; the HTTP routes read byte ranges (:meth:`ObjectStore.open`).

A key is a relative POSIX path such as ``media/12/thumb-3f9a….webp`` (:func:`check_key`).
A write is all or nothing on both backends: an interrupted write leaves nothing under its key
(a temporary name beside it, or an incomplete multipart upload, that
:meth:`ObjectStore.abort_stale_writes` removes later).
"""

from __future__ import annotations

import errno
import os
import re
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, Protocol, runtime_checkable

if TYPE_CHECKING:
    from conveyor.objects.work import WorkFolder

__all__ = [
    "CHUNK",
    "ListedObject",
    "ObjectMismatch",
    "ObjectStore",
    "Readable",
    "Source",
    "StorageFull",
    "StorageUnavailable",
    "StoredObject",
    "WorkingCopies",
    "check_key",
    "chunks_of",
    "full_storage",
    "verify",
]

#: Bytes read or written at a time when a store streams an object.
CHUNK = 1024 * 1024

#: What :meth:`ObjectStore.put` accepts: a local file, a binary stream, or byte chunks.
Source = Path | BinaryIO | Iterable[bytes]


@dataclass(frozen=True)
class ListedObject:
    """An object as the store lists it: key, size in bytes, modification time (epoch seconds)."""

    key: str
    size: int
    modified: float


@dataclass(frozen=True)
class StoredObject:
    """An object as written: its key, size in bytes and SHA-256 (hex)."""

    key: str
    size: int
    sha256: str


class StorageUnavailable(OSError):
    """The store cannot be reached or used right now (its endpoint refuses, times out or answers
    5xx): an outage, answered 503 ``storage_unavailable`` by the API (see
    :mod:`conveyor.objects.outage`)."""


#: errno values of a write that found no room: the disk is full, the user's quota is used up.
_NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT})
#: ... and of one that is too large for the file system (or the process's file size limit).
_TOO_LARGE = errno.EFBIG


class StorageFull(OSError):
    """The store has no room for what is being written: its folder's disk (or quota) is full,
    ``ENOSPC`` or ``EDQUOT``, or the folder cannot take a file this large, ``EFBIG``; or the
    bucket's server refused the write for want of room (MinIO's ``XMinioStorageFull``, any
    HTTP 507), said as ``ENOSPC``.

    ``errno`` is the failed write's, so a full disk stays an outage (steps wait for space,
    :mod:`conveyor.objects.outage`) and a too-large file does not (waiting would not help).
    The API answers both 507 ``storage_full``; ``str()`` names the storage, for the operator's
    log, the journal and the CLI (never an HTTP answer: the path is the operator's).

    Args:
        code: the failed write's errno.
        what: ``folder`` (the store's), ``work folder`` (a step's local copies) or ``bucket``.
        location: the folder's path or the bucket's URL (:meth:`ObjectStore.describe_location`).
    """

    def __init__(self, code: int, what: str, location: str) -> None:
        super().__init__(code, os.strerror(code))
        self.what = what
        self.location = location

    @property
    def no_room(self) -> bool:
        """True for a full disk or quota; False for a file too large for the folder."""
        return self.errno != _TOO_LARGE

    def __str__(self) -> str:
        said = "is full" if self.no_room else "cannot take a file this large"
        return f"the storage {self.what} {self.location} {said} ({self.strerror})"

    @staticmethod
    def of(exc: OSError, what: str, location: str) -> StorageFull | None:
        """``exc`` as a :class:`StorageFull` of ``location`` when it says there was no room,
        else None."""
        if isinstance(exc, StorageFull):
            return exc
        if exc.errno in _NO_ROOM or exc.errno == _TOO_LARGE:
            return StorageFull(exc.errno, what, location)
        return None


def full_storage(exc: BaseException) -> StorageFull | None:
    """The :class:`StorageFull` that ``exc`` is or was raised from, or None."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, StorageFull):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


class ObjectMismatch(ValueError):
    """The bytes written are not the size or SHA-256 the caller declared; nothing was kept."""


class Readable(Protocol):
    """A byte stream being read: a local file or an HTTP response body."""

    def read(self, size: int = -1, /) -> bytes:
        """Up to ``size`` bytes (all that remain when negative); ``b""`` at the end."""
        ...


_SEGMENT = re.compile(r"[^\x00-\x1f\\]+")


def check_key(key: str) -> str:
    """Return ``key`` if it is a valid object key, else raise.

    A key is 1-1024 bytes of UTF-8, ``/``-separated non-empty segments, none ``.`` or ``..``,
    without control characters or backslashes, and not starting with ``/``.

    Raises:
        ValueError: the key is not valid (it could leave the store's folder or prefix).
    """
    if not key or len(key.encode("utf-8", "surrogatepass")) > 1024:
        raise ValueError(f"object key must be 1-1024 bytes: {key!r}")
    for segment in key.split("/"):
        if segment in ("", ".", "..") or not _SEGMENT.fullmatch(segment):
            raise ValueError(f"not a valid object key: {key!r}")
    return key


def chunks_of(source: BinaryIO | Iterable[bytes], chunk: int = CHUNK) -> Iterator[bytes]:
    """The bytes of a binary stream or an iterable of chunks, as chunks."""
    if hasattr(source, "read"):
        stream = source
        yield from iter(lambda: stream.read(chunk), b"")
    else:
        yield from source


def verify(
    key: str, size: int, digest: str, *, want_size: int | None, want_sha: str | None
) -> None:
    """Raise :class:`ObjectMismatch` when the written bytes are not the declared ones."""
    if want_size is not None and size != want_size:
        raise ObjectMismatch(f"object {key}: {size} bytes written, {want_size} declared")
    if want_sha is not None and digest != want_sha.lower():
        raise ObjectMismatch(f"object {key}: SHA-256 {digest} written, {want_sha} declared")


class WorkingCopies:
    """The part of a store every backend shares: local working copies and scratch folders in
    the process's work folder (``work``). A backend says how to copy one object out
    (:meth:`copy_out`)."""

    work: WorkFolder

    def copy_out(self, key: str, target: Path) -> None:
        """Write the object ``key`` to the new file ``target``.

        Raises:
            FileNotFoundError: no such object.
        """
        raise NotImplementedError

    @contextmanager
    def local_copy(self, key: str) -> Iterator[Path]:
        """See :meth:`ObjectStore.local_copy` (a copy, never the stored object)."""
        copy = self.work.new_file(Path(key).suffix)
        try:
            try:
                self.copy_out(key, copy)
            except OSError as exc:
                full = StorageFull.of(exc, "work folder", str(self.work.base))
                if full is None:
                    raise
                raise full from exc
            yield copy
        finally:
            copy.unlink(missing_ok=True)

    @contextmanager
    def scratch(self) -> Iterator[Path]:
        """See :meth:`ObjectStore.scratch` (a step's own writes there that find no room are
        said as the work folder's: :class:`StorageFull`)."""
        with self.work.folder() as folder:
            try:
                yield folder
            except OSError as exc:
                full = StorageFull.of(exc, "work folder", str(self.work.base))
                if full is None or full is exc:
                    raise
                raise full from exc


@runtime_checkable
class ObjectStore(Protocol):
    """Objects by key. Implemented by :class:`conveyor.objects.stores.file.LocalStore` (``file:``)
    and :class:`conveyor.objects.stores.s3.S3Store` (``s3://bucket/prefix``).

    Missing objects raise :class:`FileNotFoundError` from every reading method; invalid keys
    raise :class:`ValueError` (:func:`check_key`).
    """

    def describe_location(self) -> str:
        """Where the objects are, for people: a folder, or a bucket URL; never a credential."""
        ...

    def check(self) -> None:
        """Make sure the store can be used now (the folder exists, the bucket answers).

        Raises:
            OSError: it cannot, with a sentence saying why (never a credential).
        """
        ...

    def room(self) -> int | None:
        """Bytes free for new objects (a folder: its disk's space this user may fill), or None
        when the store does not say (a bucket)."""
        ...

    def put(
        self,
        key: str,
        source: Source,
        *,
        max_bytes: int | None = None,
        size: int | None = None,
        sha256: str | None = None,
    ) -> StoredObject:
        """Store ``source`` under ``key``, replacing any object there, without holding it in
        memory.

        Args:
            source: a local file (left untouched), a binary stream, or byte chunks.
            max_bytes: refuse more than this many bytes.
            size: the expected size in bytes, checked before the object becomes visible.
            sha256: the expected SHA-256 (hex), checked the same way.

        Returns:
            The key, size and SHA-256 of what was stored.

        Raises:
            RejectedInput: ``too_large`` past ``max_bytes``; nothing is kept.
            ObjectMismatch: the bytes differ from ``size``/``sha256``; nothing is kept.
        """
        ...

    def put_file(
        self, key: str, src: Path, *, size: int | None = None, sha256: str | None = None
    ) -> StoredObject:
        """Store the local file ``src`` under ``key`` (see :meth:`put`)."""
        ...

    def open(
        self, key: str, start: int = 0, end: int | None = None
    ) -> AbstractContextManager[Readable]:
        """Read bytes ``start`` to ``end`` (exclusive; the end of the object when None).

        Raises:
            FileNotFoundError: no object under ``key``.
        """
        ...

    def local_copy(self, key: str) -> AbstractContextManager[Path]:
        """A private local copy of the object in this process's work folder, removed after.

        The copy is the caller's: changing it never changes the stored object.

        Raises:
            FileNotFoundError: no object under ``key``.
        """
        ...

    def scratch(self) -> AbstractContextManager[Path]:
        """An empty folder in this process's work folder for a step's own files, removed
        with everything in it afterwards."""
        ...

    def stat(self, key: str) -> ListedObject | None:
        """Size and modification time of the object, or None when there is none."""
        ...

    def exists(self, key: str) -> bool:
        """True when an object is stored under ``key``."""
        ...

    def delete(self, key: str) -> None:
        """Remove the object under ``key`` if present."""
        ...

    def delete_prefix(self, prefix: str) -> None:
        """Remove every object under the folder ``prefix``."""
        ...

    def list(self, prefix: str = "") -> Iterator[ListedObject]:
        """Every complete object under the folder ``prefix`` (all when empty), in no order."""
        ...

    def abort_stale_writes(self, started_before: float) -> int:
        """Remove what writes started before ``started_before`` (epoch seconds) left unfinished
        (a process killed mid-upload). Returns how many were removed."""
        ...

    def presign(self, key: str, *, expires: float, mime_type: str, disposition: str) -> str | None:
        """A URL a browser can GET the object from for ``expires`` seconds, with the given
        ``Content-Type`` and ``Content-Disposition``; None when the store cannot make one."""
        ...
