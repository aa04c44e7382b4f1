"""Recognition: the audio steps that talk to the provider.

* ``submit`` writes a recognition attempt row and then calls the provider (D12); digital silence
  skips recognition and goes straight to ``transcribed``;
* ``collect`` postpones while the provider works, stores the raw response as an object (D2) and
  advances; a failed operation counts as a failure and is re-submitted as a new attempt.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Sequence
from functools import cached_property
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, Engine, RowMapping

from conveyor.audio import queries
from conveyor.audio.halts import AudioHalt
from conveyor.audio.stages import AUDIO_KEYS
from conveyor.audio.vocabulary import merge_hints, owner_vocabulary
from conveyor.config import PipelineSettings, TranscriptionSettings
from conveyor.objects import ObjectStore, discard_unjournaled, file_by_id, put_file_row
from conveyor.pipeline import Advance, Fail, Halt, Postpone, StepContext
from conveyor.pipeline.halts import EngineHalt
from conveyor.pipeline.outcomes import Outcome
from conveyor.pipeline.redact import redact
from conveyor.providers.base import (
    LongPolling,
    ProviderBusy,
    ProviderRejected,
    RecognitionProvider,
    RecognitionRequest,
    SubmitOutcomeUnknown,
)

__all__ = ["RecognitionSteps"]


class RecognitionSteps:
    """The recognition steps ``submit`` and ``collect`` (D2, D12), bound to their services
    (config passed down, never global); :class:`conveyor.audio.steps.AudioSteps` adds the rest.

    Args:
        store: the object store.
        provider: makes the recognition provider, called on first use.
        transcription: ``[transcription]`` settings (default language, poll delay).
        pipeline: ``[pipeline]`` settings (``max_attempts`` bounds provider re-submits).
    """

    def __init__(
        self,
        store: ObjectStore,
        provider: Callable[[], RecognitionProvider],
        transcription: TranscriptionSettings,
        pipeline: PipelineSettings,
    ) -> None:
        self.store = store
        self._make_provider = provider
        self.transcription = transcription
        self.pipeline = pipeline

    def discard(self, engine: Engine, keys: Sequence[str]) -> None:
        """Remove the objects among ``keys`` that have no journal row (a halt, a deletion)."""
        discard_unjournaled(engine, self.store, keys)

    @cached_property
    def provider(self) -> RecognitionProvider:
        """The recognition provider, built on first use."""
        return self._make_provider()

    def _file_key(self, ctx: StepContext, file_id: int) -> str:
        with ctx.engine.connect() as conn:
            row = file_by_id(conn, file_id)
        if row is None:
            raise LookupError(f"object {file_id} is missing from the journal")
        return str(row["key"])

    def _request(self, ctx: StepContext, object_key: str, audio: Path) -> RecognitionRequest:
        record = ctx.record
        with ctx.engine.connect() as conn:
            own = [
                t["body"] for t in queries.texts_of(conn, int(record["id"])) if t["kind"] == "hints"
            ]
            # The owner's vocabulary as it is now: a change applies to recordings still waiting.
            standing = owner_vocabulary(conn, str(record["owner"]))
        return RecognitionRequest(
            language=record["language"] or self.transcription.language,
            hints=merge_hints(standing, own[0] if own else None),
            duration=float(record["duration"] or 0.0),
            object_key=object_key,
            channels=_wav_channels(audio),
        )

    def _start_attempt(self, ctx: StepContext, *, then: Outcome) -> Outcome:
        """Write a new attempt row, then call the provider (D12); ``then`` once it is accepted."""
        record = ctx.record
        key = f"rec{record['id']}-{uuid.uuid4().hex[:16]}"
        now = ctx.now()
        attempt_id = ctx.guarded(
            lambda conn: queries.insert_attempt(
                conn,
                record_id=record["id"],
                provider=self.provider.name,
                operation_id=key,
                claim_token=ctx.claim.token,
                model=self.provider.model,
                state="started",
                created_at=now,
            )
        )
        return self._call_provider(ctx, attempt_id, key, then=then)

    def _call_provider(
        self, ctx: StepContext, attempt_id: int, key: str, *, then: Outcome
    ) -> Outcome:
        """Submit the normalized audio for the attempt ``attempt_id`` keyed ``key``.

        The attempt row exists already (D12). What the provider answered is written on the row
        whether or not the claim still holds: it is a fact about money spent, not a step result.
        """
        record = ctx.record
        object_key = self._file_key(ctx, int(record["normalized_file_id"]))
        provider = self.provider
        try:
            # Providers read the audio during submit (the local one copies it to its job).
            with self.store.local_copy(object_key) as audio:
                request = self._request(ctx, object_key, audio)
                submission = provider.submit(audio, operation_id=key, request=request)
        except ProviderBusy as exc:
            self._mark(ctx, attempt_id, state="refused", error=str(exc))
            delay = self._busy_delay(ctx, exc.retry_after)
            note = None
            if self._new_refusal(ctx, attempt_id):
                note = f"waiting: {redact(str(exc))}; retrying in {delay:.0f} s"
            return Postpone(delay, note=note)
        except SubmitOutcomeUnknown as exc:
            if provider.idempotent_submit:
                # Repeating the same key starts nothing new: an ordinary retry is safe.
                return Fail(f"submit to {provider.name} got no answer: {exc}")
            self._mark(ctx, attempt_id, state="submit_unknown", error=str(exc))
            return Halt(
                AudioHalt.SUBMIT_UNKNOWN, _submit_unknown_text(provider.name, key, str(exc))
            )
        except ProviderRejected as exc:
            self._mark(ctx, attempt_id, state="failed", error=str(exc))
            return Halt(exc.reason, f"{provider.name} refused the recording: {exc}")
        self._mark(
            ctx,
            attempt_id,
            state="submitted",
            operation_id=submission.operation_id,
            source_url=submission.source_url,
            finished_at=None,
        )
        if submission.raw is None:
            return then
        # A synchronous provider answered with the transcript: keep it before anything else (D2).
        keep = self._keep_raw(ctx, attempt_id, submission.raw, submission.content_type)
        return Advance(to="transcribed", writes=keep, note=f"recognised by {provider.name}")

    def _mark(self, ctx: StepContext, attempt_id: int, **values: Any) -> None:
        values.setdefault("finished_at", ctx.now())
        if "error" in values:
            values["error"] = redact(values["error"])
        with ctx.engine.begin() as conn:
            queries.finish_attempt(conn, attempt_id, **values)

    def _new_refusal(self, ctx: StepContext, attempt_id: int) -> bool:
        """Whether the refusal of ``attempt_id`` begins a wait: the try before it in this stage
        was not refused, or was refused for another reason. Only those are journaled."""
        record = ctx.record
        with ctx.engine.connect() as conn:
            attempts = queries.attempts_of(conn, int(record["id"]))
        tried = [a for a in attempts if int(a["id"]) <= attempt_id]
        if len(tried) < 2:
            return True
        now, before = tried[-1], tried[-2]
        since = float(record["state_entered_at"])
        return (
            before["state"] != "refused"
            or before["finished_at"] is None
            or float(before["finished_at"]) < since
            or before["error"] != now["error"]
        )

    def _busy_delay(self, ctx: StepContext, retry_after: float | None) -> float:
        """Back-off for a provider that started nothing: its ``Retry-After``, else doubling per
        refusal since the record entered its stage, capped at ``[pipeline] retry_max``."""
        record = ctx.record
        with ctx.engine.connect() as conn:
            refused = queries.count_attempts(
                conn, int(record["id"]), "refused", float(record["state_entered_at"])
            )
        if retry_after is not None:
            return max(float(retry_after), 0.0)
        return float(
            min(self.pipeline.retry_max, self.pipeline.retry_base * 2 ** max(0, refused - 1))
        )

    def _keep_raw(
        self, ctx: StepContext, attempt_id: int, raw: bytes, content_type: str
    ) -> Callable[[Connection], None]:
        """Store ``raw`` as an object now; the returned writes journal it and finish the attempt."""
        record_id = int(ctx.record["id"])
        token = ctx.claim.token[:16]
        key = ctx.produced_object(
            AUDIO_KEYS.produced(record_id, f"recognition-{attempt_id}-{token}.json")
        )
        stored = self.store.put(key, [raw])
        now = ctx.now()

        def writes(conn: Connection) -> None:
            file_id = put_file_row(
                conn,
                key=key,
                mime_type=content_type,
                format="json",
                size=stored.size,
                sha256=stored.sha256,
                now=now,
            )
            queries.finish_attempt(
                conn, attempt_id, state="done", raw_response_file_id=file_id, finished_at=now
            )

        return writes

    def _unanswered(self, ctx: StepContext, attempt: RowMapping, *, then: Outcome) -> Outcome:
        """An attempt row whose submit never reported back (the worker died mid-call)."""
        provider = self.provider
        if provider.idempotent_submit:
            return self._call_provider(ctx, int(attempt["id"]), attempt["operation_id"], then=then)
        error = "the worker stopped while the submit was in flight; its outcome is unknown"
        self._mark(ctx, int(attempt["id"]), state="submit_unknown", error=error)
        return Halt(
            AudioHalt.SUBMIT_UNKNOWN,
            _submit_unknown_text(provider.name, attempt["operation_id"], error),
        )

    def submit(self, ctx: StepContext) -> Outcome:
        """``normalized`` → ``submitted``: attempt row first, then the provider call (D12)."""
        record = ctx.record
        if record["no_speech"]:
            # Silence: nothing to recognise, and nothing to pay a provider for.
            return Advance(to="transcribed", note="silent audio: recognition skipped")
        with ctx.engine.connect() as conn:
            attempt = queries.latest_attempt(conn, int(record["id"]))
        advance = Advance(note=f"submitted to {self.provider.name}")
        if attempt is not None:
            state = _attempt_state(attempt)
            if state == "started":
                return self._unanswered(ctx, attempt, then=advance)
            if state in ("submitted", "done"):
                # Accepted before (the worker died before advancing): never start a second one.
                return Advance(note=f"operation {attempt['operation_id']} already started")
        return self._start_attempt(ctx, then=advance)

    def collect(self, ctx: StepContext) -> Outcome:
        """``submitted`` → ``transcribed``: wait for the operation, keep its raw response (D2)."""
        record = ctx.record
        record_id = int(record["id"])
        since = float(record["state_entered_at"])
        with ctx.engine.connect() as conn:
            attempt = queries.latest_attempt(conn, record_id)
            # Failures since the record entered this stage (or was resumed, P9) count.
            failed = queries.count_attempts(conn, record_id, "failed", since)
        provider = self.provider
        duration = float(record["duration"] or 0.0)
        state = _attempt_state(attempt) if attempt is not None else "failed"
        if attempt is None or state in ("failed", "refused", "submit_unknown"):
            if state == "failed" and failed >= self.pipeline.max_attempts:
                last = attempt["error"] if attempt is not None else "no attempt"
                return Halt(
                    EngineHalt.ATTEMPTS_EXHAUSTED,
                    f"recognition failed {failed} times; last error: {last}",
                )
            return self._start_attempt(ctx, then=Postpone(provider.poll_delay(duration, 0.0)))
        if state == "done":
            return Advance(note="raw response already stored")
        if state == "started":
            return self._unanswered(ctx, attempt, then=Postpone(provider.poll_delay(duration, 0.0)))
        now = ctx.now()
        waited = max(0.0, now - max(float(attempt["created_at"]), since))
        spent = 0.0
        try:
            if isinstance(provider, LongPolling):
                # Waited on while it is worked on: seen the moment it is written, and no claim,
                # poll and save every few milliseconds taking CPU from the recognizer.
                # At most a quarter of the lease: the claim never runs low while it waits.
                longest = min(provider.poll_delay(duration, waited), ctx.stage.lease / 4)
                started = time.monotonic()
                result = provider.wait(attempt["operation_id"], longest, ctx.check)
                spent = time.monotonic() - started
            else:
                result = provider.poll(attempt["operation_id"])
        except ProviderBusy as exc:
            # Polls are free to repeat: wait and ask again (the stuck watchdog bounds it).
            delay = exc.retry_after or provider.poll_delay(duration, waited)
            return Postpone(max(delay, provider.poll_delay(duration, waited)))
        if result.state == "running":
            if waited > provider.deadline(duration):
                return self._past_deadline(ctx, attempt, waited, duration)
            # One look per poll delay: a wait that used it up comes back at once.
            delay = max(0.0, provider.poll_delay(duration, waited) - spent)
            if result.retry_after is not None:
                delay = max(delay, result.retry_after)
            return Postpone(delay)
        if result.state in ("failed", "unknown"):
            error = result.error or "the provider no longer knows this operation"
            self._mark(ctx, int(attempt["id"]), state="failed", error=error)
            # A dead operation leaves nothing behind at the provider (its job folder).
            provider.discard(attempt["operation_id"])
            if result.halt_reason is not None:
                return Halt(result.halt_reason, f"{provider.name}: {error}")
            return Fail(f"recognition failed: {error}")
        if result.raw is None:
            error = "the operation finished without a result or an error"
            self._mark(ctx, int(attempt["id"]), state="failed", error=error)
            return Halt(AudioHalt.PROVIDER_NO_RESULT, f"{provider.name}: {error}")
        keep = self._keep_raw(ctx, int(attempt["id"]), result.raw, result.content_type)
        return Advance(writes=keep, note="recognition done")

    def _past_deadline(
        self, ctx: StepContext, attempt: RowMapping, waited: float, duration: float
    ) -> Outcome:
        """An operation still running past its deadline: ask the provider to cancel it (best
        effort), then halt ``provider_timeout`` saying what became of it."""
        provider = self.provider
        operation = attempt["operation_id"]
        late = (
            f"{provider.name} operation {operation} was still running {waited:.0f} s after "
            f"submission, past its deadline of {provider.deadline(duration):.0f} s for "
            f"{duration:.0f} s of audio"
        )
        answer = provider.cancel(operation)
        if answer.state == "done" and answer.raw is not None:
            # It finished as the cancel reached it: the result is ours after all (D2).
            keep = self._keep_raw(ctx, int(attempt["id"]), answer.raw, answer.content_type)
            return Advance(writes=keep, note="recognition done (at its deadline)")
        if answer.state == "running":
            return Halt(
                AudioHalt.PROVIDER_TIMEOUT,
                f"{late}. Conveyor asked {provider.name} to cancel it, but it may still run: "
                f"{answer.error or 'no confirmation'}. Resume to keep waiting for the same "
                "operation (nothing is submitted again).",
            )
        error = f"cancelled at its deadline ({answer.error or answer.state})"
        self._mark(ctx, int(attempt["id"]), state="failed", error=error)
        provider.discard(operation)
        return Halt(
            AudioHalt.PROVIDER_TIMEOUT,
            f"{late}, so Conveyor cancelled it ({answer.error or answer.state}). Resume to "
            "submit the recording again (a new operation, billed again).",
        )


def _attempt_state(attempt: RowMapping) -> str:
    """The attempt's state; a ``started`` row with a source URL predates the ``submitted``
    state and was accepted by its provider."""
    state = str(attempt["state"])
    if state == "started" and attempt["source_url"] is not None:
        return "submitted"
    return state


def _submit_unknown_text(provider: str, key: str, error: str) -> str:
    return (
        f"The submit to {provider} (attempt {key}) got no answer: {error}. The provider may "
        "have started, and will bill, an operation we have no id for; it accepts no "
        "idempotency key, so Conveyor does not repeat the call on its own. Check the "
        "provider's console or bill for an operation started at that time; resume the record "
        "to submit it again (this may be billed twice)."
    )


def _wav_channels(path: Path) -> int:
    """Channels of a normalized WAV (1 unless channels were kept apart)."""
    import wave

    with wave.open(str(path), "rb") as source:
        return int(source.getnchannels())
