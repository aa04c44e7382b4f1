"""An HTTP reverse proxy in a thread that answers some requests badly: an object store's faults.

Put it in front of the S3-compatible test server (``s3server``) and point a store's endpoint at
it. Each request, after its body was read in full, is by chance answered with a 503
``SlowDown`` (as S3 does when overloaded), or has its connection reset with no answer at all,
or is forwarded after ``delay`` seconds; the rest are forwarded as they are. The rates can be
changed while requests flow, or ended by the proxy itself after a number of requests
(:meth:`HttpFaultProxy.heal_after`): the end of the faults then falls at a point of the work,
counted in requests, whatever the machine's speed.
"""

from __future__ import annotations

import http.client
import random
import socket
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

_SLOW_DOWN = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>SlowDown</Code>'
    b"<Message>Please reduce your request rate.</Message></Error>"
)
#: MinIO's answer to a write once its drives are past their free-space threshold (its
#: ``ErrStorageFull``: HTTP 507, code ``XMinioStorageFull``).
_STORAGE_FULL = (
    b'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>XMinioStorageFull</Code>'
    b"<Message>Storage backend has reached its minimum free drive threshold. Please delete a "
    b"few objects to proceed.</Message></Error>"
)
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade"}


class HttpFaultProxy:
    """Forwards ``http://127.0.0.1:<port>`` to ``target`` (``http://host:port``), with faults.

    Attributes:
        error_rate: share of requests answered 503 ``SlowDown`` without reaching the server.
        reset_rate: share of requests whose connection is reset without an answer (some after
            the server did the work: the client cannot tell whether it happened).
        delay: seconds every forwarded request waits first.
        full: while True, every write (``PUT``, ``POST``) is answered 507 ``XMinioStorageFull``
            without reaching the server, as MinIO answers when its drives are full; reads,
            listings and deletes are forwarded.
        counts: how many requests met each fate (``forwarded``, ``error``, ``reset``).
        healed: how many requests came after the faults ended by :meth:`heal_after`.
    """

    def __init__(self, target: str, *, seed: int = 8) -> None:
        parts = urlsplit(target)
        self.target_host = parts.hostname or "127.0.0.1"
        self.target_port = parts.port or 80
        self.error_rate = 0.0
        self.reset_rate = 0.0
        self.delay = 0.0
        self.full = False
        self.counts = {"forwarded": 0, "error": 0, "reset": 0}
        self.healed = 0
        self._heal_at: int | None = None
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def _body(self) -> bytes:
                if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
                    chunks: list[bytes] = []
                    while True:
                        size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                        if size == 0:
                            while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                                pass
                            return b"".join(chunks)
                        chunks.append(self.rfile.read(size))
                        self.rfile.readline()
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _answer(self, status: int, xml: bytes) -> None:
                self.send_response(status)
                self.send_header("Content-Type", "application/xml")
                self.send_header("Content-Length", str(len(xml)))
                self.end_headers()
                self.wfile.write(xml)

            def _reset(self) -> None:
                # SO_LINGER 0: close sends RST, not FIN — the client sees "connection reset".
                self.connection.setsockopt(
                    socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0)
                )
                self.close_connection = True
                self.connection.close()

            def _handle(self) -> None:
                body = self._body()
                if proxy.full and self.command in ("PUT", "POST"):
                    self._answer(507, _STORAGE_FULL)
                    return
                fate = proxy._fate()
                if fate == "error":
                    self._answer(503, _SLOW_DOWN)
                    return
                if fate == "reset_before":
                    self._reset()
                    return
                if proxy.delay > 0:
                    time.sleep(proxy.delay)
                upstream = http.client.HTTPConnection(
                    proxy.target_host, proxy.target_port, timeout=120
                )
                try:
                    headers = {
                        k: v for k, v in self.headers.items() if k.lower() not in _HOP_BY_HOP
                    }
                    headers["Content-Length"] = str(len(body))
                    upstream.request(self.command, self.path, body=body, headers=headers)
                    answer = upstream.getresponse()
                    data = answer.read()
                finally:
                    upstream.close()
                if fate == "reset_after":  # the server did it; the client never hears
                    self._reset()
                    return
                self.send_response(answer.status)
                for key, value in answer.getheaders():
                    if key.lower() not in _HOP_BY_HOP and key.lower() != "content-length":
                        self.send_header(key, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(data)

            do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self.port = int(self._server.server_address[1])
        self.endpoint = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self._server.serve_forever, daemon=True).start()

    def heal_after(self, requests: int) -> None:
        """End every fault (rates and delay to 0) once ``requests`` requests in all have met
        their fate: the request that reaches the count is the last one with faults."""
        with self._lock:
            self._heal_at = requests

    def _fate(self) -> str:
        with self._lock:
            if self._heal_at is not None and sum(self.counts.values()) >= self._heal_at:
                self.error_rate = self.reset_rate = self.delay = 0.0
                self.healed += 1
            dice = self._rng.random()
            if dice < self.error_rate:
                fate = "error"
            elif dice < self.error_rate + self.reset_rate:
                fate = "reset_before" if self._rng.random() < 0.5 else "reset_after"
            else:
                fate = "forwarded"
            self.counts["reset" if fate.startswith("reset") else fate] += 1
            return fate

    def close(self) -> None:
        """Stop serving."""
        self._server.shutdown()
        self._server.server_close()
