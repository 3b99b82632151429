"""Media in prompts, counted the way each provider bills them (never by base64 length).

Images are sized from their own header bytes (PNG, JPEG, GIF, WebP, read from a data URL or a
base64 block without decoding the whole image), then billed by the provider's published formula:

- OpenAI: `detail="low"` costs 85; otherwise the image is fitted in 2048x2048, its short side
  scaled to 768, and each 512-pixel tile costs 170 on top of 85 (what
  `ChatOpenAI.get_num_tokens_from_messages` computes with Pillow).
- Anthropic: `width * height / 750` after scaling the long edge to at most 1568 pixels and the
  image to about 1.15 megapixels (at most about 1,600 tokens).
- Google (Gemini): 258 for an image with both sides at most 384 pixels, else 258 per 768x768
  tile.

An image whose size cannot be read (a remote URL: counting never fetches) is billed as a
typical large image of that provider. Audio is billed by duration (a WAV header, else the byte
size at 128 kbit/s): Gemini bills 32 tokens a second, OpenAI's audio models about 10. Documents
(PDF) are billed per page (`/Type /Page` objects): Anthropic about 1,500 a page (text plus the
page image), Gemini 258, OpenAI about 1,000 (text plus a page image). Plain-text files count as
their text.
"""

from __future__ import annotations

import base64
import binascii
import math
import re
import struct
from collections.abc import Mapping
from typing import Any

_HEADER_B64_CHARS = 64_000  # enough base64 for any image header we read (48 KB of bytes)

_UNKNOWN_IMAGE = {"openai": 765, "anthropic": 1_600, "google": 258}
_AUDIO_PER_SECOND = {"openai": 10.0, "anthropic": 10.0, "google": 32.0}
_PDF_PER_PAGE = {"openai": 1_000, "anthropic": 1_500, "google": 258}
_UNKNOWN_FILE = 1_500  # a document we cannot page: about one dense page

_PAGE = re.compile(rb"/Type\s*/Page(?![s\w])")


def _b64_head(data: str, chars: int = _HEADER_B64_CHARS) -> bytes:
    head = data[:chars]
    head = head[: len(head) - len(head) % 4]
    try:
        return base64.b64decode(head, validate=False)
    except (binascii.Error, ValueError):
        return b""


def _b64_bytes(data: str) -> bytes:
    try:
        return base64.b64decode(data, validate=False)
    except (binascii.Error, ValueError):
        return b""


def split_data_url(url: str) -> tuple[str, str] | None:
    """`(mime_type, base64_payload)` of a `data:...;base64,...` URL, else None."""
    if not url.startswith("data:"):
        return None
    header, _, payload = url.partition(",")
    if ";base64" not in header:
        return None
    return header[5:].split(";", 1)[0], payload


def image_size(head: bytes) -> tuple[int, int] | None:
    """`(width, height)` from the first bytes of a PNG, JPEG, GIF or WebP file, else None."""
    if head.startswith(b"\x89PNG\r\n\x1a\n") and len(head) >= 24:
        width, height = struct.unpack(">II", head[16:24])
        return width, height
    if head[:6] in (b"GIF87a", b"GIF89a") and len(head) >= 10:
        width, height = struct.unpack("<HH", head[6:10])
        return width, height
    if head.startswith(b"RIFF") and head[8:12] == b"WEBP" and len(head) >= 30:
        return _webp_size(head)
    if head.startswith(b"\xff\xd8"):
        return _jpeg_size(head)
    return None


def _webp_size(head: bytes) -> tuple[int, int] | None:
    kind = head[12:16]
    if kind == b"VP8X":
        width = 1 + int.from_bytes(head[24:27], "little")
        height = 1 + int.from_bytes(head[27:30], "little")
        return width, height
    if kind == b"VP8 " and head[23:26] == b"\x9d\x01\x2a":
        width, height = struct.unpack("<HH", head[26:30])
        return width & 0x3FFF, height & 0x3FFF
    if kind == b"VP8L" and head[20:21] == b"\x2f":
        bits = int.from_bytes(head[21:25], "little")
        return (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
    return None


def _jpeg_size(head: bytes) -> tuple[int, int] | None:
    i = 2
    while i + 9 < len(head):
        if head[i] != 0xFF:
            i += 1
            continue
        marker = head[i + 1]
        if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7 or marker == 0xFF:
            i += 1 if marker == 0xFF else 2
            continue
        length = struct.unpack(">H", head[i + 2 : i + 4])[0]
        if 0xC0 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC):
            height, width = struct.unpack(">HH", head[i + 5 : i + 9])
            return width, height
        i += 2 + length
    return None


# --- the providers' formulas --------------------------------------------------------------


def openai_image_tokens(size: tuple[int, int] | None, detail: str | None = None) -> int:
    """OpenAI's tile formula (85 base + 170 per 512-pixel tile; `low` detail 85)."""
    if detail == "low":
        return 85
    if size is None:
        return _UNKNOWN_IMAGE["openai"]
    width, height = size
    if width > 2048 or height > 2048:  # fit in 2048x2048 (integer steps as ChatOpenAI)
        if width > height:
            width, height = 2048, (height * 2048) // width
        else:
            width, height = (width * 2048) // height, 2048
    if width > 768 and height > 768:  # short side to 768
        if width > height:
            width, height = (width * 768) // height, 768
        else:
            width, height = 768, (height * 768) // width
    return 170 * math.ceil(width / 512) * math.ceil(height / 512) + 85


def anthropic_image_tokens(size: tuple[int, int] | None) -> int:
    """Anthropic's `width * height / 750`, after its downscaling (long edge 1568, ~1.15 MP)."""
    if size is None:
        return _UNKNOWN_IMAGE["anthropic"]
    width, height = size
    scale = min(1.0, 1568 / max(width, height, 1), math.sqrt(1_150_000 / max(width * height, 1)))
    return max(1, math.ceil(int(width * scale) * int(height * scale) / 750))


def google_image_tokens(size: tuple[int, int] | None) -> int:
    """Gemini: 258 for an image within 384x384, else 258 per 768x768 tile."""
    if size is None:
        return _UNKNOWN_IMAGE["google"]
    width, height = size
    if width <= 384 and height <= 384:
        return 258
    return 258 * math.ceil(width / 768) * math.ceil(height / 768)


def image_tokens(provider: str, size: tuple[int, int] | None, detail: str | None = None) -> int:
    """Tokens of one image for `provider` (`openai`, `anthropic`, `google`, else OpenAI's)."""
    if provider == "anthropic":
        return anthropic_image_tokens(size)
    if provider == "google":
        return google_image_tokens(size)
    return openai_image_tokens(size, detail)


def audio_tokens(provider: str, data: bytes, mime: str = "") -> int:
    """Tokens of an audio clip: its duration times the provider's rate."""
    seconds = _wav_seconds(data)
    if seconds is None:
        seconds = len(data) / 16_000  # 128 kbit/s, a common compressed rate
    rate = _AUDIO_PER_SECOND.get(provider, _AUDIO_PER_SECOND["openai"])
    return max(1, math.ceil(seconds * rate))


def _wav_seconds(data: bytes) -> float | None:
    if not (data.startswith(b"RIFF") and data[8:12] == b"WAVE"):
        return None
    i = 12
    byte_rate: int = 0
    while i + 8 <= len(data):
        chunk, size = data[i : i + 4], struct.unpack("<I", data[i + 4 : i + 8])[0]
        if chunk == b"fmt " and i + 20 <= len(data):
            byte_rate = int(struct.unpack("<I", data[i + 16 : i + 20])[0])
        if chunk == b"data" and byte_rate:
            return float(min(size, len(data) - i - 8) / byte_rate)
        i += 8 + size + (size & 1)
    return None


def document_tokens(provider: str, data: bytes, mime: str, count_text: Any) -> int:
    """Tokens of a file: a PDF per page, text as text, anything else about one page."""
    if mime.startswith("text/") or mime in ("application/json", "application/xml"):
        return int(count_text(data.decode("utf-8", errors="replace")))
    per_page = _PDF_PER_PAGE.get(provider, _PDF_PER_PAGE["openai"])
    if data.startswith(b"%PDF"):
        return per_page * max(1, len(_PAGE.findall(data)))
    return _UNKNOWN_FILE


# --- content blocks (LangChain standard and provider-native shapes) ------------------------

_IMAGE_TYPES = frozenset({"image", "image_url", "input_image"})
_AUDIO_TYPES = frozenset({"audio", "input_audio"})
_FILE_TYPES = frozenset({"file", "document", "input_file"})


def is_media(block: Mapping[str, Any]) -> bool:
    """Whether a content block is an image, audio clip or file."""
    kind = block.get("type")
    return kind in _IMAGE_TYPES or kind in _AUDIO_TYPES or kind in _FILE_TYPES


def _image_source(block: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """`(url, base64_data)` of an image block in any of the shapes LangChain passes on."""
    if block.get("type") == "image_url":
        inner = block.get("image_url")
        url = inner.get("url") if isinstance(inner, Mapping) else inner
        return (url if isinstance(url, str) else None), None
    source = block.get("source")
    if isinstance(source, Mapping):  # Anthropic native: {"source": {"type": "base64", ...}}
        if isinstance(source.get("data"), str):
            return None, source["data"]
        url = source.get("url")
        return (url if isinstance(url, str) else None), None
    for key in ("base64", "data"):
        if isinstance(block.get(key), str):
            return None, block[key]
    url = block.get("url") or block.get("image_url")
    return (url if isinstance(url, str) else None), None


def media_tokens(provider: str, block: Mapping[str, Any], count_text: Any) -> int:
    """Tokens of one media block for `provider`, by its billing formula.

    Args:
        provider: `openai`, `anthropic`, `google` or anything else (billed as OpenAI).
        block: An image, audio or file content block.
        count_text: Counts the text of a plain-text file.
    """
    kind = block.get("type")
    if kind in _IMAGE_TYPES:
        url, data = _image_source(block)
        if url is not None and data is None:
            split = split_data_url(url)
            data = split[1] if split else None
        size = image_size(_b64_head(data)) if data else None
        inner = block.get("image_url")
        detail = inner.get("detail") if isinstance(inner, Mapping) else block.get("detail")
        return image_tokens(provider, size, detail if isinstance(detail, str) else None)
    payload, mime = _payload(block)
    if kind in _AUDIO_TYPES:
        return audio_tokens(provider, _b64_bytes(payload) if payload else b"", mime)
    if payload is None:  # a file by id or URL: we cannot see it
        return _UNKNOWN_FILE
    return document_tokens(provider, _b64_bytes(payload), mime, count_text)


def _payload(block: Mapping[str, Any]) -> tuple[str | None, str]:
    """`(base64_data, mime_type)` of an audio or file block, from any of its shapes."""
    mime = str(block.get("mime_type") or "")
    for holder in (block, block.get("input_audio"), block.get("file"), block.get("source")):
        if not isinstance(holder, Mapping):
            continue
        for key in ("base64", "data", "file_data"):
            value = holder.get(key)
            if isinstance(value, str):
                split = split_data_url(value)
                if split is not None:
                    return split[1], split[0] or mime
                fmt = holder.get("format") or holder.get("media_type") or ""
                return value, mime or (f"audio/{fmt}" if key == "data" and fmt else str(fmt))
        if holder is not block and isinstance(holder.get("text"), str):  # Anthropic text doc
            return base64.b64encode(holder["text"].encode()).decode(), "text/plain"
    return None, mime
