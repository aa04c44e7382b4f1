"""Photo probe and variants on the shared real-file corpus (NORMS M1, M2); no mocks.

Expected values come from the shared corpus MANIFEST (``../shared/corpus/media/MANIFEST.md``).
"""

from __future__ import annotations

import io
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pillow_heif
import pytest
import pyvips
from PIL import Image, ImageCms

from conveyor.config import MediaSettings
from conveyor.errors import MediaError
from conveyor.media.images import (
    ImageInfo,
    ImageVariant,
    av1,
    hevc,
    make_image_variants,
    probe_image,
)

CORPUS = (Path(__file__).resolve().parents[2] / ".." / "shared" / "corpus" / "media").resolve()
SETTINGS = MediaSettings()
SIZES = {
    "thumb": SETTINGS.thumb_size,
    "medium": SETTINGS.medium_size,
    "preview": SETTINGS.preview_size,
}
MAX_PIXELS = SETTINGS.max_pixels

# name → (upright width, upright height, mime type, frames, has alpha)
IMAGES: dict[str, tuple[int, int, str, int, bool]] = {
    **{f"exif-samples__landscape_{n}.jpg": (600, 450, "image/jpeg", 1, False) for n in range(1, 9)},
    "exif-samples__Canon_40D.jpg": (100, 68, "image/jpeg", 1, False),
    "exif-samples__DSCN0010.jpg": (640, 480, "image/jpeg", 1, False),
    "pillow__pil_sample_cmyk.jpg": (100, 100, "image/jpeg", 1, False),
    "pillow__i_trns.png": (64, 64, "image/png", 1, True),
    "pillow__apng_mode_16bit.png": (128, 64, "image/png", 1, True),
    "pillow__iss634.gif": (245, 245, "image/gif", 42, True),
    "pillow__iss634.webp": (245, 245, "image/webp", 42, True),
    "pillow__transparent.png": (200, 150, "image/png", 1, True),
    "pillow__app13-multiple.jpg": (256, 160, "image/jpeg", 1, False),
    "pillow__hopper_orientation_6.webp": (128, 128, "image/webp", 1, False),
    "pillow__avif_rot1mir0.avif": (640, 427, "image/avif", 1, False),
    "pillow__avif_star.avifs": (159, 159, "image/avif", 5, True),
    "immich-test-assets__IMG_2682.heic": (4032, 3024, "image/heic", 1, False),
    "immich-test-assets__10bit-HDR-P3-nclx.avif": (3681, 5594, "image/avif", 1, False),
    "lychee__mongolia": (1280, 850, "image/jpeg", 1, False),
}
# The truncated JPEG's header is intact: probe_image answers, the variant step refuses it.
PROBE_ONLY = {"pillow__truncated_jpeg.jpg": (100, 100, "image/jpeg", 1, False)}

# name → reason of the refusal (header stage)
REFUSED: dict[str, str] = {
    "pillow__decompression_bomb.gif": "too_many_pixels",
    "file-type__fixture-json.webp": "unsupported_media",
    "moviepy__result.webm": "unsupported_media",
    "moviepy__fire2.mp4": "unsupported_media",
    "file-type__fixture.m4a": "unsupported_media",
    "file-type__fixture.mov": "unsupported_media",
    "lychee__train.mov": "unsupported_media",
}
HEIC = "immich-test-assets__IMG_2682.heic"
HDR = "immich-test-assets__10bit-HDR-P3-nclx.avif"
DATA = Path(__file__).resolve().parent / "data"

# Reading the corpus in place is a hard requirement; fail loudly rather than skip.
assert CORPUS.is_dir(), f"shared media corpus missing at {CORPUS}"


def _variants(name: str, out_dir: Path, image_format: str = "webp") -> list[ImageVariant]:
    return _variants_of(CORPUS / name, out_dir, image_format)


def _variants_of(src: Path, out_dir: Path, image_format: str = "webp") -> list[ImageVariant]:
    return make_image_variants(
        src,
        out_dir,
        sizes=SIZES,
        image_format=image_format,
        quality=SETTINGS.image_quality,
        max_pixels=MAX_PIXELS,
    )


def _load(path: Path) -> pyvips.Image:
    return pyvips.Image.new_from_file(str(path))


def _pixels(image: pyvips.Image, width: int, height: int) -> np.ndarray:
    """RGB float array of ``image`` squeezed to exactly ``width``×``height``."""
    if image.hasalpha():
        image = image.flatten(background=[255, 255, 255])
    image = image.colourspace("srgb").cast("uchar")
    image = image.thumbnail_image(width, height=height, size="force", no_rotate=True)
    return np.asarray(image.numpy(), dtype=np.float64)[..., :3]


def _mad(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.abs(a - b).mean())


def test_every_corpus_file_is_covered() -> None:
    names = {p.name for p in CORPUS.iterdir() if p.name != "MANIFEST.md"}
    assert names == set(IMAGES) | set(PROBE_ONLY) | set(REFUSED)


@pytest.mark.parametrize("name", sorted(IMAGES | PROBE_ONLY))
def test_probe_reads_upright_header(name: str) -> None:
    width, height, mime, pages, alpha = (IMAGES | PROBE_ONLY)[name]
    info = probe_image(CORPUS / name, max_pixels=MAX_PIXELS)
    assert info == ImageInfo(
        width, height, mime, pages, alpha, info.captured_at, info.captured_offset
    )


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("exif-samples__Canon_40D.jpg", datetime(2008, 5, 30, 15, 56, 1, tzinfo=UTC)),
        ("exif-samples__DSCN0010.jpg", datetime(2008, 10, 22, 16, 28, 39, tzinfo=UTC)),
        ("exif-samples__landscape_1.jpg", None),
        ("pillow__transparent.png", None),
    ],
)
def test_probe_captured_at(name: str, expected: datetime | None) -> None:
    assert probe_image(CORPUS / name, max_pixels=MAX_PIXELS).captured_at == expected


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_probe_refuses(name: str) -> None:
    with pytest.raises(MediaError) as caught:
        probe_image(CORPUS / name, max_pixels=MAX_PIXELS)
    assert caught.value.reason == REFUSED[name]
    assert caught.value.message


# A refusal must not hang; how fast it is belongs to the benchmarks (python -m bench).
@pytest.mark.timeout(60)
@pytest.mark.parametrize("name", sorted(REFUSED | {"pillow__truncated_jpeg.jpg": "undecodable"}))
def test_variants_refused_and_nothing_written(name: str, tmp_path: Path) -> None:
    expected = REFUSED.get(name, "undecodable")
    with pytest.raises(MediaError) as caught:
        _variants(name, tmp_path / "out")
    assert caught.value.reason == expected
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_bomb_refused_from_header_without_allocating() -> None:
    # 4.36 gigapixels declared; decoding even one RGBA frame would need ~17 GB.
    info_limit = 65535 * 66601
    with pytest.raises(MediaError) as caught:
        probe_image(CORPUS / "pillow__decompression_bomb.gif", max_pixels=MAX_PIXELS)
    assert caught.value.reason == "too_many_pixels"
    assert f"{info_limit:,}" in caught.value.message


def test_max_pixels_applies_to_ordinary_images(tmp_path: Path) -> None:
    with pytest.raises(MediaError) as caught:
        make_image_variants(
            CORPUS / "exif-samples__landscape_1.jpg",
            tmp_path,
            sizes=SIZES,
            image_format="webp",
            quality=80,
            max_pixels=600 * 450 - 1,
        )
    assert caught.value.reason == "too_many_pixels"


@pytest.mark.parametrize("name", sorted(IMAGES))
def test_variants_upright_srgb8_bounded_and_stripped(name: str, tmp_path: Path) -> None:
    width, height, _, _, _ = IMAGES[name]
    variants = _variants(name, tmp_path)
    assert [v.role for v in variants] == list(SIZES)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{r}.webp" for r in SIZES)
    longest = max(width, height)
    for variant in variants:
        edge = min(SIZES[variant.role], longest)  # never upscaled
        assert variant.path == tmp_path / f"{variant.role}.webp"
        assert variant.mime_type == "image/webp"
        assert variant.size == variant.path.stat().st_size > 0
        image = _load(variant.path)
        assert (image.width, image.height) == (variant.width, variant.height)
        assert max(image.width, image.height) == edge
        # Upright aspect: the short edge follows the original's ratio to a pixel.
        if width >= height:
            assert abs(image.height - edge * height / width) <= 1
        else:
            assert abs(image.width - edge * width / height) <= 1
        assert image.format == "uchar"
        assert image.interpretation == "srgb"
        assert image.bands in (3, 4)
        fields = set(image.get_fields())
        assert not fields & {"exif-data", "xmp-data", "iptc-data", "icc-profile-data"}
        assert not any(f.startswith("exif-") for f in fields)


def test_tiny_original_is_never_upscaled(tmp_path: Path) -> None:
    variants = _variants("exif-samples__Canon_40D.jpg", tmp_path)
    assert [(v.width, v.height) for v in variants] == [(100, 68)] * 3


@pytest.mark.parametrize("name", ["exif-samples__DSCN0010.jpg", "lychee__mongolia"])
def test_no_gps_or_exif_left_in_variants(name: str, tmp_path: Path) -> None:
    original = pyvips.Image.new_from_file(str(CORPUS / name))
    assert any(f.startswith("exif-ifd3-GPS") for f in original.get_fields())  # GPS IFD present
    variants = _variants(name, tmp_path)
    assert [v.role for v in variants] == list(SIZES)  # every variant is checked below
    for variant in variants:
        data = variant.path.read_bytes()
        assert b"EXIF" not in data
        assert b"Exif" not in data
        assert b"XMP" not in data
        assert not any(f.startswith("exif-") for f in _load(variant.path).get_fields())


@pytest.fixture(scope="module")
def landscape_reference(tmp_path_factory: pytest.TempPathFactory) -> np.ndarray:
    out = tmp_path_factory.mktemp("landscape_1")
    thumb = _variants("exif-samples__landscape_1.jpg", out)[0]
    return _pixels(_load(thumb.path), 60, 45)


@pytest.mark.parametrize("orientation", range(2, 9))
def test_exif_orientation_matches_upright_reference(
    orientation: int, landscape_reference: np.ndarray, tmp_path: Path
) -> None:
    name = f"exif-samples__landscape_{orientation}.jpg"
    thumb = _variants(name, tmp_path)[0]
    upright = _mad(_pixels(_load(thumb.path), 60, 45), landscape_reference)
    ignored = _mad(
        _pixels(pyvips.Image.new_from_file(str(CORPUS / name)), 60, 45), landscape_reference
    )
    # MANIFEST: ≈14/255 upright (digit and ICC differ) vs 42–61 when orientation is ignored.
    assert upright < 22, upright
    assert ignored > 35, ignored


def test_square_webp_orientation_6_is_rotated(tmp_path: Path) -> None:
    thumb = _variants("pillow__hopper_orientation_6.webp", tmp_path)[0]
    stored = pyvips.Image.new_from_file(str(CORPUS / "pillow__hopper_orientation_6.webp"))
    ours = _pixels(_load(thumb.path), 64, 64)
    rotated = _pixels(stored.rot90(), 64, 64)  # orientation 6: turn 90° clockwise to view
    assert _mad(ours, rotated) < 6
    assert _mad(ours, _pixels(stored, 64, 64)) > 20


def test_heif_irot_imir_is_applied(tmp_path: Path) -> None:
    variants = _variants("pillow__avif_rot1mir0.avif", tmp_path)
    assert (variants[1].width, variants[1].height) == (640, 427)
    assert (variants[0].width, variants[0].height) == (320, 214)


def test_cmyk_is_converted_not_inverted(tmp_path: Path) -> None:
    thumb = _variants("pillow__pil_sample_cmyk.jpg", tmp_path)[0]
    ours = _pixels(_load(thumb.path), 100, 100)
    with Image.open(CORPUS / "pillow__pil_sample_cmyk.jpg") as img:
        pillow = np.asarray(img.convert("RGB"), dtype=np.float64)
    # Pillow converts without a profile, libvips through a CMYK profile: close, not equal.
    assert _mad(ours, pillow) < 40
    assert _mad(ours, 255 - pillow) > 150
    mean = ours.reshape(-1, 3).mean(axis=0)
    assert mean[0] > mean[1] and mean[0] > mean[2]  # the sample reads "RED"


def test_icc_profile_is_applied(tmp_path: Path) -> None:
    # landscape_1 has no ICC, landscape_3 'Generic RGB': once converted, both look alike.
    a = _pixels(_load(_variants("exif-samples__landscape_1.jpg", tmp_path / "a")[0].path), 60, 45)
    b = _pixels(_load(_variants("exif-samples__landscape_3.jpg", tmp_path / "b")[0].path), 60, 45)
    assert abs(a.mean() - b.mean()) < 2


def test_hdr_pq_avif_is_tone_mapped(tmp_path: Path) -> None:
    thumb = _variants(HDR, tmp_path)[0]
    rgb = _pixels(_load(thumb.path), thumb.width, thumb.height)
    luma = rgb @ np.array([0.2126, 0.7152, 0.0722])
    assert 70 < luma.mean() < 180, luma.mean()  # neither black nor blown out
    assert (luma >= 254).mean() < 0.05  # highlights rolled off, not clipped
    assert luma.std() > 40  # contrast kept: a PQ signal shown as sRGB looks flat and grey
    naive = _pixels(pyvips.Image.thumbnail(str(CORPUS / HDR), 320), thumb.width, thumb.height)
    assert rgb.std() > naive.std() * 1.3


@pytest.mark.parametrize("path", ["dav1d", "libvips"])
def test_m1_hdr_avif_preview_keeps_the_tone_mapping_of_the_full_size_decode(
    path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both decode paths give the pixels the libvips path gave before the dav1d path existed.

    The reference is that path's 2560 px preview (full-size libheif decode, resize of 16-bit
    R'G'B', tone map) averaged over 20×20 blocks. dav1d's path resizes Y'CbCr before the
    R'G'B' conversion; they differ by rounding and by where out-of-range values are clipped.
    """
    taken: list[bool] = []
    real = av1.decode_av1_hdr

    def spy(*args: Any) -> pyvips.Image | None:
        taken.append(True)
        return real(*args)

    monkeypatch.setattr(av1, "decode_av1_hdr", spy)
    if path == "libvips":
        monkeypatch.setattr(av1, "takes_fast_path", lambda item: False)
    preview = make_image_variants(
        CORPUS / HDR,
        tmp_path,
        sizes={"preview": 2560},
        image_format="webp",
        quality=95,
        max_pixels=MAX_PIXELS,
    )[0]
    assert taken == ([True] if path == "dav1d" else [])
    assert (preview.width, preview.height) == (1685, 2560)
    pixels = np.asarray(_load(preview.path).numpy(), dtype=np.float64)[:2560, :1680]
    blocks = pixels.reshape(128, 20, 84, 20, 3).mean(axis=(1, 3))
    reference = np.load(DATA / "hdr_avif_preview_20x.npy").astype(np.float64)
    difference = np.abs(blocks - reference)
    assert difference.mean() < 1.0, difference.mean()
    assert difference.max() < 4.0, difference.max()


def test_alpha_kept_in_webp_and_avif(tmp_path: Path) -> None:
    for image_format in ("webp", "avif"):
        thumb = _variants("pillow__transparent.png", tmp_path / image_format, image_format)[0]
        image = _load(thumb.path)
        assert image.bands == 4, image_format
        assert image[3].min() == 0


def test_jpeg_flattens_alpha_on_white(tmp_path: Path) -> None:
    thumb = _variants("pillow__transparent.png", tmp_path, "jpeg")[0]
    assert thumb.path.name == "thumb.jpg"
    assert thumb.mime_type == "image/jpeg"
    image = _load(thumb.path)
    assert image.bands == 3
    assert image.get("vips-loader").startswith("jpegload")
    # The source's top-left pixel is fully transparent.
    assert all(v > 245 for v in image(0, 0))


def test_avif_output(tmp_path: Path) -> None:
    variants = _variants("exif-samples__landscape_6.jpg", tmp_path, "avif")
    assert [v.path.name for v in variants] == ["thumb.avif", "medium.avif", "preview.avif"]
    image = _load(variants[0].path)
    assert image.get("heif-compression") == "av1"
    assert (image.width, image.height) == (320, 240)
    assert "exif-data" not in image.get_fields()


@pytest.mark.parametrize("name", ["pillow__iss634.gif", "pillow__iss634.webp"])
def test_animation_gives_first_frame(name: str, tmp_path: Path) -> None:
    (thumb,) = make_image_variants(
        CORPUS / name,
        tmp_path,
        sizes={"thumb": 320},
        image_format="webp",
        quality=100,
        max_pixels=MAX_PIXELS,
    )
    assert (thumb.width, thumb.height) == (245, 245)  # one frame, not a strip of 42
    ours = _pixels(_load(thumb.path), 245, 245)
    first = _pixels(pyvips.Image.new_from_file(str(CORPUS / name), page=0), 245, 245)
    middle = _pixels(pyvips.Image.new_from_file(str(CORPUS / name), page=21), 245, 245)
    # The frames differ subtly (≈3/255 at most), so compare near-lossless output.
    assert _mad(ours, first) < _mad(ours, middle)
    assert _mad(ours, first) < 4


def test_gif_and_webp_animation_behave_alike(tmp_path: Path) -> None:
    gif = _variants("pillow__iss634.gif", tmp_path / "gif")[0]
    webp = _variants("pillow__iss634.webp", tmp_path / "webp")[0]
    assert (gif.width, gif.height) == (webp.width, webp.height)
    assert _mad(_pixels(_load(gif.path), 64, 64), _pixels(_load(webp.path), 64, 64)) < 8


def test_sixteen_bit_png_becomes_eight_bit(tmp_path: Path) -> None:
    for name in ("pillow__apng_mode_16bit.png", "pillow__i_trns.png"):
        image = _load(_variants(name, tmp_path / name)[0].path)
        assert image.format == "uchar"
    # Frame 0 of the APNG is opaque red (65280/65535 in 16 bits).
    red = _load(tmp_path / "pillow__apng_mode_16bit.png" / "thumb.webp")
    assert red(10, 10)[:3] == pytest.approx([254, 0, 0], abs=3)


def test_rewrite_replaces_files_atomically(tmp_path: Path) -> None:
    first = _variants("exif-samples__landscape_1.jpg", tmp_path)
    second = _variants("exif-samples__landscape_1.jpg", tmp_path)
    assert [v.path for v in first] == [v.path for v in second]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(f"{r}.webp" for r in SIZES)


def test_bad_format_is_a_programming_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        make_image_variants(
            CORPUS / "exif-samples__landscape_1.jpg",
            tmp_path,
            sizes=SIZES,
            image_format="gif",
            quality=80,
            max_pixels=MAX_PIXELS,
        )


# --- HEIC (HEVC) through pillow-heif: the pyvips-binary libheif has no HEVC decoder ------------


def _chroma(rgb: np.ndarray) -> float:
    return float((rgb.max(axis=-1) - rgb.min(axis=-1)).mean())


@pytest.fixture
def open_heif_calls(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    calls: list[Path] = []
    real = pillow_heif.open_heif

    def spy(fp: Path, *args: object, **kwargs: object) -> pillow_heif.HeifFile:
        calls.append(fp)
        return real(fp, *args, **kwargs)

    monkeypatch.setattr(pillow_heif, "open_heif", spy)
    return calls


def test_heic_variants_are_real_srgb_images(tmp_path: Path, open_heif_calls: list[Path]) -> None:
    variants = _variants(HEIC, tmp_path)
    assert [(v.role, v.width, v.height) for v in variants] == [
        ("thumb", 320, 240),
        ("medium", 1280, 960),
        ("preview", 2560, 1920),
    ]
    assert open_heif_calls == [CORPUS / HEIC]  # one decode for the three roles
    for variant in variants:
        data = variant.path.read_bytes()
        assert b"Exif" not in data and b"EXIF" not in data
        image = _load(variant.path)
        assert (image.width, image.height) == (variant.width, variant.height)
        assert (image.bands, image.format, image.interpretation) == (3, "uchar", "srgb")
        fields = set(image.get_fields())
        assert not fields & {"exif-data", "xmp-data", "icc-profile-data"}
        assert not any(f.startswith("exif-") for f in fields)
        rgb = np.asarray(image.numpy(), dtype=np.float64)
        assert 40 < rgb.mean() < 200, rgb.mean()  # neither black nor white
        assert rgb.std() > 30  # a photo, not a flat fill

    # Display P3 → sRGB was applied: LittleCMS through Pillow is the reference; the same pixels
    # read as if they were sRGB are visibly less saturated.
    heif = pillow_heif.open_heif(CORPUS / HEIC)
    p3 = ImageCms.ImageCmsProfile(io.BytesIO(heif.info["icc_profile"]))
    assert ImageCms.getProfileDescription(p3).strip() == "Display P3"
    raw = heif.to_pillow().resize((80, 60), Image.Resampling.BOX)
    srgb = ImageCms.profileToProfile(raw, p3, ImageCms.createProfile("sRGB"), outputMode="RGB")
    ours = _pixels(_load(variants[0].path), 80, 60)
    reference = np.asarray(srgb, dtype=np.float64)
    unconverted = np.asarray(raw, dtype=np.float64)
    assert _mad(ours, reference) < 8
    assert abs(_chroma(ours) - _chroma(reference)) < 2
    assert _chroma(ours) - _chroma(unconverted) > 3


def test_heic_jpeg_variant(tmp_path: Path) -> None:
    thumb = _variants(HEIC, tmp_path, "jpeg")[0]
    image = _load(thumb.path)
    assert image.get("vips-loader").startswith("jpegload")
    assert (image.width, image.height, image.bands) == (320, 240, 3)
    assert "exif-data" not in image.get_fields()


def _rotated_heic(path: Path) -> None:
    """A 96×64 HEVC picture stored with EXIF Orientation 6, which pillow-heif encodes as irot/imir
    (keeping the EXIF tag, as an iPhone does): top 8 rows green, left half red, right half blue."""
    stored = np.zeros((64, 96, 3), np.uint8)
    stored[:, :48] = (255, 0, 0)
    stored[:, 48:] = (0, 0, 255)
    stored[:8] = (0, 255, 0)
    heif = pillow_heif.from_bytes("RGB", (96, 64), stored.tobytes())
    exif = Image.Exif()
    exif[0x0112] = 6
    heif.info["exif"] = exif.tobytes()
    heif.save(path, quality=-1, chroma=444)


def test_heic_transform_applied_once_not_twice(tmp_path: Path) -> None:
    src = tmp_path / "rotated.heic"
    _rotated_heic(src)
    exif = Image.Exif()
    exif.load(pillow_heif.open_heif(src).info["exif"])
    assert exif[0x0112] == 6  # the tag is still there; libheif already turned the pixels
    info = probe_image(src, max_pixels=MAX_PIXELS)
    assert (info.width, info.height, info.mime_type) == (64, 96, "image/heic")
    variants = _variants_of(src, tmp_path / "out", "webp")
    assert {(v.width, v.height) for v in variants} == {(64, 96)}
    rgb = np.asarray(_load(variants[0].path).numpy(), dtype=np.float64)
    # Orientation 6 = turn 90° clockwise: red on top, blue at the bottom, green on the right.
    assert rgb[10, 20] == pytest.approx([255, 0, 0], abs=12)
    assert rgb[85, 20] == pytest.approx([0, 0, 255], abs=12)
    assert rgb[48, 62] == pytest.approx([0, 255, 0], abs=12)


def test_truncated_heic_is_refused(tmp_path: Path) -> None:
    data = (CORPUS / HEIC).read_bytes()
    for cut in (2_000, len(data) // 2):
        src = tmp_path / f"cut{cut}.heic"
        src.write_bytes(data[:-cut])
        assert probe_image(src, max_pixels=MAX_PIXELS).width == 4032  # the header is intact
        with pytest.raises(MediaError) as caught:
            _variants_of(src, tmp_path / f"out{cut}")
        assert caught.value.reason == "undecodable"
        assert not (tmp_path / f"out{cut}").exists()


def test_heic_pixel_limit_checked_before_decoding(
    tmp_path: Path, open_heif_calls: list[Path]
) -> None:
    with pytest.raises(MediaError) as caught:
        make_image_variants(
            CORPUS / HEIC,
            tmp_path,
            sizes=SIZES,
            image_format="webp",
            quality=80,
            max_pixels=4032 * 3024 - 1,
        )
    assert caught.value.reason == "too_many_pixels"
    assert open_heif_calls == []


def test_heic_pq_hdr_is_tone_mapped(tmp_path: Path) -> None:
    # 10-bit PQ at BT.2408 reference white (203 cd/m², code 0.58): our curve maps it to ≈244,
    # a PQ signal read as sRGB would show ≈148.
    src = tmp_path / "pq.heic"
    code = np.full((48, 64, 3), int(0.58 * 65535), np.uint16)
    pillow_heif.from_bytes("RGB;16", (64, 48), code.tobytes()).save(
        src,
        quality=-1,
        chroma=444,
        color_primaries=1,
        transfer_characteristics=16,
        matrix_coefficients=0,
        full_range_flag=1,
    )
    thumb = _variants_of(src, tmp_path / "out")[0]
    rgb = np.asarray(_load(thumb.path).numpy(), dtype=np.float64)
    assert rgb.mean() == pytest.approx(244, abs=6)


@pytest.mark.parametrize("name", ["pillow__avif_rot1mir0.avif", "pillow__avif_star.avifs", HDR])
def test_avif_is_decoded_by_libvips_not_pillow_heif(
    name: str, tmp_path: Path, open_heif_calls: list[Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object) -> None:
        raise AssertionError("the HEVC fallback ran for an AV1 file")

    monkeypatch.setattr(hevc, "decode_hevc", refuse)
    assert probe_image(CORPUS / name, max_pixels=MAX_PIXELS).mime_type == "image/avif"
    assert len(_variants(name, tmp_path)) == 3
    assert open_heif_calls == []
