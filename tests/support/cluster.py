"""A throwaway PostgreSQL cluster the fault tests start, restart and stop themselves.

Never the machine's shared service: ``initdb`` into a temporary folder, ``pg_ctl`` on a free
loopback port. PostgreSQL refuses to run as root, so under root the cluster belongs to the
``postgres`` user (``runuser``).
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from tests.support.needs import need
from tests.support.servers import free_port


def _binaries() -> Path | None:
    found = shutil.which("pg_ctl")
    if found:
        return Path(found).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"))
    return Path(candidates[-1]).parent if candidates else None


class ThrowawayCluster:
    """A PostgreSQL cluster in a temporary folder on a free port, superuser ``postgres``.

    Raises (through ``need``): no PostgreSQL binaries, or root without a ``postgres`` user.
    """

    def __init__(self) -> None:
        bindir = _binaries()
        need(bindir is not None, "PostgreSQL server binaries (initdb, pg_ctl)")
        assert bindir is not None
        self.bindir = bindir
        self.run_as: str | None = None
        if os.geteuid() == 0:
            try:
                pwd.getpwnam("postgres")
            except KeyError:
                need(False, "a 'postgres' user to run a throwaway cluster as (running as root)")
            self.run_as = "postgres"
        self.home = Path(tempfile.mkdtemp(prefix="conveyor-faults-pg-"))
        self.data = self.home / "data"
        self.log = self.home / "postgres.log"
        self.port = free_port()
        if self.run_as:
            entry = pwd.getpwnam(self.run_as)
            os.chown(self.home, entry.pw_uid, entry.pw_gid)
        self._pg("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust", "-E", "UTF8")
        self.start()

    @property
    def url(self) -> str:
        """The URL of the ``postgres`` database (create others with :meth:`create_database`)."""
        return f"postgresql://postgres@127.0.0.1:{self.port}/postgres"

    def url_of(self, database: str, port: int | None = None) -> str:
        """The URL of ``database``, on ``port`` (a proxy in front) or the cluster's own."""
        return f"postgresql://postgres@127.0.0.1:{port or self.port}/{database}"

    def _pg(self, tool: str, *args: str) -> None:
        command = [str(self.bindir / tool), *args]
        if self.run_as:
            command = ["runuser", "-u", self.run_as, "--", *command]
        subprocess.run(command, check=True, capture_output=True, timeout=120, cwd=self.home)

    def start(self) -> None:
        """Start the server and wait until it answers."""
        options = (
            f"-p {self.port} -c listen_addresses=127.0.0.1 -k {self.home} "
            "-c fsync=off -c max_connections=200 -c shared_buffers=64MB"
        )
        self._pg("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options, "-w", "start")

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``immediate``: like a crash, no shutdown checkpoint)."""
        self._pg("pg_ctl", "-D", str(self.data), "-m", mode, "-w", "stop")

    def restart(self, down_for: float = 0.0, mode: str = "immediate") -> None:
        """Stop the server as in a crash, stay down ``down_for`` seconds, start it again."""
        self.stop(mode)
        time.sleep(down_for)
        self.start()

    def create_database(self, name: str) -> str:
        """Create (or recreate) ``name``; returns its URL."""
        import psycopg

        with psycopg.connect(self.url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url_of(name)

    def destroy(self) -> None:
        """Stop the server and remove its folder."""
        with contextlib.suppress(subprocess.CalledProcessError):
            self.stop("immediate")
        shutil.rmtree(self.home, ignore_errors=True)
