"""The in-kernel module registry covers every in-kernel file, and each file keeps its rules:
standard library only, never ipykeep, a protocol version, a unique name."""

from __future__ import annotations

import ast
import json
import sys
from pathlib import Path

import pytest

from ipykeep.kernel import inkernel
from ipykeep.kernel.inkernel import MODULES, InKernelModule, install_expression, install_order

PACKAGE = inkernel.PACKAGE_DIR

#: Third-party imports allowed inside functions only, per file, with the reason. A kernel is an
#: IPython kernel, so ipykernel and IPython (and stack_data, which IPython's tracebacks use)
#: are always there; anything else is imported only once the user's code or the kernel's mode
#: has loaded it, and the code guards its absence.
LAZY_THIRD_PARTY: dict[str, dict[str, str]] = {
    "kernel/_inkernel/kernel_setup.py": {
        "IPython": "the kernel's own shell",
        "ipykernel": "the kernel's own package (parent poller, JSON cleaning), guarded",
        "stack_data": "IPython's traceback formatter, warmed before the tracer runs",
    },
    "staleness/_inkernel/ipyflow_probe.py": {
        "ipyflow": "only installed in ipyflow kernels; absent means 'not available'",
    },
    "staleness/_inkernel/datahash.py": {
        "numpy": "only called for values that are numpy arrays, so numpy is already loaded",
    },
    "debugger/_inkernel/debug.py": {
        "IPython": "the kernel's own shell, whose run_cell events arm the debugger",
    },
    "checkpoints/_inkernel/forkkernel.py": {
        "ipykernel": "the kernel's own package: the forked process builds its new kernel with it",
    },
    "checkpoints/_inkernel/snapshot.py": {
        "cloudpickle": "optional; its absence makes checkpoints unavailable, with the reason",
    },
}


def _inkernel_files() -> list[str]:
    return sorted(
        p.relative_to(PACKAGE).as_posix()
        for p in PACKAGE.glob("**/_inkernel/*.py")
        if p.name != "__init__.py"
    )


def _tree(module: InKernelModule) -> ast.Module:
    return ast.parse(module.source, filename=module.path)


def _imports(tree: ast.Module) -> list[tuple[str, bool, int]]:
    """(top-level package, imported inside a function, line) of every import."""
    found: list[tuple[str, bool, int]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef))
            if isinstance(child, ast.Import):
                found.extend((a.name.split(".")[0], in_function, child.lineno) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                assert child.level == 0, f"relative import at line {child.lineno}"
                found.append(((child.module or "").split(".")[0], in_function, child.lineno))
            visit(child, inner)

    visit(tree, False)
    return found


def _declared_protocol(tree: ast.Module) -> object:
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == inkernel.PROTOCOL_ATTR for t in node.targets
        ):
            return ast.literal_eval(node.value)
    return None


def _module_names_used(tree: ast.Module) -> set[str]:
    """In-kernel module names a file looks up: ``sys.modules[...]``, ``sys.modules.get(...)``
    with a constant key, and constants assigned to ``*_MODULE`` / ``MODULE_NAME``."""
    names: set[str] = set()

    def is_sys_modules(node: ast.AST) -> bool:
        return (
            isinstance(node, ast.Attribute)
            and node.attr == "modules"
            and isinstance(node.value, ast.Name)
            and node.value.id == "sys"
        )

    for node in ast.walk(tree):
        key: ast.AST | None = None
        if isinstance(node, ast.Subscript) and is_sys_modules(node.value):
            key = node.slice
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and is_sys_modules(node.func.value)
            and node.args
        ):
            key = node.args[0]
        elif isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and (t.id.endswith("_MODULE") or t.id == "MODULE_NAME")
            for t in node.targets
        ):
            key = node.value
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            if key.value.startswith("_ipykeep"):
                names.add(key.value)
    return names


def _needed_at_install(tree: ast.Module) -> set[str]:
    """Names of modules a file takes from ``sys.modules[...]`` while it is being executed (at
    module level or in a class body, not inside a function), constant keys resolved."""
    constants = {
        t.id: node.value.value
        for node in tree.body
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if (
                isinstance(child, ast.Subscript)
                and isinstance(child.value, ast.Attribute)
                and child.value.attr == "modules"
            ):
                key = child.slice
                value = key.value if isinstance(key, ast.Constant) else None
                if isinstance(key, ast.Name):
                    value = constants.get(key.id)
                if isinstance(value, str) and value.startswith("_ipykeep"):
                    names.add(value)
            visit(child)

    visit(tree)
    return names


def test_every_inkernel_file_is_registered_once() -> None:
    paths = [m.path for m in MODULES]
    assert sorted(paths) == _inkernel_files()
    assert len(set(paths)) == len(paths)


def test_names_are_unique_and_private() -> None:
    names = [m.name for m in MODULES]
    assert len(set(names)) == len(names)
    assert all(n.startswith("_ipykeep_") and n.isidentifier() for n in names)


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.name)
def test_imports_only_the_standard_library(module: InKernelModule) -> None:
    allowed = LAZY_THIRD_PARTY.get(module.path, {})
    stdlib = set(sys.stdlib_module_names) | {"__future__"}
    for name, in_function, line in _imports(_tree(module)):
        assert name != "ipykeep", f"{module.path}:{line} imports ipykeep"
        if name in stdlib:
            continue
        assert name in allowed, f"{module.path}:{line} imports {name}, not in the allow-list"
        assert in_function, f"{module.path}:{line} imports {name} at module level"


def test_the_allow_list_names_only_what_is_imported() -> None:
    by_path = {m.path: m for m in MODULES}
    for path, allowed in LAZY_THIRD_PARTY.items():
        imported = {name for name, _, _ in _imports(_tree(by_path[path]))}
        assert set(allowed) <= imported, (path, set(allowed) - imported)


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.name)
def test_declares_the_registered_protocol_version(module: InKernelModule) -> None:
    declared = _declared_protocol(_tree(module))
    assert isinstance(declared, int), f"{module.path} has no literal PROTOCOL_VERSION"
    assert declared == module.protocol


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.name)
def test_looks_up_only_registered_modules(module: InKernelModule) -> None:
    registered = {m.name for m in MODULES}
    assert _module_names_used(_tree(module)) <= registered


@pytest.mark.parametrize("module", MODULES, ids=lambda m: m.name)
def test_helpers_read_while_installing_are_required(module: InKernelModule) -> None:
    assert _needed_at_install(_tree(module)) <= {r.name for r in module.requires}


def test_requirements_come_first_in_the_registry_and_in_an_install() -> None:
    for i, module in enumerate(MODULES):
        assert all(MODULES.index(r) < i for r in module.requires), module.name
    order = install_order([inkernel.CHECKPOINT_LOAD, inkernel.STATEMON])
    assert order == (
        inkernel.CHECKPOINT_BLOB,
        inkernel.CHECKPOINT_FORK,
        inkernel.CHECKPOINT,
        inkernel.CHECKPOINT_LOAD,
        inkernel.REACH,
        inkernel.DATAHASH,
        inkernel.SETTINGS,
        inkernel.PLOTFP,
        inkernel.STATEMON,
    )
    assert install_order([inkernel.REACH, inkernel.STATEMON, inkernel.REACH]) == (
        inkernel.REACH,
        inkernel.DATAHASH,
        inkernel.SETTINGS,
        inkernel.PLOTFP,
        inkernel.STATEMON,
    )


def test_one_expression_installs_a_set_and_reports_the_protocols() -> None:
    wanted = (inkernel.CHECKPOINT_BLOB, inkernel.FILETRACK)
    try:
        user_ns: dict[str, object] = {}
        reply = eval(install_expression(*wanted), user_ns)
        assert json.loads(reply) == {m.name: m.protocol for m in wanted}
        installed = sys.modules[inkernel.FILETRACK.name]
        assert getattr(installed, inkernel.DIGEST_ATTR) == inkernel.FILETRACK.digest
        assert eval(install_expression(*wanted), user_ns) == reply
        assert sys.modules[inkernel.FILETRACK.name] is installed  # same source: kept
        assert set(user_ns) <= {"__builtins__"}
    finally:
        for m in wanted:
            sys.modules.pop(m.name, None)


def test_call_names_the_installed_module() -> None:
    assert inkernel.FILETRACK.call("stat_many", ["a"]) == (
        "__import__(\"sys\").modules['_ipykeep_filetrack'].stat_many(['a'])"
    )


def test_sources_are_the_package_files() -> None:
    for module in MODULES:
        assert module.source == (PACKAGE / module.path).read_text(encoding="utf-8")
        assert Path(module.path).parts[1] == "_inkernel"
