"""The ``openai`` provider: OpenAI's ``POST /v1/audio/transcriptions`` or any server speaking it
(speaches, LocalAI, whisper.cpp's server with ``--inference-path``).

The call is synchronous: ``submit`` returns the raw response and nothing is polled. The recording
is sent as Ogg Opus; one longer than a request may carry (OpenAI: 25 MiB) is cut at its quietest
moments into chunks, each sent on its own, and the segment times of each are shifted by its start.
Responses of chunks already recognised are kept in ``<work_dir>/<digest>/`` until the whole answer
is assembled, so a retry after a refusal part-way never pays for them again.

The stored raw response (D2)::

    {"provider": "openai", "model": "whisper-1",
     "chunks": [{"start": 0.0, "end": 5898.3, "response": {verbose_json or json}}, ...]}

There is no idempotency key: a request whose answer is lost is not repeated on its own (D12).
"""

from __future__ import annotations

import hashlib
import json
import math
import shutil
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx

from conveyor.files import write_atomic
from conveyor.providers.backends.openai import OpenAISettings
from conveyor.providers.base import (
    PollResult,
    ProviderRejected,
    RecognitionRequest,
    Segment,
    Submission,
    SubmitOutcomeUnknown,
    Transcript,
)
from conveyor.providers.gates import decoded_speech, only_filler, only_markup
from conveyor.providers.halts import ProviderHalt
from conveyor.providers.http import classify_submit, read_secret, scrub
from conveyor.providers.opus import encode_opus, plan_chunks
from conveyor.providers.timing import split_at_pauses, words_of, words_within

__all__ = ["OpenAICompatibleProvider", "language_code"]

# Room for the multipart envelope and the Ogg pages' variable size under the request limit.
_HEADROOM = 0.85
# gpt-4o transcription models refuse long inputs (about 25 minutes); stay well under.
_GPT4O_MAX_SECONDS = 1400.0
# Whisper's language names as verbose_json reports them ("english"), for the common ones.
_LANGUAGE_NAMES = {
    "english": "en", "russian": "ru", "german": "de", "french": "fr", "spanish": "es",
    "italian": "it", "portuguese": "pt", "dutch": "nl", "polish": "pl", "ukrainian": "uk",
    "turkish": "tr", "chinese": "zh", "japanese": "ja", "korean": "ko", "arabic": "ar",
    "hindi": "hi", "swedish": "sv", "finnish": "fi", "czech": "cs", "hebrew": "he",
    "kazakh": "kk", "uzbek": "uz", "belarusian": "be", "greek": "el", "danish": "da",
    "norwegian": "no", "hungarian": "hu", "romanian": "ro", "bulgarian": "bg",
}  # fmt: skip


def language_code(value: object, known: frozenset[str]) -> str | None:
    """An ISO 639-1 code from a response's ``language`` (``"en"``, ``"english"``), or None."""
    if not isinstance(value, str):
        return None
    value = value.strip().lower()
    if value in known:
        return value
    return _LANGUAGE_NAMES.get(value)


class OpenAICompatibleProvider:
    """Recognition by an OpenAI-compatible server (see the module docstring).

    Args:
        settings: ``[transcription.openai]``.
        languages: ISO 639-1 codes accepted (Whisper's).
        work_dir: where chunk answers wait until the whole recording is recognised.
        transport: an httpx transport (tests), default a real network one.

    Raises:
        ConfigError: ``key_file`` is unreadable. A missing key is allowed (self-hosted servers).
    """

    name = "openai"
    idempotent_submit = False
    hears_channels_apart = False

    def __init__(
        self,
        settings: OpenAISettings,
        languages: frozenset[str],
        work_dir: Path,
        *,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.model = settings.model
        self.languages = languages
        self._settings = settings
        self._work_dir = work_dir
        self._key = read_secret(
            settings.key_env, settings.key_file, what="[transcription.openai]", required=False
        )
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        self._client = httpx.Client(
            base_url=settings.base_url.rstrip("/") + "/",
            headers=headers,
            timeout=httpx.Timeout(settings.timeout, connect=min(10.0, settings.timeout)),
            transport=transport,
        )

    # -- protocol -----------------------------------------------------------------------------

    def submit(self, audio: Path, *, operation_id: str, request: RecognitionRequest) -> Submission:
        """Recognise ``audio`` now, chunk by chunk; returns the assembled raw response.

        Raises:
            ProviderBusy: the server started nothing (unreachable, 429, 503, 500).
            SubmitOutcomeUnknown: a request may have been billed without an answer we can read.
            ProviderRejected: credentials, address/model, size or format refused.
        """
        cache = self._cache_dir(audio, request)
        cache.mkdir(parents=True, exist_ok=True)
        chunks = self._plan(audio)
        answers: list[dict[str, Any]] = []
        with tempfile.TemporaryDirectory(prefix="openai-", dir=cache) as scratch:
            for index, (start, end) in enumerate(chunks):
                kept = cache / f"chunk-{index:04d}-{start:.3f}-{end:.3f}.json"
                if kept.is_file():
                    response = json.loads(kept.read_bytes())
                else:
                    encoded = Path(scratch) / f"chunk-{index}.ogg"
                    encode_opus(
                        audio, encoded, start=start, end=end, bitrate=self._settings.bitrate
                    )
                    response = self._transcribe(encoded, request)
                    write_atomic(kept, json.dumps(response, ensure_ascii=False).encode())
                answers.append({"start": start, "end": end, "response": response})
        raw = json.dumps(
            {"provider": "openai", "model": self.model, "chunks": answers}, ensure_ascii=False
        ).encode()
        shutil.rmtree(cache, ignore_errors=True)
        return Submission(operation_id=operation_id, source_url="inline", raw=raw)

    def poll(self, operation_id: str) -> PollResult:
        """Never needed: answers come from ``submit``. Reports ``unknown``."""
        return PollResult("unknown")

    def parse(self, raw: bytes) -> Transcript:
        """Turn the stored response into a transcript, never inventing speech.

        Segments the response's own fields mark as silence or failed decoding are dropped (see
        :mod:`conveyor.providers.gates`), as are segments of markup only (``[BLANK_AUDIO]``).
        Segment times are shifted by their chunk's start; LocalAI's nanosecond times are
        recognised by their size and converted.

        Raises:
            ValueError: ``raw`` is not a response of this provider.
        """
        try:
            document = json.loads(raw)
            chunks = document["chunks"]
            segments: list[Segment] = []
            languages: list[str] = []
            for chunk in chunks:
                segments += self._chunk_segments(chunk, languages)
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ValueError(
                f"not an OpenAI-compatible response: {type(exc).__name__}: {exc}"
            ) from exc
        text = " ".join(s.text for s in segments).strip()
        if only_filler(text):
            return Transcript(text="", segments=(), language=None, no_speech=True)
        return Transcript(
            text=text,
            segments=tuple(segments),
            language=languages[0] if languages else None,
            no_speech=False,
            languages=tuple(languages),
        )

    def discard(self, operation_id: str) -> None:
        """Nothing is kept at the provider."""

    def cancel(self, operation_id: str) -> PollResult:
        """Never needed (nothing runs after the call returns): ``unknown``."""
        return PollResult("unknown")

    def poll_delay(self, duration: float, waited: float) -> float:
        """Never polled; one second for form's sake."""
        return 1.0

    def deadline(self, duration: float) -> float:
        """Never polled: there is nothing running to give up."""
        return math.inf

    # -- internals ----------------------------------------------------------------------------

    def _plan(self, audio: Path) -> list[tuple[float, float]]:
        limit = self._settings.max_request_bytes * _HEADROOM / (self._settings.bitrate / 8)
        if self.model.startswith("gpt-4o"):
            limit = min(limit, _GPT4O_MAX_SECONDS)
        return plan_chunks(audio, limit, search=min(60.0, limit / 4))

    def _cache_dir(self, audio: Path, request: RecognitionRequest) -> Path:
        stat = audio.stat()
        # The stored object's key names the audio across retries (each submit reads a fresh
        # working copy with its own path and time); a bare file is named by path and time.
        if request.object_key is not None:
            identity: list[object] = [request.object_key]
        else:
            identity = [str(audio.resolve()), stat.st_mtime_ns]
        key = json.dumps(
            [*identity, stat.st_size, self.model, request.language,
             request.hints, self._settings.base_url, self._settings.max_request_bytes]
        )  # fmt: skip
        return self._work_dir / hashlib.sha256(key.encode()).hexdigest()[:24]

    def _verbose(self) -> bool:
        # The gpt-4o transcription models answer in ``json`` only (no segments).
        return not self.model.startswith("gpt-4o")

    def _transcribe(self, encoded: Path, request: RecognitionRequest) -> dict[str, Any]:
        data: dict[str, str | list[str]] = {
            "model": self.model,
            "response_format": "verbose_json" if self._verbose() else "json",
        }
        if self._verbose():
            # Word times as well: segments are timed by their words and split at pauses.
            data["timestamp_granularities[]"] = ["segment", "word"]
        if request.language:
            data["language"] = request.language
        if request.hints:
            data["prompt"] = request.hints
        with encoded.open("rb") as body:
            response = classify_submit(
                self.name,
                lambda: self._client.post(
                    "audio/transcriptions",
                    data=data,
                    files={"file": ("audio.ogg", body, "audio/ogg")},
                ),
                secret=self._key,
            )
        try:
            document = response.json()
        except ValueError:
            document = None
        if isinstance(document, dict) and document.get("error") is not None:
            # whisper.cpp's server reports failures as HTTP 200 {"error": "..."}.
            raise ProviderRejected(
                ProviderHalt.PROVIDER_REJECTED,
                scrub(f"the server answered with an error: {document['error']}"[:400], self._key),
            )
        if not isinstance(document, dict) or not isinstance(document.get("text"), str):
            # An answer we cannot read (a proxy's page, a cut body): the call may have been
            # billed, and repeating it may be billed again.
            quoted = scrub(" ".join(response.text.split())[:300], self._key)
            raise SubmitOutcomeUnknown(
                f"the server answered HTTP {response.status_code} without a transcript: {quoted}"
            )
        return document

    def _chunk_segments(self, chunk: dict[str, Any], languages: list[str]) -> list[Segment]:
        offset = float(chunk["start"])
        length = float(chunk["end"]) - offset
        response = chunk["response"]
        language = language_code(response.get("language"), self.languages)
        if language is not None and language not in languages:
            languages.append(language)
        raw_segments = response.get("segments")
        if raw_segments is None:  # plain ``json``: one stretch for the whole chunk
            text = str(response["text"]).strip()
            return [Segment(offset, offset + length, text, language=language)] if text else []
        # LocalAI reports nanoseconds; seconds never exceed the chunk's length by this much.
        scale = 1e-9 if any(float(s["end"]) > (length + 60) * 1000 for s in raw_segments) else 1.0
        # Word times: OpenAI lists them for the whole response, some servers per segment.
        words = words_of(response.get("words") or (), offset, scale)
        kept = []
        for s in raw_segments:
            text = str(s["text"]).strip()
            if not decoded_speech(s) or not text or only_markup(text):
                continue
            start = offset + float(s["start"]) * scale
            end = offset + float(s["end"]) * scale
            segment = Segment(start, end, text, language=language)
            own = words_of(s.get("words") or (), offset, scale)
            segment = replace(segment, words=own) if own else words_within(segment, words)
            kept += split_at_pauses(segment)
        return kept
