"""The audio domain: a voice recording goes in, a transcript comes out.

Stages (declared once in :func:`build_audio_domain`, D11)::

    uploaded ─normalize─▶ normalized ─submit─▶ submitted ─collect─▶ transcribed ─finish─▶ done
     (own)                 (own)               (foreign)             (own)

Who moves a record in and out:

* intake (CLI ``ingest``, HTTP upload) creates it at ``uploaded``;
* ``normalize`` decodes the original with PyAV to 16 kHz mono (the original is never modified)
  and advances, or halts with ``not_audio``, ``undecodable``, ``no_audio``, ``empty_audio``,
  ``bad_sample_rate``;
* ``submit`` writes a recognition attempt row and then calls the provider (D12); digital silence
  skips recognition and goes straight to ``transcribed``;
* ``collect`` postpones while the provider works, stores the raw response as an object (D2) and
  advances; a failed operation counts as a failure and is re-submitted as a new attempt;
* ``finish`` turns the raw response into ``texts`` rows (kind ``transcript``) and advances to
  ``done``.

The pipeline writes only the fields listed in ``OWNED_FIELDS``; owner, title, brief and topics
are the owner's (P7). Nothing here contacts the sender (P11).
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Any

from sqlalchemy import Connection

from conveyor.audio import queries
from conveyor.audio.normalize import normalize_audio
from conveyor.config import PipelineSettings, TranscriptionSettings
from conveyor.db.tables import audio_records
from conveyor.objects import LocalStore, file_by_id, put_file_row
from conveyor.pipeline import Advance, Domain, Fail, Halt, Postpone, Stage, StepContext
from conveyor.pipeline.outcomes import Outcome
from conveyor.providers.base import RecognitionProvider

__all__ = ["AUDIO_LANE", "OWNED_FIELDS", "AudioSteps", "build_audio_domain"]

AUDIO_LANE = "audio"
# Seconds of audio below which a recording is treated as empty (10 ms: a single Whisper frame).
MIN_DURATION = 0.01
OWNED_FIELDS = frozenset({"normalized_file_id", "duration", "no_speech", "detected_language"})


class AudioSteps:
    """The audio steps, bound to their services (config passed down, never global).

    Args:
        store: the object store.
        provider: makes the recognition provider, called on first use.
        transcription: ``[transcription]`` settings (default language, poll delay).
        pipeline: ``[pipeline]`` settings (``max_attempts`` bounds provider re-submits).
    """

    def __init__(
        self,
        store: LocalStore,
        provider: Callable[[], RecognitionProvider],
        transcription: TranscriptionSettings,
        pipeline: PipelineSettings,
    ) -> None:
        self.store = store
        self._make_provider = provider
        self.transcription = transcription
        self.pipeline = pipeline

    @cached_property
    def provider(self) -> RecognitionProvider:
        """The recognition provider, built on first use."""
        return self._make_provider()

    def _file_path(self, ctx: StepContext, file_id: int) -> tuple[Path, str]:
        with ctx.engine.connect() as conn:
            row = file_by_id(conn, file_id)
        if row is None:
            raise LookupError(f"object {file_id} is missing from the journal")
        return self.store.path(row["key"]), str(row["key"])

    def normalize(self, ctx: StepContext) -> Outcome:
        """``uploaded`` → ``normalized``: decode to 16 kHz mono WAV, streaming."""
        record = ctx.record
        source, _ = self._file_path(ctx, int(record["original_file_id"]))
        if not source.is_file():
            return Halt("original_missing", f"the original upload is missing from storage: {_}")
        key = f"audio/{record['id']}/normalized.wav"
        with self.store.writer(key) as temp:
            result = normalize_audio(source, temp, raw_pcm=bool(record["raw_pcm"]))
        if result.duration < MIN_DURATION:
            # A few stray samples (e.g. a tiny file read as raw PCM) are not a recording.
            return Halt(
                "empty_audio",
                f"The file holds only {result.duration * 1000:.1f} ms of audio; nothing to "
                "transcribe.",
            )
        stored = self.store.describe(key)
        now = ctx.clock.now()

        def journal(conn: Connection) -> dict[str, Any]:
            file_id = put_file_row(
                conn,
                key=key,
                mime_type="audio/wav",
                format="wav",
                size=stored.size,
                sha256=stored.sha256,
                duration=result.duration,
                now=now,
            )
            return {"normalized_file_id": file_id}

        note = (
            f"normalized {result.duration:.2f} s of {result.codec} "
            f"({result.sample_rate} Hz, {result.channels} ch)"
        )
        return Advance(
            {"duration": result.duration, "no_speech": True if result.silent else None},
            writes=journal,
            note=note + ("; digital silence" if result.silent else ""),
        )

    def _call_provider(self, ctx: StepContext, attempt_id: int, operation_id: str) -> None:
        """Submit the normalized audio under ``operation_id`` and record where the provider
        reads it. Safe to repeat: the provider never starts one operation twice (D12)."""
        record = ctx.record
        audio, _ = self._file_path(ctx, int(record["normalized_file_id"]))
        language = record["language"] or self.transcription.language
        source = self.provider.submit(audio, operation_id=operation_id, language=language)
        ctx.guarded(lambda conn: queries.finish_attempt(conn, attempt_id, source_url=source))

    def _start_attempt(self, ctx: StepContext) -> str:
        record = ctx.record
        operation_id = f"rec{record['id']}-{uuid.uuid4().hex[:16]}"
        now = ctx.clock.now()
        # D12: the attempt row is committed before the provider is called.
        attempt_id = ctx.guarded(
            lambda conn: queries.insert_attempt(
                conn,
                record_id=record["id"],
                provider=self.provider.name,
                operation_id=operation_id,
                claim_token=ctx.claim.token,
                model=self.provider.model,
                state="started",
                created_at=now,
            )
        )
        self._call_provider(ctx, attempt_id, operation_id)
        return operation_id

    def submit(self, ctx: StepContext) -> Outcome:
        """``normalized`` → ``submitted``: attempt row first, then the provider call (D12)."""
        record = ctx.record
        if record["no_speech"]:
            # Digital silence: nothing to recognise, and nothing to pay a provider for.
            return Advance(to="transcribed", note="silent audio: recognition skipped")
        with ctx.engine.connect() as conn:
            attempt = queries.latest_attempt(conn, int(record["id"]))
        if attempt is not None and attempt["state"] == "started":
            # An operation was started before (e.g. the worker died after the provider call):
            # never start a second one; make sure the provider has it, then wait for it.
            if self.provider.poll(attempt["operation_id"]).state == "unknown":
                self._call_provider(ctx, int(attempt["id"]), attempt["operation_id"])
            return Advance(note=f"operation {attempt['operation_id']} already started")
        operation_id = self._start_attempt(ctx)
        return Advance(note=f"submitted to {self.provider.name} as {operation_id}")

    def collect(self, ctx: StepContext) -> Outcome:
        """``submitted`` → ``transcribed``: wait for the operation, keep its raw response (D2)."""
        record = ctx.record
        record_id = int(record["id"])
        with ctx.engine.connect() as conn:
            attempt = queries.latest_attempt(conn, record_id)
            # Failures since the record entered this stage (or was resumed, P9) count.
            failed = queries.count_failed_attempts(
                conn, record_id, float(record["state_entered_at"])
            )
        if attempt is None or attempt["state"] == "failed":
            if failed >= self.pipeline.max_attempts:
                last = attempt["error"] if attempt is not None else "no attempt"
                return Halt(
                    "attempts_exhausted", f"recognition failed {failed} times; last error: {last}"
                )
            self._start_attempt(ctx)
            return Postpone(self.transcription.poll_delay)
        if attempt["state"] == "done":
            return Advance(note="raw response already stored")
        result = self.provider.poll(attempt["operation_id"])
        now = ctx.clock.now()
        if result.state == "running":
            return Postpone(self.transcription.poll_delay)
        if result.state == "unknown" and attempt["source_url"] is None:
            # Killed between writing the attempt and calling the provider: call it now.
            self._call_provider(ctx, int(attempt["id"]), attempt["operation_id"])
            return Postpone(self.transcription.poll_delay)
        if result.state in ("failed", "unknown"):
            error = result.error or "the provider no longer knows this operation"
            ctx.guarded(
                lambda conn: queries.finish_attempt(
                    conn, attempt["id"], state="failed", error=error, finished_at=now
                )
            )
            return Fail(f"recognition failed: {error}")
        raw = result.raw or b""
        key = f"audio/{record_id}/recognition-{attempt['id']}.json"
        stored = self.store.put_stream(key, [raw])

        def keep_raw(conn: Connection) -> None:
            file_id = put_file_row(
                conn,
                key=key,
                mime_type="application/json",
                format="json",
                size=stored.size,
                sha256=stored.sha256,
                now=now,
            )
            queries.finish_attempt(
                conn, attempt["id"], state="done", raw_response_file_id=file_id, finished_at=now
            )

        return Advance(writes=lambda conn: keep_raw(conn), note="recognition done")

    def finish(self, ctx: StepContext) -> Outcome:
        """``transcribed`` → ``done``: raw response → ``texts`` (kind ``transcript``)."""
        record = ctx.record
        record_id = int(record["id"])
        with ctx.engine.connect() as conn:
            attempt = queries.latest_attempt(conn, record_id)
        now = ctx.clock.now()
        if attempt is None or attempt["raw_response_file_id"] is None:
            if not record["no_speech"]:
                return Fail("no stored recognition response to finish from")
            body, segments, language, no_speech = "", [], None, True
        else:
            path, _ = self._file_path(ctx, int(attempt["raw_response_file_id"]))
            transcript = self.provider.parse(path.read_bytes())
            # The raw response is ours now (D2): the provider's copy is no longer needed.
            self.provider.discard(attempt["operation_id"])
            body = transcript.text
            segments = [dataclasses.asdict(s) for s in transcript.segments]
            language, no_speech = transcript.language, transcript.no_speech

        def write_text(conn: Connection) -> None:
            queries.upsert_text(
                conn,
                record_id=record_id,
                kind="transcript",
                body=body,
                segments=segments,
                language=language,
                now=now,
            )

        note = "no speech" if no_speech else f"transcript of {len(body.split())} words"
        return Advance(
            {"no_speech": no_speech, "detected_language": language},
            writes=lambda conn: write_text(conn),
            note=note,
        )


def build_audio_domain(steps: AudioSteps) -> Domain:
    """Declare the audio stages once (D11); leases in seconds, own vs foreign work (D3)."""
    return Domain(
        name="audio",
        table=audio_records,
        stages=[
            Stage("uploaded", steps.normalize, AUDIO_LANE, "own", lease=120, heartbeat=True),
            Stage("normalized", steps.submit, AUDIO_LANE, "own", lease=120),
            Stage("submitted", steps.collect, AUDIO_LANE, "foreign", lease=120),
            Stage("transcribed", steps.finish, AUDIO_LANE, "own", lease=120),
            Stage("done"),
        ],
        order_by=[audio_records.c.created_at],
        owned_fields=OWNED_FIELDS,
    )
