"""The ``speechkit`` provider: Yandex SpeechKit v3 asynchronous recognition over REST.

* submit: ``POST {endpoint}/stt/v3/recognizeFileAsync`` with the audio as Ogg Opus, inline
  (``content``, base64) or as an Object Storage link (``uri``); the answer is an Operation whose
  ``id`` the provider assigns;
* poll: ``GET {operation_endpoint}/operations/{id}`` until ``done``; an ``error`` (which may come
  before ``done``) ends the operation;
* download: ``GET {endpoint}/stt/v3/getRecognition?operation_id={id}``: a stream of concatenated
  JSON objects ``{"result": StreamingResponse}`` (neither one JSON document nor strictly one per
  line), stored as is (D2) and parsed with a streaming decoder.

Authorization is ``Api-Key <key>`` or ``Bearer <IAM token>``. There is no idempotency key: a
submit whose answer is lost is never repeated on its own (D12). Operation checks are limited to
``poll_quota_per_hour`` per process (SpeechKit allows 2,500 an hour per account); the first check
comes after about 10 s per minute of audio, the next ones ever further apart up to 2 minutes.
Results are kept by SpeechKit for 3 days: an answer of "not found" is ``result_expired``.
"""

from __future__ import annotations

import base64
import collections
import json
import threading
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx

from conveyor.clock import Clock, SystemClock
from conveyor.providers.backends.speechkit import SpeechKitSettings
from conveyor.providers.base import (
    PollResult,
    ProviderBusy,
    ProviderRejected,
    RecognitionRequest,
    Segment,
    Submission,
    SubmitOutcomeUnknown,
    Transcript,
    Word,
)
from conveyor.providers.halts import ProviderHalt
from conveyor.providers.http import classify_submit, get_or_busy, read_secret, scrub
from conveyor.providers.opus import encode_opus
from conveyor.providers.timing import split_at_pauses, words_of

__all__ = ["LANGUAGES", "SpeechKitProvider", "iter_stream"]

LANGUAGES: dict[str, str] = {
    "ru": "ru-RU", "en": "en-US", "de": "de-DE", "fr": "fr-FR", "es": "es-ES", "it": "it-IT",
    "pl": "pl-PL", "tr": "tr-TR", "kk": "kk-KZ", "uz": "uz-UZ", "he": "he-IL", "pt": "pt-BR",
    "nl": "nl-NL", "fi": "fi-FI", "sv": "sv-SE",
}  # fmt: skip
"""ISO 639-1 code → the language code SpeechKit expects."""

_MAX_POLL_GAP = 120.0  # seconds between checks of a long-running operation, at most
_MIN_FIRST_POLL = 5.0
_SECONDS_PER_AUDIO_SECOND = 10.0 / 60.0  # about 10 s of work per minute of mono audio
_HOUR = 3600.0


def iter_stream(raw: bytes) -> Iterator[Any]:
    """The JSON values of a concatenated JSON stream (whitespace between them is optional).

    Raises:
        ValueError: the stream is not valid UTF-8 or holds something that is not JSON.
    """
    text = raw.decode("utf-8")
    decoder = json.JSONDecoder()
    at = 0
    while True:
        while at < len(text) and text[at].isspace():
            at += 1
        if at == len(text):
            return
        value, at = decoder.raw_decode(text, at)
        yield value


class SpeechKitProvider:
    """Recognition by Yandex SpeechKit v3 (see the module docstring).

    Args:
        settings: ``[transcription.speechkit]``.
        work_dir: where the Opus file is made before an inline upload.
        clock: time for the poll quota.
        transport: an httpx transport (tests), default a real network one.

    Raises:
        ConfigError: no credential in ``key_file`` or the ``key_env`` variable.
    """

    name = "speechkit"
    idempotent_submit = False
    hears_channels_apart = False
    languages = frozenset(LANGUAGES)

    def __init__(
        self,
        settings: SpeechKitSettings,
        work_dir: Path,
        *,
        clock: Clock | None = None,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.model = settings.model
        self._settings = settings
        self._work_dir = work_dir
        self._clock: Clock = clock or SystemClock()
        key = read_secret(settings.key_env, settings.key_file, what="[transcription.speechkit]")
        assert key is not None
        self._key = key
        scheme = "Api-Key" if settings.auth == "api_key" else "Bearer"
        self._client = httpx.Client(
            headers={"Authorization": f"{scheme} {key}"},
            timeout=httpx.Timeout(settings.timeout, connect=min(10.0, settings.timeout)),
            transport=transport,
        )
        self._checks: collections.deque[float] = collections.deque()
        self._quota = threading.Lock()

    # -- protocol -----------------------------------------------------------------------------

    def submit(self, audio: Path, *, operation_id: str, request: RecognitionRequest) -> Submission:
        """Start an asynchronous recognition; returns SpeechKit's operation id.

        Raises:
            ProviderBusy, SubmitOutcomeUnknown, ProviderRejected: see :mod:`.http`.
        """
        model: dict[str, Any] = {
            "model": self.model,
            "audioFormat": {"containerAudio": {"containerAudioType": "OGG_OPUS"}},
            "textNormalization": {"textNormalization": "TEXT_NORMALIZATION_ENABLED"},
        }
        if request.language is not None:
            if request.language not in LANGUAGES:
                raise ProviderRejected(
                    ProviderHalt.UNSUPPORTED_LANGUAGE,
                    f"SpeechKit does not recognise the language {request.language!r}; "
                    f"it knows {', '.join(sorted(LANGUAGES))}",
                )
            model["languageRestriction"] = {
                "restrictionType": "WHITELIST",
                "languageCode": [LANGUAGES[request.language]],
            }
        body: dict[str, Any] = {"recognitionModel": model}
        if self._settings.audio_uri is not None and request.object_key is not None:
            source = self._settings.audio_uri + request.object_key
            body["uri"] = source
        else:
            source = "inline"
            self._work_dir.mkdir(parents=True, exist_ok=True)
            encoded = self._work_dir / f"{operation_id}.ogg"
            try:
                encode_opus(audio, encoded)
                body["content"] = base64.b64encode(encoded.read_bytes()).decode("ascii")
            finally:
                encoded.unlink(missing_ok=True)
        url = self._settings.endpoint.rstrip("/") + "/stt/v3/recognizeFileAsync"
        response = classify_submit(
            self.name, lambda: self._client.post(url, json=body), secret=self._key
        )
        try:
            operation = response.json()
            provider_id = str(operation["id"])
        except (ValueError, KeyError, TypeError) as exc:
            raise SubmitOutcomeUnknown(
                f"SpeechKit answered HTTP {response.status_code} without an operation id: "
                + scrub(response.text[:300], self._key)
            ) from exc
        return Submission(operation_id=provider_id, source_url=source)

    def poll(self, operation_id: str) -> PollResult:
        """Check the operation (within the quota) and download its result once it is done.

        Returns ``running`` with ``retry_after`` when the quota is used up.

        Raises:
            ProviderBusy: SpeechKit could not be asked (down, 429, 5xx); ask again later.
        """
        wait = self._take_check()
        if wait is not None:
            return PollResult("running", retry_after=wait)
        url = f"{self._settings.operation_endpoint.rstrip('/')}/operations/{operation_id}"
        response = get_or_busy(self.name, lambda: self._client.get(url), secret=self._key)
        if response.status_code == 404:
            return PollResult(
                "failed",
                error=f"SpeechKit no longer knows operation {operation_id} (results are kept "
                "3 days)",
                halt_reason=ProviderHalt.RESULT_EXPIRED,
            )
        operation = self._json(response)
        error = operation.get("error")
        if error:
            # An error may come before ``done``: the operation is over either way.
            return PollResult(
                "failed",
                error=_error_text(operation_id, operation, self._key),
                halt_reason=ProviderHalt.PROVIDER_ERROR,
            )
        if not operation.get("done"):
            return PollResult("running")
        return self._download(operation_id)

    def parse(self, raw: bytes) -> Transcript:
        """Turn a getRecognition stream into a transcript.

        The last ``final`` of each (channel, final index) counts; a ``finalRefinement`` with
        normalised text replaces its final's text. ``partial`` and other events are ignored.
        Channels are labelled (``channel`` on each segment) when there is more than one.

        Raises:
            ValueError: ``raw`` is not a concatenated JSON stream of SpeechKit results.
        """
        finals: dict[tuple[str, int], dict[str, Any]] = {}
        refined: dict[tuple[str, int], str] = {}
        counters: dict[str, int] = collections.defaultdict(int)
        try:
            for event in iter_stream(raw):
                result = event["result"]
                channel = str(result.get("channelTag", "0"))
                if "final" in result:
                    final = result["final"]
                    channel = str(final.get("channelTag", channel))
                    alternatives = final.get("alternatives") or []
                    index = counters[channel]
                    counters[channel] += 1
                    if alternatives:
                        finals[(channel, index)] = alternatives[0]
                elif "finalRefinement" in result:
                    refinement = result["finalRefinement"]
                    alternatives = refinement["normalizedText"].get("alternatives") or []
                    if alternatives:
                        key = (channel, int(refinement["finalIndex"]))
                        refined[key] = str(alternatives[0]["text"])
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(
                f"not a SpeechKit recognition stream: {type(exc).__name__}: {exc}"
            ) from exc
        channels = {channel for channel, _ in finals}
        segments: list[Segment] = []
        languages: list[str] = []
        for key, alternative in finals.items():
            text = refined.get(key, str(alternative.get("text", ""))).strip()
            if not text:
                continue
            language = _language_of(alternative)
            if language is not None and language not in languages:
                languages.append(language)
            segment = Segment(
                start=int(alternative.get("startTimeMs", 0)) / 1000,
                end=int(alternative.get("endTimeMs", 0)) / 1000,
                text=text,
                channel=key[0] if len(channels) > 1 else None,
                language=language,
            )
            parts = split_at_pauses(replace(segment, words=_words(alternative)))
            if key in refined and len(parts) == 1:
                # Word times belong to the raw text, which the refinement rewrote ("twenty
                # five" → "25"): the refined text keeps the words' span, without the words.
                parts = [replace(segment, start=parts[0].start, end=parts[0].end)]
            segments += parts
        segments.sort(key=lambda s: (s.start, s.channel or ""))
        if not segments:
            return Transcript(text="", segments=(), language=None, no_speech=True)
        return Transcript(
            text=" ".join(s.text for s in segments),
            segments=tuple(segments),
            language=languages[0] if languages else None,
            no_speech=False,
            languages=tuple(languages),
        )

    def cancel(self, operation_id: str) -> PollResult:
        """``POST {operation_endpoint}/operations/{id}:cancel`` (the Operation service's Cancel,
        best effort: SpeechKit may refuse it or still be cancelling), read as :meth:`poll` reads
        an Operation. ``running`` carries in ``error`` why the operation may still run."""
        url = f"{self._settings.operation_endpoint.rstrip('/')}/operations/{operation_id}:cancel"
        try:
            response = self._client.post(url)
        except httpx.TransportError as exc:
            return PollResult(
                "running",
                error=scrub(f"the cancel request got no answer ({type(exc).__name__}: {exc})",
                            self._key),
            )  # fmt: skip
        if response.status_code == 404:
            return PollResult("failed", error=f"SpeechKit no longer knows operation {operation_id}")
        if response.status_code >= 300:
            return PollResult(
                "running",
                error=scrub(f"SpeechKit refused the cancel: HTTP {response.status_code}: "
                            f"{' '.join(response.text.split())[:300]}", self._key),
            )  # fmt: skip
        try:
            operation = self._json(response)
        except ProviderBusy as exc:
            return PollResult("running", error=str(exc))
        if operation.get("error"):
            return PollResult("failed", error=_error_text(operation_id, operation, self._key))
        if not operation.get("done"):
            return PollResult(
                "running", error="SpeechKit accepted the cancel but the operation is still running"
            )
        try:
            return self._download(operation_id)  # it finished before the cancel reached it
        except ProviderBusy as exc:
            return PollResult("running", error=f"finished, but the result could not be read: {exc}")

    def discard(self, operation_id: str) -> None:
        """SpeechKit deletes results itself after 3 days; nothing to do."""

    def poll_delay(self, duration: float, waited: float) -> float:
        """First check after about 10 s per minute of audio (at least 5 s), then about as long
        again as already waited, at most 2 minutes apart."""
        first = max(_MIN_FIRST_POLL, duration * _SECONDS_PER_AUDIO_SECOND)
        return min(_MAX_POLL_GAP, max(first, waited))

    def deadline(self, duration: float) -> float:
        """max(1 h, 3 x the audio's length), capped at 24 h (25 h for deferred models)."""
        cap = 25 * _HOUR if self.model.startswith("deferred") else 24 * _HOUR
        return min(cap, max(_HOUR, 3 * duration))

    # -- internals ----------------------------------------------------------------------------

    def _take_check(self) -> float | None:
        """Count one operation check; when the hour's quota is used, seconds until a slot."""
        now = self._clock.now()
        with self._quota:
            while self._checks and self._checks[0] <= now - _HOUR:
                self._checks.popleft()
            if len(self._checks) >= self._settings.poll_quota_per_hour:
                return self._checks[0] + _HOUR - now
            self._checks.append(now)
            return None

    def _download(self, operation_id: str) -> PollResult:
        url = self._settings.endpoint.rstrip("/") + "/stt/v3/getRecognition"
        fetch: Callable[[], httpx.Response] = lambda: self._client.get(  # noqa: E731
            url, params={"operation_id": operation_id}
        )
        response = get_or_busy(self.name, fetch, secret=self._key)
        if response.status_code == 404:
            return PollResult(
                "failed",
                error=f"the result of operation {operation_id} is gone (SpeechKit keeps "
                "results 3 days)",
                halt_reason=ProviderHalt.RESULT_EXPIRED,
            )
        if response.status_code >= 400:
            return PollResult(
                "failed",
                error=scrub(f"getRecognition answered HTTP {response.status_code}: "
                            f"{response.text[:300]}", self._key),
                halt_reason=ProviderHalt.PROVIDER_REJECTED,
            )  # fmt: skip
        if not response.content.strip():
            # done, no error, nothing recognised: PollResult.raw None → provider_no_result.
            return PollResult("done", raw=None)
        return PollResult("done", raw=response.content, content_type="application/json")

    def _json(self, response: httpx.Response) -> dict[str, Any]:
        try:
            document = response.json()
        except ValueError:
            document = None
        if not isinstance(document, dict):
            raise ProviderBusy(
                scrub(f"SpeechKit answered HTTP {response.status_code} with something that is "
                      f"not an Operation: {response.text[:200]}", self._key)
            )  # fmt: skip
        return document


def _language_of(alternative: dict[str, Any]) -> str | None:
    for entry in alternative.get("languages") or []:
        code = str(entry.get("languageCode", ""))
        if code and code != "auto":
            return code.split("-")[0].lower()
    return None


def _error_text(operation_id: str, operation: dict[str, Any], key: str) -> str:
    """An Operation's ``error`` (a google.rpc.Status) as text; code 1 is CANCELLED."""
    error = operation.get("error")
    code = error.get("code") if isinstance(error, dict) else None
    message = error.get("message") if isinstance(error, dict) else error
    return scrub(f"operation {operation_id} failed: code {code}: {message}", key)


def _words(alternative: dict[str, Any]) -> tuple[Word, ...]:
    """An alternative's ``words`` (``text``, ``startTimeMs``, ``endTimeMs``) in seconds."""
    raw = alternative.get("words") or ()
    listed = [
        {"word": w.get("text", ""), "start": w.get("startTimeMs", 0), "end": w.get("endTimeMs", 0)}
        for w in raw
    ]
    return words_of(listed, scale=0.001)
