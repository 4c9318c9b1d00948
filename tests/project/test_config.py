import pytest

from ipykeep.api.errors import ConfigError
from ipykeep.project.config import load_config


def test_defaults(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    cfg = load_config(tmp_path, environ={})
    assert cfg.dataflow == "static" and cfg.idle_timeout == 3600 and cfg.write_outputs


def test_precedence_user_pyproject_ipykeep_toml_env(tmp_path, monkeypatch):
    xdg = tmp_path / "xdg" / "ipykeep"
    xdg.mkdir(parents=True)
    (xdg / "config.toml").write_text("idle_timeout = 10\nmax_queue = 3\ninterrupt_grace = 1.5\n")
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    (tmp_path / "pyproject.toml").write_text(
        "[tool.ipykeep]\nidle_timeout = 20\ndataflow = 'static'\n"
    )
    (tmp_path / "ipykeep.toml").write_text("idle_timeout = 30\n")
    cfg = load_config(
        tmp_path, environ={"IPYKEEP_MAX_QUEUE": "7", "IPYKEEP_WRITE_OUTPUTS": "false"}
    )
    assert cfg.idle_timeout == 30 and cfg.dataflow == "static" and cfg.max_queue == 7
    assert cfg.interrupt_grace == 1.5 and cfg.write_outputs is False


def test_unknown_key_names_the_file(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    (tmp_path / "ipykeep.toml").write_text("idle_timout = 3\n")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path, environ={})
    assert "ipykeep.toml" in info.value.message and "idle_timout" in info.value.message


@pytest.mark.parametrize(
    "content",
    [
        "dataflow = 'magic'\n",
        "idle_timeout = 'soon'\n",
        "write_outputs = 1\n",
        "summarizers = 'a:b'\n",
        "this is not toml",
    ],
)
def test_bad_values_are_errors_naming_the_file(tmp_path, monkeypatch, content):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    (tmp_path / "ipykeep.toml").write_text(content)
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path, environ={})
    assert str(tmp_path / "ipykeep.toml") in info.value.message


def test_bad_env_value_names_the_variable(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path, environ={"IPYKEEP_IDLE_TIMEOUT": "never"})
    assert "IPYKEEP_IDLE_TIMEOUT" in info.value.message
