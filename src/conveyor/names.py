"""File names as Conveyor keeps and shows them, whichever way the file came.

A name is bytes on the way in (a POSIX path, a multipart ``filename``, tus metadata) and need
not be UTF-8. The CLI, the HTTP API and the web app keep it in one form (:func:`kept_name`),
so the same file has the same name however it was sent: UTF-8 as it is, any other byte
written ``\\xNN``, characters that would break a line or a terminal (newline, tab, other
control characters) written as escapes (``\\n``, ``\\x01``). The form is text every reader
takes (a terminal, a JSON reader, the database) and shows the person which bytes were odd.
"""

from __future__ import annotations

import re

__all__ = ["MAX_NAME", "kept_name", "readable"]

MAX_NAME = 255
"""Longest name kept with a record or item (characters)."""

_SEPARATORS = re.compile(rb"[/\\]")


def _raw(name: bytes | str) -> bytes:
    # A str may carry a POSIX name's odd bytes as surrogate escapes (os.fsdecode).
    return name if isinstance(name, bytes) else name.encode("utf-8", "surrogateescape")


def readable(name: bytes | str) -> str:
    """``name`` as text: bytes that are not UTF-8 written ``\\xNN``, characters that are not
    printable written as Python writes them in a string (``\\n``, ``\\t``, ``\\x1b``)."""
    text = _raw(name).decode("utf-8", errors="backslashreplace")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def kept_name(name: bytes | str, *, posix_name: bool = False) -> str | None:
    """The name kept for a file sent as ``name``: its last path part (after ``/`` or ``\\``,
    as old browsers send ``C:\\dir\\file``), :func:`readable`, without the spaces around it,
    at most :data:`MAX_NAME` characters; None when nothing is left.

    ``posix_name``: ``name`` is already a POSIX file's own name (the CLI's ``path.name``), in
    which ``\\`` is an ordinary byte, so ``a\\b.wav`` is kept whole; only a name that came
    over HTTP is cut at it.
    """
    last = _raw(name) if posix_name else _SEPARATORS.split(_raw(name))[-1]
    return readable(last).strip()[:MAX_NAME].strip() or None
