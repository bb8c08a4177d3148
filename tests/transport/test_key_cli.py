"""``m2mc key``: a key file made once, with mode 600, never overwritten, read back as
``--key-file`` reads it."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from m2mc.cli import main
from m2mc.security.keys import key_from_file


def test_new_writes_a_private_32_byte_key_and_check_prints_its_fingerprint(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "team.key"
    assert main(["key", "new", str(path)]) == 0
    made = capsys.readouterr().out
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    key = key_from_file(path)
    assert len(key) == 32
    assert main(["key", "check", str(path)]) == 0
    assert capsys.readouterr().out == made           # the same fingerprint, read back
    other = tmp_path / "other.key"
    assert main(["key", "new", str(other)]) == 0
    assert capsys.readouterr().out.split()[-1] != made.split()[-1]


def test_an_existing_file_is_never_overwritten(tmp_path: Path,
                                               capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "team.key"
    path.write_text("precious")
    assert main(["key", "new", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "exists" in err
    assert path.read_text() == "precious"


def test_check_refuses_a_key_others_can_read(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "team.key"
    assert main(["key", "new", str(path)]) == 0
    path.chmod(0o644)
    capsys.readouterr()
    assert main(["key", "check", str(path)]) == 2
    assert "chmod 600" in capsys.readouterr().err
