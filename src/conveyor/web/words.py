"""What the pages say: stages and halt reasons in plain words, durations, sizes."""

from __future__ import annotations

__all__ = ["duration_words", "halt_words", "stage_words"]

_STAGES = {
    "audio": {
        "uploaded": "Uploaded; waiting to be prepared",
        "normalized": "Prepared; waiting for speech recognition",
        "submitted": "Speech recognition is running",
        "transcribed": "Recognised; the transcript is being written",
        "done": "Done",
    },
    "media": {
        "uploaded": "Uploaded; thumbnails are being made",
        "transcoding": "Thumbnails ready; the video is being converted for playback",
        "done": "Ready",
    },
}

_HALTS = {
    "undecodable": "The file could not be read: it may be damaged, or in a format we cannot open.",
    "unsupported_media": "This kind of file is not supported.",
    "not_audio": "The file holds no sound we can transcribe.",
    "no_audio": "The file has no sound track.",
    "empty_audio": "The recording is empty: it is too short to hold any speech.",
    "not_video": "The file is not a video we can play.",
    "original_missing": "The uploaded file is missing from storage.",
    "stuck": "It took far longer than it should at this stage, so it was stopped rather than "
    "left hanging.",
    "attempts_exhausted": "It failed several times in a row, so it was stopped.",
    "step_error": "An unexpected error stopped it.",
}


def stage_words(domain: str, stage: str) -> str:
    """A stage as a person would say it (``audio``/``media``)."""
    return _STAGES.get(domain, {}).get(stage, stage)


def halt_words(reason: str | None) -> str:
    """Why a record was stopped, in plain words (the reason code when we have none)."""
    if reason is None:
        return "It was stopped."
    return _HALTS.get(reason, f"It was stopped ({reason.replace('_', ' ')}).")


def duration_words(seconds: float | None) -> str:
    """``42 s``, ``3 min``, ``2 h 5 min``, ``3 d 4 h``; empty for None."""
    if seconds is None:
        return ""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min"
    if s < 86400:
        h, m = divmod(s // 60, 60)
        return f"{h} h {m} min" if m else f"{h} h"
    d, h = divmod(s // 3600, 24)
    return f"{d} d {h} h" if h else f"{d} d"
