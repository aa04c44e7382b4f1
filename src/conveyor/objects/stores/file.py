"""The ``file:`` object store: objects as files under a local folder (the embedded default).

An object is written to a temporary name beside its final place (``.<name>.<hex>.part``),
flushed, checked against the declared size and SHA-256, and renamed over the key: a crash never
leaves half an object under a real key, and the temporary file is invisible to :meth:`list`
until :meth:`LocalStore.abort_stale_writes` removes it.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from conveyor.config import StorageSettings
from conveyor.error_codes import ErrorCode
from conveyor.errors import RejectedInput
from conveyor.objects.store import (
    ListedObject,
    Readable,
    Source,
    StorageFull,
    StoredObject,
    WorkingCopies,
    check_key,
    chunks_of,
    verify,
)
from conveyor.objects.work import WorkFolder
from conveyor.sizes import human_size

__all__ = ["SETTINGS_HINT", "LocalStore", "from_settings"]

#: What to change when the folder cannot be used (said by the CLI after the reason).
SETTINGS_HINT = (
    "point [storage] root (CONVEYOR_STORAGE__ROOT), or the folder of [storage] url, at a "
    "folder this user can write"
)

_PARTIAL = re.compile(r"\..+\.[0-9a-f]{32}\.part")


class _Slice:
    """Reads at most ``remaining`` bytes of an open file."""

    def __init__(self, handle: BinaryIO, remaining: int | None) -> None:
        self._handle = handle
        self._remaining = remaining

    def read(self, size: int = -1, /) -> bytes:
        if self._remaining is None:
            return self._handle.read(size)
        if size < 0 or size > self._remaining:
            size = self._remaining
        data = self._handle.read(size)
        self._remaining -= len(data)
        return data


class LocalStore(WorkingCopies):
    """Objects under ``root``; the key ``audio/12/original`` is the file ``root/audio/12/original``.

    Args:
        root: the objects' folder; created when missing.
        work: this process's work folder for local copies (default ``root/work``).
    """

    def __init__(self, root: Path, *, work: WorkFolder | None = None) -> None:
        self.root = Path(root).resolve()
        self.root.mkdir(parents=True, exist_ok=True)
        self.work = work or WorkFolder(self.root / "work")

    def describe_location(self) -> str:
        """The folder, as an absolute path."""
        return str(self.root)

    def check(self) -> None:
        """See :meth:`conveyor.objects.ObjectStore.check`: the folder is there and writable."""
        if not os.access(self.root, os.W_OK | os.X_OK):
            raise PermissionError(f"the folder {self.root} is not writable")

    def room(self) -> int:
        """See :meth:`conveyor.objects.ObjectStore.room`: the folder's disk's free bytes that
        this user may fill (``statvfs``'s ``f_bavail``, without the blocks kept for root)."""
        st = os.statvfs(self.root)
        return st.f_bavail * st.f_frsize

    def _path(self, key: str) -> Path:
        path = self.root / check_key(key)
        # check_key bars ".." and absolute keys; a symlink inside the folder is the owner's.
        return path

    def put(
        self,
        key: str,
        source: Source,
        *,
        max_bytes: int | None = None,
        size: int | None = None,
        sha256: str | None = None,
    ) -> StoredObject:
        """See :meth:`conveyor.objects.ObjectStore.put`."""
        final = self._path(key)
        if isinstance(source, Path):
            with source.open("rb") as handle:
                return self.put(key, handle, max_bytes=max_bytes, size=size, sha256=sha256)
        temp = final.with_name(f".{final.name}.{uuid.uuid4().hex}.part")
        digest = hashlib.sha256()
        written = 0
        try:
            final.parent.mkdir(parents=True, exist_ok=True)
            with temp.open("wb") as out:
                for chunk in chunks_of(source):
                    written += len(chunk)
                    if max_bytes is not None and written > max_bytes:
                        raise RejectedInput(
                            ErrorCode.TOO_LARGE,
                            f"the upload is larger than the limit of {human_size(max_bytes)}",
                        )
                    digest.update(chunk)
                    out.write(chunk)
                out.flush()
                os.fsync(out.fileno())
            verify(key, written, digest.hexdigest(), want_size=size, want_sha=sha256)
            os.replace(temp, final)
        except OSError as exc:
            # Said as the storage's, not as a bare "[Errno 28]": the operator's log, a step's
            # journal and the CLI name the folder that is full.
            full = StorageFull.of(exc, "folder", str(self.root))
            if full is None:
                raise
            raise full from exc
        finally:
            temp.unlink(missing_ok=True)
        return StoredObject(key=key, size=written, sha256=digest.hexdigest())

    def put_file(
        self, key: str, src: Path, *, size: int | None = None, sha256: str | None = None
    ) -> StoredObject:
        """See :meth:`conveyor.objects.ObjectStore.put_file`."""
        return self.put(key, src, size=size, sha256=sha256)

    @contextmanager
    def open(self, key: str, start: int = 0, end: int | None = None) -> Iterator[Readable]:
        """See :meth:`conveyor.objects.ObjectStore.open`."""
        with self._path(key).open("rb") as handle:
            if start:
                handle.seek(start)
            yield _Slice(handle, None if end is None else max(0, end - start))

    def copy_out(self, key: str, target: Path) -> None:
        """See :meth:`conveyor.objects.store.WorkingCopies.copy_out`."""
        shutil.copyfile(self._path(key), target)

    def stat(self, key: str) -> ListedObject | None:
        """See :meth:`conveyor.objects.ObjectStore.stat`."""
        try:
            st = self._path(key).stat()
        except (FileNotFoundError, NotADirectoryError):
            return None
        if not os.path.isfile(self._path(key)):
            return None
        return ListedObject(key=key, size=st.st_size, modified=st.st_mtime)

    def exists(self, key: str) -> bool:
        """See :meth:`conveyor.objects.ObjectStore.exists`."""
        return self._path(key).is_file()

    def delete(self, key: str) -> None:
        """See :meth:`conveyor.objects.ObjectStore.delete`."""
        path = self._path(key)
        path.unlink(missing_ok=True)
        # Empty folders are left: removing them would race with a writer creating them.

    def delete_prefix(self, prefix: str) -> None:
        """See :meth:`conveyor.objects.ObjectStore.delete_prefix`."""
        shutil.rmtree(self._path(prefix), ignore_errors=True)

    def _files(self, prefix: str) -> Iterator[tuple[Path, os.stat_result]]:
        top = self._path(prefix) if prefix else self.root
        if not top.is_dir():
            return
        work = self.work.base.resolve()
        for path in top.rglob("*"):
            if path.is_relative_to(work):  # the work folder's files are not objects
                continue
            try:
                st = path.stat()
            except FileNotFoundError:  # removed while we walked
                continue
            if path.is_file():
                yield path, st

    def list(self, prefix: str = "") -> Iterator[ListedObject]:
        """See :meth:`conveyor.objects.ObjectStore.list` (temporary files are not objects)."""
        for path, st in self._files(prefix):
            if not _PARTIAL.fullmatch(path.name):
                key = path.relative_to(self.root).as_posix()
                yield ListedObject(key=key, size=st.st_size, modified=st.st_mtime)

    def abort_stale_writes(self, started_before: float) -> int:
        """See :meth:`conveyor.objects.ObjectStore.abort_stale_writes`: temporary files of
        writes cut short, older than ``started_before``."""
        removed = 0
        for path, st in self._files(""):
            if _PARTIAL.fullmatch(path.name) and st.st_mtime < started_before:
                path.unlink(missing_ok=True)
                removed += 1
        return removed

    def presign(self, key: str, *, expires: float, mime_type: str, disposition: str) -> str | None:
        """A folder has no URLs of its own: always None (the API streams the file)."""
        return None


def from_settings(settings: StorageSettings, work: WorkFolder) -> LocalStore:
    """The ``file:`` store of ``[storage]``: ``file:`` is the folder ``root``, ``file:PATH``
    another folder (created on first use).

    Raises:
        OSError: the folder cannot be created.
    """
    where = settings.url.removeprefix("file:")
    return LocalStore(Path(where) if where else settings.root, work=work)
