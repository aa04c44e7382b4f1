"""Content sniffing: what a stored blob is, judged from its first bytes only.

Uploads arrive with names and declared types we never trust (a JSON file named ``.webp``, a
JPEG with no extension, text under ``.wav``). :func:`sniff` reads at most :data:`SNIFF_BYTES`
from the start of the file (plus a few bytes after an ID3 tag) and matches magic numbers. It is
shared by the audio and the photo/video domains, which decide from :attr:`Sniffed.kind` which
pipeline a blob enters.

The kind is a first guess from the container: an MP4 is ``video`` even when it holds only
sound, unless its brand says audio (``M4A``/``M4B``). Callers that care confirm by probing the
streams with PyAV.
"""

from __future__ import annotations

import array
import codecs
import itertools
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from conveyor.objects.store import ObjectStore

__all__ = [
    "OCTET_STREAM",
    "PCM_CORRELATION",
    "SNIFF_BYTES",
    "Kind",
    "Sniffed",
    "container_signature",
    "is_document",
    "looks_like_pcm",
    "raw_format",
    "sniff",
    "sniff_bytes",
    "sniff_object",
]

Kind = Literal["audio", "video", "image", "unknown"]

#: How much of the file is read. 4 KiB holds every header we match, including the first Ogg
#: page(s) and an MP4 ``ftyp`` box with dozens of compatible brands.
SNIFF_BYTES: Final = 4096

#: The MIME type of content we do not recognise (also of a zero-byte file).
OCTET_STREAM: Final = "application/octet-stream"


@dataclass(frozen=True)
class Sniffed:
    """The result of sniffing a blob.

    Attributes:
        mime: the MIME type judged from the content, e.g. ``image/jpeg``, ``audio/ogg``;
            ``application/octet-stream`` when unrecognised, ``text/plain`` for text.
        kind: the domain the content belongs to; ``unknown`` for anything we do not process
            (including text and empty files).
    """

    mime: str
    kind: Kind


_UNKNOWN: Final = Sniffed(OCTET_STREAM, "unknown")
_TEXT: Final = Sniffed("text/plain", "unknown")


def sniff(path: Path) -> Sniffed:
    """Identify a file from its magic bytes, ignoring its name.

    Args:
        path: the file to inspect. Only its first :data:`SNIFF_BYTES` bytes are read (and, for
            an MP3 with an ID3v2 tag, 4 bytes just after the tag); the file is never modified.

    Returns:
        The sniffed MIME type and kind. A zero-byte or unrecognised file gives
        ``Sniffed("application/octet-stream", "unknown")``; text gives
        ``Sniffed("text/plain", "unknown")``.

    Raises:
        OSError: the file cannot be opened or read (e.g. ``FileNotFoundError``).
    """
    with path.open("rb") as f:
        head = f.read(SNIFF_BYTES)
        if head[:3] == b"ID3" and len(head) >= 10:
            # An ID3v2 tag can wrap FLAC as well as MP3 and can be large (cover art), so peek
            # just past it rather than reading it.
            f.seek(_id3_end(head))
            return _after_id3(f.read(4))
    return sniff_bytes(head)


def sniff_object(store: ObjectStore, key: str) -> tuple[Sniffed, bytes]:
    """:func:`sniff` for a stored object, reading only its first bytes from the store.

    Returns:
        The sniffed type and the first :data:`SNIFF_BYTES` bytes (for further checks).

    Raises:
        FileNotFoundError: no object under ``key``.
    """
    with store.open(key, 0, SNIFF_BYTES) as body:
        head = body.read()
    if head[:3] == b"ID3" and len(head) >= 10:
        end = _id3_end(head)
        with store.open(key, end, end + 4) as body:
            return _after_id3(body.read()), head
    return sniff_bytes(head), head


def sniff_bytes(head: bytes) -> Sniffed:
    """Identify content from its first bytes (see :func:`sniff`).

    Args:
        head: the start of the content; :data:`SNIFF_BYTES` bytes are enough. Fewer is fine
            (a short file), more is not looked at except for Ogg pages and text detection.

    Returns:
        The sniffed MIME type and kind. An ID3-tagged file is reported as ``audio/mpeg``
        (:func:`sniff` looks past the tag, which this function cannot).
    """
    if not head:
        return _UNKNOWN
    for matcher in _MATCHERS:
        found = matcher(head)
        if found is not None:
            return found
    if _looks_like_text(head[:SNIFF_BYTES]):
        return _TEXT
    return _UNKNOWN


# --- images -------------------------------------------------------------------------------------


def _image(head: bytes) -> Sniffed | None:
    if head.startswith(b"\xff\xd8\xff"):
        return Sniffed("image/jpeg", "image")
    # APNG is a PNG with an acTL chunk; it stays image/png (readers see frame 0 at worst).
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return Sniffed("image/png", "image")
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return Sniffed("image/gif", "image")
    if head[:4] in (b"II*\x00", b"MM\x00*"):
        return Sniffed("image/tiff", "image")
    # "BM" alone is too weak (two ASCII letters); also require a known DIB header size.
    if head[:2] == b"BM" and len(head) >= 18:
        (dib_size,) = struct.unpack_from("<I", head, 14)
        if dib_size in (12, 40, 52, 56, 64, 108, 124):
            return Sniffed("image/bmp", "image")
    return None


# --- RIFF / AIFF: WAV, WebP, AVI --------------------------------------------------------------


def _riff(head: bytes) -> Sniffed | None:
    if len(head) < 12:
        return None
    tag, form = head[:4], head[8:12]
    if tag in (b"RIFF", b"RIFX", b"RF64", b"BW64"):
        if form == b"WAVE":
            return Sniffed("audio/wav", "audio")
        if tag == b"RIFF" and form == b"WEBP":
            return Sniffed("image/webp", "image")
        if tag == b"RIFF" and form == b"AVI ":
            return Sniffed("video/x-msvideo", "video")
    if tag == b"FORM" and form in (b"AIFF", b"AIFC"):
        return Sniffed("audio/aiff", "audio")
    return None


# --- ISO base media (ftyp): MP4, MOV, M4A, 3GP, HEIC, HEIF, AVIF -------------------------------

_AVIF_BRANDS: Final = frozenset({b"avif", b"avis"})
_HEIC_BRANDS: Final = frozenset(
    {b"heic", b"heix", b"heim", b"heis", b"hevc", b"hevx", b"hevm", b"hevs"}
)
# Generic HEIF structure brands: the codec is named by another brand when it is known.
_HEIF_BRANDS: Final = frozenset({b"mif1", b"msf1", b"mif2", b"miaf"})
_M4A_BRANDS: Final = frozenset({b"M4A ", b"M4B ", b"M4P ", b"F4A ", b"F4B "})
# Top-level atoms that open a QuickTime file written before ftyp existed.
_BARE_QT_ATOMS: Final = frozenset({b"moov", b"mdat", b"wide", b"free", b"skip", b"pnot"})


def _iso_bmff(head: bytes) -> Sniffed | None:
    if len(head) < 12:
        return None
    box_type = head[4:8]
    if box_type != b"ftyp":
        if box_type in _BARE_QT_ATOMS and head[:4] != b"\x00\x00\x00\x00":
            return Sniffed("video/quicktime", "video")
        return None
    (box_size,) = struct.unpack(">I", head[:4])
    # A size below 16 cannot hold major brand + minor version; 0 means "to end of file".
    end = len(head) if box_size == 0 else min(box_size, len(head))
    if box_size != 0 and box_size < 16:
        return None
    major = head[8:12]
    compatible = {head[i : i + 4] for i in range(16, end - 3, 4)}
    brands = {major} | compatible
    # Image brands win over the generic ones, and the major brand is checked first so that an
    # MP4 listing "mif1" among many does not turn into an image.
    if major in _AVIF_BRANDS:
        return Sniffed("image/avif", "image")
    if major in _HEIC_BRANDS:
        return Sniffed("image/heic", "image")
    if major in _M4A_BRANDS:
        return Sniffed("audio/mp4", "audio")
    if major == b"qt  ":
        return Sniffed("video/quicktime", "video")
    if major in _HEIF_BRANDS:
        if brands & _AVIF_BRANDS:
            return Sniffed("image/avif", "image")
        if brands & _HEIC_BRANDS:
            return Sniffed("image/heic", "image")
        return Sniffed("image/heif", "image")
    if major.startswith(b"3g2"):
        return Sniffed("video/3gpp2", "video")
    if major.startswith(b"3gp") or major.startswith(b"3ge") or major.startswith(b"3gg"):
        return Sniffed("video/3gpp", "video")
    return Sniffed("video/mp4", "video")


# --- Matroska / WebM ----------------------------------------------------------------------------

_EBML_MAGIC: Final = b"\x1a\x45\xdf\xa3"
_EBML_DOCTYPE_ID: Final = b"\x42\x82"


def _read_vint(data: bytes, pos: int) -> tuple[int, int] | None:
    """Decode an EBML variable-length integer; return (value, next position) or None."""
    if pos >= len(data) or data[pos] == 0:
        return None
    first = data[pos]
    length = 8 - first.bit_length() + 1
    if pos + length > len(data):
        return None
    value = first & (0xFF >> length)
    for b in data[pos + 1 : pos + length]:
        value = (value << 8) | b
    return value, pos + length


def _matroska(head: bytes) -> Sniffed | None:
    if not head.startswith(_EBML_MAGIC):
        return None
    header = _read_vint(head, 4)
    if header is None:
        return Sniffed("video/x-matroska", "video")
    header_size, pos = header
    end = min(pos + header_size, len(head))
    # Walk the EBML header's children looking for DocType; IDs keep their marker bits.
    while pos < end:
        id_len = 8 - head[pos].bit_length() + 1 if head[pos] else 9
        if id_len > 4:
            break
        element_id = head[pos : pos + id_len]
        size = _read_vint(head, pos + id_len)
        if size is None:
            break
        length, data_pos = size
        if element_id == _EBML_DOCTYPE_ID:
            doctype = head[data_pos : data_pos + length].rstrip(b"\x00")
            if doctype == b"webm":
                return Sniffed("video/webm", "video")
            break
        pos = data_pos + length
    return Sniffed("video/x-matroska", "video")


# --- camera RAW --------------------------------------------------------------------------------

# TIFF-based RAW files whose IFD0 is a reduced-resolution preview with the sensor data in
# SubIFDs: the maker (the Make tag) names the format.
_TIFF_RAW_MAKERS: Final = (
    (b"NIKON", "Nikon NEF"),
    (b"SONY", "Sony ARW"),
    (b"PENTAX", "Pentax PEF"),
    (b"SAMSUNG", "Samsung SRW"),
    (b"Canon", "Canon CR2"),
)
_DNG_VERSION: Final = 0xC612
_NEW_SUBFILE_TYPE: Final = 0x00FE
_SUB_IFDS: Final = 0x014A
_MAKE: Final = 0x010F


def raw_format(head: bytes) -> str | None:
    """The camera RAW format ``head`` opens, by name (``DNG``, ``Canon CR3``, ``Nikon NEF``,
    ...), or None. Such files also sniff as TIFF or ISO media; read as those, a decoder finds
    only their small embedded preview, so intake names the format instead (issue 21).

    An ordinary TIFF (an editor's export, even one keeping the camera's Make) is not RAW: its
    first image is the full picture, with no sensor data in SubIFDs.
    """
    if head.startswith(b"FUJIFILMCCD-RAW"):
        return "Fujifilm RAF"
    if len(head) >= 12 and head[4:8] == b"ftyp" and head[8:12] == b"crx ":
        return "Canon CR3"
    if head[:4] in (b"IIRO", b"IIRS", b"MMOR"):
        return "Olympus ORF"
    if head[:4] == b"IIU\x00":
        return "Panasonic RW2"
    if head[:4] == b"II*\x00" and head[8:10] == b"CR":
        return "Canon CR2"
    if head[:4] not in (b"II*\x00", b"MM\x00*"):
        return None
    tags = _ifd0_tags(head)
    if _DNG_VERSION in tags:
        return "DNG"
    make = tags.get(_MAKE)
    if isinstance(make, bytes) and _SUB_IFDS in tags and tags.get(_NEW_SUBFILE_TYPE) == 1:
        for prefix, name in _TIFF_RAW_MAKERS:
            if make.startswith(prefix):
                return name
    return None


def _ifd0_tags(head: bytes) -> dict[int, object]:
    """The first IFD's tags found in ``head``: Make as bytes, NewSubfileType as an int, the
    others as present (None)."""
    order = "<" if head[:2] == b"II" else ">"
    try:
        (offset,) = struct.unpack_from(f"{order}I", head, 4)
        (count,) = struct.unpack_from(f"{order}H", head, offset)
    except struct.error:
        return {}
    tags: dict[int, object] = {}
    for index in range(min(count, 512)):
        at = offset + 2 + 12 * index
        if at + 12 > len(head):
            break
        tag, kind, number, value = struct.unpack_from(f"{order}HHII", head, at)
        if tag == _NEW_SUBFILE_TYPE:
            tags[tag] = value if kind == 4 else struct.unpack_from(f"{order}H", head, at + 8)[0]
        elif tag == _MAKE and kind == 2:
            start = at + 8 if number <= 4 else value
            tags[tag] = head[start : start + number].rstrip(b"\x00 ")
        else:
            tags[tag] = None
    return tags


# --- MPEG transport and program streams: camcorders (AVCHD .MTS/.M2TS), DVDs, recorders ------

_TS_SYNC: Final = 0x47
_PACK_START: Final = b"\x00\x00\x01\xba"  # MPEG-PS pack header (.VOB, .MOD, .MPG)
_SEQUENCE_START: Final = b"\x00\x00\x01\xb3"  # MPEG-1/2 video sequence header (.m2v, .mpg)


def _synced(head: bytes, first: int, size: int) -> bool:
    """A sync byte at ``first`` and every ``size`` bytes after it, four packets (or as many as
    ``head`` holds, at least two): one 0x47 is any byte, four in step are a transport stream."""
    positions = range(first, min(len(head), first + 4 * size), size)
    return len(positions) >= 2 and all(head[p] == _TS_SYNC for p in positions)


def _mpeg_streams(head: bytes) -> Sniffed | None:
    if _synced(head, 0, 188):
        return Sniffed("video/mp2t", "video")
    if _synced(head, 4, 192):  # BDAV/AVCHD: a 4-byte timecode before each 188-byte packet
        return Sniffed("video/mp2t", "video")
    # A pack header, then an MPEG-2 (marker bits 01) or MPEG-1 (0010) system clock.
    if head.startswith(_PACK_START) and len(head) > 4 and head[4] >> 6 == 0b01:
        return Sniffed("video/mpeg", "video")
    if head.startswith(_PACK_START) and len(head) > 4 and head[4] >> 4 == 0b0010:
        return Sniffed("video/mpeg", "video")
    if head.startswith(_SEQUENCE_START):
        return Sniffed("video/mpeg", "video")
    return None


# --- Ogg ----------------------------------------------------------------------------------------

# Identification-packet prefixes of the beginning-of-stream pages, by codec.
_OGG_AUDIO_IDS: Final = (b"OpusHead", b"\x01vorbis", b"\x7fFLAC", b"Speex   ", b"fLaC")
_OGG_VIDEO_IDS: Final = (b"\x80theora", b"OVP80", b"BBCD")  # Theora, VP8, Dirac


def _ogg(head: bytes) -> Sniffed | None:
    if not head.startswith(b"OggS"):
        return None
    audio = video = False
    pos = 0
    # Each logical stream starts with a BOS page; they all come before any data page, so the
    # first pages name every codec in the file (an Ogg Skeleton "fishead" stream may lead).
    while head.startswith(b"OggS", pos) and pos + 27 <= len(head):
        header_type = head[pos + 5]
        if not header_type & 0x02:
            break
        n_segments = head[pos + 26]
        table = head[pos + 27 : pos + 27 + n_segments]
        body = pos + 27 + n_segments
        packet = head[body : body + 16]
        if packet.startswith(_OGG_AUDIO_IDS):
            audio = True
        elif packet.startswith(_OGG_VIDEO_IDS):
            video = True
        pos = body + sum(table)
    if video:
        return Sniffed("video/ogg", "video")
    if audio:
        return Sniffed("audio/ogg", "audio")
    return Sniffed("application/ogg", "unknown")


# --- other audio --------------------------------------------------------------------------------

# MPEG audio header tables, indexed by the header's bit fields.
_MPEG_VERSION: Final = {0b11: 1.0, 0b10: 2.0, 0b00: 2.5}  # 0b01 is reserved
_MPEG_RATES: Final = {
    1.0: (44100, 48000, 32000),
    2.0: (22050, 24000, 16000),
    2.5: (11025, 12000, 8000),
}
# kbit/s for index 1..14, by (version 1 or 2/2.5, layer).
_MPEG_BITRATES: Final = {
    (1, 1): (32, 64, 96, 128, 160, 192, 224, 256, 288, 320, 352, 384, 416, 448),
    (1, 2): (32, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320, 384),
    (1, 3): (32, 40, 48, 56, 64, 80, 96, 112, 128, 160, 192, 224, 256, 320),
    (2, 1): (32, 48, 56, 64, 80, 96, 112, 128, 144, 160, 176, 192, 224, 256),
    (2, 2): (8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160),
    (2, 3): (8, 16, 24, 32, 40, 48, 56, 64, 80, 96, 112, 128, 144, 160),
}


_FrameParser = Callable[[bytes, int], int | None]


def _mpeg_frame_length(head: bytes, pos: int) -> int | None:
    """Length in bytes of the MPEG audio frame whose header starts at ``pos``, or None."""
    if pos + 4 > len(head):
        return None
    b1, b2, b3 = head[pos + 1], head[pos + 2], head[pos + 3]
    if head[pos] != 0xFF or b1 & 0xE0 != 0xE0:
        return None
    version = _MPEG_VERSION.get((b1 >> 3) & 0b11)
    layer = 4 - ((b1 >> 1) & 0b11)  # 0b11 → layer I, 0b01 → layer III, 0b00 → reserved (4)
    bitrate_index, rate_index, padding = b2 >> 4, (b2 >> 2) & 0b11, (b2 >> 1) & 1
    if version is None or layer == 4 or bitrate_index in (0, 15) or rate_index == 3:
        return None
    if b3 & 0b11 == 0b10:  # reserved emphasis
        return None
    bitrate = _MPEG_BITRATES[(1 if version == 1.0 else 2, layer)][bitrate_index - 1] * 1000
    rate = _MPEG_RATES[version][rate_index]
    if layer == 1:
        return (12 * bitrate // rate + padding) * 4
    per_frame = 144 if layer == 2 or version == 1.0 else 72
    return per_frame * bitrate // rate + padding


def _adts_frame_length(head: bytes, pos: int) -> int | None:
    """Length of the AAC ADTS frame whose header starts at ``pos``, or None."""
    if pos + 7 > len(head) or head[pos] != 0xFF or head[pos + 1] & 0xF6 != 0xF0:
        return None
    if (head[pos + 2] >> 2) & 0x0F > 12:  # sampling frequency index
        return None
    length = ((head[pos + 3] & 0x03) << 11) | (head[pos + 4] << 3) | (head[pos + 5] >> 5)
    return length if length >= 7 else None


def _frame_synced(head: bytes, frame_length: int | None, parse: _FrameParser) -> bool:
    """Whether a sync word at offset 0 is confirmed by a valid second frame header."""
    # One header alone is 11-12 bits of evidence, which headerless PCM or a UTF-16 byte-order
    # mark can hit by chance; a clip shorter than two frames (<50 ms) is no loss.
    return frame_length is not None and parse(head, frame_length) is not None


def _audio(head: bytes) -> Sniffed | None:
    if head.startswith(b"fLaC"):
        return Sniffed("audio/flac", "audio")
    if head.startswith(b"ID3"):
        return Sniffed("audio/mpeg", "audio")
    if head.startswith(b"#!AMR-WB\n"):
        return Sniffed("audio/amr-wb", "audio")
    if head.startswith(b"#!AMR\n"):
        return Sniffed("audio/amr", "audio")
    if head.startswith(b"caff"):
        return Sniffed("audio/x-caf", "audio")
    if _frame_synced(head, _adts_frame_length(head, 0), _adts_frame_length):
        return Sniffed("audio/aac", "audio")
    if _frame_synced(head, _mpeg_frame_length(head, 0), _mpeg_frame_length):
        return Sniffed("audio/mpeg", "audio")
    return None


_ASF_GUID: Final = bytes.fromhex("3026b2758e66cf11a6d900aa0062ce6c")


def _asf(head: bytes) -> Sniffed | None:
    # WMA and WMV share the ASF container; "video" is the first guess as for MP4.
    if head.startswith(_ASF_GUID):
        return Sniffed("video/x-ms-asf", "video")
    return None


def _after_id3(after: bytes) -> Sniffed:
    if after.startswith(b"fLaC"):
        return Sniffed("audio/flac", "audio")
    return Sniffed("audio/mpeg", "audio")


def _id3_end(head: bytes) -> int:
    """Offset just past an ID3v2 tag that starts at offset 0 (sizes are 7-bit "syncsafe")."""
    size = 0
    for b in head[6:10]:
        size = (size << 7) | (b & 0x7F)
    footer = 10 if head[5] & 0x10 else 0
    return 10 + size + footer


# --- text ---------------------------------------------------------------------------------------

# Control characters that ordinary text contains: tab, LF, FF, CR, ESC, BS.
_TEXT_CONTROLS: Final = frozenset(b"\t\n\x0c\r\x1b\x08")


def _looks_like_text(head: bytes) -> bool:
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return True  # UTF-16 byte-order mark
    if b"\x00" in head:
        return False
    try:
        # final=False: the read may cut a multi-byte character in two.
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)
    except UnicodeDecodeError:
        return False
    controls = sum(1 for b in head if b < 0x20 and b not in _TEXT_CONTROLS)
    return controls * 100 <= len(head)


# --- documents and archives: never media, also not when an upload claims to be raw PCM -------

_DOCUMENT_MAGIC: Final = (
    (b"%PDF-", "application/pdf"),
    (b"PK\x03\x04", "application/zip"),
    (b"PK\x05\x06", "application/zip"),
    (b"\x1f\x8b", "application/gzip"),
    (b"7z\xbc\xaf\x27\x1c", "application/x-7z-compressed"),
    (b"Rar!\x1a\x07", "application/vnd.rar"),
    (b"\x7fELF", "application/x-executable"),
    (b"MZ", "application/x-msdownload"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "application/x-ole-storage"),
    (b"SQLite format 3\x00", "application/vnd.sqlite3"),
)
# Markup a browser would render, after an optional UTF-8 byte-order mark and blanks.
_MARKUP: Final = (
    (b"<!doctype html", "text/html"),
    (b"<html", "text/html"),
    (b"<head", "text/html"),
    (b"<body", "text/html"),
    (b"<script", "text/html"),
    (b"<iframe", "text/html"),
    (b"<svg", "image/svg+xml"),
    (b"<?xml", "application/xml"),
)


def _document(head: bytes) -> Sniffed | None:
    for magic, mime in _DOCUMENT_MAGIC:
        if head.startswith(magic) and (magic != b"MZ" or _looks_like_pe(head)):
            return Sniffed(mime, "unknown")
    start = head.removeprefix(b"\xef\xbb\xbf").lstrip(b" \t\r\n\x0c")[:16].lower()
    for magic, mime in _MARKUP:
        if start.startswith(magic):
            return Sniffed(mime, "unknown")
    return None


def _looks_like_pe(head: bytes) -> bool:
    # "MZ" alone is two ASCII letters; a DOS/PE executable also points at its PE header.
    if len(head) < 64:
        return False
    (offset,) = struct.unpack_from("<I", head, 60)
    return offset + 4 <= len(head) and head[offset : offset + 4] == b"PE\x00\x00"


def is_document(sniffed: Sniffed) -> bool:
    """True for content we know is no sound at all: images, text, markup, PDF, archives,
    executables. An upload that says it is headerless PCM (``raw_pcm``) and sniffs as one of
    these is refused rather than "decoded" into noise."""
    if sniffed.kind == "image":
        return True
    return sniffed.kind == "unknown" and sniffed.mime != OCTET_STREAM


# --- containers that are never headerless PCM ---------------------------------------------------

#: Readable names of the formats :func:`container_signature` recognises, by MIME type.
_CONTAINER_NAMES: Final = {
    "audio/wav": "WAV",
    "audio/aiff": "AIFF",
    "audio/mp4": "MP4/M4A",
    "video/mp4": "MP4",
    "video/3gpp": "3GP",
    "video/3gpp2": "3GP2",
    "video/quicktime": "QuickTime",
    "video/x-msvideo": "AVI",
    "video/x-matroska": "Matroska",
    "video/webm": "WebM",
    "audio/ogg": "Ogg",
    "video/ogg": "Ogg",
    "application/ogg": "Ogg",
    "audio/flac": "FLAC",
    "audio/mpeg": "MP3",
    "audio/aac": "AAC (ADTS)",
    "audio/amr": "AMR",
    "audio/amr-wb": "AMR-WB",
    "audio/x-caf": "CAF",
    "video/x-ms-asf": "ASF (WMA/WMV)",
}


def container_signature(head: bytes) -> tuple[Sniffed, str] | None:
    """The audio or video format whose *complete* signature opens ``head``, or None.

    For content declared headerless PCM (``raw_pcm``): such bytes are read as samples, so a
    compressed file would be "transcribed" as noise. Stricter than :func:`sniff_bytes`, because
    here a false match refuses a real recording: every signature accepted below is at least
    about 40 bits that must all match (e.g. ``RIFF`` + ``WAVE``, a whole valid ID3v2 header,
    three chained MPEG frame headers, ``fLaC`` + a STREAMINFO block header, an EBML header
    naming its DocType), so samples of sound starting with, say, the bytes ``ID3`` by chance
    are not refused. Weak magic (QuickTime atom names without ``ftyp``, a bare EBML magic, a
    single frame sync) is left alone.

    Args:
        head: the first :data:`SNIFF_BYTES` bytes of the content.

    Returns:
        The sniffed type and a readable format name (``MP3``, ``WAV``, ``Ogg``, ...), or None.
    """
    found = sniff_bytes(head)
    if not _complete_signature(head, found):
        return None
    return found, _CONTAINER_NAMES[found.mime]


def _complete_signature(head: bytes, found: Sniffed) -> bool:
    mime = found.mime
    if mime not in _CONTAINER_NAMES:
        return False
    if mime.startswith("application/ogg") or head.startswith(b"OggS"):
        # Capture pattern, stream structure version 0, and the beginning-of-stream flag.
        return len(head) >= 27 and head[4] == 0 and bool(head[5] & 0x02)
    if head.startswith(b"ID3"):
        return _id3_header_valid(head)
    if mime == "audio/flac":
        # "fLaC" then the STREAMINFO metadata block: type 0 (last flag free), length 34.
        return len(head) >= 8 and head[4] & 0x7F == 0 and head[5:8] == b"\x00\x00\x22"
    if mime == "audio/mpeg":
        return _frames_chained(head, _mpeg_frame_length)
    if mime == "audio/aac":
        return _frames_chained(head, _adts_frame_length)
    if mime in ("video/x-matroska", "video/webm"):
        # The EBML magic plus a DocType element that names the format.
        window = head[:64]
        return head.startswith(_EBML_MAGIC) and (
            _EBML_DOCTYPE_ID + b"\x88matroska" in window or _EBML_DOCTYPE_ID + b"\x84webm" in window
        )
    if mime == "video/quicktime":
        return head[4:8] == b"ftyp"  # not the pre-ftyp atom names alone
    if mime == "audio/x-caf":
        return head[4:8] == b"\x00\x01\x00\x00"  # file version 1, no flags
    # RIFF/RIFX/RF64 + form, FORM + AIFF/AIFC, "ftyp" + a box size of at least 16, the AMR
    # magic lines and the 16-byte ASF GUID are long enough as matched.
    return True


def _id3_header_valid(head: bytes) -> bool:
    """A whole ID3v2 header: ``ID3``, version 2-4, a revision, no undefined flag, and a
    syncsafe size."""
    if len(head) < 10 or head[3] not in (2, 3, 4) or head[4] == 0xFF:
        return False
    return head[5] & 0x0F == 0 and all(b < 0x80 for b in head[6:10])


def _frames_chained(head: bytes, parse: _FrameParser, count: int = 3) -> bool:
    """Whether ``count`` valid frame headers follow each other from offset 0."""
    pos = 0
    for _ in range(count):
        length = parse(head, pos)
        if length is None:
            return False
        pos += length
    return True


# --- headerless PCM -----------------------------------------------------------------------------

#: Lag-1 correlation of 16-bit samples above which bytes look like sound: neighbouring samples
#: of speech or music at 8-48 kHz are strongly alike (the corpus' goforward.raw: 0.99), while
#: compressed media, images and random bytes stay near 0 (at most 0.55 in the corpus).
PCM_CORRELATION: Final = 0.8


def looks_like_pcm(head: bytes) -> bool:
    """Whether unrecognised bytes look like headerless 16-bit little-endian PCM.

    Only a hint for people (send it again with ``raw_pcm``): content with a known header never
    gets here. Reads the samples in ``head`` (at least 64) as s16le and measures how alike
    neighbouring samples are; digital silence (all zero) counts as PCM.
    """
    count = len(head) // 2
    if count < 64:
        return False
    samples = array.array("h", head[: count * 2])
    if sys.byteorder != "little":
        samples.byteswap()
    mean = sum(samples) / count
    centred = [x - mean for x in samples]
    energy = sum(x * x for x in centred)
    if energy == 0:
        return all(x == 0 for x in samples)
    lagged = sum(a * b for a, b in itertools.pairwise(centred))
    return lagged / energy >= PCM_CORRELATION


_MATCHERS: Final = (
    _image,
    _riff,
    _iso_bmff,
    _matroska,
    _ogg,
    _mpeg_streams,
    _audio,
    _asf,
    _document,
)
