"""Colour: any decoded photo → 8-bit sRGB, including PQ/HLG HDR tone mapping (libvips ops only).

libvips 8.18 has no PQ/HLG operation (only UltraHDR gain maps), so the transfer is decoded here:
PQ/HLG → linear light with BT.2408 reference white (203 cd/m²) at 1.0, primaries (P3, BT.2020) →
BT.709 by matrix, values above a knee rolled off with an exponential shoulder, then the sRGB
curve. An SDR ``nclx`` with wide primaries gets the matrix only. Every function builds a lazy
libvips pipeline; nothing is computed until the caller renders it.
"""

from __future__ import annotations

from collections.abc import Mapping

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
    e = colour.cast("float") / full
    if nclx.transfer == _TRANSFER_PQ:
        m1, m2, c1, c2, c3 = 0.1593017578125, 78.84375, 0.8359375, 18.8515625, 18.6875
        p = e ** (1 / m2)
        num = p - c1
        num = (num > 0).ifthenelse(num, 0.0)
        linear = (num / (c2 - c3 * p)) ** (1 / m1) * (10000.0 / _REFERENCE_WHITE_NITS)
    else:  # HLG: inverse OETF to scene light, then the 1000 cd/m² OOTF (gamma 1.2, per channel)
        a, b, c = 0.17883277, 0.28466892, 0.55991073
        low = e * e / 3.0
        high = (((e - c) / a).exp() + b) / 12.0
        scene = (e <= 0.5).ifthenelse(low, high)
        linear = scene**1.2 * (1000.0 / _REFERENCE_WHITE_NITS)
    if nclx.primaries in PRIMARIES_TO_BT709:
        linear = linear.recomb(PRIMARIES_TO_BT709[nclx.primaries])
        linear = (linear > 0).ifthenelse(linear, 0.0)
    # Exponential shoulder: identity below the knee, same slope at it, approaches 1.0.
    span = 1.0 - _KNEE
    shoulder = _KNEE + span * (1.0 - (-(linear - _KNEE) / span).exp())
    mapped = (linear > _KNEE).ifthenelse(shoulder, linear)
    out = mapped.copy(interpretation="scrgb").colourspace("srgb")
    if alpha is not None:
        out = out.bandjoin((alpha.cast("float") * (255.0 / full)).cast("uchar"))
    return out


def to_bt709_primaries(image: pyvips.Image, primaries: int) -> pyvips.Image:
    """SDR sRGB-curve pixels in wide primaries (nclx, no ICC) → BT.709 primaries."""
    colour, alpha = _split_alpha(image.colourspace("srgb"))
    linear = colour.colourspace("scrgb").recomb(PRIMARIES_TO_BT709[primaries])
    linear = (linear > 0).ifthenelse(linear, 0.0)
    out = linear.copy(interpretation="scrgb").colourspace("srgb")
    return out if alpha is None else out.bandjoin(alpha.cast(out.format))
