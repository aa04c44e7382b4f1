"""The choices a recording upload carries (title, language, hints, channels), checked once for
both upload routes: ``POST /api/records`` and the web app's ``POST /records/upload``."""

from __future__ import annotations

from dataclasses import dataclass

from conveyor.api.multipart import Upload
from conveyor.audio.intake import MAX_HINTS, clean_language
from conveyor.error_codes import ErrorCode
from conveyor.errors import RejectedInput

__all__ = ["RECORD_FIELDS", "RecordChoices", "record_choices"]

#: The text parts a multipart recording upload may carry before its ``file`` part.
RECORD_FIELDS = frozenset({"title", "language", "hints", "channels", "keep_duplicate"})


def _field(upload: Upload, name: str, given: str | None, limit: int) -> str | None:
    value = given if given is not None else upload.fields.get(name)
    if value is not None and len(value) > limit:
        raise RejectedInput(ErrorCode.INVALID_REQUEST, f"{name} is longer than {limit} characters")
    if value is not None and "\x00" in value:
        raise RejectedInput(ErrorCode.INVALID_REQUEST, f"{name} contains a NUL character")
    return value


@dataclass(frozen=True)
class RecordChoices:
    """What the owner chose for one recording upload, checked (see :func:`record_choices`)."""

    title: str | None
    language: str | None
    hints: str | None
    channels: str


def record_choices(
    upload: Upload,
    *,
    default_channels: str,
    title: str | None = None,
    language: str | None = None,
    hints: str | None = None,
    channels: str | None = None,
) -> RecordChoices:
    """The choices of a recording upload: each one given as a query parameter, else its
    multipart text field (:data:`RECORD_FIELDS`), else its default.

    Both upload routes (``POST /api/records`` and the web app's ``POST /records/upload``) check
    them here, so a value one refuses the other refuses too. :func:`accept_audio` then checks
    what needs the installation (a language the recognizer knows, the channel choices) and
    collapses the hints' whitespace.

    Args:
        default_channels: ``[transcription] channels``, used when none is chosen.

    Raises:
        RejectedInput: ``invalid_request``: a field over its length (title 300, hints 1,000,
            channels 8 characters), with a NUL character, or a ``language`` that is not two or
            three ASCII letters (in any case, blanks around them allowed; the choice is lower
            case).
    """
    given = language if language is not None else upload.fields.get("language")
    lang = _field(upload, "language", clean_language(given), 3)
    if lang is not None and not (lang.isascii() and lang.isalpha() and lang.islower()):
        raise RejectedInput(ErrorCode.INVALID_REQUEST, "language is an ISO 639-1 code such as `en`")
    return RecordChoices(
        title=_field(upload, "title", title, 300),
        language=lang,
        hints=_field(upload, "hints", hints, MAX_HINTS),
        channels=_field(upload, "channels", channels, 8) or default_channels,
    )
