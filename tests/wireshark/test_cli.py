"""``m2mc wireshark``: install the dissector where Wireshark looks for a user's Lua
plugins, say where without installing, and fail in one line when the folder cannot be
written. With tshark here, Wireshark itself is asked where that folder is and whether
it loads the dissector from there."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from dissection import TSHARK, needs_tshark

from m2mc import __version__
from m2mc.cli import main
from m2mc.errors import UsageError
from m2mc.wireshark import DISSECTOR_NAME, dissector_path, personal_plugin_dir

M2MC = [sys.executable, "-m", "m2mc.cli"]


def _env(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("M2MC_", "WIRESHARK_"))}
    env["HOME"] = str(home)
    return env


def _run(argv: list[str], home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*M2MC, *argv], capture_output=True, text=True, env=_env(home),
                          timeout=60, check=False)


def test_help_says_what_it_decodes_and_how_to_install(
        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as caught:
        main(["wireshark", "--help"])
    assert caught.value.code == 0
    out = capsys.readouterr().out
    for word in ("install", "path", "M2MP", "group message", "infrastructure", "7777"):
        assert word in out
    with pytest.raises(SystemExit) as caught:
        main(["wireshark", "install", "--help"])
    assert caught.value.code == 0
    out = capsys.readouterr().out
    assert "--print" in out and "--dir" in out and ".local/lib/wireshark/plugins" in out


def test_print_names_the_file_and_writes_nothing(tmp_path: Path) -> None:
    done = _run(["wireshark", "install", "--print"], tmp_path)
    assert done.returncode == 0, done.stderr
    target = tmp_path / ".local" / "lib" / "wireshark" / "plugins" / DISSECTOR_NAME
    assert done.stdout == f"{target}\n"
    assert not (tmp_path / ".local").exists()


def test_install_copies_the_packaged_dissector_and_replaces_an_old_one(tmp_path: Path) -> None:
    target = tmp_path / ".local" / "lib" / "wireshark" / "plugins" / DISSECTOR_NAME
    for _ in range(2):  # a second install replaces the first
        done = _run(["wireshark", "install"], tmp_path)
        assert done.returncode == 0, done.stderr
        assert done.stdout == f"{target}\n"
        assert target.read_bytes() == dissector_path().read_bytes()
        target.write_text("-- an older version\n")
    other = tmp_path / "elsewhere"
    done = _run(["wireshark", "install", "--dir", str(other)], tmp_path)
    assert done.returncode == 0 and (other / DISSECTOR_NAME).read_bytes() == (
        dissector_path().read_bytes())
    assert sorted(p.name for p in target.parent.iterdir()) == [DISSECTOR_NAME]  # no leftovers


@pytest.mark.parametrize("where", ["home is a file", "dir under a file"])
def test_unwritable_folder_is_one_line_and_status_2(tmp_path: Path, where: str) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    if where == "home is a file":
        done = _run(["wireshark", "install"], blocker)
    else:
        done = _run(["wireshark", "install", "--dir", str(blocker / "plugins")], tmp_path)
    assert done.returncode == 2
    assert done.stdout == ""
    assert len(done.stderr.splitlines()) == 1, done.stderr
    assert done.stderr.startswith("m2mc wireshark: error: cannot write ")
    assert str(blocker) in done.stderr


def test_path_prints_the_packaged_script() -> None:
    done = subprocess.run([*M2MC, "wireshark", "path"], capture_output=True, text=True,
                          check=False, timeout=60)
    assert done.returncode == 0
    assert Path(done.stdout.strip()) == dissector_path() and dissector_path().is_file()


def test_the_personal_folder_on_each_platform() -> None:
    assert personal_plugin_dir({"HOME": "/home/u"}, "linux") == Path(
        "/home/u/.local/lib/wireshark/plugins")
    assert personal_plugin_dir({"HOME": "/Users/u"}, "darwin") == Path(
        "/Users/u/.local/lib/wireshark/plugins")
    assert personal_plugin_dir({"APPDATA": "C:/Users/u/AppData/Roaming"}, "win32") == Path(
        "C:/Users/u/AppData/Roaming/Wireshark/plugins")
    with pytest.raises(UsageError, match="APPDATA"):
        personal_plugin_dir({}, "win32")


@needs_tshark
def test_wireshark_loads_it_from_where_it_was_installed(tmp_path: Path) -> None:
    assert TSHARK is not None
    env = _env(tmp_path)
    folders = subprocess.run([TSHARK, "-G", "folders"], capture_output=True, text=True,
                             env=env, check=True, timeout=60).stdout
    personal = [line.split("\t")[-1] for line in folders.splitlines()
                if line.startswith("Personal Lua Plugins:")]
    assert personal == [str(personal_plugin_dir(env))]
    installed = _run(["wireshark", "install"], tmp_path).stdout.strip()
    plugins = subprocess.run([TSHARK, "-G", "plugins"], capture_output=True, text=True, env=env,
                             check=True, timeout=60).stdout
    [ours] = [line.split("\t") for line in plugins.splitlines()
              if line.split("\t")[-1] == installed]
    assert ours[:3] == [DISSECTOR_NAME, __version__, "lua script"]  # the release it belongs to
    protocols = subprocess.run([TSHARK, "-G", "protocols"], capture_output=True, text=True,
                               env=env, check=True, timeout=60).stdout
    names = {line.split("\t")[-1] for line in protocols.splitlines()}
    assert {"m2mp", "m2mc", "m2mc_auth", "m2mc_infra", "m2mc_backbone"} <= names
