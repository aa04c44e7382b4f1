"""Motion photos and Live Photos: the clip a photo carries, or the movie it is paired with.

* A **motion photo** (Google's Motion Photo format 1.0, the older ``MVIMG`` micro video, and
  Samsung's) is a JPEG or HEIC with an MP4 appended. Where it starts is said by the XMP
  (``GCamera:MicroVideoOffset``: bytes from the end; or a ``Container:Directory`` whose item of
  semantic ``MotionPhoto`` has ``Item:Length`` bytes, the last in the file) or, in Samsung's
  files without it, by the ``MotionPhoto_Data`` marker of their trailer, the MP4 right after.
  The clip is only taken when an MP4 ``ftyp`` box opens where it is said to start.
* An **iPhone Live Photo** is two files, a HEIC or JPEG still and a QuickTime movie, that carry
  the same content identifier: the still in its Apple maker note (tag ``0x0011``), the movie in
  its ``com.apple.quicktime.content.identifier`` metadata.
"""

from __future__ import annotations

import contextlib
import re
import shutil
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import av
import exifread

__all__ = [
    "EmbeddedClip",
    "copy_clip",
    "embedded_clip",
    "movie_content_id",
    "still_content_id",
]

_MICRO_VIDEO_OFFSET: Final = re.compile(rb'MicroVideoOffset\s*=\s*"(\d+)"|MicroVideoOffset>(\d+)<')
_CONTAINER_ITEM: Final = re.compile(rb"<Container:Item\b[^>]*>", re.S)
_ATTRIBUTE: Final = re.compile(rb'Item:(\w+)\s*=\s*"([^"]*)"')
_XMP_SEARCH: Final = 1 << 20
_SAMSUNG_MARKER: Final = b"MotionPhoto_Data"
_SAMSUNG_TAIL: Final = 1 << 26  # the trailer is searched for in the last 64 MiB
_APPLE_MAKER: Final = b"Apple iOS\x00"
_APPLE_CONTENT_ID: Final = 0x0011
_MOVIE_CONTENT_ID: Final = "com.apple.quicktime.content.identifier"


@dataclass(frozen=True)
class EmbeddedClip:
    """Where a motion photo's MP4 lies in the file.

    Attributes:
        start: byte offset of the MP4's first box.
        length: bytes, to the end of the file.
        found_by: ``XMP MicroVideo``, ``XMP Container`` or ``Samsung trailer``.
    """

    start: int
    length: int
    found_by: str


def embedded_clip(path: Path) -> EmbeddedClip | None:
    """The MP4 a motion photo ``path`` carries, or None (a plain photo, or a claim that no MP4
    backs: the photo is kept as a still)."""
    size = path.stat().st_size
    candidates: list[tuple[int, str]] = []
    xmp = _xmp(path)
    if xmp:
        match = _MICRO_VIDEO_OFFSET.search(xmp)
        if match:
            candidates.append((size - int(match.group(1) or match.group(2)), "XMP MicroVideo"))
        for item in _CONTAINER_ITEM.findall(xmp):
            attributes = {k.decode(): v.decode() for k, v in _ATTRIBUTE.findall(item)}
            if (
                attributes.get("Semantic") == "MotionPhoto"
                and attributes.get("Length", "").isdigit()
            ):
                candidates.append((size - int(attributes["Length"]), "XMP Container"))
    with path.open("rb") as f:
        tail_start = max(0, size - _SAMSUNG_TAIL)
        f.seek(tail_start)
        tail = f.read()
        marker = tail.rfind(_SAMSUNG_MARKER)
        if marker >= 0:
            candidates.append((tail_start + marker + len(_SAMSUNG_MARKER), "Samsung trailer"))
        for start, found_by in candidates:
            if 0 < start < size - 8:
                f.seek(start)
                if f.read(8)[4:8] == b"ftyp":
                    return EmbeddedClip(start, size - start, found_by)
    return None


def copy_clip(path: Path, clip: EmbeddedClip, dest: Path) -> Path:
    """Write the bytes of ``clip`` from ``path`` to ``dest`` (streamed) and return ``dest``."""
    with path.open("rb") as src, dest.open("wb") as out:
        src.seek(clip.start)
        shutil.copyfileobj(src, out, 1 << 20)
    return dest


def _xmp(path: Path) -> bytes:
    """The photo's XMP packet, found in its first MiB (a JPEG's APP1 segment, a HEIF's ``mime``
    item sit at the start), or b"": read as bytes, not decoded, so asking costs no image
    open (the variants step opens the photo once, M1)."""
    with path.open("rb") as f:
        head = f.read(_XMP_SEARCH)
    start = head.find(b"<x:xmpmeta")
    if start < 0:
        return b""
    end = head.find(b"</x:xmpmeta>", start)
    return head[start : end if end >= 0 else len(head)]


def still_content_id(path: Path) -> str | None:
    """The Live Photo content identifier in a still's Apple maker note, or None.

    The maker note is ``Apple iOS\\0``, a version, the byte order (``MM``) and, from byte 14,
    a TIFF IFD whose value offsets count from the maker note's first byte (as ExifTool reads it).
    """
    try:
        with path.open("rb") as f:
            # details: the maker note's bytes are kept only then. Its Apple tags are read
            # here, not by ExifRead, whose Apple offsets count from the IFD (14 bytes late).
            tags = exifread.process_file(f, details=True, extract_thumbnail=False)
    except Exception:  # ExifRead raises anything on odd files; no identifier then
        return None
    note = tags.get("EXIF MakerNote")
    if note is None or not isinstance(note.values, list):
        return None
    data = bytes(note.values)
    if not data.startswith(_APPLE_MAKER) or len(data) < 16:
        return None
    order = ">" if data[12:14] == b"MM" else "<"
    with contextlib.suppress(struct.error):
        (count,) = struct.unpack_from(f"{order}H", data, 14)
        for index in range(min(count, 256)):
            tag, kind, number, value = struct.unpack_from(f"{order}HHII", data, 16 + 12 * index)
            if tag != _APPLE_CONTENT_ID or kind != 2:
                continue
            at = 16 + 12 * index + 8 if number <= 4 else value
            text = data[at : at + number].split(b"\x00", 1)[0].decode("ascii", "replace").strip()
            return text or None
    return None


def movie_content_id(path: Path) -> str | None:
    """The Live Photo content identifier in a QuickTime movie's metadata, or None."""
    try:
        with av.open(str(path)) as container:
            value = container.metadata.get(_MOVIE_CONTENT_ID)
    except (av.FFmpegError, OSError):
        return None
    return str(value).strip() or None if value else None
