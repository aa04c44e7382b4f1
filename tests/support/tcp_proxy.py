"""A TCP proxy in a thread that a test can cut, slow down and restore: a database (or any
server's) outage on demand. Shared by the API outage tests and the fault suite."""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
import time


class TcpProxy:
    """Forwards 127.0.0.1:<port> to ``target``; :meth:`down` refuses and drops every connection,
    :meth:`up` listens again on the same port; while :attr:`delay` is above 0, every chunk
    forwarded either way waits that many seconds first (a slow network, one chunk after
    another); while :attr:`latency` is above 0, every chunk arrives that many seconds after it
    was sent, without holding up the chunks behind it (a long link: a round trip costs twice
    the latency, a large transfer only once).

    :attr:`turns` counts round trips: the times a client spoke again after its server had
    answered (on any connection), the waits a long link charges for."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.delay = 0.0
        self.latency = 0.0
        self.turns = 0
        self._lock = threading.Lock()
        self._sockets: list[socket.socket] = []
        self._listener: socket.socket | None = None
        self.port = 0
        self.up()

    def up(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()

    def down(self) -> None:
        with self._lock:
            listener, self._listener = self._listener, None
            doomed, self._sockets = self._sockets, []
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            listener.close()
        for sock in doomed:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._listener is not listener:
                    client.close()
                    server.close()
                    return
                self._sockets += [client, server]
            spoke = [False]  # the client spoke last on this connection
            for a, b, by_client in ((client, server, True), (server, client, False)):
                threading.Thread(
                    target=self._pipe, args=(a, b, by_client, spoke), daemon=True
                ).start()

    def cut(self) -> None:
        """Drop every open connection but keep listening: new connections are accepted."""
        with self._lock:
            doomed, self._sockets = self._sockets, []
        for sock in doomed:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def _pipe(
        self, source: socket.socket, sink: socket.socket, by_client: bool, spoke: list[bool]
    ) -> None:
        # Chunks wait in the line until their time on the long link has passed.
        line: queue.SimpleQueue[tuple[float, bytes]] = queue.SimpleQueue()
        threading.Thread(target=self._deliver, args=(line, sink), daemon=True).start()
        try:
            while data := source.recv(65536):
                with self._lock:
                    if by_client and not spoke[0]:
                        self.turns += 1
                    spoke[0] = by_client
                if self.delay > 0:
                    time.sleep(self.delay)
                line.put((time.monotonic() + self.latency, data))
        except OSError:
            pass
        finally:
            line.put((0.0, b""))

    @staticmethod
    def _deliver(line: queue.SimpleQueue[tuple[float, bytes]], sink: socket.socket) -> None:
        try:
            while True:
                due, data = line.get()
                if not data:
                    break
                wait = due - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                sink.sendall(data)
        except OSError:
            pass
        finally:
            with contextlib.suppress(OSError):
                sink.shutdown(socket.SHUT_WR)
