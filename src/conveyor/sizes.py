"""Sizes as people read them: binary units, the same in every text Conveyor shows.

The CLI, event texts, log lines, the HTTP API's error messages and the web pages all say a size
with :func:`human_size` (``912 B``, ``10.3 KiB``, ``1 MiB``), so a limit in one place and a file's
size in another read alike; a count that must be exact (a byte range, a size mismatch) is given
in bytes instead.
"""

from __future__ import annotations

__all__ = ["human_size"]

_UNITS = ("KiB", "MiB", "GiB", "TiB")


def human_size(size: int) -> str:
    """``size`` bytes for a person, in binary units (1 KiB = 1024 B).

    ``912 B``, ``10.3 KiB``, ``3.1 MiB``, ``1.2 GiB``; a whole number of units is written without
    decimals (``1 MiB``, ``16 KiB``), as limits are. A negative size keeps its sign.
    """
    if size < 0:
        return "-" + human_size(-size)
    if size < 1024:
        return f"{size} B"
    for power, unit in enumerate(_UNITS, start=1):
        scale = 1024**power
        if size < scale * 1024 or unit == _UNITS[-1]:
            whole, rest = divmod(size, scale)
            return f"{whole} {unit}" if rest == 0 else f"{size / scale:.1f} {unit}"
    raise AssertionError("unreachable")  # pragma: no cover
