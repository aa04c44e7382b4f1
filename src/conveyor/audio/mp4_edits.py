"""Whether an MP4/MOV's sound tracks have only plain edit lists (ISO/IEC 14496-12 ``elst``).

FFmpeg's MP4 demuxer applies edit lists by rebuilding each track's sample index
(``advanced_editlist``, on by default): while it does, the old and the new index exist together,
one 24-byte entry per AAC frame each, plus a per-sample copy of the timing tables. For a 6 h
recording (a million frames) that is a ~35 MB spike on top of the ~40 MB index, and it grows with
the duration. A plain edit list — at most some empty edits (a delay) followed by one edit at
normal speed that runs to the end of the media, as every encoder's priming edit is — decodes to
the very same samples with the demuxer's simple handling (``advanced_editlist=0``), which keeps
one index. :func:`plain_sound_edits` tells when that is so; anything else (cuts, a trimmed
end, changed speed, a file it cannot read) keeps FFmpeg's default.

Only box headers, the edit lists and the sound tracks' ``stts`` (a few run-length entries) are
read; every other box is skipped by seeking, so a 6 h file's 5 MB sample tables are never read.
"""

from __future__ import annotations

import struct
from pathlib import Path
from typing import BinaryIO

__all__ = ["plain_sound_edits"]

_MAX_BOXES = 10_000  # boxes walked before giving up (a crafted file must not make us loop)
_MAX_STTS = 100_000  # timing entries read; a sound track has a handful


class _Unreadable(Exception):
    """The boxes are not what the format says: keep FFmpeg's default handling."""


def plain_sound_edits(path: Path) -> bool:
    """True when every sound track of the MP4/MOV at ``path`` has no edit list or a plain one.

    Plain: any number of leading empty edits, then exactly one edit at rate 1 whose segment
    ends inside the track's last frame or after it (FFmpeg keeps a frame that starts inside an
    edit whole, so only an edit that ends before the last frame starts drops samples). Files
    with fragments (``moof``, whose tracks have no full index) and files that cannot be read
    answer False.
    """
    try:
        with path.open("rb") as file:
            size = path.stat().st_size
            moov = _find_moov(file, size)
            if moov is None:
                return False
            return _moov_is_plain(file, *moov)
    except (OSError, _Unreadable, struct.error):
        return False


def _boxes(file: BinaryIO, start: int, end: int) -> list[tuple[bytes, int, int]]:
    """(type, payload start, payload end) of the boxes between ``start`` and ``end``."""
    found: list[tuple[bytes, int, int]] = []
    at = start
    while at + 8 <= end:
        file.seek(at)
        head = file.read(8)
        if len(head) < 8:
            raise _Unreadable
        size, kind = struct.unpack(">I4s", head)
        payload = at + 8
        if size == 1:
            large = file.read(8)
            if len(large) < 8:
                raise _Unreadable
            (size,) = struct.unpack(">Q", large)
            payload = at + 16
        elif size == 0:
            size = end - at
        if size < payload - at or at + size > end:
            raise _Unreadable
        found.append((kind, payload, at + size))
        if len(found) > _MAX_BOXES:
            raise _Unreadable
        at += size
    return found


def _find_moov(file: BinaryIO, size: int) -> tuple[int, int] | None:
    top = _boxes(file, 0, size)
    if any(kind == b"moof" for kind, _, _ in top):
        return None
    moov = [(start, end) for kind, start, end in top if kind == b"moov"]
    return moov[0] if len(moov) == 1 else None


def _moov_is_plain(file: BinaryIO, start: int, end: int) -> bool:
    children = _boxes(file, start, end)
    mvhd = [(s, e) for kind, s, e in children if kind == b"mvhd"]
    if len(mvhd) != 1:
        return False
    movie_scale = _timescale(file, *mvhd[0])
    for kind, s, e in children:
        if kind == b"mvex":
            return False  # fragmented: the index is built from fragments
        if kind == b"trak" and not _trak_is_plain(file, s, e, movie_scale):
            return False
    return True


def _trak_is_plain(file: BinaryIO, start: int, end: int, movie_scale: int) -> bool:
    children = {kind: (s, e) for kind, s, e in _boxes(file, start, end)}
    if b"mdia" not in children:
        return True  # not a media track
    media = {kind: (s, e) for kind, s, e in _boxes(file, *children[b"mdia"])}
    if b"hdlr" not in media or b"mdhd" not in media:
        raise _Unreadable
    file.seek(media[b"hdlr"][0] + 8)  # version/flags, pre_defined
    if file.read(4) != b"soun":
        return True  # only sound tracks are decoded by normalize
    if b"edts" not in children:
        return True
    edits = {kind: (s, e) for kind, s, e in _boxes(file, *children[b"edts"])}
    if b"elst" not in edits:
        return True
    media_scale, _ = _scale_and_duration(file, *media[b"mdhd"])
    entries = _edit_list(file, *edits[b"elst"])
    while entries and entries[0][1] == -1:
        entries.pop(0)  # empty edits: a delay before the sound starts
    if len(entries) != 1:
        return False
    segment, media_time, rate = entries[0]
    if rate != 0x10000 or media_time < 0 or movie_scale <= 0 or media_scale <= 0:
        return False
    if segment == 0:
        return True  # "to the end" (some writers)
    media_duration, last_frame = _sample_times(file, media)
    # Where the edit ends and where the last frame starts, in media units × movie units.
    edit_end = media_time * movie_scale + segment * media_scale
    last_start = (media_duration - last_frame) * movie_scale
    return edit_end > last_start


def _sample_times(file: BinaryIO, media: dict[bytes, tuple[int, int]]) -> tuple[int, int]:
    """(sum of the sample durations, duration of the last sample) from the track's ``stts``."""
    if b"minf" not in media:
        raise _Unreadable
    info = {kind: (s, e) for kind, s, e in _boxes(file, *media[b"minf"])}
    if b"stbl" not in info:
        raise _Unreadable
    table = {kind: (s, e) for kind, s, e in _boxes(file, *info[b"stbl"])}
    if b"stts" not in table:
        raise _Unreadable
    start, end = table[b"stts"]
    file.seek(start + 4)  # version/flags
    (count,) = struct.unpack(">I", file.read(4))
    if not 0 < count <= _MAX_STTS or start + 8 + count * 8 > end:
        raise _Unreadable
    raw = file.read(count * 8)
    total = last = 0
    for index in range(count):
        samples, delta = struct.unpack_from(">II", raw, index * 8)
        total += samples * delta
        if samples:
            last = delta
    return total, last


def _timescale(file: BinaryIO, start: int, end: int) -> int:
    return _scale_and_duration(file, start, end)[0]


def _scale_and_duration(file: BinaryIO, start: int, end: int) -> tuple[int, int]:
    """Timescale and duration of an ``mvhd`` or ``mdhd`` box (same layout up to there)."""
    file.seek(start)
    version = file.read(4)[:1]
    if version == b"\x01":
        data = file.read(28)
        _, _, scale, duration = struct.unpack(">QQIQ", data)
    else:
        data = file.read(16)
        _, _, scale, duration = struct.unpack(">IIII", data)
    if file.tell() > end:
        raise _Unreadable
    return int(scale), int(duration)


def _edit_list(file: BinaryIO, start: int, end: int) -> list[tuple[int, int, int]]:
    """(segment duration, media time, rate as 16.16) of each ``elst`` entry."""
    file.seek(start)
    head = file.read(8)
    version, count = head[0], struct.unpack(">I", head[4:8])[0]
    width = 20 if version == 1 else 12
    if count > 1000 or start + 8 + count * width > end:
        raise _Unreadable
    raw = file.read(count * width)
    layout = ">QqI" if version == 1 else ">IiI"
    return [struct.unpack_from(layout, raw, i * width) for i in range(count)]
