"""Width and height of a PNG, JPEG, GIF or WebP image in a ``data:`` URL, read from the header bytes.

Nothing is decoded beyond the header: the base64 payload is decoded a prefix at a time, doubling, until
the reader has the bytes it needs (24 for PNG, 10 for GIF, 30 for WebP; for JPEG as far as the first
start-of-frame segment, past any EXIF or ICC segments).
"""

from __future__ import annotations

import binascii

_MAX_HEADER_CHARS = 256
_FIRST_WINDOW = 64
_JPEG_MAX_SEGMENTS = 1024
_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_JPEG_STANDALONE = frozenset(range(0xD0, 0xD8)) | {0x01}


def data_url_size(url: str) -> tuple[int, int] | None:
    """(width, height) of the image in a base64 ``data:`` URL, or None when the header is unreadable."""
    if url[:5].lower() != "data:":
        return None
    comma = url.find(",", 5, _MAX_HEADER_CHARS)
    if comma < 0 or not url[5:comma].lower().endswith(";base64"):
        return None
    prefix = _Base64Prefix(url, comma + 1)
    head = prefix.get(30)
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return _png(head)
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return _positive(int.from_bytes(head[6:8], "little"), int.from_bytes(head[8:10], "little"))
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return _webp(head)
    if head[:2] == b"\xff\xd8":
        return _jpeg(prefix)
    return None


class _Base64Prefix:
    """Decodes as little of a base64 payload as the caller needs, in doubling windows."""

    def __init__(self, text: str, start: int) -> None:
        self._text = text
        self._start = start
        self._decoded = b""
        self._chars = 0
        self._cleaned = False

    def get(self, size: int) -> bytes:
        """At least ``size`` decoded bytes from the start, or all there are."""
        while len(self._decoded) < size and self._chars < len(self._text) - self._start:
            self._chars = max(-(-size // 3) * 4, 2 * self._chars, _FIRST_WINDOW)
            window = self._text[self._start : self._start + self._chars]
            try:
                self._decoded = binascii.a2b_base64(window)
            except ValueError:  # binascii.Error, or a character outside ASCII (no base64 at all)
                if self._cleaned:
                    return b""
                # A line-wrapped payload: drop its whitespace once, then decode windows of the rest.
                self._text = "".join(self._text[self._start :].split())
                self._start, self._chars, self._cleaned = 0, 0, True
        return self._decoded


def _positive(width: int, height: int) -> tuple[int, int] | None:
    return (width, height) if width > 0 and height > 0 else None


def _png(head: bytes) -> tuple[int, int] | None:
    if len(head) < 24 or head[12:16] != b"IHDR":
        return None
    return _positive(int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big"))


def _webp(head: bytes) -> tuple[int, int] | None:
    chunk = head[12:16]
    if chunk == b"VP8 " and len(head) >= 30 and head[23:26] == b"\x9d\x01\x2a":
        width = int.from_bytes(head[26:28], "little") & 0x3FFF
        height = int.from_bytes(head[28:30], "little") & 0x3FFF
        return _positive(width, height)
    if chunk == b"VP8L" and len(head) >= 25 and head[20] == 0x2F:
        bits = int.from_bytes(head[21:25], "little")
        return ((bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1)
    if chunk == b"VP8X" and len(head) >= 30:
        return (int.from_bytes(head[24:27], "little") + 1, int.from_bytes(head[27:30], "little") + 1)
    return None


def _jpeg(prefix: _Base64Prefix) -> tuple[int, int] | None:
    position = 2
    for _ in range(_JPEG_MAX_SEGMENTS):
        data = prefix.get(position + 9)
        if len(data) < position + 4 or data[position] != 0xFF:
            return None
        marker = data[position + 1]
        if marker == 0xFF:  # fill byte before a marker
            position += 1
            continue
        if marker in _JPEG_SOF:
            if len(data) < position + 9:
                return None
            height = int.from_bytes(data[position + 5 : position + 7], "big")
            width = int.from_bytes(data[position + 7 : position + 9], "big")
            return _positive(width, height)
        if marker in _JPEG_STANDALONE:
            position += 2
            continue
        if marker in (0xD9, 0xDA):  # end of image or start of scan before any frame header
            return None
        position += 2 + int.from_bytes(data[position + 2 : position + 4], "big")
    return None
