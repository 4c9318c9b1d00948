"""Text that ``ipykeep init`` writes: the Claude Code skill, the AGENTS.md / GEMINI.md section,
ipykeep.toml."""

from __future__ import annotations

import ast
import dataclasses
import inspect
from typing import Any, Literal, get_args, get_origin, get_type_hints

import tomlkit

from ipykeep.project.config import Config

AGENTS_START = "<!-- ipykeep:start -->"
AGENTS_END = "<!-- ipykeep:end -->"

_WORKFLOW = """\
1. `create_kernel` on the notebook. The kernel is persistent: state survives between calls and
   sessions, so never restart it to "be safe".
2. Edit cells with your own file-editing tools; ipykeep notices the edits on disk. When a person
   has the notebook open (JupyterLab, VS Code), edit with `edit_cell` instead, passing the
   cell's `version` from `list_cells`; on `stale_version` someone changed the cell: apply your
   change to the current source the error returns and call again.
3. `run_stale` in plan mode: it lists the cells that must re-run, each with its reason
   (edited, upstream changed, file changed, …). Planning runs nothing.
4. `run_stale` in execute mode: runs exactly the planned cells, in order.
5. `inspect` a variable for a typed summary (shape, dtypes, head, …) instead of printing it.

When something goes wrong:

- A cell failed: call `debug` with `where`, then `up` / `p EXPR` / `locals` to read the failing
  frame's values (post-mortem), rather than adding prints and re-running.
- `ImportError` / `ModuleNotFoundError`: `add_packages` with the package names installs them
  into the kernel's own environment; then re-run the cell (restart only if the result says
  `restart_needed`).
- Before a risky cell (one that mutates or drops data, or takes long): `checkpoint` with a name;
  `restore` that name rolls the variables back if it goes wrong.

Habits:

- Use the `ipython` tool for scratch work (quick checks, exploring data); it shares the
  notebook's state without adding cells to the notebook.
- Never re-run the whole notebook: expensive cells that are still valid stay valid.
- A long cell returns a `handle`: follow it with `read_cell`, stop it with `interrupt`.
- Outputs are bounded: a long output keeps its head and tail and says where the full text is.
  Read the full text only when the cut part is what you need.
"""

_SKILL_DESCRIPTION = (
    "Work in a Jupyter notebook through ipykeep's persistent, dataflow-aware kernel. "
    "Use when running, debugging or editing cells of an .ipynb notebook, "
    "or exploring its data and variables."
)

SKILL_MD = f"""\
---
name: ipykeep
description: {_SKILL_DESCRIPTION}
---

# Working in notebooks with ipykeep

ipykeep keeps a Jupyter kernel bound to the notebook and tracks which cells are stale after an
edit. Use its MCP tools (server `ipykeep`) like this:

{_WORKFLOW}"""

AGENTS_SECTION = f"""\
{AGENTS_START}
## Notebooks: use ipykeep

This project's notebooks run on a persistent ipykeep kernel (MCP server `ipykeep`, or the
`ipykeep` command line). Workflow:

{_WORKFLOW}{AGENTS_END}
"""


def _field_comments() -> dict[str, str]:
    """The ``#:`` comment above each Config field, read from its source."""
    try:
        source = inspect.getsource(Config)
    except (OSError, TypeError):
        return {}
    lines = source.splitlines()
    comments: dict[str, str] = {}
    tree = ast.parse(source)
    cls = tree.body[0]
    assert isinstance(cls, ast.ClassDef)
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            above: list[str] = []
            i = node.lineno - 2
            while i >= 0 and lines[i].strip().startswith("#:"):
                above.insert(0, lines[i].strip()[2:].strip())
                i -= 1
            if above:
                comments[node.target.id] = " ".join(above)
    return comments


def _default_of(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def _example_line(name: str, hint: Any, default: Any) -> str:
    if name == "python":
        # The default is the interpreter running ipykeep: a machine-specific path, so show a
        # relative example instead of it.
        return '# python = ".venv/bin/python"   # default: the Python running ipykeep'
    if default is None:
        return f'# {name} = ""'
    line = f"# {name} = {tomlkit.item(default).as_string()}"
    if get_origin(hint) is Literal:
        line += "   # one of " + ", ".join(f'"{a}"' for a in get_args(hint))
    return line


def ipykeep_toml(notebook: str | None) -> str:
    """A fresh ``ipykeep.toml``: the notebook, then every other setting commented out."""
    comments = _field_comments()
    hints = get_type_hints(Config)
    out = ["# ipykeep settings for this project. Check them with `ipykeep doctor`.", ""]
    if notebook is not None:
        out += [
            "# Notebook the kernel is bound to by default.",
            f"notebook = {tomlkit.item(notebook).as_string()}",
            "",
        ]
    out += ["# Defaults; uncomment a line to change it."]
    for f in dataclasses.fields(Config):
        if f.name == "notebook" and notebook is not None:
            continue
        if f.name in comments:
            out += ["", f"# {comments[f.name]}"]
        out.append(_example_line(f.name, hints[f.name], _default_of(f)))
    return "\n".join(out) + "\n"
