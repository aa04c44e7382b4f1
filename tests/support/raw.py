"""Real camera RAW files from known pixels: a DNG whose sensor data is a Bayer mosaic.

The corpus has no RAW file, so the tests (and the RAW benchmark) write DNGs with tifffile: the
scene (linear RGB, 0 to 1) is sampled through an RGGB colour filter array into 12-bit values,
with the DNG tags LibRaw needs to develop it: the CFA layout, black and white levels, and a
colour matrix that makes the camera's RGB linear sRGB (D65), so the developed picture is the
scene in sRGB. The capture tags go in IFD0, where TIFF/EP (and so DNG) allows them.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import tifffile
from numpy.typing import NDArray

__all__ = ["QUADRANTS", "WHITE", "quadrant_scene", "write_dng", "write_mosaic_dng"]

WHITE = 4095  # 12-bit sensor

# XYZ (D65) from linear sRGB, IEC 61966-2-1.
_SRGB_TO_XYZ = np.array(
    [[0.4124, 0.3576, 0.1805], [0.2126, 0.7152, 0.0722], [0.0193, 0.1192, 0.9505]]
)

QUADRANTS = {"top-left": "red", "top-right": "green", "bottom-left": "blue", "bottom-right": "grey"}
"""What :func:`quadrant_scene` paints where, as stored (before the orientation)."""

_COLOURS = {
    "red": (0.7, 0.08, 0.08),
    "green": (0.08, 0.6, 0.08),
    "blue": (0.08, 0.08, 0.7),
    "grey": (0.3, 0.3, 0.3),
}


def quadrant_scene(height: int, width: int) -> NDArray[np.float64]:
    """Linear RGB of height×width: red, green, blue and grey quadrants (:data:`QUADRANTS`)."""
    scene = np.zeros((height, width, 3))
    top, left = slice(0, height // 2), slice(0, width // 2)
    bottom, right = slice(height // 2, height), slice(width // 2, width)
    for (rows, cols), name in zip(
        ((top, left), (top, right), (bottom, left), (bottom, right)),
        QUADRANTS.values(),
        strict=True,
    ):
        scene[rows, cols] = _COLOURS[name]
    return scene


def _rationals(values: NDArray[np.float64]) -> list[int]:
    out: list[int] = []
    for value in values.ravel():
        out += [round(float(value) * 10_000), 10_000]
    return out


def write_dng(
    path: Path,
    scene: NDArray[np.float64],
    *,
    orientation: int = 1,
    taken: str | None = None,
    offset: str | None = None,
) -> Path:
    """Write ``scene`` (linear RGB, height×width×3, even sides) as a 12-bit RGGB DNG.

    Args:
        orientation: the EXIF/TIFF Orientation tag (6: the picture is the stored one turned a
            quarter clockwise).
        taken: ``DateTimeOriginal``, ``YYYY:MM:DD HH:MM:SS`` local time.
        offset: ``OffsetTimeOriginal``, ``+HH:MM``.
    """
    mosaic = np.empty(scene.shape[:2], dtype=np.uint16)
    levels = np.clip(np.rint(scene * WHITE), 0, WHITE).astype(np.uint16)
    mosaic[0::2, 0::2] = levels[0::2, 0::2, 0]  # R
    mosaic[0::2, 1::2] = levels[0::2, 1::2, 1]  # G
    mosaic[1::2, 0::2] = levels[1::2, 0::2, 1]  # G
    mosaic[1::2, 1::2] = levels[1::2, 1::2, 2]  # B
    return write_mosaic_dng(path, mosaic, orientation=orientation, taken=taken, offset=offset)


def write_mosaic_dng(
    path: Path,
    mosaic: NDArray[np.uint16],
    *,
    orientation: int = 1,
    taken: str | None = None,
    offset: str | None = None,
) -> Path:
    """Write an RGGB sensor ``mosaic`` (12-bit values, 0 to :data:`WHITE`) as a DNG; the
    arguments as :func:`write_dng`'s."""
    # ColorMatrix1 maps XYZ to the camera's RGB; the camera's RGB is linear sRGB here.
    xyz_to_camera = np.linalg.inv(_SRGB_TO_XYZ)
    tags: list[tuple[int, int | str, int, object, bool]] = [
        (254, 4, 1, 0, True),  # NewSubfileType: the main image
        (271, "s", 0, "Conveyor", True),  # Make
        (272, "s", 0, "Test Bayer", True),  # Model
        (274, 3, 1, orientation, True),
        (33421, 3, 2, (2, 2), True),  # CFARepeatPatternDim
        (33422, 1, 4, (0, 1, 1, 2), True),  # CFAPattern: RGGB
        (50706, 1, 4, (1, 4, 0, 0), True),  # DNGVersion 1.4
        (50708, "s", 0, "Conveyor Test Bayer", True),  # UniqueCameraModel
        (50714, 3, 1, 0, True),  # BlackLevel
        (50717, 3, 1, WHITE, True),  # WhiteLevel
        (50721, 10, 9, _rationals(xyz_to_camera), True),  # ColorMatrix1
        (50728, 5, 3, (1, 1, 1, 1, 1, 1), True),  # AsShotNeutral: white is R = G = B
        (50778, 3, 1, 21, True),  # CalibrationIlluminant1: D65
    ]
    if taken is not None:
        tags.append((36867, "s", 0, taken, True))  # DateTimeOriginal
    if offset is not None:
        tags.append((36881, "s", 0, offset, True))  # OffsetTimeOriginal
    tifffile.imwrite(path, mosaic, photometric=32803, extratags=tags)  # 32803: CFA
    return path
