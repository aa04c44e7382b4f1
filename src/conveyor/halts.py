"""Every halt reason of both domains, with what it means and the way forward.

A halt keeps the record at its stage until an operator resumes it (P8, P9). Whether a resume can
help depends on the reason: a *content* halt (the file itself is the problem) halts again on
resume, so the way forward is to upload a different file; a *transient* halt (a provider that did
not answer, a database that was down) is resumed once the cause is fixed.

The CLI prints :func:`way_forward` under a halted record; ``docs/troubleshooting.md`` has one row
per entry of :data:`HALT_REASONS` (a test keeps the two and the code's reasons in step).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

__all__ = ["HALT_REASONS", "HaltReason", "way_forward"]

Domain = Literal["audio", "media"]


@dataclass(frozen=True)
class HaltReason:
    """One halt reason.

    Attributes:
        domains: where it occurs: ``audio`` (records), ``media`` (items), or both.
        meaning: what happened, in one sentence.
        resume_helps: True when resuming the same record can succeed once the cause is fixed;
            False when the content itself is the problem (resume halts it again).
        action: what to change or do.
    """

    domains: tuple[Domain, ...]
    meaning: str
    resume_helps: bool
    action: str


_BOTH: Final[tuple[Domain, ...]] = ("audio", "media")

#: Reason → guidance, for every reason a step or the engine halts with.
HALT_REASONS: Final[dict[str, HaltReason]] = {
    # Content halts: the file itself is the problem.
    "not_audio": HaltReason(
        ("audio",),
        "the file is not in an audio or video format we can read (a photo, a document, text)",
        False,
        "upload an audio or video file instead; headerless 16 kHz mono 16-bit PCM goes in "
        "again with `conveyor ingest --raw-pcm` (HTTP: raw_pcm=true); a photo goes to "
        "`conveyor media add`",
    ),
    "undecodable": HaltReason(
        _BOTH,
        "the file is damaged or truncated, or its codec cannot be decoded",
        False,
        "repair or re-export the file (e.g. `ffmpeg -i in -c copy out`) and upload it again; "
        "headerless PCM goes in with `--raw-pcm`",
    ),
    "no_audio": HaltReason(
        ("audio",),
        "the file (usually a video) has no audio track",
        False,
        "upload a file that has sound; for the picture use `conveyor media add`",
    ),
    "empty_audio": HaltReason(
        ("audio",),
        "the file decodes to no audio samples (0 s), e.g. a cut-off upload or a few stray bytes",
        False,
        "upload the complete recording again; if it is headerless PCM, check it really is "
        "16 kHz mono 16-bit little-endian",
    ),
    "bad_sample_rate": HaltReason(
        ("audio",),
        "the file declares a sample rate outside 8000-192000 Hz",
        False,
        "re-export it at a common rate (16000, 44100 or 48000 Hz) and upload it again",
    ),
    "unsupported_media": HaltReason(
        ("media",),
        "a format we do not process (e.g. HEIC without a decoder installed, an unusual pixel "
        "format)",
        False,
        "convert it to JPEG, PNG, WebP or MP4 and add it again",
    ),
    "not_video": HaltReason(
        ("media",),
        "a file that looked like a video has no video track (or holds a single image)",
        False,
        "add it as a photo, or transcribe its sound with `conveyor ingest`",
    ),
    "too_many_pixels": HaltReason(
        ("media",),
        "the image declares more than `[media] max_pixels` pixels (the guard against "
        "decompression bombs)",
        False,
        "scale the image down and add it again; or raise `[media] max_pixels`, restart the "
        "workers, and resume",
    ),
    # Transient halts: the record can go on once the cause is fixed.
    "original_missing": HaltReason(
        _BOTH,
        "the stored original is gone from storage (deleted, or `[storage] root` / "
        "`[storage] url` now points elsewhere)",
        True,
        "point `[storage] root` (or `url`) at the folder or bucket it was uploaded to, or "
        "restore the object from a backup, then resume; otherwise upload it again",
    ),
    "stuck": HaltReason(
        _BOTH,
        "the record stayed in one stage longer than `[pipeline] own_work_limit` (our work) or "
        "`foreign_work_limit` (waiting on a provider)",
        True,
        "resume it; if it halts stuck again, read the log around it (a provider that never "
        "answers, a worker killed mid-step) or raise the limit",
    ),
    "attempts_exhausted": HaltReason(
        _BOTH,
        "one step failed `[pipeline] max_attempts` times in a row; the halt text quotes the "
        "last error",
        True,
        "fix what the last error names (database, storage, provider, model), then resume",
    ),
    # Recognition halts (see docs/providers.md for the providers' own terms).
    "submit_unknown": HaltReason(
        ("audio",),
        "the submit to the provider may have started a paid operation, but no answer came back",
        True,
        "check the provider's console or bill for an operation at that time; resume submits "
        "again (it may be billed twice)",
    ),
    "provider_auth": HaltReason(
        ("audio",),
        "the provider refused the credential (401/403: wrong, expired, or missing a role)",
        True,
        "fix the key (`key_file` or the variable `key_env` names), then resume",
    ),
    "provider_config": HaltReason(
        ("audio",),
        "the provider answered 404: a wrong endpoint or model name",
        True,
        "fix `base_url` / `endpoint` / `model` of the provider's section, then resume",
    ),
    "too_large": HaltReason(
        ("audio",),
        "the provider refused the request as too large (413)",
        True,
        "lower the provider's `max_request_bytes` or `bitrate`, then resume",
    ),
    "provider_rejected": HaltReason(
        ("audio",),
        "the provider refused the request or reported an error for it",
        True,
        "read the provider's answer quoted in the halt text; resume once the cause is fixed",
    ),
    "unsupported_language": HaltReason(
        ("audio",),
        "the record's language is one the provider does not recognise",
        True,
        "choose another `[transcription] provider` (or upload again without a language), then "
        "resume",
    ),
    "provider_error": HaltReason(
        ("audio",),
        "the provider's operation ended with an error",
        True,
        "read the error in the halt text; resume submits again (billed again)",
    ),
    "provider_no_result": HaltReason(
        ("audio",),
        "the provider's operation finished without a result or an error (often: no speech it "
        "could hear)",
        True,
        "resume submits again; if it repeats, listen to the recording",
    ),
    "result_expired": HaltReason(
        ("audio",),
        "the provider no longer keeps the result (SpeechKit keeps them 3 days)",
        True,
        "resume submits again",
    ),
    "provider_timeout": HaltReason(
        ("audio",),
        "the provider's operation ran past its deadline; Conveyor asked the provider to cancel it",
        True,
        "resume: if it was cancelled, the recording is submitted again (billed again); if the "
        "cancel was refused, Conveyor keeps waiting for the same operation",
    ),
    "unreadable_response": HaltReason(
        ("audio",),
        "the provider's stored answer cannot be parsed",
        True,
        "the answer is kept: after upgrading to a version that reads it, resume parses it "
        "again without a new request",
    ),
    "step_error": HaltReason(
        _BOTH,
        "a step returned an outcome its stage does not allow (a fault of Conveyor)",
        True,
        "report it with the halt text; resume after upgrading to a version with the fix",
    ),
}


def way_forward(reason: str | None) -> str:
    """One line for a person: whether a resume helps with ``reason``, and what to do.

    An unknown reason (from a newer version) is treated as transient.
    """
    guide = HALT_REASONS.get(reason or "")
    if guide is None:
        return "fix the cause the halt text names, then resume"
    if guide.resume_helps:
        return f"resume helps once the cause is fixed: {guide.action}"
    return f"resume will not help, the file itself is the problem: {guide.action}"
