"""Token estimates of what is not text in a Messages request: images and PDF documents.

Anthropic documents both only as estimates, and so are these (every Messages count is approximate):

- an image costs ``width x height / 750`` tokens, after being scaled down (aspect ratio kept) until its
  long edge is at most 1568 px and it costs at most about 1,600 tokens; so no image costs more than
  ``IMAGE_MAX_TOKENS``. The size is read from the header of a base64 image
  (``gateway.tokens.imagesize``); an image given by URL or file id, or whose header cannot be read,
  counts ``IMAGE_MAX_TOKENS``.
- a PDF page costs its text (1,500-3,000 tokens "depending on content density": ``PDF_PAGE_TEXT_TOKENS``
  is the middle of that) plus its image (each page is also shown as an image: ``IMAGE_MAX_TOKENS``).
  The pages of a base64 PDF are its page objects (``/Type /Page``); a PDF whose pages sit in compressed
  object streams shows none, and is taken to have one page per ``PDF_BYTES_PER_PAGE`` bytes. A PDF given
  by URL or file id is taken to have ``PDF_ASSUMED_PAGES`` pages. Never more than ``PDF_MAX_PAGES``.
"""

from __future__ import annotations

import binascii
import math
import re
from collections.abc import Mapping
from typing import Any

from gateway.tokens.imagesize import data_url_size

PIXELS_PER_TOKEN = 750
LONG_EDGE = 1568
IMAGE_MAX_TOKENS = 1600
HEADER_CHARS = 64 * 1024
"""Base64 characters of an image read for its header at first (all of it when that is not enough)."""
PDF_PAGE_TEXT_TOKENS = 2250
PDF_PAGE_TOKENS = PDF_PAGE_TEXT_TOKENS + IMAGE_MAX_TOKENS
PDF_BYTES_PER_PAGE = 50_000
PDF_ASSUMED_PAGES = 10
PDF_MAX_PAGES = 600
DOCUMENT_MAX_TOKENS = PDF_MAX_PAGES * PDF_PAGE_TOKENS
"""No document that is not text costs more."""
_PAGE_OBJECT = re.compile(rb"/Type\s*/Page(?![A-Za-z])")


def scaled_image_tokens(width: int, height: int) -> int:
    """Tokens of a ``width`` x ``height`` image, as Anthropic scales and bills it."""
    if width <= 0 or height <= 0:
        return IMAGE_MAX_TOKENS
    scale = min(
        1.0, LONG_EDGE / max(width, height), math.sqrt(IMAGE_MAX_TOKENS * PIXELS_PER_TOKEN / (width * height))
    )
    if scale < 1.0:
        width, height = max(1, int(width * scale)), max(1, int(height * scale))
    return min(IMAGE_MAX_TOKENS, math.ceil(width * height / PIXELS_PER_TOKEN))


def image_tokens(source: Any) -> int:
    """Tokens of an image block's ``source``."""
    size = _base64_size(source)
    return IMAGE_MAX_TOKENS if size is None else scaled_image_tokens(*size)


def _base64_size(source: Any) -> tuple[int, int] | None:
    if not isinstance(source, Mapping) or source.get("type") != "base64":
        return None
    data, media = source.get("data"), source.get("media_type")
    if not isinstance(data, str) or not isinstance(media, str) or len(media) > 100:
        return None
    head = f"data:{media};base64,"
    size = data_url_size(head + data[:HEADER_CHARS])
    if size is None and len(data) > HEADER_CHARS:
        size = data_url_size(head + data)
    return size


def document_tokens(source: Any) -> int:
    """Tokens of a document block whose ``source`` is not text (a PDF, by data, URL or file id)."""
    return pdf_pages(source) * PDF_PAGE_TOKENS


def pdf_pages(source: Any) -> int:
    if not isinstance(source, Mapping) or source.get("type") != "base64":
        return PDF_ASSUMED_PAGES
    data = source.get("data")
    if not isinstance(data, str):
        return PDF_ASSUMED_PAGES
    try:
        decoded = binascii.a2b_base64(data)
    except (binascii.Error, ValueError):
        return PDF_ASSUMED_PAGES
    pages = len(_PAGE_OBJECT.findall(decoded)) or math.ceil(len(decoded) / PDF_BYTES_PER_PAGE)
    return min(PDF_MAX_PAGES, max(1, pages))
