"""load_config: sources, precedence, the seed's properties files, validation, docs."""

from __future__ import annotations

import dataclasses
import random
import re
from pathlib import Path

import pytest

from m2mc.config import Config, load_config, read_properties, sections
from m2mc.errors import ConfigError
from m2mc.transport.url import DEFAULT_CHANNEL_URL

DOCS = Path(__file__).resolve().parents[2] / "docs" / "configuration.md"


def load(tmp_path: Path, *, env: dict[str, str] | None = None, **kwargs: object) -> Config:
    work = tmp_path / "work"
    home = tmp_path / "home"
    work.mkdir(exist_ok=True)
    home.mkdir(exist_ok=True)
    return load_config(env=env or {}, cwd=work, home=home, rng=random.Random(7),
                       **kwargs)  # type: ignore[arg-type]


def test_defaults(tmp_path: Path) -> None:
    config = load(tmp_path)
    assert config.m2mp.channel == DEFAULT_CHANNEL_URL
    assert (config.m2mp.message_timeout, config.m2mp.flow_timeout, config.m2mp.redundancy) == (
        5.0, 0.1, 2)
    assert config.daemon.port == 5678 and config.daemon.channel == DEFAULT_CHANNEL_URL
    assert re.fullmatch(r"[0-9A-F]{12}", config.node_id)
    assert int(config.node_id, 16) <= 0x3FFFFFFFFFFF
    assert config.sources == ()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.m2mp.redundancy = 3  # type: ignore[misc]


def test_toml_in_working_directory_wins_over_user_config_directory(tmp_path: Path) -> None:
    (tmp_path / "home" / ".config" / "m2mc").mkdir(parents=True)
    (tmp_path / "home" / ".config" / "m2mc" / "config.toml").write_text(
        "[m2mp]\nredundancy = 3\n")
    assert load(tmp_path).m2mp.redundancy == 3
    (tmp_path / "work" / "m2mc.toml").write_text("[m2mp]\nredundancy = 4\n")
    assert load(tmp_path).m2mp.redundancy == 4


def test_xdg_config_home_is_honoured(tmp_path: Path) -> None:
    (tmp_path / "xdg" / "m2mc").mkdir(parents=True)
    (tmp_path / "xdg" / "m2mc" / "config.toml").write_text("[daemon]\nport = 6000\n")
    assert load(tmp_path, env={"XDG_CONFIG_HOME": str(tmp_path / "xdg")}).daemon.port == 6000


def test_precedence_properties_toml_env_flags(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "m2mp.properties").write_text(
        "edu.rit.m2mp.redundancy = 2\nedu.rit.m2mp.flowtimeout = 250\n"
        "edu.rit.m2mp.messagetimeout = 3000\n")
    (tmp_path / "work" / "m2mc.toml").write_text("[m2mp]\nredundancy = 3\nflow_timeout = 0.5\n")
    config = load(tmp_path)
    assert (config.m2mp.redundancy, config.m2mp.flow_timeout,
            config.m2mp.message_timeout) == (3, 0.5, 3.0)
    config = load(tmp_path, env={"M2MC_M2MP_REDUNDANCY": "5"})
    assert config.m2mp.redundancy == 5
    config = load(tmp_path, env={"M2MC_M2MP_REDUNDANCY": "5"},
                  overrides={"m2mp.redundancy": 6, "m2mp.channel": None})
    assert config.m2mp.redundancy == 6 and config.m2mp.channel == DEFAULT_CHANNEL_URL
    assert [Path(s).name for s in config.sources] == ["m2mp.properties", "m2mc.toml"]


def test_explicit_path_and_m2mc_config_variable(tmp_path: Path) -> None:
    other = tmp_path / "other.toml"
    other.write_text("[m2mp]\nchannel = \"mem://x\"\n")
    assert load(tmp_path, path=other).m2mp.channel == "mem://x"
    assert load(tmp_path, env={"M2MC_CONFIG": str(other)}).m2mp.channel == "mem://x"
    with pytest.raises(ConfigError, match="not found"):
        load(tmp_path, path=tmp_path / "missing.toml")


def test_seed_properties_files(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "device.properties").write_text(
        "# Device Properties File\nedu.rit.device.id = 00087443BC87\n")
    (home / "m2mp.properties").write_text(
        "edu.rit.m2mp.messagetimeout = 5000\nedu.rit.m2mp.flowtimeout = 100\n"
        "edu.rit.m2mp.redundancy = 2\nedu.rit.m2mp.debug.packets = 0\n"
        "edu.rit.m2mp.daemon.port = 5679\n"
        "edu.rit.m2mp.channel.class = edu.rit.m2mp.NullChannel\n")
    config = load(tmp_path)
    assert config.node_id == "00087443BC87"
    assert config.m2mp.channel == "daemon://127.0.0.1:5679"  # non-zero port: use the daemon
    assert config.daemon.port == 5679 and config.daemon.channel == "null://"
    (home / "m2mp.properties").write_text(
        "edu.rit.m2mp.daemon.port = 0\nedu.rit.m2mp.channel.class = "
        "edu.rit.m2mp.udp.UDPMulticastChannel\n")
    assert load(tmp_path).m2mp.channel == DEFAULT_CHANNEL_URL  # port 0: direct (Figure 2)


def test_properties_in_working_directory_win_over_home(tmp_path: Path) -> None:
    for place, value in (("home", "1"), ("work", "3")):
        (tmp_path / place).mkdir()
        (tmp_path / place / "m2mp.properties").write_text(f"edu.rit.m2mp.redundancy={value}\n")
    assert load(tmp_path).m2mp.redundancy == 3


def test_properties_syntax(tmp_path: Path) -> None:
    path = tmp_path / "x.properties"
    path.write_text("! comment\n# comment\na = 1\nb: two\nc three\nd = long \\\n  value\n\n")
    assert read_properties(path) == {"a": "1", "b": "two", "c": "three", "d": "long value"}


@pytest.mark.parametrize(("toml", "fault"), [
    ("[m2mp]\nredundancy = 0\n", "m2mp.redundancy must be >= 1"),
    ("[m2mp]\nredundancy = \"two\"\n", "m2mp.redundancy must be an integer"),
    ("[m2mp]\nredundancy = true\n", "m2mp.redundancy must be an integer"),
    ("[m2mp]\nmessage_timeout = 0\n", "m2mp.message_timeout must be > 0"),
    ("[m2mp]\nchanel = \"null://\"\n", "unknown configuration key m2mp.chanel"),
    ("[m2mpp]\n", "unknown section [m2mpp]"),
    ("[m2mp]\nchannel = \"tcp://x\"\n", "bad channel URL"),
    ("[daemon]\nchannel = \"daemon://127.0.0.1:1\"\n", "cannot be a daemon:// URL"),
    ("[daemon]\nport = 70000\n", "daemon.port must be <= 65535"),
    ("[device]\nid = \"4000000000000\"\n", "device id must be hex"),
    ("[device]\nid = \"xyz\"\n", "device id must be hex"),
    ("m2mp = [", "not valid TOML"),
])
def test_bad_toml_is_one_line_naming_file_and_key(tmp_path: Path, toml: str, fault: str) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "m2mc.toml").write_text(toml)
    with pytest.raises(ConfigError) as caught:
        load(tmp_path)
    assert fault in str(caught.value) and "m2mc.toml" in str(caught.value)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(("props", "fault"), [
    ("edu.rit.m2mp.messagetimeout = 0\n", "messagetimeout must be a decimal integer > 0"),
    ("edu.rit.m2mp.flowtimeout = 1.5\n", "flowtimeout must be a decimal integer > 0"),
    ("edu.rit.m2mp.daemon.port = -1\n", "daemon.port must be 0..65535"),
    ("edu.rit.m2mp.channel.class = edu.rit.m2mp.udp.UDPUnicastChannel\n", "not supported"),
])
def test_bad_properties(tmp_path: Path, props: str, fault: str) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "m2mp.properties").write_text(props)
    with pytest.raises(ConfigError, match=re.escape(fault)):
        load(tmp_path)


def test_bad_environment_variables(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="M2MC_M2MP_REDUNDANCI"):
        load(tmp_path, env={"M2MC_M2MP_REDUNDANCI": "1"})
    with pytest.raises(ConfigError, match="environment variable M2MC_M2MP_FLOW_CONTROL"):
        load(tmp_path, env={"M2MC_M2MP_FLOW_CONTROL": "maybe"})
    assert not load(tmp_path, env={"M2MC_M2MP_FLOW_CONTROL": "off"}).m2mp.flow_control
    load(tmp_path, env={"M2MC_SOMETHING_ELSE": "x"})  # other tools' variables are left alone


def test_layer_config_carries_every_setting(tmp_path: Path) -> None:
    (tmp_path / "work").mkdir()
    (tmp_path / "work" / "m2mc.toml").write_text(
        "[m2mp]\nredundancy = 1\nmax_partial_messages = 7\nflow_control = false\n")
    layer = load(tmp_path).m2mp.layer_config()
    assert (layer.redundancy, layer.max_partial_messages, layer.flow_control) == (1, 7, False)


def test_every_key_is_documented() -> None:
    text = DOCS.read_text()
    for name, cls in sections().items():
        for spec in dataclasses.fields(cls):
            assert f"`{name}.{spec.name}`" in text, f"{name}.{spec.name} not in {DOCS.name}"
