"""Adding packages to remote kernels: on an SSH host it installs there; a gateway refuses."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import pytest_asyncio

from ipykeep.api.errors import RemoteNotSupportedError
from ipykeep.engine.archive import KernelArchive
from ipykeep.engine.resolve import kernel_process
from ipykeep.engine.session import KernelSession
from ipykeep.project.config import Config
from tests.environments.envs import make_venv, uv
from tests.environments.test_environments import composed
from tests.kernel.providers.checks import free_port, make_remote_project
from tests.kernel.providers.sshd import LoopbackSshd, unavailable

#: the PATH OpenSSH gives a session (its compiled-in default)
SSHD_DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin:/usr/games"

pytestmark = [pytest.mark.kernel, pytest.mark.ssh, pytest.mark.posix, pytest.mark.timeout(300)]


async def test_a_gateway_kernel_is_refused_with_the_reason(tmp_path: Path) -> None:
    comp = composed(tmp_path)
    config = Config(kernel_provider="gateway", gateway_url="http://127.0.0.1:9")
    # a session as create_kernel makes it (the refusal comes before the kernel is reached)
    comp.engine.kernels["k1"] = KernelSession(
        kernel_id="k1",
        process=kernel_process("k1", config, tmp_path, None),
        notebook=None,
        cwd=tmp_path,
        config=config,
        archive=KernelArchive(tmp_path / "k1", "k1"),
    )
    with pytest.raises(RemoteNotSupportedError) as err:
        await comp.environments.add_packages(["six"], kernel_id="k1")
    assert "gateway" in err.value.message and "image" in err.value.message
    assert err.value.hint


@pytest.fixture(scope="module")
def sshd(tmp_path_factory):
    if unavailable() is not None:
        pytest.skip(f"loopback sshd unavailable: {unavailable()}")
    server = LoopbackSshd(tmp_path_factory.mktemp("sshd"), free_port())
    yield server
    server.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def ssh_kernel(sshd, tmp_path_factory):
    """A kernel on the SSH host, in an environment there that has pip but no uv beside it."""
    host_env = tmp_path_factory.mktemp("host") / "env"
    make_venv(host_env, "ipykernel")
    python = str(host_env / "bin" / "python")
    subprocess.run([uv(), "pip", "install", "-q", "--python", python, "pip"], check=True)
    root = make_remote_project(tmp_path_factory.mktemp("sshproj"))
    comp = composed(root, ssh_config=str(sshd.config), remote_python=python)
    rec = await comp.engine.create_kernel(notebook=str(root / "n.ipynb"), cwd=sshd.url(root))
    yield comp, rec.kernel_id, host_env
    await comp.engine.shutdown()


async def test_an_ssh_kernel_installs_into_its_environment_on_the_host(ssh_kernel) -> None:
    comp, kid, host_env = ssh_kernel
    record = comp.engine.kernel_record(comp.engine.session(kid))
    assert record.environment is not None and record.environment.kind == "remote"
    res = await comp.environments.add_packages(["tabulate"], kernel_id=kid)
    assert res.python == str(host_env / "bin" / "python")
    # the host's environment has no uv beside it; sshd's default PATH decides the rest
    assert res.installer == ("uv" if shutil.which("uv", path=SSHD_DEFAULT_PATH) else "pip")
    assert [c.name for c in res.changed] == ["tabulate"]
    rec = await comp.engine.execute("import tabulate, sys; print(sys.prefix)", kernel_id=kid)
    assert rec.state == "ok" and rec.output.text.strip() == str(host_env), rec
