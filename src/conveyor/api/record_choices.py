"""The choices a recording upload carries (title, language, hints, channels), checked once for
both upload routes: ``POST /api/records`` and the web app's ``POST /records/upload``."""

from __future__ import annotations

from dataclasses import dataclass

from conveyor.api.multipart import Upload
from conveyor.audio.intake import clean_language
from conveyor.error_codes import ErrorCode
from conveyor.errors import RejectedInput, check_text
from conveyor.limits import HINTS, RECORD_TITLE, TextLimit

__all__ = ["RECORD_FIELDS", "RecordChoices", "record_choices"]

#: The text parts a multipart recording upload may carry before its ``file`` part.
RECORD_FIELDS = frozenset({"title", "language", "hints", "channels", "keep_duplicate"})


# The language and channels are words checked after this; these bounds only keep them short.
_LANGUAGE = TextLimit("a language code", 3)
_CHANNELS = TextLimit("a channels choice", 8)


def _field(upload: Upload, name: str, given: str | None, limit: TextLimit) -> str | None:
    value = given if given is not None else upload.fields.get(name)
    check_text(limit, value, name)
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
        RejectedInput: ``invalid_request``: a title or hints that break their
            :mod:`conveyor.limits` declaration (:data:`~conveyor.limits.RECORD_TITLE`,
            :data:`~conveyor.limits.HINTS`), channels over 8 characters or with a control
            character, or a ``language`` that is not two or
            three ASCII letters (in any case, blanks around them allowed; the choice is lower
            case).
    """
    given = language if language is not None else upload.fields.get("language")
    lang = _field(upload, "language", clean_language(given), _LANGUAGE)
    if lang is not None and not (lang.isascii() and lang.isalpha() and lang.islower()):
        raise RejectedInput(ErrorCode.INVALID_REQUEST, "language is an ISO 639-1 code such as `en`")
    return RecordChoices(
        title=_field(upload, "title", title, RECORD_TITLE),
        language=lang,
        hints=_field(upload, "hints", hints, HINTS),
        channels=_field(upload, "channels", channels, _CHANNELS) or default_channels,
    )
