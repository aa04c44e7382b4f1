"""The audio steps: normalize and finish here, submit and collect from
:mod:`conveyor.audio.recognition`.

* ``normalize`` decodes the original with PyAV to 16 kHz mono (the original is never modified)
  and advances, or halts with ``not_audio``, ``undecodable``, ``no_audio``, ``empty_audio``,
  ``bad_sample_rate``;
* ``finish`` turns the raw response into ``texts`` rows (kind ``transcript``) and advances to
  ``done``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from contextlib import ExitStack
from typing import Any

from sqlalchemy import Connection

from conveyor.audio import queries
from conveyor.audio.halts import AudioHalt
from conveyor.audio.normalize import normalize_audio
from conveyor.audio.recognition import RecognitionSteps
from conveyor.audio.stages import AUDIO_KEYS
from conveyor.kinds import TextKind
from conveyor.objects import put_file_row
from conveyor.pipeline import Advance, Fail, Halt, StepContext
from conveyor.pipeline.outcomes import Outcome

__all__ = ["MIN_DURATION", "AudioSteps"]

# Seconds of audio below which a recording is treated as empty (10 ms: a single Whisper frame).
MIN_DURATION = 0.01


class AudioSteps(RecognitionSteps):
    """The audio steps, bound to their services (see :class:`RecognitionSteps` for the
    arguments)."""

    def _channels_apart(self, record: Mapping[str, Any]) -> bool:
        # The record's own choice (made at upload), else the installation's default. Only a
        # provider that labels channels gets them apart; others hear the mix.
        chosen = record["channels"] or self.transcription.channels
        return chosen == "separate" and self.provider.hears_channels_apart

    def normalize(self, ctx: StepContext) -> Outcome:
        """``uploaded`` → ``normalized``: decode to 16 kHz mono WAV, streaming."""
        record = ctx.record
        original = self._file_key(ctx, int(record["original_file_id"]))
        # A claim-unique key: a holder whose claim expired can never overwrite the object of
        # the live holder; the journal names this one only if our fenced save lands.
        key = AUDIO_KEYS.produced(record["id"], f"normalized-{ctx.claim.token[:16]}.wav")
        with ExitStack() as stack:
            try:
                source = stack.enter_context(self.store.local_copy(original))
            except FileNotFoundError:
                return Halt(
                    AudioHalt.ORIGINAL_MISSING,
                    f"the original upload is missing from storage: {original}",
                )
            work = stack.enter_context(self.store.scratch())
            result = normalize_audio(
                source,
                work / "normalized.wav",
                raw_pcm=bool(record["raw_pcm"]),
                separate_channels=self._channels_apart(record),
            )
            if result.duration < MIN_DURATION:
                # A few stray samples (e.g. a tiny file read as raw PCM) are not a recording.
                return Halt(
                    AudioHalt.EMPTY_AUDIO,
                    f"The file holds only {result.duration * 1000:.1f} ms of audio; nothing "
                    "to transcribe.",
                )
            ctx.check()
            stored = self.store.put_file(ctx.produced_object(key), work / "normalized.wav")
        now = ctx.now()
        earlier = record["normalized_file_id"]

        def journal(conn: Connection) -> dict[str, Any]:
            file_id = put_file_row(
                conn,
                replaces=None if earlier is None else int(earlier),
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
        if result.tracks > 1:
            how = "kept apart" if result.output_channels > 1 else "mixed"
            note += f"; {result.tracks} audio tracks {how}"
        elif result.output_channels > 1:
            note += f"; {result.output_channels} channels kept apart"
        if record["channels"] == "separate" and not self._channels_apart(record):
            note += f"; channels mixed: {self.provider.name} recognises one mix only"
        if result.cancelled_mix is not None:
            note += (
                f"; the channels cancel each other when mixed (opposite phase): channel "
                f"{result.cancelled_mix} heard alone"
            )
        if result.damaged is not None:
            note += f"; {result.damaged}"
        if result.skipped_tracks:
            note += f"; {result.skipped_tracks} audio track(s) left out: no decoder for their codec"
        return Advance(
            {"duration": result.duration, "no_speech": True if result.silent else None},
            writes=journal,
            note=note + ("; digital silence" if result.silent else ""),
        )

    def finish(self, ctx: StepContext) -> Outcome:
        """``transcribed`` → ``done``: raw response → ``texts`` (kind ``transcript``)."""
        record = ctx.record
        record_id = int(record["id"])
        with ctx.engine.connect() as conn:
            attempt = queries.latest_attempt(conn, record_id)
        now = ctx.now()
        if attempt is None or attempt["raw_response_file_id"] is None:
            if not record["no_speech"]:
                return Fail("no stored recognition response to finish from")
            body, segments, language, no_speech = "", [], None, True
            detected: str | None = None
        else:
            key = self._file_key(ctx, int(attempt["raw_response_file_id"]))
            with self.store.open(key) as stored:
                raw = stored.read()
            try:
                transcript = self.provider.parse(raw)
            except ValueError as exc:
                # The response is stored (D2): after a fix, resume parses it again for free.
                return Halt(
                    AudioHalt.UNREADABLE_RESPONSE,
                    f"the stored {self.provider.name} response cannot be read: {exc}",
                )
            # The raw response is ours now (D2): the provider's copy is no longer needed.
            self.provider.discard(attempt["operation_id"])
            body = transcript.text
            segments = [dataclasses.asdict(s) for s in transcript.segments]
            language, no_speech = transcript.language, transcript.no_speech
            detected = language
            if len(transcript.languages) > 1:
                # A recording that switches language: the card lists each, in order heard.
                detected = ",".join(transcript.languages)

        def write_text(conn: Connection) -> None:
            queries.upsert_text(
                conn,
                record_id=record_id,
                kind=TextKind.TRANSCRIPT,
                body=body,
                segments=segments,
                language=language,
                now=now,
            )

        note = "no speech" if no_speech else f"transcript of {len(body.split())} words"
        if detected and "," in detected:
            note += f" in {detected.replace(',', ', ')}"
        return Advance(
            {"no_speech": no_speech, "detected_language": detected},
            writes=lambda conn: write_text(conn),
            note=note,
        )
