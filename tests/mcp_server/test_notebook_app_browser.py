"""The notebook view in a real MCP Apps host: Chromium, the ext-apps ``AppBridge``, ``mcp-serve``.

The host page (``app_host/host.html``, built from ``app/test-host``) holds the official TS MCP
client and an ``AppBridge``; its messages reach ``ipykeep mcp-serve`` over the server's stdio,
relayed line by line by this test (the page cannot spawn a process). The page renders the view
a linked tool names, pushes the call's input and result into it, and forwards the view's tool
calls: the clicks below run the plan, run one cell and interrupt it through that path. Every
request the browser makes is recorded: the view's page makes none of its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import nbformat
import pytest

from tests.mcp_server.harness import server_env, shutdown_daemon, stdio_params
from tests.serve.conftest import ARTIFACTS

pytestmark = [pytest.mark.kernel, pytest.mark.browser, pytest.mark.timeout(420)]

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
HOST_PAGE = Path(__file__).parent / "app_host" / "host.html"
HOST_URL = "http://ipykeep-host.test/"
SNAPSHOT_URL = "http://ipykeep-host.test/view.html"
NOTEBOOK = "plot.ipynb"
VIEW_CLI = (sys.executable, "-m", "ipykeep", "view")

#: Generous waits for a loaded machine (the suite never times work).
WAIT_MS = 120_000


def _cells(n: int) -> list[Any]:
    return [
        nbformat.v4.new_code_cell(f"n = {n}", id="base"),
        nbformat.v4.new_code_cell(
            "xs = [i * n for i in range(10)]\nprint('sum', sum(xs))", id="xs"
        ),
        nbformat.v4.new_code_cell(
            "import matplotlib\nmatplotlib.use('module://matplotlib_inline.backend_inline')\n"
            "import matplotlib.pyplot as plt\nfig, ax = plt.subplots(figsize=(3, 2))\n"
            "ax.plot(xs)\nplt.show()",
            id="plot",
        ),
        nbformat.v4.new_code_cell(
            "import time\ntime.sleep(globals().get('pause_s', 0))", id="pause"
        ),
    ]


def _write_notebook(root: Path, n: int) -> None:
    nb = nbformat.v4.new_notebook()
    nb.cells = _cells(n)
    nbformat.write(nb, root / NOTEBOOK)


class StdioRelay:
    """``ipykeep mcp-serve`` on pipes; its lines go to the page, the page's to its stdin."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.page: Any = None
        self.reader: asyncio.Task[None] | None = None

    async def to_server(self, line: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(line.encode() + b"\n")
        await self.proc.stdin.drain()

    async def to_page(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            text = line.decode().strip()
            if text:
                await self.page.evaluate("line => window.relayIn(line)", text)


@contextlib.asynccontextmanager
async def mcp_serve(root: Path) -> AsyncIterator[StdioRelay]:
    params = stdio_params(root)
    proc = await asyncio.create_subprocess_exec(
        params.command,
        *params.args,
        cwd=params.cwd,
        env=server_env(root),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
        limit=1 << 24,
    )
    relay = StdioRelay(proc)
    try:
        yield relay
    finally:
        if relay.reader is not None:
            relay.reader.cancel()
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            await asyncio.wait_for(proc.wait(), 30)
        except TimeoutError:
            proc.kill()
        shutdown_daemon(root)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    root.mkdir()
    (root / ".git").mkdir()
    (root / "ipykeep.toml").write_text("")
    _write_notebook(root, 3)
    return root


@pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason="needs Debian's chromium (apt-get install chromium)"
)
async def test_the_view_shows_the_plan_runs_it_and_interrupts(project: Path) -> None:
    from playwright.async_api import async_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    requests: list[str] = []
    async with mcp_serve(project) as relay, async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            context = await browser.new_context(viewport={"width": 940, "height": 1100})
            context.on("request", lambda req: requests.append(req.url))

            pages = {HOST_URL: HOST_PAGE.read_text()}

            async def route(r: Any) -> None:
                if r.request.url in pages:
                    await r.fulfill(body=pages[r.request.url], content_type="text/html")
                else:  # nothing else is served: a request here is a failure below
                    await r.abort()

            await context.route("**/*", route)
            page = await context.new_page()
            relay.page = page
            await page.expose_function("relayOut", relay.to_server)
            await page.goto(HOST_URL)
            relay.reader = asyncio.create_task(relay.to_page())
            tools = await page.evaluate("() => window.host.connect()")
            assert "notebook_view" in tools and "run_stale" in tools

            created = await page.evaluate(
                "args => window.host.client.callTool({name: 'create_kernel', arguments: args})",
                {"notebook": NOTEBOOK},
            )
            kernel_id = created["structuredContent"]["kernel_id"]
            await page.evaluate(
                "args => window.host.call('list_cells', args)", {"kernel_id": kernel_id}
            )
            view = page.frame_locator("iframe")
            await view.locator("li.cell[data-cell-id='xs'][data-state='ok']").wait_for(
                timeout=WAIT_MS
            )
            await page.screenshot(path=str(ARTIFACTS / "app-created.png"))

            # A person's (or the agent's) edit on disk: base and what reads it go stale.
            _write_notebook(project, 4)
            await page.evaluate(
                "args => window.host.call('run_stale', args)", {"kernel_id": kernel_id}
            )
            for cell in ("base", "xs", "plot"):
                await view.locator(f"li.cell[data-cell-id='{cell}'][data-state='stale']").wait_for(
                    timeout=WAIT_MS
                )
            base_reasons = await view.locator("li.cell[data-cell-id='base'] .reasons").inner_text()
            xs_reasons = await view.locator("li.cell[data-cell-id='xs'] .reasons").inner_text()
            assert base_reasons.strip() and xs_reasons.strip()
            plan = await view.locator("#plan > li").evaluate_all(
                "items => items.map(li => li.dataset.cellId)"
            )
            assert plan == ["base", "xs", "plot"]
            estimate = await view.locator("#plan-estimate").inner_text()
            assert "3 cell(s)" in estimate and "estimated" in estimate, estimate
            await view.locator("li.cell[data-cell-id='pause'][data-state='ok']").wait_for()
            await page.screenshot(path=str(ARTIFACTS / "app-stale.png"))

            # "Run the plan": run_stale(execute) through the host's bridge.
            await view.locator("#run-plan").click()
            await view.locator("#plan-empty").wait_for(state="visible", timeout=WAIT_MS)
            for cell in ("base", "xs", "plot"):
                await view.locator(f"li.cell[data-cell-id='{cell}'][data-state='ok']").wait_for(
                    timeout=WAIT_MS
                )
            assert await view.locator("#plan > li").count() == 0
            xs_out = view.locator("li.cell[data-cell-id='xs'] .output pre").first
            assert "sum 180" in await xs_out.inner_text()
            image = view.locator("li.cell[data-cell-id='plot'] .output img").first
            await image.wait_for(timeout=WAIT_MS)
            assert (await image.get_attribute("src") or "").startswith("data:image/png;base64,")
            assert await image.evaluate("img => img.complete && img.naturalWidth > 50")
            await page.screenshot(path=str(ARTIFACTS / "app-ran.png"))

            # A long cell, started from the view, stopped from the view.
            done = await page.evaluate(
                "args => window.host.client.callTool({name: 'ipython', arguments: args})",
                {"kernel_id": kernel_id, "code": "pause_s = 600"},
            )
            assert not done.get("isError"), done
            await view.locator("#refresh").click()
            await view.locator(
                "li.cell[data-cell-id='pause'] button[data-action='run']:not([disabled])"
            ).click()
            await view.locator("li.cell[data-cell-id='pause'][data-state='running']").wait_for(
                timeout=WAIT_MS
            )
            await page.screenshot(path=str(ARTIFACTS / "app-running.png"))
            await view.locator("#interrupt:not([disabled])").click()
            await view.locator("li.cell[data-cell-id='pause'][data-state='failed']").wait_for(
                timeout=WAIT_MS
            )
            error = view.locator("li.cell[data-cell-id='pause'] .output .error").first
            assert "KeyboardInterrupt" in await error.inner_text()
            await view.locator("#kernel-state[data-state='idle']").wait_for(timeout=WAIT_MS)
            await view.locator(
                "li.cell[data-cell-id='pause'] button[data-action='debug']"
            ).wait_for()
            await page.screenshot(path=str(ARTIFACTS / "app-interrupted.png"))

            # The same view for a person at a shell: a snapshot page, no host, no controls.
            snapshot_file = project / "view.html"
            done_cli = await asyncio.create_subprocess_exec(
                *VIEW_CLI, kernel_id, "-o", str(snapshot_file), cwd=project, env=server_env(project)
            )
            assert await done_cli.wait() == 0
            assert snapshot_file.stat().st_mode & 0o077 == 0
            pages[SNAPSHOT_URL] = snapshot_file.read_text()
            await page.goto(SNAPSHOT_URL)
            await page.locator("li.cell[data-cell-id='pause'][data-state='failed']").wait_for()
            await page.locator("li.cell[data-cell-id='plot'] .output img").first.wait_for()
            assert not await page.locator("#run-plan").is_visible()
            await page.screenshot(path=str(ARTIFACTS / "app-snapshot.png"))
        finally:
            await browser.close()
    # The two pages are all that was fetched: the view (srcdoc) fetched nothing at all.
    assert set(requests) == {HOST_URL, SNAPSHOT_URL}, requests
    notebook = json.loads((project / NOTEBOOK).read_text())
    assert "".join(notebook["cells"][0]["source"]) == "n = 4"
