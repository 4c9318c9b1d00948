"""The error registry: every error class is registered under its code, and a client rebuilds
errors by code whatever modules it imported (a fresh process, over a real RPC server)."""

from __future__ import annotations

import asyncio
import importlib
import pkgutil
import subprocess
import sys
import threading
from collections.abc import Iterator

import pytest

import ipykeep
from ipykeep.api import error_codes as codes
from ipykeep.api.errors import IpykeepError


def _all_error_classes() -> set[type[IpykeepError]]:
    skip = ("_inkernel", "ipykeep.__main__", "ipykeep.daemon.__main__")
    for mod in pkgutil.walk_packages(ipykeep.__path__, "ipykeep."):
        if not any(s in mod.name for s in skip):
            importlib.import_module(mod.name)
    found: set[type[IpykeepError]] = set()
    todo = [IpykeepError]
    while todo:
        cls = todo.pop()
        found.add(cls)
        todo.extend(cls.__subclasses__())
    return {c for c in found if c.__module__.startswith("ipykeep.")}


def test_every_error_class_is_registered_under_its_code() -> None:
    classes = _all_error_classes()
    by_code = {cls.code: cls for cls in classes}
    assert len(by_code) == len(classes), "two classes share a code"
    assert set(by_code) == set(codes.ERROR_CLASSES)
    for code, cls in by_code.items():
        assert codes.error_class(code) is cls


def test_an_unknown_code_is_an_internal_error() -> None:
    err = codes.error_from_envelope({"code": "no_such_code", "message": "m", "hint": "h"})
    assert (
        type(err) is IpykeepError
        and err.code == "internal"
        and err.message == "m"
        and err.hint == "h"
    )


@pytest.fixture
def failing_server() -> Iterator[tuple[str, int, str]]:
    """A real RPC server whose ``ping`` raises ProbeFailedError (code ``probe_failed``)."""
    from ipykeep.api import methods as api
    from ipykeep.api.errors import ProbeFailedError
    from ipykeep.api.spec import bind
    from ipykeep.daemon.rpc import RpcServer

    async def ping() -> None:
        raise ProbeFailedError("the dataflow probe sent garbage", hint="restart the kernel")

    loop = asyncio.new_event_loop()
    server = RpcServer({"ping": bind(api.PING, ping)}, "secret")
    host, port = loop.run_until_complete(server.start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield host, port, "secret"
    asyncio.run_coroutine_threadsafe(server.close(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


def test_a_fresh_client_process_gets_probe_failed_as_its_own_class(failing_server) -> None:
    host, port, token = failing_server
    code = (
        "import sys\n"
        "from ipykeep.client.wire import Endpoint, call_sync\n"
        f"try:\n    call_sync(Endpoint({host!r}, {port}, {token!r}), 'ping')\n"
        "except Exception as exc:\n"
        "    print(type(exc).__module__, type(exc).__name__, exc.code, exc.exit_code, exc.hint, "
        "sep='|')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert (
        out.stdout.strip()
        == "ipykeep.api.errors|ProbeFailedError|probe_failed|1|restart the kernel"
    ), out.stdout
