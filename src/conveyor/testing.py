"""Test helpers shipped in the package: a clock that moves only when told to, and a recognition
provider that answers at once (for tests that are not about recognition)."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

from conveyor.providers.base import (
    PollResult,
    RecognitionRequest,
    Segment,
    Submission,
    Transcript,
)

__all__ = ["FakeClock", "FakeProvider", "OffsetClock"]


class FakeClock:
    """A :class:`conveyor.clock.Clock` whose time moves only by :meth:`advance` or :meth:`set`.

    It stands in for the database's clock (``drives_database_time``): the engine's statements
    bind its time where they would read the database's, so a test moves every lease, retry
    pause and stuck countdown by moving this clock (D17).

    Args:
        start: the initial time in epoch seconds.
    """

    drives_database_time = True

    def __init__(self, start: float = 1_800_000_000.0) -> None:
        self._now = start
        self._lock = threading.Lock()

    def now(self) -> float:
        """Return the current fake time in epoch seconds."""
        with self._lock:
            return self._now

    def advance(self, seconds: float) -> None:
        """Move time forward by ``seconds`` (may be fractional)."""
        with self._lock:
            self._now += seconds

    def set(self, when: float) -> None:
        """Jump to ``when`` (epoch seconds)."""
        with self._lock:
            self._now = when


class OffsetClock:
    """A worker's wall clock that runs ``offset`` seconds off; the database's clock does not.

    Models a worker host whose clock is wrong (D17): everything the worker dates itself is
    off, while the engine's statements still read the database's time.

    Args:
        offset: seconds added to ``time.time()`` (negative: behind).
    """

    drives_database_time = False

    def __init__(self, offset: float) -> None:
        self.offset = offset

    def now(self) -> float:
        """Return this host's time, off by ``offset`` seconds."""
        return time.time() + self.offset


class FakeProvider:
    """A :class:`~conveyor.providers.RecognitionProvider` that answers at once, recognising nothing.

    For tests that are not about recognition: every submitted recording "says" ``text``. It is
    asynchronous (one ``running`` poll per operation before ``done``, so the ``submitted`` stage
    is exercised) unless ``synchronous``, in which case ``submit`` returns the raw response like
    an OpenAI-compatible server. ``submits`` lists every operation key submitted, in order;
    ``requests`` maps each key to the :class:`~conveyor.providers.RecognitionRequest` it came with
    (language, merged vocabulary hints, channels).

    Args:
        text: the transcript of every recording; empty means no speech.
        language: the ISO 639-1 code reported.
        synchronous: answer from ``submit`` instead of a poll.
    """

    name = "fake"
    model = "fake-1"
    languages = frozenset({"en", "de", "ru", "fr", "es"})
    idempotent_submit = True
    hears_channels_apart = False

    def __init__(
        self, text: str = "Hello world.", language: str = "en", *, synchronous: bool = False
    ) -> None:
        self.text = text
        self.language = language
        self.synchronous = synchronous
        self.submits: list[str] = []
        self.requests: dict[str, RecognitionRequest] = {}
        self._polls: dict[str, int] = {}
        self._lock = threading.Lock()

    def _raw(self) -> bytes:
        segments = [{"start": 0.0, "end": 1.0, "text": self.text}] if self.text else []
        return json.dumps({"language": self.language, "segments": segments}).encode()

    def submit(self, audio: Path, *, operation_id: str, request: RecognitionRequest) -> Submission:
        """Accept the recording; idempotent per ``operation_id``."""
        with self._lock:
            if operation_id not in self._polls:
                self.submits.append(operation_id)
                self.requests[operation_id] = request
                self._polls[operation_id] = 0
        raw = self._raw() if self.synchronous else None
        return Submission(operation_id=operation_id, source_url=str(audio), raw=raw)

    def poll(self, operation_id: str) -> PollResult:
        """``running`` on the first poll of an operation, ``done`` afterwards."""
        with self._lock:
            if operation_id not in self._polls:
                return PollResult("unknown")
            self._polls[operation_id] += 1
            if self._polls[operation_id] == 1:
                return PollResult("running")
        return PollResult("done", raw=self._raw())

    def parse(self, raw: bytes) -> Transcript:
        """The fake raw response as a transcript."""
        try:
            document = json.loads(raw)
            segments = tuple(
                Segment(float(s["start"]), float(s["end"]), str(s["text"]))
                for s in document["segments"]
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"not a fake provider response: {exc}") from exc
        text = " ".join(s.text for s in segments)
        if not text:
            return Transcript("", (), None, True)
        language = str(document["language"])
        return Transcript(text, segments, language, False, (language,))

    def cancel(self, operation_id: str) -> PollResult:
        """Forget the operation: ``failed`` (cancelled)."""
        self.discard(operation_id)
        return PollResult("failed", error="cancelled")

    def discard(self, operation_id: str) -> None:
        """Forget the operation."""
        with self._lock:
            self._polls.pop(operation_id, None)

    def poll_delay(self, duration: float, waited: float) -> float:
        """A tenth of a second."""
        return 0.1

    def deadline(self, duration: float) -> float:
        """An hour."""
        return 3600.0
