"""The recognition provider protocol the audio pipeline talks to.

A provider runs one *operation* per submitted recording. The pipeline names the operation
itself (``operation_id``) and writes it on the attempt row BEFORE calling
:meth:`RecognitionProvider.submit` (NORMS D12); a repeated submit with the same id never starts
a second operation, so a retry never pays twice. The pipeline then polls until the operation is
done or failed, stores the raw response as an object (D2) and turns it into a :class:`Transcript`
with :meth:`RecognitionProvider.parse`.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

__all__ = ["PollResult", "PollState", "RecognitionProvider", "Segment", "Transcript"]

PollState = Literal["running", "done", "failed", "unknown"]


@dataclass(frozen=True)
class Segment:
    """One recognised stretch of speech; ``start`` and ``end`` are seconds from the start."""

    start: float
    end: float
    text: str


@dataclass(frozen=True)
class Transcript:
    """A parsed recognition result.

    Attributes:
        text: the whole transcript; empty when ``no_speech``.
        segments: the speech segments kept, in time order; empty when ``no_speech``.
        language: ISO 639-1 code the recognizer used (requested or detected); ``None`` when
            ``no_speech``.
        no_speech: the recording holds no speech (silence, noise, only filler sounds).
    """

    text: str
    segments: tuple[Segment, ...]
    language: str | None
    no_speech: bool


@dataclass(frozen=True)
class PollResult:
    """The state of one operation.

    Attributes:
        state: ``running`` (queued or working), ``done``, ``failed``, or ``unknown`` (no operation
            with that id was ever started).
        raw: the provider's raw response when ``done``; the caller stores it as an object (D2).
        error: readable error text when ``failed``; never contains credentials (D16).
    """

    state: PollState
    raw: bytes | None = None
    error: str | None = None


class RecognitionProvider(Protocol):
    """What the pipeline needs from a speech recognition provider."""

    name: str
    """Provider name, e.g. ``"local"``."""
    model: str
    """Model name recorded on the attempt row."""
    languages: frozenset[str]
    """Language codes the provider accepts for ``submit``."""

    def submit(self, audio: Path, *, operation_id: str, language: str | None) -> str:
        """Start recognising ``audio`` (16 kHz mono WAV) under the caller's ``operation_id``.

        Idempotent: when that operation was already started, nothing new is started.

        Args:
            audio: the normalised recording.
            operation_id: the caller's id, already written on the attempt row (D12).
            language: ISO 639-1 code, or ``None`` to detect it.

        Returns:
            The source URL or path the provider reads the audio from.
        """
        ...

    def poll(self, operation_id: str) -> PollResult:
        """Report the state of an operation; never raises for a failed operation."""
        ...

    def parse(self, raw: bytes) -> Transcript:
        """Turn a raw response (from a ``done`` :class:`PollResult`) into a transcript."""
        ...

    def discard(self, operation_id: str) -> None:
        """Forget an operation whose raw response is stored (or that is given up); idempotent."""
        ...
