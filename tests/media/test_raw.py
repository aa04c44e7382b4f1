"""Camera RAW photos (issue 21): told by their first bytes, decoded by LibRaw (rawpy) into
upright, colour-managed variants with the capture time from their EXIF, and never silently
their embedded preview: what LibRaw cannot decode is refused with a reason naming the format.
An ordinary TIFF, even one keeping the camera's Make, is still a photo. The RAW files are real
DNGs written from known pixels (tests/support/raw.py); the headers are built byte by byte."""

from __future__ import annotations

import struct
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import pyvips
from numpy.typing import NDArray
from sqlalchemy import Engine

from conveyor.errors import RejectedInput, UnsupportedMedia
from conveyor.media.albums import item_view
from conveyor.media.images import make_image_variants
from conveyor.media.intake import probe_upload
from conveyor.objects import LocalStore, WorkFolder
from conveyor.objects.sniff import raw_format
from conveyor.testing import FakeClock
from tests.support.media import MEDIA, add, album, drain, media_domain
from tests.support.raw import quadrant_scene, write_dng


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


def test_what_libraw_cannot_decode_is_refused_naming_the_format_and_a_tiff_is_a_photo(
    tmp_path: Path,
) -> None:
    # A DNG header with no sensor data, and a CR3's first box with nothing after it.
    for name, body, fmt in (
        ("IMG_0001.DNG", DNG, "DNG"),
        ("IMG_0002.CR3", b"\0\0\0\x18ftypcrx \0\0\0\x01crx isom" + b"\0" * 64, "Canon CR3"),
    ):
        path = tmp_path / name
        path.write_bytes(body)
        with pytest.raises(UnsupportedMedia) as refused:
            probe_upload(path, max_pixels=MEDIA.max_pixels, name=name)
        assert refused.value.reason == "not_media"
        message = str(refused.value)
        assert f"{name} is a {fmt} camera RAW file that LibRaw" in message, message
        assert "cannot decode" in message and "preview" in message
    plain = tmp_path / "scan.tif"
    pyvips.Image.black(8, 8).cast("uchar").tiffsave(str(plain))
    probed = probe_upload(plain, max_pixels=MEDIA.max_pixels)
    assert (probed.kind, probed.width) == ("photo", 8)


def _mean(
    image: pyvips.Image, left: float, top: float, right: float, bottom: float
) -> NDArray[Any]:
    """The mean RGB of the box (fractions of the width and height) of ``image``."""
    pixels = image.numpy()
    h, w = pixels.shape[:2]
    box = pixels[int(top * h) : int(bottom * h), int(left * w) : int(right * w), :3]
    return np.asarray(box.reshape(-1, 3).mean(axis=0))


# Where each quadrant of the stored sensor data shows once turned a quarter clockwise
# (Orientation 6), as boxes well inside it: (left, top, right, bottom).
UPRIGHT_BOXES = {
    "red": (0.6, 0.1, 0.9, 0.4),  # stored top-left -> top-right
    "green": (0.6, 0.6, 0.9, 0.9),  # stored top-right -> bottom-right
    "blue": (0.1, 0.1, 0.4, 0.4),  # stored bottom-left -> top-left
    "grey": (0.1, 0.6, 0.4, 0.9),  # stored bottom-right -> bottom-left
}


def check_colours(image: pyvips.Image) -> None:
    """Each quadrant in its upright place, its hue kept, the grey neutral (sRGB output)."""
    for name, box in UPRIGHT_BOXES.items():
        r, g, b = _mean(image, *box)
        if name == "grey":
            assert max(abs(r - g), abs(b - g)) < 6 and 60 < g < 230, (name, r, g, b)
            continue
        channel = {"red": 0, "green": 1, "blue": 2}[name]
        values = [r, g, b]
        others = [v for i, v in enumerate(values) if i != channel]
        assert values[channel] > 150 and max(others) < values[channel] * 0.55, (name, values)


def test_a_dng_is_a_photo_probed_by_libraw_with_its_capture_time(tmp_path: Path) -> None:
    path = write_dng(
        tmp_path / "IMG_0100.DNG",
        quadrant_scene(240, 320),
        orientation=6,
        taken="2024:07:01 14:05:11",
        offset="+02:00",
    )
    probed = probe_upload(path, max_pixels=MEDIA.max_pixels, name="IMG_0100.DNG")
    assert (probed.kind, probed.mime_type) == ("photo", "image/x-adobe-dng")
    assert (probed.width, probed.height) == (240, 320)  # upright: a quarter turn
    assert probed.captured_at == datetime(2024, 7, 1, 12, 5, 11, tzinfo=UTC).timestamp()
    assert probed.captured_offset == 120
    with pytest.raises(RejectedInput) as big:
        probe_upload(path, max_pixels=240 * 320 - 1, name="IMG_0100.DNG")
    assert big.value.reason == "too_many_pixels"


@pytest.mark.parametrize("largest", [2048, 100])
def test_dng_variants_are_upright_srgb_from_the_sensor_data(tmp_path: Path, largest: int) -> None:
    """NORMS M1: every role from one decode. 2048: the full demosaic (the photo is smaller);
    100: LibRaw's half-size shrink-on-load. Either way never the embedded preview (this DNG has
    none) and the colours of the scene where the orientation puts them."""
    path = write_dng(tmp_path / "IMG_0101.DNG", quadrant_scene(400, 600), orientation=6)
    sizes = {"thumb": min(64, largest), "preview": largest}
    made = make_image_variants(
        path, tmp_path / "out", sizes=sizes, image_format="webp", quality=90, max_pixels=10**8
    )
    by_role = {v.role: v for v in made}
    expected_edge = min(largest, 600)
    preview = by_role["preview"]
    assert max(preview.width, preview.height) == expected_edge
    assert preview.width < preview.height  # upright: stored 600 wide, shown 400 wide
    for variant in made:
        image = pyvips.Image.new_from_file(str(variant.path))
        assert image.interpretation == "srgb" and image.bands == 3
        check_colours(image)


def test_a_dng_added_to_an_album_becomes_a_done_photo_with_upright_roles(
    engine: Engine, tmp_path: Path, clock: FakeClock
) -> None:
    store = LocalStore(tmp_path / "store", work=WorkFolder(tmp_path / "work"))
    album_id = album(engine, clock)
    path = write_dng(
        tmp_path / "DSC_0001.DNG",
        quadrant_scene(400, 600),
        orientation=6,
        taken="2023:12:24 18:30:00",
        offset="-05:00",
    )
    item_id = add(engine, store, clock, album_id, path)
    drain(engine, media_domain(store), clock)
    with engine.connect() as conn:
        view = item_view(conn, item_id)
    assert view["done"], view
    assert view["captured_local"] == "2023-12-24T18:30:00-05:00"
    roles = view["roles"]
    assert roles["original"]["mime_type"] == "image/x-adobe-dng"
    assert {"thumb", "medium", "preview"} <= set(roles)
    for role in ("thumb", "medium", "preview"):
        assert roles[role]["width"] < roles[role]["height"], (role, roles[role])
    with store.local_copy(roles["preview"]["key"]) as copy:
        check_colours(pyvips.Image.new_from_file(str(copy)))
