"""The terminal ``ipykeep console`` becomes: jupyter_console attached to the agent's kernel.

Run as ``python -m ipykeep.cli.console_shell CONNECTION_FILE PROJECT KERNEL_ID`` once the
history is printed. It attaches to the existing kernel (never starts one) and differs from
``jupyter console --existing`` where that would hurt the agent: leaving it (``exit``, ``quit``,
Ctrl-D) only detaches. Sent to the kernel, ``exit`` makes ipykernel stop itself and asks the
console to send a shutdown request, so those words are handled here and never sent, and no
shutdown request is ever sent. Ctrl-C during a run interrupts through the daemon (SIGINT to
the kernel's process group, as ``ipykeep interrupt`` does), which a console that did not start
the kernel cannot do itself. Other clients' output (the agent's runs) is shown as it happens.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from jupyter_console.app import ZMQTerminalIPythonApp
from jupyter_console.ptshell import ZMQTerminalInteractiveShell

from ipykeep.api import names

#: What a person types to leave: handled by the console, never run in the kernel.
LEAVE = re.compile(r"\s*%?(exit|quit)\s*(\(\s*\))?\s*;?\s*")


class AttachedShell(ZMQTerminalInteractiveShell):  # type: ignore[misc]
    """A shell whose exit always keeps the kernel: it belongs to ipykeep and the agent."""

    def run_cell(self, cell: str, store_history: bool = True) -> None:
        if LEAVE.fullmatch(cell):
            print("detached; the kernel keeps running")
            self.ask_exit()
            return
        super().run_cell(cell, store_history)

    @property
    def keepkernel(self) -> bool:
        return True

    @keepkernel.setter
    def keepkernel(self, value: bool) -> None:
        del value  # ``exit`` asks the console to shut the kernel down: it only detaches


class AttachedConsole(ZMQTerminalIPythonApp):  # type: ignore[misc]
    project: Path
    kernel_id: str

    def init_shell(self) -> None:
        super().init_shell()
        ZMQTerminalInteractiveShell.clear_instance()
        self.shell = AttachedShell.instance(
            parent=self,
            manager=None,
            client=self.kernel_client,
            confirm_exit=False,
            include_other_output=True,
            other_output_prefix="[agent] ",
        )
        self.shell.own_kernel = False

    def handle_sigint(self, *args: Any) -> None:
        if not self.shell._executing:
            raise KeyboardInterrupt
        from ipykeep.api.errors import IpykeepError
        from ipykeep.client.connection import connect

        print("\ninterrupting (through ipykeep)…", file=sys.stderr)
        try:
            connect(self.project).call(names.INTERRUPT, kernel_id=self.kernel_id)
        except IpykeepError as exc:  # the daemon is gone: say so, keep the console usable
            print(f"could not interrupt: {exc.message}", file=sys.stderr)


def main(argv: list[str]) -> None:
    connection_file, project, kernel_id = argv
    app = AttachedConsole.instance()
    app.project, app.kernel_id = Path(project), kernel_id
    app.initialize(["--existing", connection_file])
    app.start()


if __name__ == "__main__":
    main(sys.argv[1:])
