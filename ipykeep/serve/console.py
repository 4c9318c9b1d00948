"""The daemon's ``console``: where a terminal console attaches to a kernel, and what ran lately.

``ipykeep console`` attaches jupyter_console to the kernel the agent drives through the kernel's
own connection file (the one the Jupyter server adopts it by), so there is never a second
kernel. Code typed there reaches the daemon on the broadcast iopub channel like a browser's
and is recorded and judged the same way (``ServeService.foreign_message``). The history returned
first is the kernel's latest executions of every kind, each with its code and a short, bounded
output, so the person sees what the agent did before the prompt appears.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ipykeep.api import serve as serve_api
from ipykeep.api.bounding import bound_text
from ipykeep.api.errors import RemoteNotSupportedError
from ipykeep.api.serve import ConsoleEntry, ConsoleInfo
from ipykeep.api.spec import Bindings, bind
from ipykeep.kernel.execution import Execution
from ipykeep.serve.service import _attach_point

if TYPE_CHECKING:
    from ipykeep.engine.engine import Engine

#: Characters of code and of output shown per history entry (head and tail beyond them).
CODE_CHARS = 1200
OUTPUT_CHARS = 800


class ConsoleService:
    def __init__(self, engine: Engine) -> None:
        self.engine = engine

    async def console(
        self, kernel_id: str | None = None, notebook: str | None = None, history: int = 10
    ) -> ConsoleInfo:
        """The kernel's connection file and its ``history`` latest executions."""
        session = self.engine.live(kernel_id, notebook)
        where = _attach_point(session.process)
        if session.process.provider.kind == "gateway":
            raise RemoteNotSupportedError(
                f"kernel {session.kernel_id} runs behind a gateway: "
                "a console cannot attach to it from here",
                hint="attach from that server: `jupyter console --existing` on its host",
            )
        if where is None:
            raise RemoteNotSupportedError(
                f"kernel {session.kernel_id} has no connection file to attach a console to",
                hint="a console attaches to a running local or SSH kernel; is it still starting?",
            )
        recent = list(session.executions.values())[-history:] if history else []
        return ConsoleInfo(
            kernel_id=session.kernel_id,
            connection_file=where[0],
            notebook=str(session.notebook) if session.notebook else None,
            history=[_entry(ex) for ex in recent],
        )

    def bindings(self) -> Bindings:
        """The daemon methods this service serves, each bound to its declaration."""
        return (bind(serve_api.CONSOLE, self.console),)


def _entry(ex: Execution) -> ConsoleEntry:
    text, _ = ex.text_since(0)
    if ex.error:
        text += f"{ex.error.get('ename', 'Error')}: {ex.error.get('evalue', '')}\n"
    return ConsoleEntry(
        handle=ex.handle,
        kind=ex.kind,
        state=ex.state,
        code=bound_text(ex.code, CODE_CHARS).text,
        output=bound_text(text, OUTPUT_CHARS).text,
        cell_id=ex.cell_id,
    )
