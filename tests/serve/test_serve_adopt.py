"""Adoption goes through the server's public start path: in-process, against a real kernel.

The kernel is started by a plain jupyter_client manager (standing in for ipykeep's daemon); an
``AdoptingKernelManager`` adopts it by connection file and must never end it.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from jupyter_client.manager import AsyncKernelManager
from tornado import web

from ipykeep.serve.kernels import (
    PROVISIONER_NAME,
    REFUSE_RESTART,
    REFUSE_SHUTDOWN,
    REFUSE_START,
    AdoptedProvisioner,
    AdoptingKernelManager,
    AdoptionKernelSpecManager,
)

pytestmark = pytest.mark.kernel

SERVER_ID = "6a1f6c1e-0000-4000-8000-000000000001"


@pytest.fixture(scope="module")
async def owner() -> AsyncIterator[AsyncKernelManager]:
    km = AsyncKernelManager(kernel_name="python3")
    await km.start_kernel()
    try:
        yield km
    finally:
        await km.shutdown_kernel(now=True)


def kernel_pid(km: AsyncKernelManager) -> int:
    pid = km.provisioner.pid  # type: ignore[union-attr]
    assert isinstance(pid, int) and pid > 0
    return pid


async def test_provisioner_is_registered_as_an_entry_point(monkeypatch: pytest.MonkeyPatch) -> None:
    import tomlkit
    from jupyter_client.provisioning import KernelProvisionerFactory

    from ipykeep.serve import kernels
    from ipykeep.serve.kernels import adoption_spec, ensure_provisioner_registered

    pyproject = tomlkit.parse((Path(__file__).parents[2] / "pyproject.toml").read_text("utf-8"))
    group = pyproject["project"]["entry-points"]["jupyter_client.kernel_provisioners"]  # type: ignore[index]
    assert dict(group) == {PROVISIONER_NAME: "ipykeep.serve.kernels:AdoptedProvisioner"}  # type: ignore[call-overload]
    # Where the entry point is not installed (a source tree), adoption registers it itself.
    KernelProvisionerFactory.instance()  # its cache of installed provisioners, filled once
    cache = {
        k: v for k, v in KernelProvisionerFactory.provisioners.items() if k != PROVISIONER_NAME
    }
    monkeypatch.setattr(kernels, "entry_points", lambda **kw: [])
    monkeypatch.setattr(KernelProvisionerFactory, "provisioners", cache)
    ensure_provisioner_registered()
    assert cache[PROVISIONER_NAME].value == "ipykeep.serve.kernels:AdoptedProvisioner"
    spec = adoption_spec("/nonexistent.json", 0, "probe")
    prov = KernelProvisionerFactory.instance().create_provisioner_instance(
        "probe", spec, parent=None
    )
    assert isinstance(prov, AdoptedProvisioner) and prov.connection_file == "/nonexistent.json"


async def test_adoption_goes_through_start_kernel_and_the_provisioner(
    owner: AsyncKernelManager, monkeypatch: pytest.MonkeyPatch
) -> None:
    launches: list[str] = []
    real_launch = AdoptedProvisioner.launch_kernel

    async def spy(self: AdoptedProvisioner, cmd: list[str], **kw: Any) -> Any:
        launches.append(self.connection_file)
        assert cmd == [], "nothing may be launched"
        return await real_launch(self, cmd, **kw)

    monkeypatch.setattr(AdoptedProvisioner, "launch_kernel", spy)
    starts: list[dict[str, Any]] = []
    mkm = AdoptingKernelManager(kernel_spec_manager=AdoptionKernelSpecManager())
    real_start = AdoptingKernelManager.start_kernel

    async def start_spy(self: AdoptingKernelManager, **kw: Any) -> str:
        starts.append(kw)
        return await real_start(self, **kw)

    monkeypatch.setattr(AdoptingKernelManager, "start_kernel", start_spy)
    pid = kernel_pid(owner)
    await mkm.adopt(SERVER_ID, owner.connection_file, pid, "ipykeep k1")
    try:
        assert [s["kernel_id"] for s in starts] == [SERVER_ID]
        assert launches == [owner.connection_file]
        km = mkm.get_kernel(SERVER_ID)
        assert isinstance(km.provisioner, AdoptedProvisioner)
        assert km.provisioner.pid == pid
        assert km.kernel_id == SERVER_ID and km.ready.done() and km.ready.exception() is None
        assert km.connection_file == owner.connection_file
        assert km.get_connection_info() == owner.get_connection_info()
        # What the REST API reports: the notebook's usual kernel name, running, idle.
        model = mkm.kernel_model(SERVER_ID)
        assert (model["name"], model["execution_state"]) == ("python3", "idle")
        assert mkm.adopted_pid(SERVER_ID) == pid
        assert mkm.adopted_connection_file(SERVER_ID) == owner.connection_file
        # The adoption spec was for this start only.
        assert mkm.kernel_spec_manager.adoption_specs == {}

        # The browser may not start, restart or shut down kernels; the kernel survives.
        for call, message in [
            (mkm.start_kernel(kernel_name="python3"), REFUSE_START),
            (mkm.start_kernel(kernel_name=f"ipykeep-adopted-{SERVER_ID}"), REFUSE_START),
            (mkm.restart_kernel(SERVER_ID), REFUSE_RESTART),
            (mkm.shutdown_kernel(SERVER_ID), REFUSE_SHUTDOWN),
            (km.shutdown_kernel(), REFUSE_SHUTDOWN),
        ]:
            with pytest.raises(web.HTTPError) as info:
                await call
            assert info.value.status_code == 403 and info.value.log_message == message
        await km.provisioner.kill()
        await km.provisioner.terminate()
        await km.provisioner.send_signal(15)
        assert await km.provisioner.poll() is None
        os.kill(pid, 0)
        assert await owner.is_alive()
    finally:
        await mkm.shutdown_all()
    # Detached, not ended; the connection file is ipykeep's and stays.
    assert SERVER_ID not in mkm
    assert await owner.is_alive() and os.path.exists(owner.connection_file)
    # Re-adoption under the same id (ipykeep re-adopts a restarted kernel this way).
    await mkm.adopt(SERVER_ID, owner.connection_file, pid, "ipykeep k1")
    assert mkm.list_kernel_ids() == [SERVER_ID]
    await mkm.detach(SERVER_ID)
    assert await owner.is_alive()


async def test_a_spec_without_a_kernel_behind_it_starts_nothing(
    owner: AsyncKernelManager, tmp_path: Any
) -> None:
    mkm = AdoptingKernelManager(kernel_spec_manager=AdoptionKernelSpecManager())
    with pytest.raises(web.HTTPError) as info:
        await mkm.adopt(SERVER_ID, str(tmp_path / "gone.json"), kernel_pid(owner), "ipykeep k9")
    assert info.value.status_code == 403
    assert mkm.list_kernel_ids() == [] and mkm.kernel_spec_manager.adoption_specs == {}
