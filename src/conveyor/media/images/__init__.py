"""Photos: header probe and web variants with libvips (NORMS M1, M2).

One module per job:

* :mod:`~conveyor.media.images.header`: what a photo is, without decoding pixels (intake);
* :mod:`~conveyor.media.images.variants`: ``thumb``/``medium``/``preview`` from one decode;
* :mod:`~conveyor.media.images.colour`: any decode → 8-bit sRGB, PQ/HLG tone mapping;
* :mod:`~conveyor.media.images.av1`: HDR AVIF pixels through dav1d, shrunk before RGB;
* :mod:`~conveyor.media.images.hevc`: HEIC pixels through pillow-heif;
* :mod:`~conveyor.media.images.isobmff`: the HEIF/AVIF boxes libvips does not expose.
"""

from conveyor.media.images.header import ImageInfo, probe_image
from conveyor.media.images.variants import ImageVariant, make_image_variants

__all__ = ["ImageInfo", "ImageVariant", "make_image_variants", "probe_image"]
