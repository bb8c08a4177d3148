"""The m2mc send/listen/daemon/demo command lines: help, and one-line errors with status 2."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from m2mc.cli import main


@pytest.mark.parametrize(("command", "flags"), [
    ("send", ["--channel", "--redundancy", "--file", "--config"]),
    ("listen", ["--channel", "--prefix", "--count", "--timeout", "--config"]),
    ("daemon", ["--port", "--channel", "--config"]),
    ("demo", ["--out"]),
])
def test_help_lists_the_contract_flags(command: str, flags: list[str],
                                       capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main([command, "--help"])
    assert caught.value.code == 0
    out = capsys.readouterr().out
    assert all(flag in out for flag in flags)


@pytest.mark.parametrize("argv", [
    ["send", "--channel", "bogus://x"],
    ["listen", "--channel", "udp-multicast://127.0.0.1:5000"],
    ["daemon", "--channel", "daemon://127.0.0.1:1"],
    ["send", "--config", "does-not-exist.toml"],
    ["send", "--channel", "null://", "--file", "does-not-exist.bin"],
])
def test_bad_url_or_config_is_one_line_and_status_2(
        argv: list[str], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"m2mc {argv[0]}: error: ")


@pytest.mark.parametrize("argv", [
    ["send", "--redundancy", "0"],
    ["listen", "--prefix", "xyz"],
    ["listen", "--count", "-1"],
    ["listen", "--timeout", "soon"],
    ["daemon", "--port", "70000"],
    ["send", "--no-such-flag"],
])
def test_bad_flag_is_one_line_and_status_2(argv: list[str],
                                           capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(argv)
    assert caught.value.code == 2
    assert capsys.readouterr().err.count("\n") == 1


def test_bad_config_file_contents_from_a_real_process(tmp_path: Path) -> None:
    (tmp_path / "m2mc.toml").write_text("[m2mp]\nredundancy = -3\n")
    done = subprocess.run([sys.executable, "-m", "m2mc.cli", "send"], cwd=tmp_path,
                          input=b"x", capture_output=True, timeout=60,
                          env={"HOME": str(tmp_path), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 2
    assert done.stderr.decode().count("\n") == 1
    assert "m2mp.redundancy must be >= 1" in done.stderr.decode()
    assert b"Traceback" not in done.stderr


@pytest.mark.parametrize("size", [999, 1000, 5000])
def test_send_warns_once_of_a_message_large_enough_to_be_lost(
        size: int, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    """M2MP repairs nothing: from LARGE bytes on (16 MiB; 1,000 here) `m2mc send` says so
    in one line on stderr, naming the group layer's streams, and sends the file anyway."""
    import m2mc.cli.send as send

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(send, "LARGE", 1000)
    path = tmp_path / "file.bin"
    path.write_bytes(bytes(size))
    assert main(["send", "--channel", "null://", "--file", str(path)]) == 0
    captured = capsys.readouterr()
    assert f'"len": {size}' in captured.out
    warnings = [line for line in captured.err.splitlines() if "warning" in line]
    if size < 1000:
        assert warnings == []
    else:
        assert len(warnings) == 1 and "Group.send_stream" in warnings[0]
        assert "does not send a lost packet again" in warnings[0]


def test_send_help_says_m2mp_does_not_repair(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["send", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "does not repair lost packets" in out and "16 MiB" in out


def test_send_warns_once_when_stdin_passes_the_threshold(
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
        tmp_path: Path) -> None:
    """Stdin's size is not known ahead: the warning comes once that much is read."""
    import io

    import m2mc.cli.send as send

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.setattr(send, "LARGE", 100_000)
    monkeypatch.setattr(send, "PIECE", 30_000)

    class Stdin:
        buffer = io.BytesIO(bytes(250_000))

    monkeypatch.setattr(sys, "stdin", Stdin())
    assert main(["send", "--channel", "null://"]) == 0
    captured = capsys.readouterr()
    assert '"len": 250000' in captured.out
    assert captured.err.count("warning") == 1
