"""The ``ipykeep`` command table: every command, its options, their rules and its handler.

Exit codes (also in the README): 0 success; 1 a cell failed; 2 usage or configuration error;
3 no daemon running (or it refused the request); 4 notebook missing or invalid; 5 unknown cell
or variable; 6 unknown kernel; 7 kernel failed to start or died; 8 timed out; 9 kernel busy.
"""

from __future__ import annotations

from ipykeep.cli.declare import Command, EitherWay, Param, Requires

APP_HELP = "A persistent, dataflow-aware Jupyter kernel bound to your notebook."
#: What the notebook argument means wherever it names the kernel to use.
NOTEBOOK_HELP = "Notebook whose kernel to use, or a kernel id like k1 (optional with one kernel)."
#: For ``start``, where the notebook is the one to bind rather than a kernel to use.
BIND_HELP = "Notebook to bind (default: `notebook` from ipykeep.toml)."
#: For ``init``, which writes the notebook into the project's configuration.
INIT_NOTEBOOK_HELP = "Notebook to bind by default (written to ipykeep.toml)."

VERSION_FLAGS = ("--version", "-V")
#: Flags every command that prints takes, accepted before the command's name too.
GLOBAL_FLAGS = ("--json",)
#: The options of ``ipykeep`` itself, before any command.
ROOT_PARAMS = (
    Param("version", "Print ipykeep's version and exit.", VERSION_FLAGS, "bool", False),
    Param(
        "as_json",
        "Same as --json after the command: print compact JSON.",
        GLOBAL_FLAGS,
        "bool",
        False,
    ),
)


def json_flag(help: str = "Print compact JSON.") -> Param:
    return Param("as_json", help, GLOBAL_FLAGS, "bool", False)


def notebook_option(
    help: str = NOTEBOOK_HELP, *, dest: str = "notebook", type: str = "str", kernel: bool = True
) -> Param:
    """``-n, --notebook`` (and, where a running kernel is meant, ``-k, --kernel``: one option)."""
    flags = ("--notebook", "-n", "--kernel", "-k") if kernel else ("--notebook", "-n")
    return Param(dest, help, flags, type, metavar="NOTEBOOK")


def flag(dest: str, name: str, help: str) -> Param:
    return Param(dest, help, (name,), "bool", False)


def notebook_either_way(
    help: str = NOTEBOOK_HELP, *, type: str = "str", kernel: bool = True
) -> tuple[Param, Param]:
    """``[NOTEBOOK]`` and ``-n, --notebook NOTEBOOK``: the notebook given either way."""
    argument = Param("notebook", help, type=type, show_default=False)
    return argument, notebook_option(help, dest="notebook_opt", type=type, kernel=kernel)


NOTEBOOK_ONCE = EitherWay("notebook", "notebook_opt", "--notebook", "notebook")

_HOT = "ipykeep.cli.hot"
_KERNELS = "ipykeep.cli.kernels"
_CHECKPOINTS = "ipykeep.cli.checkpoints"
_SERVE = "ipykeep.cli.serve"
_SCAFFOLD = "ipykeep.cli.scaffold"
_EDITING = "ipykeep.cli.editing"


def _cell(help: str = "The cell: its id, or its 0-based index among all cells.") -> Param:
    return Param("cell", help, required=True)


def _version() -> Param:
    return Param(
        "version",
        "The cell's version your edit is based on (`ipykeep status` shows it after @); "
        "a cell changed since is refused with its current source.",
        ("--version", "-v"),
        required=True,
    )


def _neighbours(what: str) -> tuple[Param, Param]:
    return (
        Param("after", f"{what} after this cell.", ("--after",), metavar="CELL"),
        Param("before", f"{what} before this cell.", ("--before",), metavar="CELL"),
    )


_RUN_STALE_HELP = """Which cells must re-run after edits, and why; --execute re-runs exactly those.

Each planned cell shows its last measured duration and the plan its total; when the plan
would take longer than restarting and running every cell, the output says so and
--execute --fresh does that instead. Progress goes to stderr while a plan runs.
Plan mode exits 0 whatever it finds; --execute exits 0 when every cell succeeded, 1 when
one failed (its dependents are skipped and reported; independent cells still run)."""

_LAUNCHER_HELP = (
    "How hosts start the server: auto (`ipykeep` when PATH has this one, else its absolute "
    "path), path (`ipykeep` on PATH), venv (.venv/bin/ipykeep), "
    "uvx (uvx --from SOURCE ipykeep), command (--command)."
)

COMMANDS: tuple[Command, ...] = (
    Command(
        "start",
        "Start (or reuse) the project's daemon and a kernel bound to NOTEBOOK, warmed up.",
        f"{_KERNELS}:start",
        (
            *notebook_either_way(BIND_HELP, kernel=False),
            flag("no_warm", "--no-warm", "Do not run the notebook's cells now."),
            flag(
                "no_write_outputs", "--no-write-outputs", "Never write outputs into the notebook."
            ),
            Param("python", "Python that runs the kernel.", ("--python",)),
            Param("dataflow", "'static' (default) or 'ipyflow'.", ("--dataflow",)),
            flag("serve", "--serve", "Also serve the kernel to JupyterLab / VS Code."),
            Param(
                "gateway",
                "Run the kernel on this Jupyter server / gateway URL "
                "(token: $JUPYTER_GATEWAY_AUTH_TOKEN).",
                ("--gateway",),
            ),
            json_flag(),
        ),
        (NOTEBOOK_ONCE,),
        examples=(
            "ipykeep start analysis.ipynb             # start, run every cell once",
            "ipykeep start analysis.ipynb --no-warm   # start it, run nothing yet",
            "ipykeep start analysis.ipynb --serve     # and serve it to JupyterLab",
        ),
    ),
    Command(
        "stop",
        "Stop one notebook's kernel, or everything; returns once the processes are gone.",
        f"{_KERNELS}:stop",
        (
            *notebook_either_way(),
            flag("all_", "--all", "Stop every kernel and the daemon."),
            json_flag(),
        ),
        (NOTEBOOK_ONCE,),
        examples=(
            "ipykeep stop analysis.ipynb              # close that notebook's kernel",
            "ipykeep stop --all                       # every kernel, and the daemon",
        ),
    ),
    Command(
        "status",
        "Kernels, their notebooks and per-cell state (one notebook's, when given).",
        f"{_HOT}:status",
        (*notebook_either_way(), json_flag()),
        (NOTEBOOK_ONCE,),
        hot=True,
        examples=(
            "ipykeep status                           # every kernel, cell by cell",
            "ipykeep status analysis.ipynb --json     # one notebook, as JSON",
        ),
    ),
    Command(
        "run",
        "Run notebook cells, in the order given, with their source on disk now.",
        f"{_HOT}:run",
        (
            Param(
                "cells",
                "Cell ids or 0-based indexes among all cells.",
                required=True,
                multiple=True,
            ),
            notebook_option(),
            json_flag(),
        ),
        hot=True,
        examples=(
            "ipykeep run 3 4                          # cells 3 and 4 (0-based)",
            "ipykeep run load-data -n analysis.ipynb  # a cell by its id",
        ),
    ),
    Command(
        "restart",
        "Restart the notebook's kernel (dead or alive): same kernel id, fresh state.",
        f"{_KERNELS}:restart",
        (*notebook_either_way(), json_flag()),
        (NOTEBOOK_ONCE,),
        examples=("ipykeep restart                          # same id, fresh state",),
    ),
    Command(
        "exec",
        "Run scratch code in the kernel; print its output; non-zero exit on error.",
        f"{_HOT}:exec_",
        (
            Param(
                "code",
                "Python code to run in the notebook's kernel ('-' reads stdin).",
                required=True,
            ),
            notebook_option(),
            flag(
                "no_wait",
                "--no-wait",
                "Return at once with the execution's handle if it still runs "
                "(then `ipykeep read HANDLE`).",
            ),
            json_flag(),
        ),
        hot=True,
        examples=(
            "ipykeep exec 'df.describe()'             # scratch code in its kernel",
            "ipykeep exec - < snippet.py              # code from stdin",
            "ipykeep exec --no-wait 'train()'         # return the handle at once",
            "ipykeep exec -k k2 'x'                   # in kernel k2, when several run",
        ),
    ),
    Command(
        "read",
        "Print what an execution printed since the last read, and its state.",
        f"{_HOT}:read",
        (
            Param("handle", "The execution's handle, e.g. c12.", required=True),
            notebook_option(),
            flag("wait", "--wait", "Follow it until it finishes."),
            json_flag(),
        ),
        hot=True,
        examples=(
            "ipykeep read c12                         # what c12 printed since",
            "ipykeep read c12 --wait                  # follow it to the end",
        ),
    ),
    Command(
        "interrupt",
        "Interrupt what the kernel is running (kill and restart it if it ignores SIGINT).",
        f"{_HOT}:interrupt",
        (*notebook_either_way(), json_flag()),
        (NOTEBOOK_ONCE,),
        hot=True,
        examples=("ipykeep interrupt analysis.ipynb         # stop the running cell",),
    ),
    Command(
        "run-stale",
        _RUN_STALE_HELP,
        f"{_HOT}:run_stale",
        (
            *notebook_either_way(),
            flag("execute", "--execute", "Run the plan (default: only show it)."),
            flag(
                "fresh",
                "--fresh",
                "With --execute: restart the kernel and run every cell instead "
                "(same state, from scratch).",
            ),
            json_flag(),
        ),
        (
            NOTEBOOK_ONCE,
            Requires(
                "fresh",
                "execute",
                "--fresh restarts the kernel and runs every cell: it needs --execute",
                "ipykeep run-stale --execute --fresh",
            ),
        ),
        hot=True,
        examples=(
            "ipykeep run-stale                        # what must re-run, and why",
            "ipykeep run-stale --execute              # run them, in order",
            "ipykeep run-stale --execute --fresh      # restart, run every cell",
        ),
    ),
    Command(
        "edit-cell",
        "Replace a cell's source, checked against the version it was based on.",
        f"{_EDITING}:edit_cell",
        (
            _cell(),
            Param("source", "The new source ('-' reads stdin).", required=True),
            _version(),
            notebook_option(),
            json_flag(),
        ),
    ),
    Command(
        "insert-cell",
        "Insert a cell (at the end unless --after or --before).",
        f"{_EDITING}:insert_cell",
        (
            Param("source", "Its source ('-' reads stdin).", required=True),
            *_neighbours("Insert it"),
            flag("markdown", "--markdown", "A markdown cell (default: code)."),
            notebook_option(),
            json_flag(),
        ),
    ),
    Command(
        "delete-cell",
        "Delete a cell, checked against the version it was based on.",
        f"{_EDITING}:delete_cell",
        (_cell(), _version(), notebook_option(), json_flag()),
    ),
    Command(
        "move-cell",
        "Move a cell after or before another one, checked against its version.",
        f"{_EDITING}:move_cell",
        (_cell(), _version(), *_neighbours("Move it"), notebook_option(), json_flag()),
    ),
    Command(
        "watch",
        "Register PATH as an input of the notebook: its changes make the cells that use it stale.",
        f"{_KERNELS}:watch",
        (
            Param("path", "A file the notebook depends on that detection missed.", required=True),
            notebook_option(),
            json_flag(),
        ),
        examples=("ipykeep watch data/prices.csv            # an input detection missed",),
    ),
    Command(
        "add",
        "Install packages into the kernel's own environment, importable without a restart "
        "(uv when available, else pip).",
        f"{_KERNELS}:add",
        (
            Param(
                "packages", "Requirements, e.g. six 'iniconfig>=2'.", required=True, multiple=True
            ),
            flag("record", "--record", "Also add them to pyproject.toml (uv projects: `uv add`)."),
            Param("index_url", "Package index to install from.", ("--index-url",)),
            notebook_option(),
            json_flag(),
        ),
    ),
    Command(
        "inspect",
        "A typed, bounded summary of a live variable.",
        f"{_KERNELS}:inspect",
        (
            Param(
                "name", 'A variable, or a safe path like model.coef_ or df["col"].', required=True
            ),
            notebook_option(),
            json_flag(),
        ),
        examples=(
            "ipykeep inspect df                       # columns, dtypes, a few rows",
            "ipykeep inspect 'df[\"price\"]'            # one column",
        ),
    ),
    Command(
        "debug",
        "Debug with pdb commands: where, up, down, p EXPR, locals, break, step, next, continue, "
        "replay. A first word ending in .ipynb, or a kernel id like k1, names the kernel.",
        f"{_KERNELS}:debug",
        (
            Param(
                "words",
                "[NOTEBOOK] COMMAND, e.g. `where`, `p df.shape`, `break 2:3`, `replay`.",
                required=True,
                multiple=True,
            ),
            notebook_option(),
            Param(
                "handle",
                "The execution to debug (default: the paused or last failed one).",
                ("--handle",),
            ),
            json_flag(),
        ),
    ),
    Command(
        "namespace",
        "Every user variable in the kernel with type, shape, memory and defining cell.",
        f"{_KERNELS}:namespace",
        (notebook_option(), json_flag()),
        examples=("ipykeep namespace -n analysis.ipynb      # every variable, type, cell",),
    ),
    Command(
        "mcp-serve",
        "Serve ipykeep's tools over MCP (stdio, or streamable HTTP with a bearer token).",
        "ipykeep.cli.mcp:mcp_serve",
        (
            Param(
                "transport",
                "'stdio' (default) or 'http' (streamable HTTP).",
                ("--transport",),
                default="stdio",
            ),
            Param(
                "host",
                "HTTP: address to listen on (loopback unless IPYKEEP_MCP_TOKEN is set).",
                ("--host",),
                default="127.0.0.1",
            ),
            Param(
                "port",
                "HTTP: port; 0 picks a free one (the URL is printed on stderr).",
                ("--port",),
                "int",
                0,
            ),
            Param(
                "connection_file",
                "HTTP: write {url, headers} here (0600) once the server accepts requests.",
                ("--connection-file",),
                "path",
            ),
            Param(
                "project",
                "Project directory whose daemon to use (default: cwd). "
                "Hosts that may start the server elsewhere (Cursor) pass it.",
                ("--project",),
                "path",
            ),
        ),
        # Hosts time the MCP handshake from process start: parsed without typer.
        hot=True,
    ),
    Command(
        "serve",
        "Open the running kernel in JupyterLab / VS Code: prints the server URL with its token.",
        f"{_SERVE}:serve",
        (
            *notebook_either_way(),
            flag("stop", "--stop", "Detach the kernel from the Jupyter server instead."),
            json_flag(),
        ),
        (NOTEBOOK_ONCE,),
    ),
    Command(
        "console",
        "Attach a terminal console to the kernel the agent drives, after printing its recent "
        "history.",
        "ipykeep.cli.console:console",
        (
            *notebook_either_way(),
            Param("history", "Recent executions to print first.", ("--history",), "int", 10),
        ),
        (NOTEBOOK_ONCE,),
    ),
    Command(
        "view",
        "Write the kernel's notebook view (cells, stale marks, plan, latest outputs) as one "
        "self-contained HTML page.",
        "ipykeep.cli.view:view",
        (
            *notebook_either_way(),
            Param(
                "output",
                "Where to write the page (default: ipykeep-view-KERNEL.html here).",
                ("-o", "--output"),
                "path",
            ),
        ),
        (NOTEBOOK_ONCE,),
    ),
    Command(
        "publish",
        "A read-only, token-protected view of the kernel's notebook with captioned cells.",
        f"{_SERVE}:publish",
        (
            *notebook_either_way(),
            Param(
                "cell",
                "Highlight a cell: ID=CAPTION (repeatable).",
                ("--cell",),
                default=[],
                multiple=True,
            ),
            flag("tunnel", "--tunnel", "Also expose it through a cloudflared quick tunnel."),
            json_flag(),
        ),
        (NOTEBOOK_ONCE,),
    ),
    Command(
        "init",
        "Register ipykeep with Claude Code, Codex, Cursor, Gemini CLI, opencode and VS Code, "
        "and set up this project.",
        f"{_SCAFFOLD}:init",
        (
            *notebook_either_way(INIT_NOTEBOOK_HELP, type="path", kernel=False),
            Param(
                "provider",
                "Host to configure; repeat for several. Default: all.",
                ("--provider", "-p"),
                "ipykeep.scaffold.init:Provider",
                multiple=True,
            ),
            Param(
                "scope",
                "project: files in this project; user: the hosts' user-level files.",
                ("--scope",),
                "ipykeep.scaffold.init:Scope",
                "project",
            ),
            flag("replace", "--replace", "Overwrite an existing, different ipykeep entry."),
            flag("dry_run", "--dry-run", "Print a diff of every change; write nothing."),
            Param(
                "launcher",
                _LAUNCHER_HELP,
                ("--launcher",),
                "ipykeep.scaffold.launcher:LauncherKind",
                "auto",
            ),
            Param("uvx_from", "ipykeep's source for --launcher uvx.", ("--uvx-from",)),
            Param("command", "Command line for --launcher command.", ("--command",)),
            flag(
                "allow_all",
                "--allow-all",
                "Claude Code: allow every ipykeep tool, code-running ones too, in "
                ".claude/settings.local.json (default: only the read-only tools).",
            ),
        ),
        (NOTEBOOK_ONCE,),
    ),
    Command(
        "doctor",
        "Check the installation, the configuration, the kernel's Python, the daemon "
        "and host configs.",
        f"{_SCAFFOLD}:doctor",
        (json_flag("Print the checks as JSON."),),
    ),
    Command(
        "checkpoint",
        "Save every variable of the kernel under NAME, "
        "to roll back to with `ipykeep restore NAME`.",
        f"{_CHECKPOINTS}:checkpoint",
        (
            Param("name", "Checkpoint name (default: a timestamp)."),
            notebook_option(),
            json_flag(),
        ),
        examples=("ipykeep checkpoint before-cleanup        # save every variable",),
    ),
    Command(
        "restore",
        "Roll the kernel's variables back to checkpoint NAME (variables made since are deleted).",
        f"{_CHECKPOINTS}:restore",
        (
            Param("name", "A checkpoint made with `ipykeep checkpoint NAME`.", required=True),
            notebook_option(),
            json_flag(),
        ),
        examples=("ipykeep restore before-cleanup           # roll the variables back",),
    ),
    Command(
        "checkpoints",
        "What is checkpointed for the kernel's notebook (per cell and named), and its size.",
        f"{_CHECKPOINTS}:checkpoints",
        (notebook_option(), json_flag()),
        examples=("ipykeep checkpoints                      # what is saved, per cell",),
    ),
    Command(
        "fork",
        "Start a new kernel holding this kernel's variables, bound to a copy of its notebook "
        "(NOTEBOOK.fork-N.ipynb beside it, or --name).",
        f"{_CHECKPOINTS}:fork",
        (
            Param("name", "The fork's notebook (default: NOTEBOOK.fork-N.ipynb).", ("--name",)),
            notebook_option(),
            json_flag(),
        ),
        examples=("ipykeep fork --notebook analysis.ipynb   # try variants in a fork",),
    ),
    Command(
        "fork-diff",
        "Which cells and variables of a fork differ from its parent's.",
        f"{_CHECKPOINTS}:fork_diff",
        (notebook_option(), json_flag()),
        examples=("ipykeep fork-diff --notebook analysis.fork-1.ipynb",),
    ),
)

BY_NAME = {command.name: command for command in COMMANDS}
