"""Running the app on uvicorn so that open event streams end when the server is told to stop."""

from __future__ import annotations

import json
from types import FrameType

import uvicorn
from fastapi import FastAPI
from uvicorn.protocols.http.h11_impl import H11Protocol

from conveyor.api.state import ApiState
from conveyor.error_codes import ErrorCode

__all__ = ["GRACEFUL_SHUTDOWN", "MAX_REQUEST_HEAD", "ConveyorServer", "make_server"]

# Seconds uvicorn waits for open requests after SIGTERM before cancelling them.
GRACEFUL_SHUTDOWN = 10
# The most a request line and its headers may take before the server refuses the request
# (h11 buffers no more; httptools has no such bound, so the h11 parser is chosen).
MAX_REQUEST_HEAD = 32 * 1024


def _refusal(default_headers: list[tuple[bytes, bytes]], msg: str) -> bytes:
    """The whole 400 response to a request that is not valid HTTP, in the API's error shape."""
    body = json.dumps(
        {
            "error": {
                "status": 400,
                "code": ErrorCode.BAD_REQUEST.value,
                "message": f"the request is not valid HTTP ({msg.rstrip('.')}), e.g. a "
                "Content-Length that is not a number",
            }
        }
    ).encode()
    head = [b"HTTP/1.1 400 Bad Request\r\n"]
    head += [name + b": " + value + b"\r\n" for name, value in default_headers]
    head += [
        b"content-type: application/json\r\n",
        b"content-length: " + str(len(body)).encode() + b"\r\n",
        b"connection: close\r\n\r\n",
    ]
    return b"".join(head) + body


class _H11(H11Protocol):
    """uvicorn's h11 protocol, answering what it cannot parse in the API's JSON error shape
    instead of plain text (docs/http.md, Errors)."""

    def send_400_response(self, msg: str) -> None:
        self.transport.write(_refusal(self.server_state.default_headers, msg))
        self.transport.close()


class ConveyorServer(uvicorn.Server):
    """A uvicorn server that also ends the app's event streams on SIGINT/SIGTERM.

    uvicorn waits for open connections before its lifespan shutdown; an SSE stream never ends by
    itself, so without this a stop would hang until every browser tab closed.
    """

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        """Start uvicorn's graceful stop and end every event stream."""
        self.close_streams()
        super().handle_exit(sig, frame)
        # A stop asked for by a signal and carried out in full is a clean exit (status 0);
        # uvicorn would otherwise re-raise the signal after shutting down.
        self._captured_signals.clear()

    def close_streams(self) -> None:
        """End the app's event streams (they finish within a tick)."""
        app = self.config.app
        state: ApiState | None = getattr(getattr(app, "state", None), "conveyor", None)
        if state is not None:
            state.closing.set()


def make_server(app: FastAPI, host: str, port: int, *, log_level: str = "info") -> ConveyorServer:
    """A server for ``app`` on ``host:port`` (port 0 = any free port)."""
    config = uvicorn.Config(
        app,
        host=host,
        port=port,
        log_level=log_level,
        # The entry point configures logging (one line format, ISO 8601 UTC); uvicorn's loggers
        # propagate to it instead of printing in a style of their own.
        log_config=None,
        lifespan="on",
        proxy_headers=False,
        # Open requests get this long after SIGTERM; uploads still arriving are refused with
        # 503 a little earlier (ApiState.upload_stop_grace), so none is cut off without a word.
        timeout_graceful_shutdown=GRACEFUL_SHUTDOWN,
        http=_H11,
        h11_max_incomplete_event_size=MAX_REQUEST_HEAD,
    )
    return ConveyorServer(config)
