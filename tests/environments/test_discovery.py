"""Which environment a kernel runs in, rule by rule (directories only, no interpreter run)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from ipykeep.api.errors import KernelStartError
from ipykeep.environments import discovery
from ipykeep.project.config import Config

# the environments here are laid out as on POSIX (bin/python)
pytestmark = pytest.mark.posix


def fake_env(prefix: Path, *, ipykernel: bool = False, pip: bool = False) -> Path:
    (prefix / "bin").mkdir(parents=True)
    (prefix / "bin" / "python").write_text("")
    site = prefix / "lib" / "python3.11" / "site-packages"
    site.mkdir(parents=True)
    for name, wanted in (("ipykernel", ipykernel), ("pip", pip)):
        if wanted:
            (site / name).mkdir()
            (site / name / "__init__.py").write_text("")
    return prefix


def test_order_setting_venv_active_uv_conda_own(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    active = fake_env(tmp_path / "active")
    conda = fake_env(tmp_path / "conda")
    env = {"VIRTUAL_ENV": str(active), "CONDA_PREFIX": str(conda), "CONDA_DEFAULT_ENV": "ml"}

    def kind(config: Config = Config(), environ: dict[str, str] = env) -> str:
        return discovery.discover(root, config, environ).kind

    assert kind(Config(python="/opt/py/bin/python")) == "setting"
    fake_env(root / "venv")
    assert kind() == "project_venv"
    fake_env(root / ".venv")
    found = discovery.discover(root, Config(), env)
    assert (found.kind, found.prefix) == ("project_venv", str(root / ".venv"))
    assert found.python == str(root / ".venv" / "bin" / "python")
    for name in (".venv", "venv"):
        (root / name / "bin" / "python").unlink()
    assert kind() == "virtual_env"
    assert kind(environ={"CONDA_PREFIX": str(conda), "CONDA_DEFAULT_ENV": "ml"}) == "conda"
    # conda's always-on base environment is not a project's choice
    base = {"CONDA_PREFIX": str(conda), "CONDA_DEFAULT_ENV": "base"}
    own = discovery.discover(root, Config(), base)
    assert (own.kind, own.python) == ("ipykeep", sys.executable)


def test_uv_project_environment_and_missing_one(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    (root / "pyproject.toml").write_text(
        '[project]\nname = "p"\n\n[tool.uv]\ndev-dependencies = []\n'
    )
    with pytest.raises(KernelStartError) as err:
        discovery.discover(root, Config(), {})
    assert "uv add --dev ipykernel" in err.value.hint
    moved = fake_env(tmp_path / "elsewhere")
    found = discovery.discover(root, Config(), {"UV_PROJECT_ENVIRONMENT": str(moved)})
    assert (found.kind, found.uv_project) == ("uv_project", True)


def test_the_fix_for_a_missing_ipykernel_is_exact(tmp_path: Path) -> None:
    root = tmp_path / "p"
    root.mkdir()
    fake_env(root / ".venv", pip=True)
    info = discovery.discover(root, Config(), {})
    assert not discovery.has_ipykernel(info)
    assert discovery.kernel_fix(info) == f"{root}/.venv/bin/python -m pip install ipykernel"
    (root / "uv.lock").write_text("")
    info = discovery.discover(root, Config(), {})
    assert discovery.kernel_fix(info) == "uv add --dev ipykernel"
    err = discovery.missing_kernel_error(info)
    assert "uv add --dev ipykernel" in err.hint and "install_kernel = true" in err.hint
