"""Debian's Chromium driven by Playwright for Python, and a live server of the site.

The browser is the system's ``/usr/bin/chromium`` (never Playwright's own download). When it
is missing the set-up installs the Debian package ``chromium`` with apt-get (as root); if that
is impossible the browser tests skip locally and fail under ``CI=true``.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

import pytest
from sqlalchemy import Engine, text

from conveyor.db.engine import make_engine
from conveyor.db.migrate import upgrade
from conveyor.db.tables import metadata
from tests.support.needs import need
from tests.support.servers import LiveServer
from tests.support.web import PASSWORDS, Site, build_site

CHROMIUM = "/usr/bin/chromium"
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--autoplay-policy=no-user-gesture-required",
]
SCREENSHOTS = Path(__file__).resolve().parents[2] / "docs" / "screenshots"
DESKTOP = {"width": 1280, "height": 860}
PHONE = {"width": 390, "height": 844}


Page = Any
Browser = Any


class Served(NamedTuple):
    """The site under test, the URL its live server answers at, and its database."""

    site: Site
    url: str
    backend: str


@contextlib.contextmanager
def served_site(request: pytest.FixtureRequest, tmp: Path, **build: Any) -> Iterator[Served]:
    """A live server of a site built with ``build`` (see ``build_site``) on the database
    ``request.param`` names: ``sqlite`` (a fresh file under ``tmp``) or ``postgresql`` (the
    ``pg_engine`` fixture's database, emptied before and after). argon2 runs at a small cost
    meanwhile (the module-wide server outlives the per-test ``cheap_argon2``)."""
    from argon2 import PasswordHasher

    from conveyor.accounts import passwords

    saved = passwords.hasher
    passwords.hasher = PasswordHasher(time_cost=1, memory_cost=8 * 1024, parallelism=1)
    backend = str(request.param)
    try:
        if backend == "sqlite":
            engine = make_engine(f"sqlite:///{tmp / 'conveyor.db'}")
            upgrade(engine)
        else:
            engine = request.getfixturevalue("pg_engine")
            truncate_all(engine)
        built = build_site(engine, tmp, **build)
        try:
            with LiveServer(built.app) as server:
                yield Served(built, server.url, backend)
        finally:
            if backend == "sqlite":
                engine.dispose()
            else:
                truncate_all(engine)
    finally:
        passwords.hasher = saved


def new_page(
    browser: Browser,
    url: str,
    user: str | None,
    viewport: dict[str, int] = DESKTOP,
    *,
    bypass_csp: bool = False,
) -> Page:
    """A page in a fresh browser context at ``url``, signed in as ``user`` (one of the site's
    accounts) unless None."""
    # bypass_csp lets the test inject axe-core's script; the pages allow only their own.
    context = browser.new_context(viewport=viewport, base_url=url, bypass_csp=bypass_csp)
    context.set_default_timeout(20_000)
    page = context.new_page()
    if user is not None:
        page.goto("/sign-in")
        page.fill("#username", user)
        page.fill("#password", PASSWORDS[user])
        page.click("button[type=submit]")
        page.wait_for_url(re.compile(r"/records$"))
    return page


def ensure_chromium() -> str:
    """The path of Debian's Chromium, installing the package when it is missing."""
    if Path(CHROMIUM).exists():
        return CHROMIUM
    if os.geteuid() == 0 and shutil.which("apt-get"):
        env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
        subprocess.run(["apt-get", "update", "-qq"], env=env, check=False, timeout=600)
        subprocess.run(
            ["apt-get", "install", "-y", "-qq", "chromium"], env=env, check=False, timeout=900
        )
    need(Path(CHROMIUM).exists(), f"Debian's chromium at {CHROMIUM} (apt-get install chromium)")
    return CHROMIUM


def axe_source() -> str:
    """axe-core's script from the installed ``axe-playwright-python`` package (no CDN)."""
    import axe_playwright_python

    path = Path(axe_playwright_python.__file__).with_name("axe.min.js")
    return path.read_text(encoding="utf-8")


def truncate_all(engine: Engine) -> None:
    """Empty every table of a PostgreSQL test database (ids start again at 1)."""
    names = ", ".join(t.name for t in metadata.sorted_tables)
    with engine.begin() as conn:
        conn.execute(text(f"TRUNCATE {names} RESTART IDENTITY CASCADE"))


class CuttableProxy:
    """A TCP relay on 127.0.0.1 in front of the server whose open connections the test can cut,
    as a dropped network would (the browser's offline mode leaves open streams alone)."""

    def __init__(self, upstream_port: int) -> None:
        import socket

        self.upstream_port = upstream_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open: set[Any] = set()
        self.lock = threading.Lock()
        self.closed = False
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        import socket

        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            with self.lock:
                self.open.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    def _pump(self, src: Any, dst: Any) -> None:
        try:
            while chunk := src.recv(65536):
                dst.sendall(chunk)
        except OSError:
            pass
        finally:
            self._close(src)
            self._close(dst)

    def _close(self, sock: Any) -> None:
        import socket

        with self.lock:
            self.open.discard(sock)
        with contextlib.suppress(OSError):
            sock.shutdown(socket.SHUT_RDWR)
        sock.close()

    def cut(self) -> None:
        """Drop every open connection at once."""
        with self.lock:
            socks = list(self.open)
        for sock in socks:
            self._close(sock)

    def close(self) -> None:
        self.closed = True
        self.listener.close()
        self.cut()


def serious_violations(page: Page) -> list[str]:
    """axe-core's serious and critical findings in ``page`` (its script injected; the
    context must bypass CSP, see :func:`new_page`)."""
    page.add_script_tag(content=axe_source())
    result = page.evaluate("async () => await axe.run(document)")
    assert result["passes"], "axe-core ran no rule"
    return [
        f"{v['id']} ({v['impact']}): {v['help']} — {[n['target'] for n in v['nodes']]}"
        for v in result["violations"]
        if v["impact"] in ("serious", "critical")
    ]
