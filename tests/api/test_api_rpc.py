"""Wrong argument types over RPC, against a real daemon: ``bad_argument`` naming the field."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ipykeep.api import methods as api
from ipykeep.api import names
from ipykeep.api.errors import IpykeepError, UsageError
from ipykeep.api.kernels import NoParams
from ipykeep.api.records import DaemonInfo
from ipykeep.client.connection import DaemonClient, ensure_daemon
from tests.conftest import make_project, stop_daemon


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DaemonClient]:
    root = make_project(tmp_path_factory.mktemp("api") / "p", example=False)
    client = ensure_daemon(root)  # a daemon with no kernel: arguments are checked before any lookup
    yield client
    client.close()
    stop_daemon(root)


@pytest.mark.parametrize(
    "method,params,field",
    [
        (names.EXECUTE, {"code": 5}, "code"),
        (names.EXECUTE, {"code": "1", "yield_time_ms": "soon"}, "yield_time_ms"),
        (names.READ_EXECUTION, {"handle": ["c1"]}, "handle"),
        (names.RUN_CELLS, {"cells": "abc"}, "cells"),
        (names.WAIT_WARM, {"timeout": "long"}, "timeout"),
        (names.INSPECT, {"name": 3}, "name"),
        (names.RUN_STALE, {"execute": "maybe"}, "execute"),
        (names.PUBLISH, {"cells": ["not", "a", "map"]}, "cells"),
        (names.STATUS, {"notebook": "a\0b"}, "notebook"),
    ],
)
def test_a_wrong_argument_type_is_bad_argument_naming_the_field(
    client: DaemonClient, method, params, field
) -> None:
    with pytest.raises(IpykeepError) as err:
        client.call(method, **params)
    assert type(err.value) is UsageError and err.value.code == "bad_argument", err.value
    assert f"{method}: bad argument(s): {field}" in err.value.message, err.value.message
    assert err.value.hint.startswith(f"{method} takes: ")


def test_unknown_and_missing_arguments_say_so(client: DaemonClient) -> None:
    with pytest.raises(UsageError, match="unknown argument 'bogus'"):
        client.call(names.PING, bogus=1)
    with pytest.raises(UsageError, match="missing argument 'code'"):
        client.call(names.EXECUTE)
    with pytest.raises(UsageError, match="unknown method 'nope'"):
        client.call("nope")


def test_the_typed_client_returns_the_declared_result(client: DaemonClient) -> None:
    info = client.invoke(api.PING, NoParams())
    assert isinstance(info, DaemonInfo) and info.pid == client.descriptor.pid
    assert client.invoke(api.LIST_KERNELS, NoParams()) == []


def test_version_names_the_daemons_release_protocol_and_python(client: DaemonClient) -> None:
    import platform

    from ipykeep import __version__
    from ipykeep.api.kernels import VERSION, VersionInfo

    info = client.invoke(VERSION, NoParams())
    assert info == VersionInfo(
        version=__version__, protocol="JSON-RPC 2.0", python=platform.python_version()
    )


async def test_the_async_client_is_the_same_client(client: DaemonClient) -> None:
    info = await client.ainvoke(api.PING, NoParams())
    assert info.pid == client.descriptor.pid
    with pytest.raises(UsageError):
        await client.acall(names.EXECUTE, code=5)


def test_the_cli_checks_params_against_the_declaration_before_starting_a_daemon(tmp_path) -> None:
    from ipykeep.client.connection import find_daemon
    from tests.conftest import run_cli

    root = make_project(tmp_path / "p")
    out = run_cli("start", "01_eda.ipynb", "--dataflow", "magic", cwd=root)
    assert out.returncode == 2, out.stderr
    assert (
        "create_kernel: bad argument(s): dataflow: Input should be 'ipyflow' or 'static'"
        in out.stderr
    )
    assert find_daemon(root) is None
