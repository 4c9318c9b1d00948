"""The package layering holds: import-linter contracts (pyproject.toml) and no private names
imported from another package."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "ipykeep"

#: private names still imported across packages, by importing file (to be made public there)
KNOWN_PRIVATE_IMPORTS: set[tuple[str, str]] = set()


def test_import_contracts_hold() -> None:
    lint = Path(sys.executable).with_name("lint-imports")
    assert lint.exists(), f"{lint} missing: install the dev extra (pip install -e '.[dev]')"
    done = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout


def test_every_mcp_server_module_is_in_its_layering() -> None:
    """The MCP server's layers contract is exhaustive: a module left out of it fails the lint
    (and so a cycle among the modules cannot hide in an unlisted one)."""
    import tomlkit  # tomllib is 3.11+

    pyproject = tomlkit.parse((ROOT / "pyproject.toml").read_text()).unwrap()
    contracts = pyproject["tool"]["importlinter"]
    mcp = [c for c in contracts["contracts"] if c.get("containers") == ["ipykeep.mcp_server"]]
    assert len(mcp) == 1 and mcp[0]["type"] == "layers" and mcp[0]["exhaustive"] is True
    listed = {m.strip() for layer in mcp[0]["layers"] for m in layer.split("|")}
    modules = {p.stem for p in (PACKAGE / "mcp_server").glob("*.py") if p.stem != "__init__"}
    assert listed == modules


def _package_of(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).parent.parts)


def _imported_package(path: Path, node: ast.ImportFrom) -> str:
    if node.level == 0:
        target = (node.module or "").split(".")
    else:
        base = list(path.relative_to(ROOT).parent.parts)
        base = base[: len(base) - (node.level - 1)]
        target = base + (node.module.split(".") if node.module else [])
    # ``from pkg.mod import _x``: the package is pkg (a module's own package)
    module_file = ROOT.joinpath(*target).with_suffix(".py")
    return ".".join(target[:-1]) if module_file.is_file() else ".".join(target)


def test_no_private_names_imported_across_packages() -> None:
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        if "_inkernel" in path.parts:
            continue
        tree = ast.parse(path.read_text("utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.ImportFrom):
                continue
            target = _imported_package(path, node)
            if not target.startswith("ipykeep") or target == _package_of(path):
                continue
            for alias in node.names:
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.add((path.relative_to(ROOT).as_posix(), alias.name))
    assert found <= KNOWN_PRIVATE_IMPORTS, sorted(found - KNOWN_PRIVATE_IMPORTS)


#: the single-file in-kernel summarizer is sent into kernels as one source text
SIZE_EXEMPT = {"ipykeep/inspection/_inkernel/summarize.py"}


def test_modules_stay_small() -> None:
    big = {
        path.relative_to(ROOT).as_posix(): n
        for path in PACKAGE.rglob("*.py")
        if (n := len(path.read_text("utf-8").splitlines())) > 800
    }
    over = {p: n for p, n in big.items() if p not in SIZE_EXEMPT}
    assert not over, f"modules over 800 lines (split them by job, not for size alone): {over}"


#: the jupyter_client/jupyter_server internals the --serve kernel map once set by hand; adoption
#: goes through the public start path instead (ipykeep/serve/kernels.py)
#: (``._ready`` as an attribute: a method of ours named ``_ready`` being called is not it)
PRIVATE_KERNEL_STATE = re.compile(
    r"\._kernel_spec\b|\._kernels\[|\._kernel_connections\b|\._kernel_ports\b|\._ready\b(?!\()"
)


def test_no_private_kernel_manager_state_is_touched() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{n}: {line.strip()}"
        for path in sorted(PACKAGE.rglob("*.py"))
        for n, line in enumerate(path.read_text("utf-8").splitlines(), 1)
        if PRIVATE_KERNEL_STATE.search(line)
    ]
    assert found == [], found
