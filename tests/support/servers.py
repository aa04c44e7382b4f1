"""Real servers for tests: uvicorn serving an app on loopback, and free loopback ports."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import httpx
from fastapi import FastAPI

from conveyor.api.server import ConveyorServer, make_server


def free_port() -> int:
    """A TCP port on 127.0.0.1 that was free a moment ago."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class LiveServer:
    """uvicorn serving an app on 127.0.0.1 in a thread: ``with LiveServer(app) as server:``."""

    def __init__(self, app: FastAPI) -> None:
        self.server: ConveyorServer = make_server(app, "127.0.0.1", 0, log_level="warning")
        self.thread = threading.Thread(target=self.server.run, name="uvicorn-test", daemon=True)

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    @property
    def url(self) -> str:
        port = self.server.servers[0].sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    def client(self, headers: dict[str, str] | None = None, **kw: Any) -> httpx.Client:
        """An httpx client on :attr:`url` (30 s timeout)."""
        return httpx.Client(base_url=self.url, headers=headers, timeout=30, **kw)

    def __exit__(self, *exc: object) -> None:
        self.server.close_streams()
        self.server.should_exit = True
        self.thread.join(timeout=60)
        assert not self.thread.is_alive(), "uvicorn did not stop"
