r"""File names as Conveyor keeps and shows them, whichever way the file came.

A name is bytes on the way in (a POSIX path, a multipart ``filename``, tus metadata) and need
not be UTF-8. The CLI, the HTTP API and the web app keep it in one form (:func:`kept_name`),
so the same file has the same name however it was sent. The form (:func:`escaped_name`) is
text every reader takes (a terminal, a JSON reader, the database), shows the person which bytes
were odd, and gives the bytes back (:func:`name_bytes`), since every backslash is escaped too:

- a printable UTF-8 character as it is (``café.wav``);
- a backslash as ``\\``;
- a newline, tab and carriage return as ``\n``, ``\t``, ``\r``;
- every other byte, a byte that is not UTF-8 or one of a character that is not printable (a
  control character, a zero-width or no-break space), as ``\xNN``: two lowercase hex digits,
  one byte (``caf\xe9.wav``, ``\x1b``, ``\xc2\xa0``).

These are the escapes of a Python string literal, so
``kept.encode().decode("unicode_escape").encode("latin-1")`` is the name's bytes again (and
bash's ``printf %b`` prints them).
"""

from __future__ import annotations

import re

__all__ = ["MAX_NAME", "escaped_name", "kept_name", "name_bytes", "readable"]

MAX_NAME = 255
"""Longest name kept with a record or item (characters as kept, escapes included)."""

_MAX_EXTENSION = 16
"""Longest ending after the last dot that a cut keeps as the name's extension (characters as
kept): longer than any real file type's."""

_SEPARATORS = re.compile(rb"[/\\]")
_SHORT = {"\\": "\\\\", "\n": "\\n", "\t": "\\t", "\r": "\\r"}


def _raw(name: bytes | str) -> bytes:
    # A str may carry a POSIX name's odd bytes as surrogate escapes (os.fsdecode).
    return name if isinstance(name, bytes) else name.encode("utf-8", "surrogateescape")


def _units(raw: bytes) -> list[str]:
    """``raw`` cut into what the kept form writes for each character or odd byte, in order: a
    name is cut between these, never inside an escape or a character."""
    units: list[str] = []
    # surrogateescape gives each byte that is not UTF-8 back as one lone surrogate.
    for char in raw.decode("utf-8", "surrogateescape"):
        if char in _SHORT:
            units.append(_SHORT[char])
        elif char.isprintable():
            units.append(char)
        else:
            units.append(
                "".join(f"\\x{byte:02x}" for byte in char.encode("utf-8", "surrogateescape"))
            )
    return units


def escaped_name(name: bytes | str) -> str:
    r"""``name`` (bytes, or a str holding odd bytes as surrogate escapes, as ``os.fsdecode``
    gives) in the kept form the module's docstring gives, whole: ``b"caf\xe9\n.wav"`` is
    ``caf\xe9\n.wav`` (the text with backslashes), ``a\b`` is ``a\\b``."""
    return "".join(_units(_raw(name)))


def name_bytes(kept: str) -> bytes:
    r"""The bytes a name in the kept form (:func:`escaped_name`) was written from: the inverse,
    ``name_bytes(escaped_name(raw)) == raw`` for every ``raw``.

    Raises:
        ValueError: ``kept`` is not in the kept form (a lone backslash, a bad escape).
    """
    try:
        text = kept.encode("utf-8").decode("unicode_escape")
    except UnicodeDecodeError as exc:
        raise ValueError(f"not a kept name: {kept!r}") from exc
    return text.encode("latin-1")


def readable(text: str) -> str:
    r"""Free text (a title, an album name) for a table cell or a card line: each character
    that is not printable written as Python writes it in a string (``\n``, ``\t``, ``\x1b``),
    so a newline cannot split a row; backslashes stay as they are. For show only: ``--json``
    gives such text as it is. A file name is kept escaped already (:func:`kept_name`) and,
    being printable, shows unchanged."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def kept_name(name: bytes | str, *, posix_name: bool = False) -> str | None:
    """The name kept for a file sent as ``name``: its last path part (after ``/`` or ``\\``,
    as old browsers send ``C:\\dir\\file``), without the spaces around it, in the kept form
    (:func:`escaped_name`), at most :data:`MAX_NAME` characters; None when nothing is left.

    A longer name is cut in its real characters and bytes, before escaping, so the cut never
    ends inside an escape (``\\xf``) or a character, and from the end of its stem, so it keeps
    its extension (the ending from the last dot, when at most 16 characters as kept):
    ``aaa…aaa.wav``. A cut name no longer gives the file's full name back.

    ``posix_name``: ``name`` is already a POSIX file's own name (the CLI's ``path.name``), in
    which ``\\`` is an ordinary byte, so ``a\\b.wav`` is kept whole; only a name that came
    over HTTP is cut at it.
    """
    last = _raw(name) if posix_name else _SEPARATORS.split(_raw(name))[-1]
    units = _units(last)
    while units and units[0] == " ":
        del units[0]
    while units and units[-1] == " ":
        del units[-1]
    if sum(map(len, units)) <= MAX_NAME:
        return "".join(units) or None
    dot = max((i for i, unit in enumerate(units) if unit == "."), default=0)
    extension = units[dot:] if dot > 0 else []
    if sum(map(len, extension)) > _MAX_EXTENSION:
        extension = []
    stem = units[: len(units) - len(extension)]
    room, end = MAX_NAME - sum(map(len, extension)), 0
    while end < len(stem) and len(stem[end]) <= room:
        room -= len(stem[end])
        end += 1
    del stem[end:]
    while stem and stem[-1] == " ":
        stem.pop()
    return "".join(stem + extension) or None
