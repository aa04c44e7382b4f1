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
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
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
"""The docs' pictures (docs/web.md), rewritten only when asked (:func:`screenshot_folder`)."""
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


def screenshot_folder() -> Path:
    """Where the browser tests put their screenshots: :data:`SCREENSHOTS` (the docs'
    pictures) when ``CONVEYOR_SCREENSHOTS=docs``, the folder it names when it names another,
    else ``conveyor-screenshots`` in the system's temporary folder, so a run of the suite
    leaves the working tree as it was (docs/operations.md)."""
    chosen = os.environ.get("CONVEYOR_SCREENSHOTS", "")
    if chosen == "docs":
        folder = SCREENSHOTS
    elif chosen:
        folder = Path(chosen)
    else:
        folder = Path(tempfile.gettempdir()) / "conveyor-screenshots"
    folder.mkdir(parents=True, exist_ok=True)
    return folder


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


class _Requests:
    """The requests of one connection's client-to-server stream (HTTP/1.1, bodies sized by
    Content-Length, as browsers send uploads), read as it passes, to find where to cut."""

    def __init__(self, proxy: CuttableProxy) -> None:
        self.proxy = proxy
        self.head = bytearray()
        self.body_left = 0
        self.body_seen = 0
        self.target = False

    def cut_at(self, chunk: bytes) -> int | None:
        """Where in ``chunk`` the armed cut falls (bytes to pass on first), or None."""
        pos = 0
        while pos < len(chunk):
            if self.body_left:
                take = min(self.body_left, len(chunk) - pos)
                if self.target and self.body_seen + take >= self.proxy.cut_after:
                    return pos + self.proxy.cut_after - self.body_seen
                self.body_seen += take
                self.body_left -= take
                pos += take
                continue
            self.head += chunk[pos:]
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return None
            pos = len(chunk) - (len(self.head) - end - 4)
            lines = bytes(self.head[:end]).split(b"\r\n")
            self.head = bytearray()
            sizes = [
                v
                for k, _, v in (h.partition(b":") for h in lines[1:])
                if k.strip().lower() == b"content-length"
            ]
            self.body_left = int(sizes[0]) if sizes else 0
            self.body_seen = 0
            self.target = self.proxy.counts(lines[0].split(b" ", 1)[0])
        return None


class _Link:
    """One relayed connection: the browser's socket and the server's."""

    def __init__(self, client: Any, upstream: Any) -> None:
        self.client = client
        self.upstream = upstream
        self.cutting = False


class CuttableProxy:
    """A TCP relay on 127.0.0.1 in front of the server whose open connections the test can cut,
    as a dropped network would (the browser's offline mode leaves open streams alone).

    :meth:`cut` drops every connection now; :meth:`cut_inside` arms a cut that lands a given
    number of bytes into the body of the n-th request of a method, whatever the machine's
    speed: the server gets exactly those bytes and then the end of the stream (and has
    finished with them) before the browser's side is dropped.
    """

    def __init__(self, upstream_port: int) -> None:
        import socket

        self.upstream_port = upstream_port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.open: set[Any] = set()
        self.lock = threading.Lock()
        self.closed = False
        self.cut_method: bytes | None = None
        self.cut_nth = 0
        self.cut_after = 0
        self.seen = 0
        self.kept: Callable[[], bool] | None = None
        self.cut_done = threading.Event()
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def cut_inside(
        self, method: str, nth: int, after: int, kept: Callable[[], bool] | None = None
    ) -> None:
        """Cut the connection carrying the ``nth`` request of ``method`` (counted from now,
        over every connection) once ``after`` bytes of its body have passed; once only.
        The server's side ends when ``kept()`` is true (polled; say when the server has
        stored what it got, or the bytes still in its buffers may be dropped with the
        stream). :attr:`cut_done` is set when the browser's side is dropped."""
        with self.lock:
            self.cut_method, self.cut_nth, self.cut_after, self.seen = (
                method.encode(),
                nth,
                after,
                0,
            )
            self.kept = kept

    def counts(self, method: bytes) -> bool:
        """Whether a request of ``method`` starting now is the one the armed cut is for."""
        with self.lock:
            if self.cut_method != method:
                return False
            self.seen += 1
            if self.seen != self.cut_nth:
                return False
            self.cut_method = None
            return True

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
            link = _Link(client, upstream)
            threading.Thread(target=self._send, args=(link,), daemon=True).start()
            threading.Thread(target=self._answer, args=(link,), daemon=True).start()

    def _send(self, link: _Link) -> None:
        """Browser to server, cutting where armed: the bytes up to the cut and then the end
        of the stream go to the server; the browser's side is dropped by :meth:`_answer`
        once the server has closed its side (it has read everything sent by then)."""
        import socket

        requests = _Requests(self)
        try:
            while chunk := link.client.recv(65536):
                at = requests.cut_at(chunk)
                if at is None:
                    link.upstream.sendall(chunk)
                    continue
                link.upstream.sendall(chunk[:at])
                link.cutting = True
                deadline = time.monotonic() + 120
                while self.kept is not None and not self.kept() and time.monotonic() < deadline:
                    time.sleep(0.01)
                link.upstream.shutdown(socket.SHUT_WR)
                return
        except OSError:
            pass
        self._close(link.client)
        self._close(link.upstream)

    def _answer(self, link: _Link) -> None:
        """Server to browser; what the server answers a cut request is never passed on."""
        try:
            while chunk := link.upstream.recv(65536):
                if not link.cutting:
                    link.client.sendall(chunk)
        except OSError:
            pass
        finally:
            self._close(link.upstream)
            self._close(link.client)
            if link.cutting:
                self.cut_done.set()

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
