"""The ISOBMFF boxes of HEIF/AVIF files that libvips does not expose (ISO/IEC 14496-12, 23008-12).

Read straight from the file, never more than the ``meta`` or ``moov`` box (capped at 4 MiB):

* :func:`heif_brand`: the ``ftyp`` box names a HEIF brand (libvips's sniffer misses some);
* :func:`heif_nclx`: the ``nclx`` colour (primaries, transfer) of the primary item, without which
  PQ/HLG pixels are wrong;
* :func:`heif_extents_in_file`: every ``iloc`` extent ends inside the file (truncation check);
* :func:`sequence_frames`: frames of the ``pict`` track of an image sequence (``avis``).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Nclx", "heif_brand", "heif_extents_in_file", "heif_nclx", "sequence_frames"]

_HEIF_BRANDS = {b"avif", b"avis", b"heic", b"heix", b"heim", b"heis", b"hevc", b"hevx", b"mif1"}
_BOX_LIMIT = 1 << 22  # a meta or moov box larger than 4 MiB is not a photo's


@dataclass(frozen=True)
class Nclx:
    """An ``nclx`` colour box: ITU-T H.273 code points.

    Attributes:
        primaries: colour primaries, e.g. 1 = BT.709, 9 = BT.2020, 12 = Display P3.
        transfer: transfer characteristics, e.g. 13 = sRGB, 16 = PQ, 18 = HLG.
    """

    primaries: int
    transfer: int


def heif_brand(src: Path) -> bool:
    """True when the ``ftyp`` box names a HEIF/AVIF brand (major or compatible)."""
    with src.open("rb") as f:
        head = f.read(64)
    if len(head) < 16 or head[4:8] != b"ftyp":
        return False
    (box_size,) = struct.unpack_from(">I", head, 0)
    brands = [head[8:12]] + [head[i : i + 4] for i in range(16, min(box_size, len(head)) - 3, 4)]
    return any(brand in _HEIF_BRANDS for brand in brands)


def heif_nclx(src: Path) -> Nclx | None:
    """The ``nclx`` colour of the primary item of an ISOBMFF (HEIF/AVIF) file, if any.

    libvips does not expose it, and PQ/HLG pixels are wrong without it.
    """
    try:
        meta = _read_top_box(src, b"meta", limit=_BOX_LIMIT)
    except OSError:
        return None
    if meta is None or len(meta) < 4:
        return None
    children = dict((t, (s, e)) for t, s, e in _boxes(meta, 4, len(meta)))
    if b"pitm" not in children or b"iprp" not in children:
        return None
    s, _ = children[b"pitm"]
    primary = struct.unpack_from(">H" if meta[s] == 0 else ">I", meta, s + 4)[0]
    s, e = children[b"iprp"]
    iprp = dict((t, (ps, pe)) for t, ps, pe in _boxes(meta, s, e))
    if b"ipco" not in iprp or b"ipma" not in iprp:
        return None
    properties = list(_boxes(meta, *iprp[b"ipco"]))
    for index in _item_properties(meta, *iprp[b"ipma"], item=primary):
        if 1 <= index <= len(properties):
            kind, ps, pe = properties[index - 1]
            if kind == b"colr" and pe - ps >= 10 and meta[ps : ps + 4] == b"nclx":
                prim, transfer = struct.unpack_from(">HH", meta, ps + 4)
                return Nclx(prim, transfer)
    return None


def heif_extents_in_file(src: Path) -> bool:
    """Whether every file-offset extent of the ``iloc`` box ends inside the file.

    A truncated HEIF loses the end of its ``mdat``; libheif would decode the grid tiles it still has
    and fill the rest. Extents in ``idat`` or other items, and "to the end" (length 0), pass.
    """
    try:
        size = src.stat().st_size
        meta = _read_top_box(src, b"meta", limit=_BOX_LIMIT)
    except OSError:
        return False
    if meta is None or len(meta) < 4:
        return False
    iloc = next(((s, e) for k, s, e in _boxes(meta, 4, len(meta)) if k == b"iloc"), None)
    if iloc is None:
        return False
    data, pos, end = meta, iloc[0], iloc[1]

    def read(width: int) -> int:
        nonlocal pos
        if pos + width > end:
            raise ValueError("iloc box too short")
        value = int.from_bytes(data[pos : pos + width], "big")
        pos += width
        return value

    try:
        version = read(1)
        read(3)  # flags
        sizes = read(2)
        offset_size, length_size = sizes >> 12, (sizes >> 8) & 15
        base_size, index_size = (sizes >> 4) & 15, (sizes & 15 if version in (1, 2) else 0)
        for _ in range(read(2 if version < 2 else 4)):
            read(2 if version < 2 else 4)  # item id
            method = read(2) & 15 if version in (1, 2) else 0
            read(2)  # data reference index
            base = read(base_size)
            for _ in range(read(2)):
                read(index_size)
                offset, length = base + read(offset_size), read(length_size)
                if method == 0 and length and offset + length > size:
                    return False
    except ValueError:
        return False
    return True


def sequence_frames(src: Path) -> int:
    """Frames of the first picture track of a HEIF/AVIF image sequence; 1 for a still.

    libvips reads only the still items of HEIF, never the ``pict`` track of an ``avis`` file.
    """
    try:
        moov = _read_top_box(src, b"moov", limit=_BOX_LIMIT)
    except OSError:
        return 1
    if moov is None:
        return 1
    for kind, start, end in _boxes(moov, 0, len(moov)):
        if kind != b"trak":
            continue
        mdia = _child(moov, start, end, b"mdia")
        hdlr = mdia and _child(moov, *mdia, b"hdlr")
        if not mdia or not hdlr or moov[hdlr[0] + 8 : hdlr[0] + 12] != b"pict":
            continue
        stsz = _child(moov, *mdia, b"minf", b"stbl", b"stsz")
        if stsz and stsz[1] - stsz[0] >= 12:
            return max(1, int(struct.unpack_from(">I", moov, stsz[0] + 8)[0]))
    return 1


def _child(data: bytes, start: int, end: int, *path: bytes) -> tuple[int, int] | None:
    """(payload start, end) of the box at ``path`` below ``data[start:end]``."""
    for kind in path:
        found = next(((s, e) for k, s, e in _boxes(data, start, end) if k == kind), None)
        if found is None:
            return None
        start, end = found
    return start, end


def _item_properties(data: bytes, start: int, end: int, *, item: int) -> list[int]:
    version, flags = data[start], int.from_bytes(data[start + 1 : start + 4], "big")
    (count,) = struct.unpack_from(">I", data, start + 4)
    pos = start + 8
    for _ in range(count):
        if pos + 3 > end:
            break
        if version < 1:
            (item_id,) = struct.unpack_from(">H", data, pos)
            pos += 2
        else:
            (item_id,) = struct.unpack_from(">I", data, pos)
            pos += 4
        n = data[pos]
        pos += 1
        width = 2 if flags & 1 else 1
        raw = [
            int.from_bytes(data[pos + i * width : pos + (i + 1) * width], "big") for i in range(n)
        ]
        pos += n * width
        if item_id == item:
            return [value & (0x7FFF if width == 2 else 0x7F) for value in raw]
    return []


def _boxes(data: bytes, start: int, end: int) -> Iterator[tuple[bytes, int, int]]:
    """(type, payload start, box end) of the boxes in ``data[start:end]``."""
    pos = start
    while pos + 8 <= end:
        size, kind = struct.unpack_from(">I4s", data, pos)
        header = 8
        if size == 1 and pos + 16 <= end:
            (size,) = struct.unpack_from(">Q", data, pos + 8)
            header = 16
        elif size == 0:
            size = end - pos
        if size < header or pos + size > end:
            return
        yield kind, pos + header, pos + size
        pos += size


def _read_top_box(src: Path, kind: bytes, *, limit: int) -> bytes | None:
    """Payload of the first top-level box ``kind`` (at most ``limit`` bytes); skips the others."""
    with src.open("rb") as f:
        while True:
            header = f.read(8)
            if len(header) < 8:
                return None
            size, box = struct.unpack(">I4s", header)
            consumed = 8
            if size == 1:
                (size,) = struct.unpack(">Q", f.read(8))
                consumed = 16
            if box == kind:
                if size == 0 or size - consumed > limit:
                    return None
                return f.read(size - consumed)
            if size < consumed:
                return None
            f.seek(size - consumed, os.SEEK_CUR)
