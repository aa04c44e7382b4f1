"""Colour: any decoded photo → 8-bit sRGB, including PQ/HLG HDR tone mapping (libvips ops only).

libvips 8.18 has no PQ/HLG operation (only UltraHDR gain maps), so the transfer is decoded here:
PQ/HLG → linear light with BT.2408 reference white (203 cd/m²) at 1.0, primaries (P3, BT.2020) →
BT.709 by matrix, values above a knee rolled off with an exponential shoulder, then the sRGB
curve. An SDR ``nclx`` with wide primaries gets the matrix only. Every function builds a lazy
libvips pipeline (the per-channel curves as 65536-entry tables); nothing is computed until the
caller renders it.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping

import numpy as np
import pyvips

from conveyor.media.images.isobmff import Nclx

__all__ = [
    "PRIMARIES_TO_BT709",
    "has_icc",
    "hdr_to_srgb",
    "is_hdr",
    "shrink_heif",
    "to_bt709_primaries",
    "to_srgb8",
    "tone_map",
]

# nclx code points (ITU-T H.273).
_TRANSFER_PQ = 16
_TRANSFER_HLG = 18
_NONSRGB_TRANSFERS = (_TRANSFER_PQ, _TRANSFER_HLG)
PRIMARIES_TO_BT709: dict[int, list[list[float]]] = {
    # Linear-light RGB → BT.709/sRGB RGB, both D65.
    9: [  # BT.2020
        [1.6605, -0.5876, -0.0728],
        [-0.1246, 1.1329, -0.0083],
        [-0.0182, -0.1006, 1.1187],
    ],
    12: [  # SMPTE EG 432-1 (Display P3)
        [1.2249, -0.2247, 0.0],
        [-0.0420, 1.0419, 0.0],
        [-0.0197, -0.0786, 1.0979],
    ],
}
"""Linear-light matrices from the nclx primaries we convert (BT.2020, Display P3) to BT.709."""

_REFERENCE_WHITE_NITS = 203.0  # BT.2408 HDR reference white; maps to SDR 1.0
_KNEE = 0.75  # below this (linear, 1.0 = reference white) HDR values pass unchanged
_LINEAR_TOP = 100.0  # linear light (1.0 = reference white) above which all maps to white
_ENCODING_GAMMA = 2.4  # the display table's index is linear ** (1 / this)


def is_hdr(nclx: Nclx | None) -> bool:
    """True when ``nclx`` says PQ or HLG: the pixels are HDR code values, not sRGB."""
    return nclx is not None and nclx.transfer in _NONSRGB_TRANSFERS


def has_icc(image: pyvips.Image) -> bool:
    """True when ``image`` carries an ICC profile."""
    return bool(image.get_typeof("icc-profile-data") != 0)


def shrink_heif(
    image: pyvips.Image, target: int, nclx: Nclx | None, to_srgb: Mapping[str, str]
) -> pyvips.Image:
    """A full-size HEIF/AVIF decode (libvips's or pillow-heif's) → longest edge ``target``.

    Args:
        image: the decoded image, any depth.
        target: longest edge in pixels; never upscaled.
        nclx: the file's colour box when it has no ICC profile (else None).
        to_srgb: ``{"output_profile": "srgb"}`` when the image has a profile to convert.
    """
    if nclx is not None and is_hdr(nclx):
        # thumbnail_image() would squash the 16-bit PQ/HLG code values to 8 bits as if sRGB.
        scale = target / max(image.width, image.height)
        if scale < 1:
            image = (
                image.premultiply().resize(scale).unpremultiply().cast(image.format)
                if image.hasalpha()
                else image.resize(scale)
            )
        return hdr_to_srgb(image, nclx)
    return image.thumbnail_image(target, height=target, size="down", **to_srgb)


def to_srgb8(image: pyvips.Image) -> pyvips.Image:
    """Any interpretation/depth (grey, grey16, rgb16, cmyk...) → sRGB uchar, alpha kept."""
    if image.interpretation != "srgb" or image.format != "uchar":
        image = image.colourspace("srgb")
    if image.format != "uchar":
        image = image.cast("uchar")
    # Nothing downstream may treat the pixels as anything but sRGB (the profile is stripped
    # on save anyway), so drop it here to keep thumbnail_image() from re-transforming.
    image = image.copy()
    if has_icc(image):
        image.remove("icc-profile-data")
    return image


def _split_alpha(image: pyvips.Image) -> tuple[pyvips.Image, pyvips.Image | None]:
    if image.hasalpha():
        return image.extract_band(0, n=image.bands - 1), image.extract_band(image.bands - 1)
    return image, None


def hdr_to_srgb(image: pyvips.Image, nclx: Nclx) -> pyvips.Image:
    """PQ or HLG code values (16-bit) → tone-mapped 8-bit sRGB (see the module docstring)."""
    colour, alpha = _split_alpha(image)
    full = 65535.0 if colour.format == "ushort" else 255.0
    if colour.format != "ushort":
        colour = (colour.cast("float") * (65535.0 / full) + 0.5).cast("ushort")
    out = tone_map(colour, nclx)
    if alpha is not None:
        out = out.bandjoin((alpha.cast("float") * (255.0 / full)).cast("uchar"))
    return out


def tone_map(code: pyvips.Image, nclx: Nclx) -> pyvips.Image:
    """PQ or HLG R'G'B' code values (3 bands, ushort, 65535 = peak) → tone-mapped 8-bit sRGB.

    Two tables do the per-channel work: the transfer function (16-bit code value → linear light)
    before the primaries matrix, and shoulder + sRGB curve after it, indexed by linear light
    encoded with a 1/2.4 power so that dark tones keep their precision. Every step reads its
    input once, so the whole chain streams from the decoder to 8 bits without an intermediate
    image (libvips recomputes an input once per reader).

    Args:
        code: non-linear code values, 0 = black, 65535 = the transfer's peak (10000 cd/m² for
            PQ, the nominal peak for HLG).
        nclx: the colour box: its transfer (PQ or HLG) and primaries are applied.
    """
    linear = code.maplut(_transfer_table(nclx.transfer))
    if nclx.primaries in PRIMARIES_TO_BT709:
        linear = linear.recomb(PRIMARIES_TO_BT709[nclx.primaries])
    encoded = linear.clamp(min=0.0, max=_LINEAR_TOP) ** (1.0 / _ENCODING_GAMMA)
    index = (encoded * (65535.0 / _LINEAR_TOP ** (1.0 / _ENCODING_GAMMA)) + 0.5).cast("ushort")
    return index.maplut(_display_table()).copy(interpretation="srgb")


def _display_table() -> pyvips.Image:
    """65536-entry uchar table: encoded linear light → shoulder → sRGB 8-bit."""
    return pyvips.Image.new_from_memory(_display_values(), 65536, 1, 1, "uchar")


@functools.cache
def _display_values() -> bytes:
    x = np.arange(65536, dtype=np.float64) / 65535.0 * _LINEAR_TOP ** (1.0 / _ENCODING_GAMMA)
    linear = x**_ENCODING_GAMMA
    # Exponential shoulder: identity below the knee, same slope at it, approaches 1.0.
    span = 1.0 - _KNEE
    with np.errstate(over="ignore"):
        shoulder = _KNEE + span * (1.0 - np.exp(-(linear - _KNEE) / span))
    mapped = np.where(linear > _KNEE, shoulder, linear)
    srgb = np.where(mapped <= 0.0031308, 12.92 * mapped, 1.055 * np.power(mapped, 1 / 2.4) - 0.055)
    return bytes(np.clip(np.rint(srgb * 255.0), 0, 255).astype(np.uint8).tobytes())


def _transfer_table(transfer: int) -> pyvips.Image:
    """65536-entry table: 16-bit PQ/HLG code value → linear light, 1.0 = reference white."""
    # new_from_memory does not copy: the bytes must outlive the image, so they stay cached.
    return pyvips.Image.new_from_memory(_transfer_values(transfer), 65536, 1, 1, "float")


@functools.cache
def _transfer_values(transfer: int) -> bytes:
    e = np.arange(65536, dtype=np.float64) / 65535.0
    if transfer == _TRANSFER_PQ:
        m1, m2, c1, c2, c3 = 0.1593017578125, 78.84375, 0.8359375, 18.8515625, 18.6875
        p = e ** (1 / m2)
        num = np.maximum(p - c1, 0.0)
        linear = (num / (c2 - c3 * p)) ** (1 / m1) * (10000.0 / _REFERENCE_WHITE_NITS)
    else:  # HLG: inverse OETF to scene light, then the 1000 cd/m² OOTF (gamma 1.2, per channel)
        a, b, c = 0.17883277, 0.28466892, 0.55991073
        with np.errstate(over="ignore"):
            high = (np.exp((e - c) / a) + b) / 12.0
        scene = np.where(e <= 0.5, e * e / 3.0, high)
        linear = scene**1.2 * (1000.0 / _REFERENCE_WHITE_NITS)
    return np.ascontiguousarray(linear, dtype=np.float32).tobytes()


def to_bt709_primaries(image: pyvips.Image, primaries: int) -> pyvips.Image:
    """SDR sRGB-curve pixels in wide primaries (nclx, no ICC) → BT.709 primaries."""
    colour, alpha = _split_alpha(image.colourspace("srgb"))
    linear = colour.colourspace("scrgb").recomb(PRIMARIES_TO_BT709[primaries])
    linear = (linear > 0).ifthenelse(linear, 0.0)
    out = linear.copy(interpretation="scrgb").colourspace("srgb")
    return out if alpha is None else out.bandjoin(alpha.cast(out.format))
