"""Image tokens: tile and patch rules, model families, and sizes read from data URL headers."""

from __future__ import annotations

import base64
import struct
import zlib
from decimal import Decimal

import pytest

from gateway.config.schema.counting import ImageRuleConfig
from gateway.tokens.images import (
    DEFAULT_RULE,
    PatchRule,
    TileRule,
    image_part_tokens,
    patches,
    rule_for,
)
from gateway.tokens.imagesize import data_url_size

# -- image headers, built byte by byte from the format specifications ---------------------------------


def png(width: int, height: int) -> bytes:
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 6, 0, 0, 0)
    pixels = zlib.compress(b"\x00" * (1 + 4 * min(width, 4)))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", pixels) + chunk(b"IEND", b"")


def gif(width: int, height: int) -> bytes:
    return b"GIF89a" + struct.pack("<HH", width, height) + b"\x80\x00\x00" + b"\x00" * 6 + b";"


def jpeg(width: int, height: int, *, exif_bytes: int = 0, sof: int = 0xC0, fill: bool = False) -> bytes:
    def segment(marker: int, payload: bytes) -> bytes:
        return bytes([0xFF, marker]) + struct.pack(">H", len(payload) + 2) + payload

    parts = [b"\xff\xd8", segment(0xE0, b"JFIF\x00\x01\x01\x00\x00\x01\x00\x01\x00\x00")]
    if exif_bytes:
        parts.append(segment(0xE1, b"Exif\x00\x00" + bytes(range(256)) * (exif_bytes // 256)))
    parts.append(segment(0xDB, b"\x00" + bytes(64)))
    if fill:
        parts.append(b"\xff")
    frame = struct.pack(">BHHB", 8, height, width, 3) + b"\x01\x22\x00\x02\x11\x01\x03\x11\x01"
    parts.append(segment(sof, frame))
    parts.append(segment(0xDA, b"\x03\x01\x00\x02\x11\x03\x11\x00\x3f\x00") + b"\x12\x34\xff\xd9")
    return b"".join(parts)


def riff_webp(tag: bytes, payload: bytes) -> bytes:
    """A RIFF WEBP file of one chunk: ``tag`` (``VP8 ``, ``VP8L``, ``VP8X``) and its ``payload``."""
    chunk = tag + struct.pack("<I", len(payload)) + payload
    return b"RIFF" + struct.pack("<I", 4 + len(chunk)) + b"WEBP" + chunk


def webp_vp8(width: int, height: int) -> bytes:
    return riff_webp(b"VP8 ", b"\x30\x01\x00\x9d\x01\x2a" + struct.pack("<HH", width, height) + b"\x00" * 10)


def webp_vp8l(width: int, height: int) -> bytes:
    bits = (width - 1) | ((height - 1) << 14)
    return riff_webp(b"VP8L", b"\x2f" + struct.pack("<I", bits) + b"\x00" * 8)


def webp_vp8x(width: int, height: int) -> bytes:
    size = (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
    return riff_webp(b"VP8X", b"\x10\x00\x00\x00" + size)


def data_url(image: bytes, media_type: str = "image/png") -> str:
    return f"data:{media_type};base64,{base64.b64encode(image).decode()}"


# -- sizes from headers -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("image", "media_type", "size"),
    [
        (png(1024, 1024), "image/png", (1024, 1024)),
        (png(4096, 8192), "image/png", (4096, 8192)),
        (gif(320, 200), "image/gif", (320, 200)),
        (jpeg(1800, 2400), "image/jpeg", (1800, 2400)),
        (jpeg(640, 480, sof=0xC2), "image/jpeg", (640, 480)),
        (jpeg(3000, 2000, exif_bytes=40_000), "image/jpeg", (3000, 2000)),
        (jpeg(33, 17, fill=True), "image/jpeg", (33, 17)),
        (webp_vp8(1920, 1080), "image/webp", (1920, 1080)),
        (webp_vp8l(513, 257), "image/webp", (513, 257)),
        (webp_vp8x(16383, 9000), "image/webp", (16383, 9000)),
    ],
)
def test_imagesize_reads_dimensions_from_header(image: bytes, media_type: str, size: tuple[int, int]) -> None:
    assert data_url_size(data_url(image, media_type)) == size


def test_imagesize_decodes_only_the_header() -> None:
    # A valid header followed by a payload that is not base64 at all: only the first window is decoded.
    url = data_url(png(800, 600)) + "!" * 1_000_000
    assert data_url_size(url) == (800, 600)


def test_imagesize_line_wrapped_base64() -> None:
    encoded = base64.encodebytes(jpeg(1200, 900, exif_bytes=2_000)).decode()  # newline every 76 chars
    assert "\n" in encoded[:100]
    assert data_url_size(f"data:image/jpeg;base64,{encoded}") == (1200, 900)


@pytest.mark.parametrize(
    "url",
    [
        "https://example.com/cat.png",
        "data:image/png,rawbytes",
        "data:image/svg+xml;base64," + base64.b64encode(b"<svg width='10' height='10'/>").decode(),
        data_url(png(0, 10)),
        data_url(b"\xff\xd8\xff\xd9"),
        data_url(jpeg(10, 10)[:40], "image/jpeg"),
        "data:image/png;base64,@@@@",
        "data:image/png;base64,\x80iVBORw0KGgo",  # not even ASCII: no base64 at all
        "data:image/png;base64,iVBO Rw0K\u00e9Ggo",
    ],
)
def test_imagesize_unreadable_is_none(url: str) -> None:
    assert data_url_size(url) is None


# -- rules --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("rule", "width", "height", "detail", "tokens"),
    [
        (TileRule(85, 170), 1024, 1024, "high", 765),
        (TileRule(85, 170), 2048, 4096, "high", 1105),
        (TileRule(85, 170), 4096, 8192, "low", 85),
        (TileRule(85, 170), 512, 512, "high", 255),
        (TileRule(85, 170), 513, 512, "high", 425),
        (TileRule(85, 170), 100, 100, "high", 255),
        (TileRule(70, 140), 1024, 1024, "high", 630),
        (TileRule(2833, 5667), 1024, 1024, "high", 25501),
        (TileRule(75, 150), 2048, 4096, "high", 975),
        (PatchRule(Decimal(1)), 1024, 1024, "high", 1024),
        (PatchRule(Decimal(1)), 1800, 2400, "high", 1452),
        (PatchRule(Decimal("1.62")), 1024, 1024, "high", 1659),
        (PatchRule(Decimal("2.46")), 1800, 2400, "low", 3572),
        (PatchRule(Decimal("1.72")), 64, 32, "high", 4),
    ],
)
def test_image_rule_tokens_match_known_values(
    rule: TileRule | PatchRule, width: int, height: int, detail: str, tokens: int
) -> None:
    assert rule.tokens(width, height, detail) == tokens


@pytest.mark.parametrize(("width", "height"), [(8000, 8000), (10_000, 300), (1537 * 32, 32), (4000, 3000)])
def test_image_patches_never_exceed_the_cap(width: int, height: int) -> None:
    assert 0 < patches(width, height) <= 1536


@pytest.mark.parametrize(
    "rule", [TileRule(85, 170), TileRule(2833, 5667), PatchRule(Decimal("2.46")), PatchRule(Decimal("1.62"))]
)
@pytest.mark.parametrize("size", [(1, 1), (512, 512), (768, 2048), (2048, 768), (9999, 77), (4096, 4096)])
def test_image_rule_max_tokens_bounds_every_size(rule: TileRule | PatchRule, size: tuple[int, int]) -> None:
    assert rule.tokens(*size, "high") <= rule.max_tokens
    assert rule.tokens(*size, "low") <= rule.max_tokens


def test_image_rule_tile_max_tokens_is_reached() -> None:
    assert TileRule(85, 170).tokens(2048, 768, "high") == TileRule(85, 170).max_tokens == 85 + 8 * 170


@pytest.mark.parametrize(
    ("model", "rule"),
    [
        ("gpt-4o", TileRule(85, 170)),
        ("gpt-4o-2024-08-06", TileRule(85, 170)),
        ("gpt-4.1", TileRule(85, 170)),
        ("gpt-4o-mini", TileRule(2833, 5667)),
        ("gpt-5", TileRule(70, 140)),
        ("gpt-5.4", TileRule(70, 140)),
        ("o1", TileRule(75, 150)),
        ("o3-2025-04-16", TileRule(75, 150)),
        ("gpt-4.1-mini", PatchRule(Decimal("1.62"))),
        ("gpt-5-mini", PatchRule(Decimal("1.62"))),
        ("gpt-4.1-nano", PatchRule(Decimal("2.46"))),
        ("gpt-5-nano", PatchRule(Decimal("2.46"))),
        ("o4-mini", PatchRule(Decimal("1.72"))),
        ("openai/gpt-4o-mini", TileRule(2833, 5667)),
        ("some-local-model", DEFAULT_RULE),
    ],
)
def test_image_rule_for_model_family(model: str, rule: TileRule | PatchRule) -> None:
    assert rule_for([model]) == rule


def test_image_rule_config_override_wins() -> None:
    overrides = (
        ImageRuleConfig(match="gpt-5.4*", kind="patch", multiplier=Decimal("1.2")),
        ImageRuleConfig(match="my-vision-*", kind="tile", base=10, per_tile=20),
    )
    assert rule_for(["gpt-5.4-mini"], overrides=overrides) == PatchRule(Decimal("1.2"))
    assert rule_for(["alias", "my-vision-large"], overrides=overrides) == TileRule(10, 20)
    assert rule_for(["gpt-5"], overrides=overrides) == TileRule(70, 140)


def test_image_rule_config_tile_needs_per_tile() -> None:
    with pytest.raises(ValueError, match="per_tile"):
        ImageRuleConfig(match="x", kind="tile", base=10)


# -- one image part -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("image_url", "tokens", "approximate"),
    [
        ({"url": data_url(png(1024, 1024)), "detail": "high"}, 765, False),
        ({"url": data_url(png(2048, 4096))}, 1105, False),
        ({"url": data_url(png(2048, 4096)), "detail": "auto"}, 1105, False),
        ({"url": data_url(png(2048, 4096)), "detail": "low"}, 85, False),
        (data_url(jpeg(1024, 1024), "image/jpeg"), 765, False),
        ({"url": "https://example.com/a.png"}, 765, True),
        ({"url": "https://example.com/a.png", "detail": "low"}, 85, True),
        ({"url": data_url(b"not an image")}, 765, True),
        ({"detail": "high"}, 765, True),
    ],
)
def test_image_part_tokens(image_url: object, tokens: int, approximate: bool) -> None:
    counted = image_part_tokens(image_url, TileRule(85, 170), assumed_size=(1024, 1024))
    assert (counted.tokens, counted.approximate) == (tokens, approximate)


def test_image_part_remote_uses_the_assumed_size() -> None:
    counted = image_part_tokens({"url": "https://x/y.png"}, TileRule(85, 170), assumed_size=(512, 512))
    assert counted.tokens == 255


@pytest.mark.parametrize(
    ("image", "size"),
    [
        (b"\xff\xd8" + b"\xff\xd0" + b"\xff\x01" + jpeg(64, 48)[2:], (64, 48)),
        (b"\xff\xd8\xff\xda\x00\x04\x00\x00" + b"\x00" * 40, None),
        (b"\xff\xd8\xff\xd9" + b"\x00" * 40, None),
        (b"\xff\xd8" + b"\xff\xe0\x00\x02" * 1100 + jpeg(8, 8)[2:], None),
        (jpeg(64, 48)[: jpeg(64, 48).index(b"\xff\xc0") + 6], None),
        (b"\xff\xd8\x00\x00" + b"\x00" * 40, None),
        (b"RIFF\x00\x00\x00\x00WEBPALPH" + b"\x00" * 30, None),
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\x0dIHDX" + b"\x00" * 20, None),
    ],
)
def test_imagesize_jpeg_webp_png_edges(image: bytes, size: tuple[int, int] | None) -> None:
    assert data_url_size(data_url(image, "image/jpeg")) == size


def test_imagesize_invalid_base64_even_without_whitespace() -> None:
    assert data_url_size("data:image/png;base64,abc\n") is None
