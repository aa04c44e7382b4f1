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

__all__ = [
    "Nclx",
    "PrimaryItem",
    "heif_brand",
    "heif_extents_in_file",
    "heif_nclx",
    "primary_item",
    "sequence_frames",
]

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
    matrix: int = 2  # unspecified
    full_range: bool = False


@dataclass(frozen=True)
class PrimaryItem:
    """The primary image item of a HEIF/AVIF file, as far as a direct decode needs it.

    Attributes:
        item_type: e.g. ``av01`` (AV1), ``hvc1`` (HEVC), ``grid`` (tiles of other items).
        extents: (file offset, length) of its coded data, in order; empty unless the data sits
            in the file itself (``iloc`` construction method 0).
        config: payload of its ``av1C`` box (empty when absent).
        nclx: its ``nclx`` colour, None when absent.
        transforms: ``irot``/``imir``/``clap`` properties it has (applied by libheif only).
        has_auxiliary: another item (alpha, depth, gain map) refers to it as ``auxl``.
    """

    item_type: bytes
    extents: tuple[tuple[int, int], ...]
    config: bytes
    nclx: Nclx | None
    transforms: tuple[bytes, ...]
    has_auxiliary: bool


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
            nclx = _nclx(meta, kind, ps, pe)
            if nclx is not None:
                return nclx
    return None


def _nclx(meta: bytes, kind: bytes, start: int, end: int) -> Nclx | None:
    if kind != b"colr" or end - start < 10 or meta[start : start + 4] != b"nclx":
        return None
    prim, transfer, matrix = struct.unpack_from(">HHH", meta, start + 4)
    full = end - start >= 11 and bool(meta[start + 10] & 0x80)
    return Nclx(prim, transfer, matrix, full)


def primary_item(src: Path) -> PrimaryItem | None:
    """The primary item of a HEIF/AVIF file; None when the boxes are missing or malformed."""
    try:
        meta = _read_top_box(src, b"meta", limit=_BOX_LIMIT)
    except OSError:
        return None
    if meta is None or len(meta) < 4:
        return None
    children = {t: (s, e) for t, s, e in _boxes(meta, 4, len(meta))}
    if not {b"pitm", b"iinf", b"iloc", b"iprp"} <= set(children):
        return None
    try:
        s, _ = children[b"pitm"]
        primary = struct.unpack_from(">H" if meta[s] == 0 else ">I", meta, s + 4)[0]
        item_type = _item_types(meta, *children[b"iinf"]).get(primary)
        method, extents = _iloc(meta, *children[b"iloc"]).get(primary, (-1, []))
        s, e = children[b"iprp"]
        iprp = {t: (ps, pe) for t, ps, pe in _boxes(meta, s, e)}
        properties = list(_boxes(meta, *iprp[b"ipco"]))
        mine = [
            properties[index - 1]
            for index in _item_properties(meta, *iprp[b"ipma"], item=primary)
            if 1 <= index <= len(properties)
        ]
        references = _references(meta, *children[b"iref"]) if b"iref" in children else []
    except (KeyError, ValueError, IndexError, struct.error):
        return None
    if item_type is None:
        return None
    config = next((meta[ps:pe] for kind, ps, pe in mine if kind == b"av1C"), b"")
    nclx = next((n for kind, ps, pe in mine if (n := _nclx(meta, kind, ps, pe)) is not None), None)
    return PrimaryItem(
        item_type=item_type,
        extents=tuple(extents) if method == 0 else (),
        config=bytes(config),
        nclx=nclx,
        transforms=tuple(k for k, _, _ in mine if k in (b"irot", b"imir", b"clap")),
        has_auxiliary=any(kind == b"auxl" and primary in to for kind, _, to in references),
    )


def _item_types(data: bytes, start: int, end: int) -> dict[int, bytes]:
    """item id → item type of the ``infe`` entries (versions 2 and 3) of an ``iinf`` box."""
    count_size = 2 if data[start] == 0 else 4
    types = {}
    for kind, ps, pe in _boxes(data, start + 4 + count_size, end):
        if kind != b"infe" or pe - ps < 12 or data[ps] < 2:
            continue
        if data[ps] == 2:
            (item,) = struct.unpack_from(">H", data, ps + 4)
            types[item] = data[ps + 8 : ps + 12]
        else:
            (item,) = struct.unpack_from(">I", data, ps + 4)
            types[item] = data[ps + 10 : ps + 14]
    return types


def _references(data: bytes, start: int, end: int) -> list[tuple[bytes, int, list[int]]]:
    """(type, from item, to items) of an ``iref`` box."""
    width = 2 if data[start] == 0 else 4
    fmt = ">H" if width == 2 else ">I"
    found = []
    for kind, ps, pe in _boxes(data, start + 4, end):
        (source,) = struct.unpack_from(fmt, data, ps)
        (count,) = struct.unpack_from(">H", data, ps + width)
        targets = [
            struct.unpack_from(fmt, data, ps + width + 2 + i * width)[0]
            for i in range(count)
            if ps + width + 2 + (i + 1) * width <= pe
        ]
        found.append((kind, int(source), [int(t) for t in targets]))
    return found


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
    try:
        items = _iloc(meta, *iloc)
    except ValueError:
        return False
    return all(
        offset + length <= size
        for method, extents in items.values()
        if method == 0
        for offset, length in extents
        if length
    )


def _iloc(data: bytes, start: int, end: int) -> dict[int, tuple[int, list[tuple[int, int]]]]:
    """item id → (construction method, [(offset, length)]) of an ``iloc`` box.

    Raises:
        ValueError: the box is shorter than its fields say.
    """
    pos = start

    def read(width: int) -> int:
        nonlocal pos
        if pos + width > end:
            raise ValueError("iloc box too short")
        value = int.from_bytes(data[pos : pos + width], "big")
        pos += width
        return value

    version = read(1)
    read(3)  # flags
    sizes = read(2)
    offset_size, length_size = sizes >> 12, (sizes >> 8) & 15
    base_size, index_size = (sizes >> 4) & 15, (sizes & 15 if version in (1, 2) else 0)
    items = {}
    for _ in range(read(2 if version < 2 else 4)):
        item = read(2 if version < 2 else 4)
        method = read(2) & 15 if version in (1, 2) else 0
        read(2)  # data reference index
        base = read(base_size)
        extents = []
        for _ in range(read(2)):
            read(index_size)
            offset, length = base + read(offset_size), read(length_size)
            extents.append((offset, length))
        items[item] = (method, extents)
    return items


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
