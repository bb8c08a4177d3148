"""Key sources: config text, key file, passphrase (scrypt, cached), HKDF."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from m2mc.errors import ConfigError
from m2mc.security import keys
from m2mc.security.keys import (
    derive_passphrase_key,
    generate_key,
    hkdf_sha256,
    key_from_file,
    load_group_key,
    parse_key,
)

RAW = bytes(range(32))


def test_hkdf_matches_rfc5869_test_case_1() -> None:
    ikm = bytes.fromhex("0b" * 22)
    salt = bytes.fromhex("000102030405060708090a0b0c")
    info = bytes.fromhex("f0f1f2f3f4f5f6f7f8f9")
    okm = hkdf_sha256(ikm, info, 42, salt)
    assert okm.hex() == ("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf"
                         "34007208d5b887185865")


def test_hkdf_matches_cryptography_with_empty_salt() -> None:
    expected = HKDF(hashes.SHA256(), 32, None, b"info").derive(RAW)
    assert hkdf_sha256(RAW, b"info") == expected


@pytest.mark.parametrize("text", [
    "hex:" + RAW.hex(), RAW.hex(), RAW.hex().upper(), "base64:" + base64.b64encode(RAW).decode(),
    base64.b64encode(RAW).decode(), "  " + RAW.hex() + "\n",
])
def test_parse_key_forms(text: str) -> None:
    assert parse_key(text) == RAW


@pytest.mark.parametrize("text", ["hex:zz", "hex:" + "00" * 8, "base64:!!!", "",
                                  "hex:" + "00" * 65])
def test_parse_key_refuses(text: str) -> None:
    with pytest.raises(ConfigError):
        parse_key(text)


def test_generated_key_parses() -> None:
    assert len(parse_key(generate_key())) == 32
    assert generate_key() != generate_key()


def test_key_file_text_or_raw_and_private(tmp_path: Path) -> None:
    text_file = tmp_path / "g.key"
    text_file.write_text("hex:" + RAW.hex() + "\n")
    text_file.chmod(0o600)
    assert key_from_file(text_file) == RAW
    raw_file = tmp_path / "raw.key"
    raw_file.write_bytes(b"\xff" + RAW[1:])
    raw_file.chmod(0o400)
    assert key_from_file(raw_file) == b"\xff" + RAW[1:]
    text_file.chmod(0o644)
    with pytest.raises(ConfigError, match="chmod 600"):
        key_from_file(text_file)
    with pytest.raises(ConfigError, match="missing"):
        key_from_file(tmp_path / "missing")


def test_passphrase_is_derived_once_and_bound_to_the_group() -> None:
    before = keys.derivations
    a = derive_passphrase_key("correct horse battery staple", "team")
    b = derive_passphrase_key("correct horse battery staple", "team")
    assert a == b and len(a) == 32 and keys.derivations == before + 1
    cheap = {"n": 1 << 10, "r": 8, "p": 1}
    other_group = derive_passphrase_key("correct horse battery staple", "other", **cheap)
    other_phrase = derive_passphrase_key("correct horse battery stapler", "team", **cheap)
    assert len({a, other_group, other_phrase}) == 3
    with pytest.raises(ConfigError):
        derive_passphrase_key("", "team")


def test_passphrase_cache_keeps_the_64_most_recently_used_keys() -> None:
    """Each group a peer names makes a derivation; the cache of them is a bounded LRU."""
    cheap = {"n": 1 << 4, "r": 8, "p": 1}
    phrase = "cache bound"
    first = derive_passphrase_key(phrase, "cache-0", **cheap)
    for i in range(1, 64):
        derive_passphrase_key(phrase, f"cache-{i}", **cheap)
    before = keys.derivations
    assert derive_passphrase_key(phrase, "cache-0", **cheap) == first  # cached, now the newest
    assert keys.derivations == before
    for i in range(64, 130):
        derive_passphrase_key(phrase, f"cache-{i}", **cheap)
    assert len(keys._derived) == 64
    before = keys.derivations
    derive_passphrase_key(phrase, "cache-1", **cheap)  # fell out: derived again
    assert keys.derivations == before + 1
    derive_passphrase_key(phrase, "cache-129", **cheap)  # among the newest: still cached
    assert keys.derivations == before + 1


def test_load_group_key_sources(tmp_path: Path) -> None:
    assert load_group_key("g") is None
    assert load_group_key("g", key=RAW.hex()) == RAW
    path = tmp_path / "k"
    path.write_text(RAW.hex())
    os.chmod(path, 0o600)
    assert load_group_key("g", key_file=path) == RAW
    with pytest.raises(ConfigError, match="only one"):
        load_group_key("g", key=RAW.hex(), passphrase="x")
