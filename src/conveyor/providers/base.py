"""The recognition provider protocol the audio pipeline talks to.

One recording is recognised by one *operation*. The pipeline writes an attempt row with its own
key (``operation_id``) BEFORE calling :meth:`RecognitionProvider.submit` (NORMS D12). What
happens next depends on the provider:

* **asynchronous** providers (the local recognizer, SpeechKit) accept the job and answer with an
  operation id — the caller's key (local) or one the provider assigns (SpeechKit) — which the
  pipeline records and polls until the operation is ``done`` or ``failed``;
* **synchronous** providers (OpenAI-compatible servers) return the raw response from ``submit``
  itself: a degenerate asynchronous operation that is done at once.

Either way the raw response is stored as an object before it is parsed (D2), then turned into a
:class:`Transcript` by :meth:`RecognitionProvider.parse`.

Retries never pay twice (D12). A submit either succeeds, or raises one of:

* :class:`ProviderBusy`: the provider certainly did not start anything (connection refused, 429,
  503); retrying later is free. ``retry_after`` honours the provider's ``Retry-After``;
* :class:`SubmitOutcomeUnknown`: the request may have reached the provider and started a paid
  operation (timeout or reset after sending, a gateway timeout). Unless the provider is
  ``idempotent_submit`` (a repeat with the same key starts nothing new), the pipeline never
  repeats it on its own: it halts the record for an operator;
* :class:`ProviderRejected`: the provider refused the request for a reason a retry will not fix
  (bad credentials, unsupported audio, too large); ``reason`` is the halt reason.

Credentials never appear in any text these exceptions or results carry (D16).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol, runtime_checkable

from conveyor.providers.halts import ProviderHalt

__all__ = [
    "LongPolling",
    "PollResult",
    "PollState",
    "ProviderBusy",
    "ProviderError",
    "ProviderRejected",
    "RecognitionProvider",
    "RecognitionRequest",
    "Segment",
    "Submission",
    "SubmitOutcomeUnknown",
    "Transcript",
    "Word",
]

PollState = Literal["running", "done", "failed", "unknown"]


@dataclass(frozen=True)
class Word:
    """One recognised word; ``start`` and ``end`` are seconds from the start of the recording.

    ``text`` is the word as written, with its punctuation and without surrounding blanks;
    ``probability`` is the recognizer's confidence (0-1) when it gives one.
    """

    start: float
    end: float
    text: str
    probability: float | None = None


@dataclass(frozen=True)
class Segment:
    """One recognised stretch of speech; ``start`` and ``end`` are seconds from the start.

    ``channel`` labels the audio track or channel it was heard on (``None`` for a single one);
    ``language`` is the segment's ISO 639-1 code when the recording switches language;
    ``words`` are its words with their own times, when the provider gives them (a segment's
    start is its first word's start, its end its last word's end).
    """

    start: float
    end: float
    text: str
    channel: str | None = None
    language: str | None = None
    words: tuple[Word, ...] = ()


@dataclass(frozen=True)
class Transcript:
    """A parsed recognition result.

    Attributes:
        text: the whole transcript; empty when ``no_speech``.
        segments: the speech segments kept, in time order; empty when ``no_speech``.
        language: ISO 639-1 code the recognizer used (requested or detected), the first one
            heard when there are several; ``None`` when ``no_speech``.
        no_speech: the recording holds no speech (silence, noise, only filler sounds).
        languages: every language heard, in order of first appearance.
    """

    text: str
    segments: tuple[Segment, ...]
    language: str | None
    no_speech: bool
    languages: tuple[str, ...] = ()


@dataclass(frozen=True)
class RecognitionRequest:
    """What to recognise and how, besides the audio itself.

    Attributes:
        language: ISO 639-1 code, or ``None`` to detect it.
        hints: vocabulary hints (names, terms) for the decoder, or ``None``.
        duration: seconds of audio (for deadlines and poll scheduling).
        object_key: the normalized audio's key in the object store, for providers that read
            it from a bucket instead of receiving the bytes.
        channels: channels of the normalized audio: more than one only for a provider that
            ``hears_channels_apart``, each to be recognised on its own and labelled.
    """

    language: str | None = None
    hints: str | None = None
    duration: float = 0.0
    object_key: str | None = None
    channels: int = 1


@dataclass(frozen=True)
class Submission:
    """What an accepted submit returned.

    Attributes:
        operation_id: the operation to poll: the caller's key, or the provider's own id.
        source_url: where the provider reads the audio from (a path, an object URI, or
            ``inline`` when the bytes travelled in the request), recorded on the attempt row.
        raw: the complete raw response of a synchronous provider; ``None`` for an
            asynchronous one (poll it).
        content_type: MIME type of ``raw``.
    """

    operation_id: str
    source_url: str | None = None
    raw: bytes | None = None
    content_type: str = "application/json"


@dataclass(frozen=True)
class PollResult:
    """The state of one operation.

    Attributes:
        state: ``running`` (queued or working), ``done``, ``failed``, or ``unknown`` (no operation
            with that id was ever started, or it is forgotten).
        raw: the provider's raw response when ``done``; the caller stores it as an object (D2).
        error: readable error text when ``failed``; never contains credentials (D16).
        halt_reason: when ``failed``, a reason to halt for an operator instead of submitting
            again (a re-submit would pay again for the same outcome), e.g.
            ``provider_no_result``, ``result_expired``, ``provider_error``.
        retry_after: seconds the provider asks us to wait before the next poll (``Retry-After``,
            or the poll quota), or ``None``.
        content_type: MIME type of ``raw``.
    """

    state: PollState
    raw: bytes | None = None
    error: str | None = None
    halt_reason: ProviderHalt | None = None
    retry_after: float | None = None
    content_type: str = "application/json"


class ProviderError(Exception):
    """Base of the errors a provider raises from :meth:`RecognitionProvider.submit`."""


class ProviderBusy(ProviderError):
    """Nothing was started; try again after ``retry_after`` seconds (or a back-off)."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class SubmitOutcomeUnknown(ProviderError):
    """The submit may have started a (paid) operation, but no answer came back."""


class ProviderRejected(ProviderError):
    """The provider refused the request; ``reason`` is the halt reason, the text says what to do."""

    def __init__(self, reason: ProviderHalt, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class RecognitionProvider(Protocol):
    """What the pipeline needs from a speech recognition provider."""

    name: str
    """Provider name, e.g. ``"local"``, ``"speechkit"``, ``"openai"``."""
    model: str
    """Model name recorded on the attempt row."""
    languages: frozenset[str]
    """ISO 639-1 codes the provider accepts for ``submit``."""
    hears_channels_apart: bool
    """True when the provider takes a multi-channel WAV and labels each channel's segments
    (``[transcription] channels = "separate"``); others always receive a mono mix."""
    idempotent_submit: bool
    """True when a repeated submit with the same ``operation_id`` never starts a second
    operation, so a submit with an unknown outcome may simply be repeated (D12)."""

    def submit(self, audio: Path, *, operation_id: str, request: RecognitionRequest) -> Submission:
        """Start recognising ``audio`` (16 kHz mono WAV) for the attempt keyed ``operation_id``.

        Args:
            audio: the normalised recording.
            operation_id: the caller's key, already written on the attempt row (D12).
            request: language, hints, duration.

        Raises:
            ProviderBusy, SubmitOutcomeUnknown, ProviderRejected: see the module docstring.
        """
        ...

    def poll(self, operation_id: str) -> PollResult:
        """Report the state of an operation; never raises for a failed operation.

        Raises:
            ProviderBusy: the provider could not be asked now (down, 429, 5xx); poll later.
        """
        ...

    def parse(self, raw: bytes) -> Transcript:
        """Turn a raw response (from a ``done`` poll or a synchronous submit) into a transcript.

        Raises:
            ValueError: ``raw`` is not a response of this provider.
        """
        ...

    def discard(self, operation_id: str) -> None:
        """Forget an operation whose raw response is stored (or that is given up); idempotent."""
        ...

    def cancel(self, operation_id: str) -> PollResult:
        """Ask the provider to stop an operation past its :meth:`deadline` (best effort).

        Returns the operation's state as the provider reports it after the request: ``failed``
        (it ended: cancelled, or failed anyway), ``done`` with ``raw`` (it finished meanwhile),
        or ``running`` with ``error`` saying why it may still run (the provider refused or could
        not confirm the cancel). Never raises.
        """
        ...

    def poll_delay(self, duration: float, waited: float) -> float:
        """Seconds until the next poll of an operation on ``duration`` s of audio, submitted
        ``waited`` s ago (quota-aware)."""
        ...

    def deadline(self, duration: float) -> float:
        """Seconds after submission past which a still-running operation is given up."""
        ...


@runtime_checkable
class LongPolling(Protocol):
    """A provider that can wait for an operation it is working on, cheaply, in the worker.

    Polling on a timer either notices a result late (up to the poll delay) or costs a claim,
    a poll and a save every few milliseconds, taking CPU from the recognizer itself on the same
    machine. A provider whose operations finish on this host (the local recognizer) can instead
    be waited on: the collect step waits up to its poll delay while the operation is being
    worked on, and sees the result the moment it is written.
    """

    def wait(self, operation_id: str, timeout: float, check: Callable[[], None]) -> PollResult:
        """Wait up to ``timeout`` seconds while the operation is being worked on.

        Returns at once when the operation is not being worked on (queued, finished, unknown),
        as soon as it finishes, or after ``timeout`` seconds with ``running``: the same answer
        :meth:`RecognitionProvider.poll` would give then.

        Args:
            operation_id: as for ``poll``.
            timeout: longest wait, seconds.
            check: called between looks; raises to end the wait early (the worker is stopping
                or lost its claim), and the exception propagates.
        """
        ...
