"""Camera RAW is never silently its embedded preview (issue 21): until RAW decoding is here,
intake refuses a RAW file with a reason that names its format; an ordinary TIFF, even one
keeping the camera's Make, is still a photo. The files are built byte by byte here."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
import pyvips

from conveyor.errors import UnsupportedMedia
from conveyor.media.intake import probe_upload
from conveyor.objects.sniff import raw_format
from tests.support.media import MEDIA


def tiff(entries: list[tuple[int, int, int, bytes]]) -> bytes:
    """A little-endian TIFF whose IFD0 holds ``entries`` (tag, type, count, 4 value bytes), and
    8×8 grey pixels the entries may point at (strip at offset 200)."""
    ifd = struct.pack("<H", len(entries))
    for tag, kind, count, value in sorted(entries):
        ifd += struct.pack("<HHI", tag, kind, count) + value.ljust(4, b"\0")
    body = b"II*\0" + struct.pack("<I", 8) + ifd + b"\0\0\0\0"
    return body.ljust(200, b"\0") + b"\x80" * 64


def short(value: int) -> bytes:
    return struct.pack("<H", value)


def long(value: int) -> bytes:
    return struct.pack("<I", value)


BASE = [
    (0x0100, 3, 1, short(8)),  # ImageWidth
    (0x0101, 3, 1, short(8)),  # ImageLength
    (0x0102, 3, 1, short(8)),  # BitsPerSample
    (0x0106, 3, 1, short(1)),  # Photometric: black is zero
    (0x0111, 4, 1, long(200)),  # StripOffsets
    (0x0116, 3, 1, short(8)),  # RowsPerStrip
    (0x0117, 4, 1, long(64)),  # StripByteCounts
]
DNG = tiff([*BASE, (0x00FE, 4, 1, long(1)), (0xC612, 1, 4, bytes([1, 4, 0, 0]))])
# The same Make in an editor's export: the full picture first, no SubIFDs.
NIKON_TIFF = tiff([*BASE, (0x010F, 2, 4, b"NIK\0")])


@pytest.mark.parametrize(
    ("head", "name"),
    [
        (DNG, "DNG"),
        (b"II*\0\x10\0\0\0CR\x02\0" + b"\0" * 64, "Canon CR2"),
        (b"\0\0\0\x18ftypcrx \0\0\0\x01crx isom" + b"\0" * 64, "Canon CR3"),
        (b"FUJIFILMCCD-RAW 0201FF383501" + b"\0" * 64, "Fujifilm RAF"),
        (b"IIRO\x08\0\0\0" + b"\0" * 64, "Olympus ORF"),
        (b"IIU\0\x08\0\0\0" + b"\0" * 64, "Panasonic RW2"),
    ],
)
def test_raw_formats_are_named_by_their_first_bytes(head: bytes, name: str) -> None:
    assert raw_format(head) == name


def test_a_nef_is_told_from_a_tiff_that_keeps_the_cameras_make() -> None:
    # IFD0 a preview (NewSubfileType 1) with the sensor data in SubIFDs; "NIKON" after the
    # 264 bytes of header and pixels, where the Make entry points.
    make = (0x010F, 2, 6, long(264))
    nef = tiff([*BASE, (0x00FE, 4, 1, long(1)), make, (0x014A, 4, 1, long(0))]) + b"NIKON\0"
    assert raw_format(nef) == "Nikon NEF"
    assert raw_format(NIKON_TIFF) is None


def test_a_dng_is_refused_naming_its_format_and_a_tiff_is_a_photo(tmp_path: Path) -> None:
    dng = tmp_path / "IMG_0001.DNG"
    dng.write_bytes(DNG)
    with pytest.raises(UnsupportedMedia) as refused:
        probe_upload(dng, max_pixels=MEDIA.max_pixels, name="IMG_0001.DNG")
    assert refused.value.reason == "not_media"
    message = str(refused.value)
    assert "IMG_0001.DNG is a DNG camera RAW file" in message and "preview" in message
    plain = tmp_path / "scan.tif"
    pyvips.Image.black(8, 8).cast("uchar").tiffsave(str(plain))
    probed = probe_upload(plain, max_pixels=MEDIA.max_pixels)
    assert (probed.kind, probed.width) == ("photo", 8)
