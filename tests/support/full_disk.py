"""Disks that run out: a small tmpfs of our own (root only, as the test machine runs), filled
to the last byte, for the writes that must meet a real ``ENOSPC``; and a file size limit
(anyone), whose writes past it fail with ``EFBIG`` as a full disk's fail with ``ENOSPC``."""

from __future__ import annotations

import errno
import os
import resource
import shutil
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.needs import need

__all__ = ["file_size_limit", "fill", "limit_file_size", "small_disk"]


@contextmanager
def small_disk(path: Path, size: int = 4 * 1024 * 1024) -> Iterator[Path]:
    """A tmpfs of ``size`` bytes mounted at ``path`` (created), unmounted after. Skips the
    test where this process may not mount one (not root, or a container without the right);
    under ``CI=true`` fails instead (:func:`tests.support.needs.need`)."""
    need(
        os.geteuid() == 0 and shutil.which("mount") is not None,
        "root and mount, for a small disk of its own (mount -t tmpfs)",
    )
    path.mkdir(parents=True, exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    need(mounted.returncode == 0, f"a tmpfs mount ({mounted.stderr.strip()})")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=True)


def fill(folder: Path) -> Path:
    """Fill the disk of ``folder`` to its last byte; the filler file (remove it to free the
    space)."""
    filler = folder / "filler"
    with filler.open("wb", buffering=0) as out:
        for block in (1024 * 1024, 4096, 1):
            try:
                while True:
                    out.write(b"\0" * block)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC, exc
    assert shutil.disk_usage(folder).free == 0
    return filler


@contextmanager
def file_size_limit(limit: int) -> Iterator[None]:
    """No file of this process grows past ``limit`` bytes until the block ends: writes past it
    fail with ``EFBIG`` (the signal that would kill the process is ignored meanwhile)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    before = signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        signal.signal(signal.SIGXFSZ, before)


def limit_file_size(limit: int) -> None:
    """A subprocess's ``preexec_fn``: no file of the command grows past ``limit`` bytes (writes
    past it fail with ``EFBIG``; the signal that would kill it instead is ignored)."""
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
