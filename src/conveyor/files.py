"""Local files: writing one so a reader sees the whole old file or the whole new one, never
half, and reading one's SHA-256.

Every file Conveyor produces (variants, posters, playbacks, normalised audio, job and model files)
goes through :func:`atomic_path`: it is written under a temporary name in the destination's folder
(same file system, so the rename is atomic), flushed to disk, and renamed over the destination.
On any exception the temporary file is removed and the previous destination, if any, stays.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["atomic_path", "file_sha256", "write_atomic"]


@contextmanager
def atomic_path(dst: Path, *, durable: bool = True) -> Iterator[Path]:
    """Yield a temporary path beside ``dst``; it replaces ``dst`` when the block succeeds.

    The caller writes the temporary path however it likes (a library writing to a file name,
    an open file, a rename). The destination folder is created when missing.

    Args:
        dst: the file to produce.
        durable: fsync the file before the rename, so a power cut cannot leave an empty
            ``dst`` behind (the rename may reach the disk before the data otherwise).

    Raises:
        FileNotFoundError: the block finished without creating the temporary file.
        OSError: the folder cannot be created or the rename fails.
    """
    dst.parent.mkdir(parents=True, exist_ok=True)
    tmp = dst.with_name(f".{dst.name}.{uuid.uuid4().hex}.tmp")
    try:
        yield tmp
        if durable:
            fd = os.open(tmp, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        os.replace(tmp, dst)
    finally:
        tmp.unlink(missing_ok=True)


def write_atomic(dst: Path, data: bytes | str, *, durable: bool = True) -> None:
    """Write ``data`` (bytes, or text as UTF-8) to ``dst`` through :func:`atomic_path`."""
    with atomic_path(dst, durable=durable) as tmp:
        if isinstance(data, str):
            tmp.write_text(data, encoding="utf-8")
        else:
            tmp.write_bytes(data)


def file_sha256(path: Path, *, chunk_size: int = 1 << 20) -> str:
    """The SHA-256 of the local file ``path`` as 64 hex digits, read in ``chunk_size`` pieces.

    Raises:
        OSError: the file cannot be read.
    """
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(chunk_size):
            digest.update(chunk)
    return digest.hexdigest()
