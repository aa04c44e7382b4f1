"""The per-process work folder: where steps keep local copies and scratch files.

Each process gets its own subfolder ``<work_dir>/<host>-<pid>-<random>`` of ``[storage]
work_dir``, so processes sharing a disk never touch each other's files. Folders left by a
process of this host that no longer runs (killed) are removed by the next command that uses
the storage (:meth:`WorkFolder.remove_dead`), whether or not it needs a folder itself.
"""

from __future__ import annotations

import atexit
import os
import shutil
import socket
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

__all__ = ["WorkFolder"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


class WorkFolder:
    """This process's folder under ``base`` (created on first use).

    Args:
        base: ``[storage] work_dir``; shared by the processes of one host.
    """

    def __init__(self, base: Path) -> None:
        self.base = Path(base)
        self._host = socket.gethostname().replace("-", "_") or "host"
        self._pid = -1
        self._path: Path | None = None

    @property
    def path(self) -> Path:
        """This process's folder (a forked child gets a folder of its own)."""
        if self._path is None or self._pid != os.getpid():
            self._pid = os.getpid()
            self.base.mkdir(parents=True, exist_ok=True)
            self.remove_dead()
            path = self.base / f"{self._host}-{self._pid}-{uuid.uuid4().hex[:8]}"
            path.mkdir()
            self._path = path
            atexit.register(self.cleanup)
        return self._path

    def remove_dead(self) -> int:
        """Remove the folders of this host's processes that no longer run (a killed step's or
        command's copies and scratch files); the count removed. Nothing when ``base`` is not
        there. Another host's folders and a running process's are left."""
        try:
            children = list(self.base.iterdir())
        except OSError:  # not there yet, or not readable: the command that needs it says so
            return 0
        removed = 0
        for child in children:
            host, _, rest = child.name.partition("-")
            pid = rest.partition("-")[0]
            ours = host == self._host and pid.isdigit() and int(pid) != self._pid
            if ours and not _alive(int(pid)):
                shutil.rmtree(child, ignore_errors=True)
                removed += 1
        return removed

    @contextmanager
    def folder(self) -> Iterator[Path]:
        """A fresh empty folder, removed with everything in it afterwards."""
        path = Path(tempfile.mkdtemp(dir=self.path))
        try:
            yield path
        finally:
            shutil.rmtree(path, ignore_errors=True)

    def new_file(self, suffix: str = "") -> Path:
        """A fresh file name in the work folder (not created)."""
        return self.path / f"{uuid.uuid4().hex}{suffix}"

    def cleanup(self) -> None:
        """Remove this process's folder."""
        if self._path is not None and self._pid == os.getpid():
            shutil.rmtree(self._path, ignore_errors=True)
            self._path = None
