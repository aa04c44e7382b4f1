"""The exception tree of Conveyor.

::

    ConveyorError
    ├── ConfigError            a setting is missing or contradictory
    ├── DeclarationError       a domain's stages are declared wrongly (start-up fails, D11)
    ├── NotFound               a record, album, item or object does not exist (for this owner)
    ├── Conflict               the action does not fit the record's state (resume of a running one)
    ├── Duplicate              the owner already holds an upload's content; nothing was stored
    ├── RejectedInput          an upload we will not accept (empty, not media, too large)
    │   └── UnsupportedMedia   content is not a kind we process
    ├── Unprocessable          a step's input can never be processed; the record halts with
    │   │                      the error's reason (the engine's word, no domain named)
    │   └── MediaError         a file we accepted cannot be processed
    └── ClaimLost              a step's claim was re-issued or released while it ran (P2, P6)

A lost claim is normally a value (``save_if_held`` returns False); ``ClaimLost`` exists so a long
step can stop at once when its heartbeat finds the claim gone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from conveyor.error_codes import ErrorCode
from conveyor.halts import HaltReason

if TYPE_CHECKING:
    from conveyor.limits import TextLimit

__all__ = [
    "ClaimLost",
    "ConfigError",
    "Conflict",
    "ConveyorError",
    "DeclarationError",
    "Duplicate",
    "MediaError",
    "NotFound",
    "RejectedInput",
    "Unprocessable",
    "UnsupportedMedia",
    "check_text",
]


class ConveyorError(Exception):
    """Base of every error Conveyor raises on purpose."""


class ConfigError(ConveyorError):
    """A setting is missing, malformed or contradictory."""


class DeclarationError(ConveyorError):
    """A domain's stage table is inconsistent (e.g. a non-terminal stage without a step)."""


class NotFound(ConveyorError):
    """The named thing does not exist, or belongs to another owner (never revealed)."""


class Conflict(ConveyorError):
    """The action does not fit the current state, e.g. resuming a record that is not halted."""


class Duplicate(ConveyorError):
    """The owner already holds a file with this content (same SHA-256); nothing was stored.

    Intake says so instead of keeping a second copy, unless asked to keep one
    (``keep_duplicate``). Entry points answer with the existing record or item.

    Attributes:
        existing_id: the record's or item's id that holds the content.
        noun: ``record`` or ``item``.
    """

    def __init__(self, existing_id: int, noun: str, name: str | None = None) -> None:
        shown = name or "the upload"
        super().__init__(f"{shown} is already here as {noun} {existing_id}")
        self.existing_id = existing_id
        self.noun = noun


class RejectedInput(ConveyorError):
    """An upload refused at intake; nothing was written.

    Attributes:
        reason: its machine word, e.g. ``ErrorCode.EMPTY_FILE`` (HTTP: its status).
    """

    def __init__(self, reason: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.reason = reason


def check_text(limit: TextLimit, text: str | None, subject: str | None = None) -> None:
    """Refuse ``text`` when its :mod:`conveyor.limits` declaration does (None: nothing given,
    accepted), as every entry point refuses it: the domain functions the CLI, the API and the
    pages all call.

    Args:
        subject: how the message names the text (``"the token's note"``); default the
            declaration's own words (:attr:`~conveyor.limits.TextLimit.what`).

    Raises:
        RejectedInput: ``invalid_request``, with why (``"the album's name is longer than 200
            characters (it has 201)"``).
    """
    problem = None if text is None else limit.problem(text)
    if problem is not None:
        raise RejectedInput(ErrorCode.INVALID_REQUEST, f"{subject or limit.what} {problem}")


class UnsupportedMedia(RejectedInput):
    """The content is not a media kind we process (sniffed, never from the extension)."""


class Unprocessable(ConveyorError):
    """A step's input can never be processed: retrying cannot help, so the executor halts the
    record with ``reason`` and ``message`` instead of counting a failure (P8).

    Attributes:
        reason: the halt reason its owner declares, e.g. ``MediaHalt.UNDECODABLE``.
        message: a sentence a person can read.
    """

    def __init__(self, reason: HaltReason, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class MediaError(Unprocessable):
    """A file cannot be processed; the record is halted with ``reason``.

    Attributes:
        reason: a domain's halt reason, e.g. ``AudioHalt.NO_AUDIO``,
            ``MediaHalt.TOO_MANY_PIXELS``.
        message: a sentence a person can read.
    """


class ClaimLost(ConveyorError):
    """The step's claim token no longer holds; the step must stop without writing."""
