"""What every request handler reaches through ``request.app.state.conveyor``."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Annotated

import anyio
from fastapi import Depends, Request

from conveyor.api.live import LiveHub
from conveyor.db.album_signals import AlbumSignals
from conveyor.media.broadcast import AlbumBroadcast
from conveyor.runtime import Runtime

__all__ = ["UPLOAD_SLOTS", "ApiState", "State", "state_of"]

# Uploads arriving at once per process. Their threads are apart from the ordinary routes', so
# slow phones on slow links cannot take every thread the other routes need.
UPLOAD_SLOTS = 32


@dataclass
class ApiState:
    """The process's services for the HTTP layer.

    Attributes:
        runtime: engine, store, notifier, domains, settings.
        run_workers: this process runs the worker pool too.
        broadcast: the album outbox reader (M5), on the runtime's notifier.
        live: one reader per album for every event stream of this process.
        signals: album notifications from every process (LISTEN on PostgreSQL).
        closing: set when the server begins to stop, so event streams end and let it.
        upload_stop_grace: seconds an upload still arriving may go on once ``closing`` is set,
            before it is refused with 503 (less than the server's graceful-shutdown timeout).
        upload_slots: uploads that may be arriving at once in this process; others wait.
        upload_threads: the threads those uploads run in, apart from the ordinary routes'.
        uploads_by_owner: uploads arriving now, by owner (``[api] uploads_per_owner``).
        page_streams_by_session: the web app's live streams open now, by session id (as many
            as ``[api] streams_per_token`` each).
    """

    runtime: Runtime
    run_workers: bool
    broadcast: AlbumBroadcast
    live: LiveHub
    signals: AlbumSignals
    closing: threading.Event = field(default_factory=threading.Event)
    upload_stop_grace: float = 8.0
    upload_slots: anyio.CapacityLimiter = field(
        default_factory=lambda: anyio.CapacityLimiter(UPLOAD_SLOTS)
    )
    upload_threads: anyio.CapacityLimiter = field(
        default_factory=lambda: anyio.CapacityLimiter(UPLOAD_SLOTS)
    )
    uploads_by_owner: dict[str, int] = field(default_factory=dict)
    page_streams_by_session: dict[int, int] = field(default_factory=dict)


def state_of(request: Request) -> ApiState:
    """The :class:`ApiState` of the app serving ``request``."""
    state: ApiState = request.app.state.conveyor
    return state


State = Annotated[ApiState, Depends(state_of)]
