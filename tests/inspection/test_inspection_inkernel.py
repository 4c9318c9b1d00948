"""Inspection in a real ipyflow kernel: silent, traceless, and bounded in time."""

from __future__ import annotations

import ast
import json
import sys
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from jupyter_client.kernelspec import KernelSpec
from jupyter_client.manager import AsyncKernelManager

from ipykeep.inspection import probe
from ipykeep.kernel.inkernel import INSPECT, install_expression

pytestmark = [pytest.mark.kernel, pytest.mark.timeout(120)]


class Kernel:
    def __init__(self, km: AsyncKernelManager) -> None:
        self.km = km
        self.kc = km.client()
        self.replies: dict[str, dict[str, Any]] = {}

    def send(
        self,
        code: str,
        *,
        silent: bool = False,
        expressions: dict[str, str] | None = None,
        subshell_id: str | None = None,
    ) -> str:
        content = {
            "code": code,
            "silent": silent,
            "store_history": not silent,
            "user_expressions": expressions or {},
            "allow_stdin": False,
            "stop_on_error": True,
        }
        msg = self.kc.session.msg("execute_request", content)
        if subshell_id is not None:
            msg["header"]["subshell_id"] = subshell_id
        self.kc.shell_channel.send(msg)
        return msg["header"]["msg_id"]

    async def reply(self, msg_id: str, timeout: float = 60) -> dict[str, Any]:
        """The shell reply to ``msg_id``; replies to other requests are kept for their callers."""
        while msg_id not in self.replies:
            msg = await self.kc.get_shell_msg(timeout=timeout)
            self.replies[msg["parent_header"].get("msg_id")] = msg["content"]
        return self.replies.pop(msg_id)

    async def execute(
        self,
        code: str,
        *,
        silent: bool = False,
        expressions: dict[str, str] | None = None,
        timeout: float = 60,
        subshell_id: str | None = None,
    ) -> dict[str, Any]:
        msg_id = self.send(code, silent=silent, expressions=expressions, subshell_id=subshell_id)
        return await self.reply(msg_id, timeout)

    async def expression(
        self, expr: str, timeout: float = 60, subshell_id: str | None = None
    ) -> str:
        """Evaluate one expression silently, as the engine does; the str it returns."""
        content = await self.execute(
            "", silent=True, expressions={"v": expr}, timeout=timeout, subshell_id=subshell_id
        )
        assert content["status"] == "ok", content
        return probe.decode_user_expression(content["user_expressions"]["v"])

    async def value(self, expr: str) -> Any:
        content = await self.execute("", silent=True, expressions={"v": expr})
        entry = content["user_expressions"]["v"]
        assert entry["status"] == "ok", entry
        return ast.literal_eval(entry["data"]["text/plain"])


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def kernel(tmp_path_factory) -> AsyncIterator[Kernel]:
    runtime = tmp_path_factory.mktemp("ik")
    km = AsyncKernelManager(transport="ipc", connection_file=str(runtime / "k.json"))
    km._kernel_spec = KernelSpec(
        argv=[sys.executable, "-m", "ipyflow.kernel", "-f", "{connection_file}"],
        display_name="ipyflow",
        language="python",
    )
    await km.start_kernel(cwd=str(runtime))
    k = Kernel(km)
    k.kc.start_channels()
    try:
        await k.kc.wait_for_ready(timeout=60)
        installed = await k.execute("", silent=True, expressions={"v": install_expression(INSPECT)})
        text = installed["user_expressions"]["v"]["data"]["text/plain"]
        assert json.loads(ast.literal_eval(text)) == {INSPECT.name: INSPECT.protocol}
        yield k
    finally:
        k.kc.stop_channels()
        await km.shutdown_kernel(now=True)


GLOBALS = "sorted(k for k in globals() if not k.startswith('_'))"
GRAPH = (
    "(lambda f: (f.cell_counter(), sorted((s.readable_name, str(s.timestamp)) "
    "for s in f.all_symbols())))(__import__('ipyflow').flow())"
)


async def test_inspection_leaves_no_trace(kernel: Kernel):
    first = await kernel.execute(
        "import pandas as pd\ndf = pd.DataFrame({'a': [1, 2, None]})\nxs = [1, 2]"
    )
    assert first["status"] == "ok"
    names_before = await kernel.value(GLOBALS)
    graph_before = await kernel.value(GRAPH)

    summary = probe.parse_inspect_reply(
        await kernel.expression(probe.inspect_expression("df", 5.0, [], {"df": "cell-1"}))
    )
    assert summary.kind == "dataframe" and summary.shape == [3, 1] and summary.cell == "cell-1"
    assert summary.columns is not None and summary.columns[0].nulls == 1
    listing = probe.parse_namespace_reply(await kernel.expression(probe.namespace_expression(5.0)))
    assert [e.name for e in listing.entries] == ["df", "pd", "xs"]

    assert await kernel.value(GLOBALS) == names_before
    assert await kernel.value(GRAPH) == graph_before
    second = await kernel.execute("ys = 3")
    assert second["execution_count"] == first["execution_count"] + 1


async def test_names_made_by_globals_and_exec_are_listed(kernel: Kernel):
    await kernel.execute("globals()['via_globals'] = 1\nexec('via_exec = 2')")
    listing = probe.parse_namespace_reply(await kernel.expression(probe.namespace_expression(5.0)))
    names = {e.name for e in listing.entries}
    assert {"via_globals", "via_exec"} <= names
    assert not names & {"In", "Out", "exit", "quit", "get_ipython", "summarizer"}


async def test_summarizer_decorator_in_a_cell(kernel: Kernel):
    reply = await kernel.execute(
        "from _ipykeep_inspect import summarizer\n"
        "class Temperature:\n    celsius = 21.5\n"
        "@summarizer(match=Temperature)\n"
        "def temp_brief(t):\n    return {'kind': 'temperature', 'celsius': t.celsius}\n"
        "room = Temperature()"
    )
    assert reply["status"] == "ok", reply
    summary = probe.parse_inspect_reply(await kernel.expression(probe.inspect_expression("room")))
    assert summary.kind == "temperature" and summary.custom == {"celsius": 21.5}


async def test_hanging_repr_is_degraded_and_the_next_cell_runs_at_once(kernel: Kernel):
    # ipyflow itself calls len() on values a traced cell assigns, so the object is armed by a
    # silent (untraced) execution after its defining cell.
    reply = await kernel.execute(
        "import time\n"
        "class Hostile:\n"
        "    armed = False\n"
        "    def __repr__(self):\n        time.sleep(30 if self.armed else 0)\n        return 'x'\n"
        "    def __len__(self):\n        time.sleep(30 if self.armed else 0)\n        return 0\n"
        "hostile = Hostile()"
    )
    assert reply["status"] == "ok"
    assert (await kernel.execute("Hostile.armed = True", silent=True))["status"] == "ok"
    start = time.monotonic()
    summary = probe.parse_inspect_reply(
        await kernel.expression(probe.inspect_expression("hostile", 1.0))
    )
    inspected = time.monotonic() - start
    assert summary.degraded and "1s" in (summary.degraded_reason or "")
    assert inspected < 5.0

    start = time.monotonic()
    after = await kernel.execute("after_hostile = 1 + 1", timeout=10)
    assert after["status"] == "ok"
    assert time.monotonic() - start < 5.0  # a kernel left sleeping would take 30 s
    start = time.monotonic()
    listing = probe.parse_namespace_reply(await kernel.expression(probe.namespace_expression(1.0)))
    assert time.monotonic() - start < 5.0
    entry = next(e for e in listing.entries if e.name == "hostile")
    assert entry.degraded
    assert (await kernel.execute("Hostile.armed = False", silent=True))["status"] == "ok"


async def test_inspection_on_a_subshell_while_the_main_shell_is_busy(kernel: Kernel):
    request = kernel.kc.session.msg("create_subshell_request", {})
    kernel.kc.control_channel.send(request)
    created = await kernel.kc.get_control_msg(timeout=10)
    subshell_id = created["content"]["subshell_id"]
    await kernel.execute(
        "class Slow:\n    armed = False\n"
        "    def __repr__(self):\n        __import__('time').sleep(30 if self.armed else 0)\n"
        "        return 's'\n"
        "slow = Slow()\nbusy_done = False"
    )
    assert (await kernel.execute("Slow.armed = True", silent=True))["status"] == "ok"
    busy = kernel.send("import time\ntime.sleep(3)\nbusy_done = True")
    start = time.monotonic()
    summary = probe.parse_inspect_reply(
        await kernel.expression(probe.inspect_expression("slow", 1.0), subshell_id=subshell_id)
    )
    # Off the main thread the hanging call is left in a worker; the subshell answers in time.
    assert summary.degraded and time.monotonic() - start < 2.5
    assert (await kernel.reply(busy, timeout=30))["status"] == "ok"
    assert await kernel.value("busy_done") is True
    assert (await kernel.execute("Slow.armed = False", silent=True))["status"] == "ok"
