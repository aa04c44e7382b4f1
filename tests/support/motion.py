"""Motion photos and Live Photo stills built from corpus images and videos, with real metadata.

The corpus has a Live Photo's movie (``lychee__train.mov``) but neither its still nor any motion
photo, so the tests make them the way phones do: a corpus JPEG with an XMP packet (Google's
Motion Photo 1.0 ``Container:Directory``, the older ``GCamera:MicroVideo*``) or Samsung's trailer
marker, and a corpus MP4 appended; a Live Photo still is a corpus JPEG given an EXIF block whose
Apple maker note holds the content identifier (the layout ExifTool reads: ``Apple iOS``, version,
byte order, then an IFD whose value offsets count from the maker note's first byte).
"""

from __future__ import annotations

import struct
from pathlib import Path

__all__ = ["LIVE_ID", "live_still", "motion_photo"]

LIVE_ID = "E905E6C6-C747-4805-942F-9904A0281F02"
"""The content identifier of the corpus's Live Photo movie ``lychee__train.mov``."""

_XMP_HEADER = b"http://ns.adobe.com/xap/1.0/\x00"


def _app1(body: bytes) -> bytes:
    return b"\xff\xe1" + struct.pack(">H", len(body) + 2) + body


def _with_segment(jpeg: bytes, segment: bytes) -> bytes:
    assert jpeg[:2] == b"\xff\xd8", "not a JPEG"
    return jpeg[:2] + segment + jpeg[2:]


def _container_xmp(length: int) -> bytes:
    return (
        '<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF '
        'xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description rdf:about="" '
        'xmlns:GCamera="http://ns.google.com/photos/1.0/camera/" '
        'xmlns:Container="http://ns.google.com/photos/1.0/container/" '
        'xmlns:Item="http://ns.google.com/photos/1.0/container/item/" '
        'GCamera:MotionPhoto="1" GCamera:MotionPhotoVersion="1" '
        'GCamera:MotionPhotoPresentationTimestampUs="500000"><Container:Directory><rdf:Seq>'
        '<rdf:li rdf:parseType="Resource"><Container:Item Item:Mime="image/jpeg" '
        'Item:Semantic="Primary" Item:Length="0" Item:Padding="0"/></rdf:li>'
        '<rdf:li rdf:parseType="Resource"><Container:Item Item:Mime="video/mp4" '
        f'Item:Semantic="MotionPhoto" Item:Length="{length}" Item:Padding="0"/></rdf:li>'
        "</rdf:Seq></Container:Directory></rdf:Description></rdf:RDF></x:xmpmeta>"
    ).encode()


def _micro_video_xmp(offset: int) -> bytes:
    return (
        '<x:xmpmeta xmlns:x="adobe:ns:meta/"><rdf:RDF '
        'xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#"><rdf:Description rdf:about="" '
        'xmlns:GCamera="http://ns.google.com/photos/1.0/camera/" GCamera:MicroVideo="1" '
        f'GCamera:MicroVideoVersion="1" GCamera:MicroVideoOffset="{offset}" '
        'GCamera:MicroVideoPresentationTimestampUs="1000000"/></rdf:RDF></x:xmpmeta>'
    ).encode()


def motion_photo(path: Path, still: Path, clip: Path, style: str) -> Path:
    """Write ``still`` with ``clip`` (an MP4) appended as a motion photo of ``style``:
    ``container`` (Motion Photo 1.0), ``micro_video`` (MVIMG) or ``samsung`` (the trailer's
    ``MotionPhoto_Data`` marker, no XMP)."""
    jpeg, mp4 = still.read_bytes(), clip.read_bytes()
    if style == "container":
        jpeg = _with_segment(jpeg, _app1(_XMP_HEADER + _container_xmp(len(mp4))))
    elif style == "micro_video":
        jpeg = _with_segment(jpeg, _app1(_XMP_HEADER + _micro_video_xmp(len(mp4))))
    elif style == "samsung":
        jpeg += b"MotionPhoto_Data"
    else:
        raise ValueError(style)
    path.write_bytes(jpeg + mp4)
    return path


def _apple_maker_note(content_id: str) -> bytes:
    text = content_id.encode() + b"\x00"
    entries = 2
    ifd_end = 14 + 2 + 12 * entries + 4
    note = b"Apple iOS\x00" + b"\x00\x01" + b"MM" + struct.pack(">H", entries)
    note += struct.pack(">HHII", 0x0001, 9, 1, 14)  # MakerNoteVersion (SLONG)
    note += struct.pack(">HHII", 0x0011, 2, len(text), ifd_end)  # ContentIdentifier
    return note + b"\x00\x00\x00\x00" + text


def live_still(path: Path, still: Path, content_id: str = LIVE_ID) -> Path:
    """Write ``still`` (a JPEG without EXIF of its own) as an iPhone Live Photo's still: an
    EXIF block with Make ``Apple`` and the maker note holding ``content_id``."""
    note = _apple_maker_note(content_id)
    make = b"Apple\x00"
    # TIFF header (8), IFD0 with 2 entries (2 + 24 + 4), the Exif IFD with 1 (2 + 12 + 4).
    ifd0, exif_ifd = 8, 8 + 30
    make_at = exif_ifd + 18
    note_at = make_at + len(make)
    tiff = b"MM\x00\x2a" + struct.pack(">I", ifd0)
    tiff += struct.pack(">H", 2)
    tiff += struct.pack(">HHII", 0x010F, 2, len(make), make_at)  # Make
    tiff += struct.pack(">HHII", 0x8769, 4, 1, exif_ifd)  # ExifIFD
    tiff += b"\x00\x00\x00\x00"
    tiff += struct.pack(">H", 1) + struct.pack(">HHII", 0x927C, 7, len(note), note_at)
    tiff += b"\x00\x00\x00\x00" + make + note
    path.write_bytes(_with_segment(still.read_bytes(), _app1(b"Exif\x00\x00" + tiff)))
    return path
