"""The longest texts people give Conveyor, and which of them hold one line, declared once.

The HTTP API's request schemas and parameters, the CLI's options and arguments and the web
app's forms check a text with its :class:`TextLimit` here, so what one entry point refuses the
others refuse too: over HTTP 422 ``invalid_request`` (in the one error shape), on the command
line exit 2 before anything is stored.

Lengths count characters (Unicode code points, as Python's ``len``, JSON Schema's
``maxLength`` and PostgreSQL's ``varchar(n)`` count them), not bytes; a text as long as its
limit is accepted. A **one-line** text (a title, a name, a note) holds no control character
(Unicode category Cc: U+0000-U+001F, U+007F-U+009F, so no newline or tab): it is shown on one
line in tables, pages, logs and terminals, where a control character would break the line or
act on the terminal of whoever reads it. A text of several lines (a brief, a corrected
segment) may hold any character but NUL, which PostgreSQL's text columns refuse.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "ALBUM_NAME",
    "HINTS",
    "LANE_REASON",
    "LINK_LABEL",
    "PROOFREAD_SEGMENT",
    "RECORD_BRIEF",
    "RECORD_TITLE",
    "TEXT_LIMITS",
    "TOKEN_LABEL",
    "TOPIC",
    "USER_NAME",
    "TextLimit",
    "is_control",
]


def is_control(char: str) -> bool:
    """True for a control character (Unicode category Cc): U+0000-U+001F and U+007F-U+009F."""
    code = ord(char)
    return code < 0x20 or 0x7F <= code <= 0x9F


def _char_class(refused: list[int], extra: str = "") -> str:
    """A regular expression class matching every character but ``refused`` (code points, in
    ascending order) and the class escapes in ``extra`` (``\\s``), written with ``\\xNN``
    escapes as JSON Schema and pydantic read them."""
    ranges: list[list[int]] = []
    for code in refused:
        if ranges and ranges[-1][1] == code - 1:
            ranges[-1][1] = code
        else:
            ranges.append([code, code])
    parts = (f"\\x{a:02x}" if a == b else f"\\x{a:02x}-\\x{b:02x}" for a, b in ranges)
    return "[^" + "".join(parts) + extra + "]"


@dataclass(frozen=True, slots=True)
class TextLimit:
    """What one kind of text may be.

    Attributes:
        what: what people call it, in messages (``"a record's title"``).
        longest: the most characters it may have.
        one_line: it holds no control character (see the module's docstring); otherwise only
            NUL is refused.
        collapses: its whitespace (newlines and tabs too) is collapsed to single spaces before
            it is kept (vocabulary hints), so whitespace control characters are not refused.
        blank: it may be empty or only spaces; otherwise it needs a character that is not.
    """

    what: str
    longest: int
    one_line: bool = True
    collapses: bool = False
    blank: bool = True

    def refuses(self, char: str) -> bool:
        """True when ``char`` may not appear in the text."""
        if not self.one_line:
            return char == "\x00"
        return is_control(char) and not (self.collapses and char.isspace())

    @property
    def pattern(self) -> str:
        """The rule as a regular expression (JSON Schema's ``pattern``, pydantic's): the
        characters allowed, and a character that is not a space unless :attr:`blank`."""
        refused = [c for c in range(0xA0) if self.refuses(chr(c))]
        allowed = _char_class(refused)
        if self.blank:
            return f"^{allowed}*$"
        solid = _char_class(refused, "\\s")
        return f"^{allowed}*{solid}{allowed}*$"

    @property
    def rule(self) -> str:
        """The limit in a few words, for help texts: ``at most 300 characters, one line``."""
        words = f"at most {self.longest:,} characters"
        if self.one_line and not self.collapses:
            words += ", one line"
        return words if self.blank else words + ", not blank"

    def problem(self, text: str) -> str | None:
        """Why ``text`` is refused, for people (``"is longer than 300 characters (it has
        301)"``), or None when it is accepted."""
        if len(text) > self.longest:
            return f"is longer than {self.longest:,} characters (it has {len(text):,})"
        bad = next((c for c in text if self.refuses(c)), None)
        if bad is not None:
            kind = "a NUL character" if bad == "\x00" else "a control character"
            return f"contains {kind} ({bad!r}); {self._allowed()}"
        if not self.blank and not text.strip():
            return "is empty; give at least one character that is not a space"
        return None

    def _allowed(self) -> str:
        if not self.one_line:
            return "any other character may appear"
        if self.collapses:
            return "it is one line of text (spaces, tabs and newlines become one space)"
        return "it is one line of printable text (no newline or tab)"


RECORD_TITLE = TextLimit("a record's title", 300)
"""A record's title (P7): one line, 300 characters (its column is ``varchar(300)``)."""

RECORD_BRIEF = TextLimit("a record's brief", 20_000, one_line=False)
"""A record's brief (P7): several lines of notes, 20,000 characters (about ten pages)."""

HINTS = TextLimit("vocabulary hint text", 1000, collapses=True)
"""A recording's own vocabulary hints, and an owner's standing vocabulary: 1,000 characters as
given, whitespace collapsed to single spaces before they are kept (Whisper's prompt holds about
224 tokens, which 1,000 characters of names and terms exceed already)."""

TOPIC = TextLimit("a topic", 100, collapses=True)
"""One topic name of a record (D9): one line, 100 characters (its column is ``varchar(100)``),
whitespace collapsed to single spaces before it is kept."""

PROOFREAD_SEGMENT = TextLimit("a corrected segment", 10_000, one_line=False)
"""One segment's text of an owner's correction: 10,000 characters (a segment is a stretch of
speech of at most a few minutes)."""

ALBUM_NAME = TextLimit("an album's name", 200, blank=False)
"""An album's name: one line, not blank, 200 characters (its column is ``varchar(200)``)."""

USER_NAME = TextLimit("a user name", 100)
"""A user's name as another user names them (sharing an album): one line, 100 characters (the
column of ``users.name``); :func:`conveyor.accounts.clean_user_name` also refuses spaces."""

LINK_LABEL = TextLimit("a link's note", 100)
"""The owner's note on a view-only album link (who it was given to): one line, 100 characters
(its column is ``varchar(100)``)."""

TOKEN_LABEL = TextLimit("a token's note", 100)
"""The note on an API token (which device or script): one line, 100 characters (its column is
``varchar(100)``)."""

LANE_REASON = TextLimit("a lane's pause reason", 300)
"""Why an operator paused a lane, for the other operators (shown in lane lists and on the
operator's page): one line, 300 characters (its column is ``varchar(300)``)."""

#: Every declaration above, for the tests that hold the entry points to them.
TEXT_LIMITS = (
    RECORD_TITLE,
    RECORD_BRIEF,
    HINTS,
    TOPIC,
    PROOFREAD_SEGMENT,
    ALBUM_NAME,
    USER_NAME,
    LINK_LABEL,
    TOKEN_LABEL,
    LANE_REASON,
)
