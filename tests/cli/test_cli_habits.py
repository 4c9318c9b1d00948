"""CLI habits that need no kernel.

--version, shell completion, --json placement, the notebook argument.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import typer

import ipykeep
from ipykeep.cli import fast as cli_fast
from ipykeep.cli.commands import BIND_HELP, NOTEBOOK_HELP
from tests.conftest import cli_env, make_project, run_cli

PATHS = {"fast": cli_env(), "typer": cli_env(IPYKEEP_CLI_FULL="1")}


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_project(tmp_path_factory.mktemp("habits") / "p", example=False)


@pytest.mark.parametrize("path", PATHS)
@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_on_both_paths(project: Path, path: str, flag: str) -> None:
    res = run_cli(flag, cwd=project, env=PATHS[path])
    assert res.returncode == 0, res.stderr
    assert res.stdout == f"ipykeep {ipykeep.__version__}\n"


def test_the_version_has_one_source() -> None:
    from importlib.metadata import version

    assert version("ipykeep") == ipykeep.__version__


@pytest.mark.parametrize("path", PATHS)
def test_json_before_the_command_is_the_same_as_after(project: Path, path: str) -> None:
    # No daemon here: both spellings reach the command and fail the same way (exit 3).
    before = run_cli("--json", "status", cwd=project, env=PATHS[path])
    after = run_cli("status", "--json", cwd=project, env=PATHS[path])
    assert before.returncode == after.returncode == 3
    assert before.stderr == after.stderr and "no ipykeep daemon" in before.stderr


def test_normalize_argv_moves_only_leading_global_flags() -> None:
    assert cli_fast.normalize_argv(["--json", "status"]) == ["status", "--json"]
    assert cli_fast.normalize_argv(["--json", "--json", "exec", "--", "-1"]) == [
        "exec",
        "--json",
        "--",
        "-1",
    ]
    assert cli_fast.normalize_argv(["exec", "--json", "1"]) == ["exec", "--json", "1"]
    assert cli_fast.normalize_argv(["--json"]) == ["--json"]
    assert cli_fast.normalize_argv(["--json", "--version"]) == ["--json", "--version"]


def test_shell_completion_script_and_completions(project: Path) -> None:
    # typer names the shell it detects among the parents; this one is named, for any parent
    pinned = cli_env(_TYPER_COMPLETE_TEST_DISABLE_SHELL_DETECTION="1")
    script = run_cli("--show-completion", "bash", cwd=project, env=pinned)
    assert script.returncode == 0, script.stderr
    assert "_IPYKEEP_COMPLETE=complete_bash" in script.stdout
    env = cli_env(_IPYKEEP_COMPLETE="complete_bash", COMP_WORDS="ipykeep run-st", COMP_CWORD="1")
    res = run_cli(cwd=project, env=env)
    assert res.stdout.split() == ["run-stale"]
    env.update(COMP_WORDS="ipykeep status --", COMP_CWORD="2")
    assert {"--notebook", "--json"} <= set(run_cli(cwd=project, env=env).stdout.split())


def _commands() -> dict[str, Any]:
    from ipykeep.cli.app import build_app

    group = typer.main.get_command(build_app())
    return dict(group.commands)  # type: ignore[attr-defined]


def test_the_notebook_argument_is_spelled_the_same_everywhere() -> None:
    with_notebook = []
    for name, command in _commands().items():
        params = {p.name: p for p in command.params}
        if not any(n in params for n in ("notebook", "notebook_opt")):
            continue
        with_notebook.append(name)
        option = params["notebook_opt"] if "notebook_opt" in params else params["notebook"]
        assert getattr(option, "param_type_name", "") != "argument", name
        binds = name in ("start", "init")  # a notebook to bind, not a running kernel to use
        spelled = ["--notebook", "-n"] if binds else ["--kernel", "--notebook", "-k", "-n"]
        assert sorted(option.opts) == spelled, name
        assert option.metavar == "NOTEBOOK", name
        helps = {
            getattr(p, "help", None)
            for p in command.params
            if p.name in ("notebook", "notebook_opt")
        }
        allowed = {
            NOTEBOOK_HELP,
            BIND_HELP,
            "Notebook to bind by default (written to ipykeep.toml).",
        }
        assert helps <= allowed and len(helps) == 1, (name, helps)
    expected = {
        "start",
        "stop",
        "status",
        "run",
        "restart",
        "exec",
        "interrupt",
        "run-stale",
        "watch",
        "inspect",
        "namespace",
        "serve",
        "publish",
        "init",
    }
    assert expected <= set(
        with_notebook
    )  # commands added later are held to the same spelling above


def test_the_cli_modules_import_one_way() -> None:
    """Entry point -> parsers -> table -> vocabulary; handlers import neither parser nor table."""
    import ast

    cli = Path(ipykeep.__file__).parent / "cli"
    allowed = {
        "entry": {"fast", "app"},
        "fast": {"commands", "declare", "output"},
        "app": {"commands", "declare", "output"},
        "commands": {"declare"},
        "declare": set(),
        "output": set(),
    }
    # console_shell is the program `ipykeep console` becomes (run with -m), held to the same rule
    handlers = {"hot", "kernels", "checkpoints", "serve", "scaffold", "mcp", "editing", "console"}
    handlers.add("view")
    handlers.add("console_shell")
    assert {p.stem for p in cli.glob("*.py")} - {"__init__"} == set(allowed) | handlers
    for path in cli.glob("*.py"):
        tree = ast.parse(path.read_text())
        imported: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "ipykeep.cli":
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith(
                "ipykeep.cli."
            ):
                imported.add((node.module or "").rsplit(".", 1)[-1])
        assert imported <= allowed.get(path.stem, {"output"}), (path.stem, imported)


class _Stream:
    def __init__(self, tty: bool) -> None:
        self.tty, self.text = tty, ""

    def isatty(self) -> bool:
        return self.tty

    def write(self, text: str) -> None:
        self.text += text

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("tty", [True, False])
def test_progress_is_one_line_on_a_terminal_and_one_line_per_change_in_a_log(tty: bool) -> None:
    from ipykeep.client.progress import ProgressLine, follow

    stream = _Stream(tty)
    states = iter([0, 1, 1, 2, 3])
    last = follow(
        lambda: next(states),
        lambda n: None if n == 3 else f"{n}/3 cells",
        lambda n: n == 3,
        ProgressLine(stream=stream),  # type: ignore[arg-type]
    )
    assert last == 3
    if tty:
        assert stream.text == "".join("\r" + f"{n}/3 cells".ljust(78) for n in range(3))
    else:
        assert stream.text == "0/3 cells\n1/3 cells\n2/3 cells\n"


def test_flags_show_no_value_placeholder_in_help() -> None:
    from typer.testing import CliRunner

    from ipykeep.cli.app import build_app

    app, runner = build_app(), CliRunner()
    for name in [None, *_commands()]:
        args = ["--help"] if name is None else [name, "--help"]
        shown = runner.invoke(app, args, env={"COLUMNS": "200"})
        assert shown.exit_code == 0, (name, shown.output)
        assert "<bool>" not in shown.output, (name, shown.output)
        assert "--help" in shown.output


#: The commands people use most: each shows examples in its help.
MAIN_COMMANDS = ("start", "stop", "status", "run", "restart", "exec", "read", "interrupt")
MAIN_COMMANDS += ("run-stale", "watch", "inspect", "namespace", "checkpoint", "restore")


def test_the_main_commands_show_examples_in_their_help() -> None:
    from typer.testing import CliRunner

    from ipykeep.cli.app import build_app
    from ipykeep.cli.commands import COMMANDS

    app, runner = build_app(), CliRunner()
    table = {c.name: c for c in COMMANDS}
    for name in MAIN_COMMANDS:
        examples = table[name].examples
        assert examples, name
        assert all(e.split("#")[0].split()[:2] == ["ipykeep", name] for e in examples), examples
        shown = runner.invoke(app, [name, "--help"], env={"COLUMNS": "80"}).output
        assert "Examples:" in shown, (name, shown)
        for example in examples:  # each on one line, whole, in an 80-column terminal
            assert f"$ {example}" in shown, (name, example, shown)


def _listing(type_name: str, value: str | None = None) -> Any:
    from ipykeep.api.summaries import NamespaceEntry, NamespaceListing

    entry = NamespaceEntry(name="obj", type=type_name, kind="object", value=value, cell="c1")
    return NamespaceListing(entries=[entry], count=1)


@pytest.mark.parametrize(
    ("type_name", "shown"),
    [
        (
            "__main__.VeryLongTypeNameForTestingTheColumnWidth",
            "…VeryLongTypeNameForTestingTheColumnWidth",
        ),
        ("pandas.core.frame.DataFrame", "pandas.core.frame.DataFrame"),
        (
            "a.b.c.d.e.f.g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z",
            "…g.h.i.j.k.l.m.n.o.p.q.r.s.t.u.v.w.x.y.z",
        ),
        (
            "ThisIsOneVeryLongClassNameWithoutAnyDotsInItAtAll",
            "ThisIsOneVeryLongClassNameWithoutAnyDotsInItAtAll",
        ),
    ],
)
def test_the_namespace_type_column_never_cuts_inside_a_word(type_name: str, shown: str) -> None:
    from ipykeep.client.summaries import render_namespace

    row = render_namespace(_listing(type_name)).splitlines()[1]
    assert row.split()[1] == shown, row


def test_a_namespace_value_is_cut_at_a_boundary_on_one_line() -> None:
    from ipykeep.client.summaries import COLUMN_WIDTH, render_namespace

    words = "first line\nsecond line with several more words than fit"
    lines = render_namespace(_listing("str", words)).splitlines()
    assert len(lines) == 3, lines  # header, the row, the footer: the newline is escaped
    header, row = lines[0], lines[1]
    start = header.index("shape/len")
    extent = row[start:].split("  ")[0]
    assert extent.endswith("…") and len(extent) <= COLUMN_WIDTH, extent
    full = "= " + words.replace("\n", "\\n")  # the value as rendered, on one line
    kept = extent[:-1]
    assert full.startswith(kept), (full, kept)
    after = full[len(kept)] if len(full) > len(kept) else " "
    assert not (kept[-1].isalnum() and after.isalnum()), (kept, after)  # not inside a word
