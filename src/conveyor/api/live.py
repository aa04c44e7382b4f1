"""One reader per album per process feeds every live subscriber of that album (M5).

Each open event stream used to read the album's outbox itself, about once a second: 200 idle
streams cost about a quarter of a core in queries. Now the process keeps one
:class:`AlbumFeed` per album that has subscribers. The feed reads the outbox only when told
something happened — a step of this process advanced (the notifier), or PostgreSQL's
``NOTIFY`` on the album's channel (:class:`~conveyor.db.album_signals.AlbumSignals`) — plus a
slow safety poll; on SQLite, which has no cross-process signal, it polls every
``poll_interval`` seconds, once for all subscribers. New events go into a bounded window in
memory from which every subscriber takes what it has not seen; a subscriber that is further
behind (a reconnect with an old ``Last-Event-ID``) catches up from the outbox by itself, so a
slow client still costs only its own reads and nothing is queued for it.

The feed also notices that its album was deleted (the outbox goes with the album) and ends
every stream of it with ``album.deleted``. Tokens of open streams are re-checked together, one
query every few seconds, and a stream whose token was revoked ends; so does the stream of a
user an album was shared with, once it no longer is. One token may hold at
most ``[api] streams_per_token`` streams of this process at once (429 beyond).
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import deque
from dataclasses import dataclass, field

import anyio
import anyio.to_thread
from sqlalchemy import Engine

from conveyor.accounts import active_tokens
from conveyor.api.errors import ApiError
from conveyor.db.album_signals import AlbumSignals
from conveyor.db.notify import Notifier
from conveyor.error_codes import ErrorCode
from conveyor.errors import NotFound
from conveyor.media.broadcast import AlbumBroadcast, AlbumEvent
from conveyor.media.sharing import album_access

__all__ = ["AlbumFeed", "LiveHub", "StreamSlot"]

# Outbox reads of every feed and catch-up share these threads, so a crowd of subscribers
# cannot take the threads the ordinary routes need.
READS = anyio.CapacityLimiter(8)
# How often a feed looks at its in-memory wake-up counters (seconds; costs no query).
_TICK = 0.1
# Events kept in memory per album for subscribers to take.
_WINDOW = 512
# Events read per outbox query.
_BATCH = 200
# Seconds between outbox reads of a feed that hears NOTIFY (a safety net only).
_LISTENING_POLL = 30.0
# Idle polls between two checks that the album still exists (without NOTIFY).
_EXISTS_EVERY = 10
# Seconds between two checks of the open streams' tokens (one query for all).
TOKEN_CHECK = 5.0


class AlbumFeed:
    """The one reader of one album's outbox in this process.

    Attributes:
        album_id: the album.
        last_id: the newest event id read so far.
        floor: every event with an id above this is in :attr:`recent`.
        deleted: the album no longer exists.
    """

    def __init__(self, hub: LiveHub, album_id: int, start_id: int) -> None:
        self.hub = hub
        self.album_id = album_id
        self.last_id = start_id
        self.floor = start_id
        self.recent: deque[AlbumEvent] = deque()
        self.deleted = False
        self.subscribers = 0
        self._changed = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    def changed(self) -> asyncio.Event:
        """An event set at the next change (new events, deletion); take it before looking."""
        return self._changed

    def _announce(self) -> None:
        done, self._changed = self._changed, asyncio.Event()
        done.set()

    def events_after(self, last_id: int) -> list[AlbumEvent] | None:
        """What a subscriber at ``last_id`` has not seen, from memory; None when it is further
        behind than the window and must read the outbox itself."""
        if last_id < self.floor:
            return None
        return [e for e in self.recent if e.id > last_id]

    async def run(self) -> None:
        """Read the outbox when woken (or on the poll), until no subscriber is left."""
        hub = self.hub
        local = hub.notifier.generation
        heard = hub.signals.generation(self.album_id)
        next_read = time.monotonic() + hub.interval()
        idle_reads = 0
        while self.subscribers > 0 and not hub.closing.is_set():
            await asyncio.sleep(_TICK)
            woken = (
                hub.notifier.generation != local or hub.signals.generation(self.album_id) != heard
            )
            if not woken and time.monotonic() < next_read:
                continue
            local = hub.notifier.generation
            heard = hub.signals.generation(self.album_id)
            events = await anyio.to_thread.run_sync(
                hub.broadcast.events_after, self.album_id, self.last_id, _BATCH, limiter=READS
            )
            hub.reads += 1
            if events:
                self._keep(events)
                idle_reads = 0
                next_read = 0.0 if len(events) == _BATCH else time.monotonic() + hub.interval()
                continue
            idle_reads += 1
            if woken or idle_reads % _EXISTS_EVERY == 0:
                exists = await anyio.to_thread.run_sync(
                    hub.broadcast.album_exists, self.album_id, limiter=READS
                )
                hub.reads += 1
                if not exists:
                    self.deleted = True
                    self._announce()
                    return
            next_read = time.monotonic() + hub.interval()

    def _keep(self, events: list[AlbumEvent]) -> None:
        for event in events:
            self.recent.append(event)
        while len(self.recent) > _WINDOW:
            self.floor = self.recent.popleft().id
        self.last_id = events[-1].id
        self._announce()


@dataclass
class StreamSlot:
    """One open stream's place: its feed and token; :meth:`close` gives it back (idempotent)."""

    hub: LiveHub
    feed: AlbumFeed
    token_id: int
    closed: bool = field(default=False)
    #: The user of a stream of an album shared with them (None: the owner's own).
    shared_with: str | None = field(default=None)
    unshared: bool = field(default=False)

    @property
    def revoked(self) -> bool:
        """True once the stream's token was found revoked, or the album no longer shared with
        the stream's user."""
        return self.unshared or self.token_id in self.hub.revoked

    def close(self) -> None:
        """Leave the feed and free the token's slot."""
        if self.closed:
            return
        self.closed = True
        self.hub.release(self)


def _unshared(engine: Engine, slots: list[StreamSlot]) -> list[StreamSlot]:
    """Those of ``slots`` whose album is no longer shared with their user (one connection)."""
    if not slots:
        return []
    gone = []
    with engine.connect() as conn:
        for slot in slots:
            try:
                album_access(conn, slot.feed.album_id, str(slot.shared_with))
            except NotFound:
                gone.append(slot)
    return gone


class LiveHub:
    """The process's album feeds and the open streams' tokens.

    Args:
        broadcast: the outbox reader.
        notifier: this process's wake-ups (a step that wrote an event bumps it).
        signals: album notifications from every process (PostgreSQL).
        engine: the database (token checks).
        closing: set when the server stops; feeds and streams end.
        streams_per_token: ``[api] streams_per_token``.
        token_check: seconds between checks of the open streams' tokens.
    """

    def __init__(
        self,
        broadcast: AlbumBroadcast,
        notifier: Notifier,
        signals: AlbumSignals,
        engine: Engine,
        *,
        closing: threading.Event,
        streams_per_token: int,
        token_check: float = TOKEN_CHECK,
    ) -> None:
        self.broadcast = broadcast
        self.notifier = notifier
        self.signals = signals
        self.engine = engine
        self.closing = closing
        self.streams_per_token = streams_per_token
        self.token_check = token_check
        self.feeds: dict[int, AlbumFeed] = {}
        self.streams_by_token: dict[int, int] = {}
        self.revoked: set[int] = set()
        self.shared: list[StreamSlot] = []
        self.reads = 0
        self._token_task: asyncio.Task[None] | None = None

    def interval(self) -> float:
        """Seconds between outbox reads of a feed nobody woke."""
        if self.signals.listening:
            return _LISTENING_POLL
        return self.broadcast.poll_interval

    def open(
        self, album_id: int, token_id: int, latest_id: int, *, shared_with: str | None = None
    ) -> StreamSlot:
        """A place in the album's feed for a new stream of ``token_id`` (in the event loop).

        Args:
            latest_id: the album's newest event id now (where a new feed starts reading).
            shared_with: the stream's user when the album is shared with them (not theirs):
                the stream ends once it no longer is, checked with the tokens.

        Raises:
            ApiError: 429 ``too_many_streams`` when the token has its maximum open already.
        """
        held = self.streams_by_token.get(token_id, 0)
        if held >= self.streams_per_token:
            raise ApiError(
                ErrorCode.TOO_MANY_STREAMS,
                f"this token has {held} event streams open (the limit is "
                f"{self.streams_per_token}); close one first",
                headers={"Retry-After": "5"},
            )
        self.streams_by_token[token_id] = held + 1
        feed = self.feeds.get(album_id)
        if feed is None or feed.deleted or feed.task is None or feed.task.done():
            feed = AlbumFeed(self, album_id, latest_id)
            self.feeds[album_id] = feed
        feed.subscribers += 1
        if feed.task is None:
            feed.task = asyncio.get_running_loop().create_task(feed.run())
        if self._token_task is None or self._token_task.done():
            self._token_task = asyncio.get_running_loop().create_task(self._check_tokens())
        slot = StreamSlot(self, feed, token_id, shared_with=shared_with)
        if shared_with is not None:
            self.shared.append(slot)
        return slot

    def release(self, slot: StreamSlot) -> None:
        """Give back a stream's place (the feed ends by itself when its last one leaves)."""
        self.shared = [other for other in self.shared if other is not slot]
        left = self.streams_by_token.get(slot.token_id, 0) - 1
        if left > 0:
            self.streams_by_token[slot.token_id] = left
        else:
            self.streams_by_token.pop(slot.token_id, None)
        slot.feed.subscribers -= 1
        if slot.feed.subscribers <= 0 and self.feeds.get(slot.feed.album_id) is slot.feed:
            del self.feeds[slot.feed.album_id]

    async def _check_tokens(self) -> None:
        while self.streams_by_token and not self.closing.is_set():
            await asyncio.sleep(self.token_check)
            ids = list(self.streams_by_token)
            if not ids:
                return
            alive = await anyio.to_thread.run_sync(active_tokens, self.engine, ids, limiter=READS)
            self.revoked = set(ids) - alive
            shared = list(self.shared)
            gone = await anyio.to_thread.run_sync(_unshared, self.engine, shared, limiter=READS)
            for slot in gone:
                slot.unshared = True
            if self.revoked or gone:
                for feed in list(self.feeds.values()):
                    feed._announce()
