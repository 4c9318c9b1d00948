"""The declared API (no daemon): names, params validation, error codes, the method table."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path

import pytest

from ipykeep.api import error_codes as codes
from ipykeep.api import methods as api
from ipykeep.api import names
from ipykeep.api.errors import UsageError


def test_every_name_is_declared_once_and_every_declaration_is_named() -> None:
    assert set(api.BY_NAME) == names.ALL
    assert len(api.ALL) == len(names.ALL)


def test_every_method_raises_only_registered_codes() -> None:
    for method in api.ALL:
        assert set(method.errors) <= set(codes.ERROR_CLASSES), method.name


@pytest.mark.parametrize(
    "method,raw,says",
    [
        (api.EXECUTE, {"code": 5}, "code: Input should be a valid string"),
        (
            api.EXECUTE,
            {"code": "1", "yield_time_ms": "soon"},
            "yield_time_ms: Input should be a valid integer",
        ),
        (
            api.EXECUTE,
            {"code": "1", "yield_time_ms": -1},
            "yield_time_ms: Input should be greater than or equal to 0",
        ),
        (api.EXECUTE, {}, "missing argument 'code'"),
        (api.EXECUTE, {"code": "1", "bogus": 1}, "unknown argument 'bogus'"),
        (api.READ_EXECUTION, {"handle": ["c1"]}, "handle: Input should be a valid string"),
        (api.RUN_CELLS, {"cells": [True]}, "cells.0: Input should be a valid string"),
        (
            api.STATUS,
            {"notebook": "a\0b"},
            "notebook: Value error, not a path: it holds a NUL byte",
        ),
        (api.WATCH_FILE, {"path": "x\0"}, "path: Value error, not a path"),
        (api.READ_ARTIFACT, {"uri": "ipykeep://artifacts/k1/a\0"}, "uri: Value error, not a path"),
        (
            api.CREATE_KERNEL,
            {"dataflow": "magic"},
            "dataflow: Input should be 'ipyflow' or 'static'",
        ),
        (api.RUN_STALE, {"execute": "maybe"}, "execute: Input should be a valid boolean"),
    ],
)
def test_bad_params_are_bad_argument_errors_naming_the_field(method, raw, says) -> None:
    with pytest.raises(UsageError) as err:
        method.validate(raw)
    assert err.value.code == "bad_argument"
    assert (
        err.value.message.startswith(f"{method.name}: bad argument(s): ")
        and says in err.value.message
    ), err.value.message
    assert err.value.hint.startswith(f"{method.name} takes: ")


def test_params_coerce_what_json_cannot_say() -> None:
    assert api.RUN_CELLS.validate({"cells": [0, "abc"]}).cells == ["0", "abc"]
    # the declared defaults are what the handler gets for what the caller left out
    kwargs = api.READ_EXECUTION.validate({"handle": "c1"}).kwargs()
    assert kwargs == {
        "kernel_id": None,
        "notebook": None,
        "handle": "c1",
        "yield_time_ms": 0,
        "cursor": None,
        "reader": "default",
    }


def test_results_are_checked_against_their_declaration() -> None:
    from pydantic import ValidationError

    assert api.MARKDOWN.dump_result({"kernel_id": "k1", "appended": True, "record": "r"}) == {
        "kernel_id": "k1",
        "appended": True,
        "record": "r",
    }
    with pytest.raises(ValidationError):  # a handler drifting from the contract is a bug, loudly
        api.MARKDOWN.dump_result({"kernel_id": "k1"})
    assert api.LIST_KERNELS.dump_result([]) == []


def test_the_daemon_table_binds_every_declared_method_to_a_fitting_callable(tmp_path: Path) -> None:
    from ipykeep.daemon.composition import compose_for_daemon
    from ipykeep.daemon.rpc import check_binding
    from ipykeep.daemon.server import Daemon

    async def build() -> None:
        daemon = Daemon(tmp_path, compose_for_daemon)
        table = daemon.methods()
        assert set(table) == names.ALL
        for name, binding in table.items():
            check_binding(name, binding)
            # the declared defaults agree with the callable's own
            sig = inspect.signature(binding.handler)
            for field, info in binding.method.params.model_fields.items():
                default = sig.parameters[field].default
                if default is not inspect.Parameter.empty:
                    assert info.default == default, (name, field)

    asyncio.run(build())


def test_a_binding_that_does_not_fit_its_params_is_refused() -> None:
    from ipykeep.api.spec import bind
    from ipykeep.daemon.rpc import RpcServer

    async def execute(code: str) -> None:  # takes no kernel_id, notebook, yield_time_ms…
        return None

    with pytest.raises(ValueError, match="do not fit"):
        RpcServer({"execute": bind(api.EXECUTE, execute)}, "token")
    with pytest.raises(ValueError, match="bound to the declaration"):
        RpcServer({"ping": bind(api.EXECUTE, execute)}, "token")
