"""The HTTP endpoint of ``conveyor worker --metrics-port``: ``/metrics`` for Prometheus,
``/healthz`` and ``/readyz`` for probes and load balancers; any other path is 404.

* ``/healthz``: 200 when the database answers a query now; 503 when it does not (the process
  itself is alive either way: a probe that restarts on 503 would only add load to an outage).
* ``/readyz``: 200 while the process is registered and every lane thread runs, not stopping or
  draining; 503 otherwise, the body saying which.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, generate_latest
from sqlalchemy import Engine

__all__ = ["ProbeServer"]


class ProbeServer:
    """``/metrics``, ``/healthz``, ``/readyz`` on ``host:port`` in a daemon thread.

    Args:
        engine: the database ``/healthz`` pings.
        ready: returns ``(ready, why)`` for ``/readyz``.
        port: TCP port (0: any free one; :attr:`port` says which).
        host: address to listen on.

    Raises:
        OSError: the port cannot be bound.
    """

    def __init__(
        self, engine: Engine, ready: Callable[[], tuple[bool, str]], port: int, host: str
    ) -> None:
        self.engine = engine
        self.ready = ready
        probe = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if path == "/metrics":
                    self._send(200, generate_latest(REGISTRY), CONTENT_TYPE_LATEST)
                elif path == "/healthz":
                    self._json(*probe.health())
                elif path == "/readyz":
                    ok, why = probe.ready()
                    self._json(200 if ok else 503, {"ready": ok, "why": why})
                else:
                    self._json(404, {"error": f"no such path {path}; try /metrics"})

            def _json(self, status: int, body: dict[str, Any]) -> None:
                self._send(status, json.dumps(body).encode(), "application/json")

            def _send(self, status: int, body: bytes, content_type: str) -> None:
                self.send_response(status)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # a probe every few seconds is not news

        self._server = ThreadingHTTPServer((host, port), Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, name="conveyor-probes", daemon=True
        )

    def health(self) -> tuple[int, dict[str, Any]]:
        """``/healthz``: the status and body."""
        from conveyor.api.queries import ping
        from conveyor.db import outage

        try:
            with self.engine.connect() as conn:
                ping(conn)
        except Exception as exc:
            outage.DATABASE.failed(exc, "health check")
            return 503, {"status": "unavailable", "database": "unreachable"}
        return 200, {"status": "ok", "database": "ok"}

    def start(self) -> None:
        """Serve in the background."""
        self._thread.start()

    def stop(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
