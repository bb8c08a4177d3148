"""The scripted, headless participant: script format, runs, transcripts."""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from m2mc.errors import UsageError
from m2mc_chat.fake import FakeBackend, FakeNetwork
from m2mc_chat.script import (
    Create,
    Join,
    Leave,
    Reply,
    ScriptError,
    ScriptRunner,
    Send,
    Wait,
    WaitFile,
    WaitFor,
    WaitGroup,
    parse_script,
    run_script_file,
)
from m2mc_chat.session import ChatSession

SCRIPTS = Path(__file__).parent / "scripts"


def test_parse_every_step() -> None:
    text = """
    # a comment
    create lunch # and a hash in the description
    join lunch
    send Hello # not a comment either
    reply 3 Yes, #3!
    wait 0.25
    wait_for 6
    wait_group news of the day
    wait_file /tmp/go ahead
    leave
    """
    assert parse_script(text) == [
        Create("lunch # and a hash in the description"), Join("lunch"),
        Send("Hello # not a comment either"), Reply(3, "Yes, #3!"), Wait(0.25), WaitFor(6),
        WaitGroup("news of the day"), WaitFile("/tmp/go ahead"), Leave()]


@pytest.mark.parametrize(("line", "message"), [
    ("shout hi", "unknown step 'shout'"),
    ("send", "'send' needs an argument"),
    ("reply 0 hi", "reply N TEXT"),
    ("reply x hi", "reply N TEXT"),
    ("reply 2", "reply N TEXT"),
    ("wait soon", "wait SECONDS"),
    ("wait -1", "between 0 and"),
    ("wait_for many", "wait_for COUNT"),
    ("wait_group", "wait_group NAME"),
    ("wait_file", "wait_file PATH"),
    ("leave now", "takes no argument"),
])
def test_parse_errors_name_the_line(line: str, message: str) -> None:
    with pytest.raises(UsageError, match=f"steps.txt line 2: .*{message}"):
        parse_script(f"create g\n{line}\n", "steps.txt")


async def test_three_participants_end_with_the_same_tree() -> None:
    net = FakeNetwork()
    runners = []
    for name in ("alice", "bob", "carol"):
        session = ChatSession(FakeBackend(net, name), name)
        await session.start()
        runners.append((ScriptRunner(session, step_timeout=10),
                        parse_script((SCRIPTS / f"{name}.txt").read_text()),
                        asyncio.create_task(session.run())))
    await asyncio.gather(*(runner.run(steps) for runner, steps, _ in runners))
    transcripts = [runner.transcript() for runner, _, _ in runners]
    for runner, _, pump in runners:
        await runner.session.close()
        await pump
    assert transcripts[0]["tree"] == transcripts[1]["tree"] == transcripts[2]["tree"]
    tree = transcripts[0]["tree"]

    def shape(nodes: list[dict[str, object]]) -> list[object]:
        return [(n["nick"], n["text"], shape(n["children"])) for n in nodes]  # type: ignore[arg-type]

    assert shape(tree) == [
        ("alice", "Where shall we eat today?", [
            ("bob", "Pizza?", [("carol", "Pizza is fine", [("alice", "Then pizza it is", [])])]),
            ("bob", "I will book a table", [])]),
        ("carol", "Anyone for coffee after?", [])]
    assert all(t["groups"][0]["left"] for t in transcripts)


async def test_wait_group_and_wait_file(tmp_path: Path) -> None:
    """``wait_group`` waits until a group is discovered without joining it; ``wait_file``
    until a file exists: a test (or any program) can tell participants when to go on."""
    net = FakeNetwork()
    sessions = {name: ChatSession(FakeBackend(net, name), name) for name in ("ann", "ben")}
    pumps = []
    for session in sessions.values():
        await session.start()
        pumps.append(asyncio.create_task(session.run()))
    go = tmp_path / "go"
    ann = ScriptRunner(sessions["ann"], step_timeout=10)
    ben = ScriptRunner(sessions["ben"], step_timeout=10)
    waiting = asyncio.create_task(ben.run(parse_script(f"wait_group news\nwait_file {go}\n")))
    await asyncio.sleep(0.05)
    assert not waiting.done()
    await ann.run(parse_script("create news\n"))
    assert await sessions["ben"].wait_until(
        lambda: sessions["ben"].find_group("news") is not None, 5)
    await asyncio.sleep(0.1)
    assert not waiting.done()  # the group is there, the file is not
    assert "news" not in [v.info.desc for v in sessions["ben"].views.values()]  # not joined
    go.write_text("")
    await asyncio.wait_for(waiting, 5)
    late = ScriptRunner(sessions["ben"], step_timeout=0.2)
    with pytest.raises(ScriptError, match=r"no group 'sports' discovered in 0\.2 s"):
        await late.step(WaitGroup("sports"))
    with pytest.raises(ScriptError, match=r"no file .*nothing within 0\.2 s"):
        await late.step(WaitFile(str(tmp_path / "nothing")))
    for session, pump in zip(sessions.values(), pumps, strict=True):
        await session.close()
        await pump


async def test_a_wait_that_runs_out_fails_and_still_writes_the_transcript(
        tmp_path: Path) -> None:
    net = FakeNetwork()
    script = tmp_path / "s.txt"
    script.write_text("create quiet\nsend anyone?\nwait_for 2\nsend never sent\n")
    out = tmp_path / "out.json"
    problems: list[str] = []
    status = await run_script_file(ChatSession(FakeBackend(net, "a"), "alice"), script, out,
                                   step_timeout=0.2, report=problems.append)
    assert status == 1
    assert problems == ["only 1 of 2 messages arrived in 0.2 s"]
    transcript = json.loads(out.read_text())
    assert [n["text"] for n in transcript["tree"]] == ["anyone?"]


def run_cli(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "m2mc.cli", "chat", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=60, check=False)


def test_cli_headless_demo_run_writes_the_transcript(tmp_path: Path) -> None:
    script = tmp_path / "steps.txt"
    script.write_text("join travel stories\nwait_for 8\nreply 2 Lovely\n")
    done = run_cli("--demo", "--data-dir", str(tmp_path / "d"), "--nick", "zed",
                   "--device-id", "zed1", "--script", str(script),
                   "--transcript", str(tmp_path / "t.json"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    transcript = json.loads((tmp_path / "t.json").read_text())
    assert (transcript["node"], transcript["nick"]) == ("zed1", "zed")
    yes = transcript["tree"][0]["children"][0]
    assert yes["text"] == "Yes! The Red Fort at dawn."
    assert {"mid": "zed1:1", "parent": "bob:1", "author": "zed1", "nick": "zed",
            "text": "Lovely", "children": []} in yes["children"]
    assert (tmp_path / "d" / "chat.toml").read_text().count("zed1") == 1


@pytest.mark.parametrize(("args", "error"), [
    (["--transcript", "x.json"], "--transcript goes with --script"),
    (["--script", "nope.txt", "--nick", "a"], "cannot read script"),
    (["--script", "s.txt"], "--script needs a nick"),
    (["--infra", "hostonly"], "--infra: 'hostonly' is not"),
    (["--device-id", "a b"], "device id"),
    (["--nick", "", "--script", "s.txt"], "--nick: the nick must not be empty"),
    (["--nick", "a", "--channel", "udp-multicast://nowhere", "--script", "s.txt"],
     "--channel: bad channel URL 'udp-multicast://nowhere'"),
    (["--nick", "a", "--channel", "", "--script", "s.txt"], "--channel: the channel URL must"),
    (["--channel", "carrier-pigeon://home"], "--channel: bad channel URL"),   # the TUI
    (["--key-passphrase", "lunch"], "--key-passphrase: use GROUP=VALUE"),
    (["--key-suite", "rot13", "--script", "s.txt", "--nick", "a"], "unknown auth suite"),
    (["--infra", "239.255.20.1:7711", "--key-file", "k", "--key-passphrase", "p"],
     "with --infra, give one deployment key"),
    (["--infra", "239.255.20.1:7711", "--key-suite", "aes-256-gcm"],
     "--key-suite goes with --key-file or --key-passphrase"),
    (["--infra", "239.255.20.1:7711", "--key-passphrase", "p", "--key-suite", "rot13"],
     "unknown auth suite"),
])
def test_cli_usage_errors_are_one_line_exit_2(tmp_path: Path, args: list[str],
                                              error: str) -> None:
    (tmp_path / "s.txt").write_text("create g\n")
    done = run_cli("--demo", "--data-dir", str(tmp_path / "d"), *args, cwd=tmp_path)
    assert done.returncode == 2
    assert error in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "d" / "chat.toml").exists()       # nothing saved


@pytest.mark.parametrize("tui", [False, True])
def test_a_bad_channel_in_chat_toml_names_the_file(tmp_path: Path, tui: bool) -> None:
    (tmp_path / "s.txt").write_text("create g\n")
    config = tmp_path / "d" / "chat.toml"
    config.parent.mkdir()
    config.write_text('nick = "a"\ndevice_id = "d1"\nchannel = "udp://"\n')
    script = [] if tui else ["--script", "s.txt"]
    done = run_cli("--data-dir", str(tmp_path / "d"), *script, cwd=tmp_path)
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith(f"m2mc chat: error: {config}: channel: bad channel URL 'udp://'")
    config.write_text('nick = "a"\nnik = "b"\n')
    done = run_cli("--data-dir", str(tmp_path / "d"), *script, cwd=tmp_path)
    assert done.returncode == 2
    assert f"{config}: unknown setting 'nik'" in done.stderr


def test_a_channel_that_cannot_open_is_exit_2_and_not_saved(tmp_path: Path) -> None:
    (tmp_path / "s.txt").write_text("create g\n")
    with socket.socket() as taken:  # bound, never listening: no daemon can be there
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        done = run_cli("--data-dir", str(tmp_path / "d"), "--nick", "a", "--script", "s.txt",
                       "--channel", f"daemon://127.0.0.1:{port}", cwd=tmp_path)
    assert done.returncode == 2
    [line] = done.stderr.strip().splitlines()
    assert line.startswith("m2mc chat: error: cannot start the network:")
    assert not (tmp_path / "d" / "chat.toml").exists()


def test_cli_infra_needs_cells_not_backbone_addresses(tmp_path: Path) -> None:
    (tmp_path / "s.txt").write_text("create g\n")
    done = run_cli("--infra", "127.0.0.1:7001", "--nick", "a", "--data-dir", str(tmp_path / "d"),
                   "--script", "s.txt", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "m2mc chat: error: --infra: '127.0.0.1:7001' is not a cell: give the multicast "
        "GROUP:PORT of an 'm2mc host --cell', or its udp-multicast:// URL")


def test_cli_passphrases_are_used_and_never_saved(tmp_path: Path) -> None:
    script = tmp_path / "steps.txt"
    script.write_text("create plans\nsend The plan is secret\n")
    done = run_cli("--demo", "--data-dir", str(tmp_path / "d"), "--nick", "zed",
                   "--key-passphrase", "plans=hunter2 hunter2", "--script", str(script),
                   "--transcript", str(tmp_path / "t.json"), cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    saved = "".join(p.read_text() for p in (tmp_path / "d").glob("*") if p.is_file())
    assert "chat.toml" in str(list((tmp_path / "d").iterdir()))
    assert "hunter2" not in saved


def test_with_infra_the_key_flags_are_the_hosts_deployment_key() -> None:
    import argparse

    from m2mc.cli.chat import _deployment_key
    from m2mc.security.keys import GroupKey

    def args(**given: object) -> argparse.Namespace:
        return argparse.Namespace(**{"key_file": [], "key_passphrase": [], "key_suite": None,
                                     **given})

    assert _deployment_key(args()) is None
    assert _deployment_key(args(key_file=["team.key"])) == GroupKey(key_file="team.key")
    assert _deployment_key(args(key_passphrase=["p"], key_suite="aes-256-gcm")) == GroupKey(
        passphrase="p", suite="aes-256-gcm")
