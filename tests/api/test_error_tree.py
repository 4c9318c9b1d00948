"""One error base: every ipykeep error is an ``IpykeepError``, and the tree drawn in
``ipykeep.api.errors`` is the real one."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import ipykeep
from ipykeep.api import errors
from ipykeep.api.errors import IpykeepError

#: In-kernel code is standard library only and never imports ipykeep; entry points run on import.
_SKIP = ("_inkernel", "ipykeep.__main__", "ipykeep.daemon.__main__")


def _modules() -> list[object]:
    found = []
    for mod in pkgutil.walk_packages(ipykeep.__path__, "ipykeep."):
        if not any(s in mod.name for s in _SKIP):
            found.append(importlib.import_module(mod.name))
    return found


def _order(cls: type) -> tuple[bool, str, int]:
    return (cls.__module__ != errors.__name__, cls.__module__, inspect.getsourcelines(cls)[1])


def draw(cls: type[IpykeepError] = IpykeepError) -> list[str]:
    """The tree under ``cls``, one line per class: its name (and its module, where that is not
    its parent's), then its code."""
    lines: list[str] = []

    def walk(node: type[IpykeepError], parent: str, prefix: str, branch: str) -> None:
        where = "" if node.__module__ == parent else f" ({node.__module__[8:]})"
        lines.append(f"{branch}{node.__name__}{where}".ljust(41) + " " + node.code)
        kids = sorted(node.__subclasses__(), key=_order)
        for i, kid in enumerate(kids):
            last = i == len(kids) - 1
            more, mark = ("    ", "└── ") if last else ("│   ", "├── ")
            walk(kid, node.__module__, prefix + more, prefix + mark)

    walk(cls, errors.__name__, "", "")
    return lines


def test_every_public_exception_of_ipykeep_derives_from_the_one_base() -> None:
    strays = [
        f"{module.__name__}.{name}"  # type: ignore[attr-defined]
        for module in _modules()
        for name, value in vars(module).items()
        if isinstance(value, type)
        and issubclass(value, BaseException)
        and value.__module__ == module.__name__  # type: ignore[attr-defined]
        and not name.startswith("_")
        and not issubclass(value, IpykeepError)
    ]
    assert strays == []


def test_the_package_error_names_are_the_shared_classes() -> None:
    from ipykeep.inspection import errors as inspection
    from ipykeep.staleness import errors as staleness

    assert inspection.UnknownVariableError is errors.UnknownNameError
    assert inspection.BadPathError is errors.UsageError
    assert inspection.InspectionError is IpykeepError
    assert staleness.ProbeError is errors.ProbeFailedError


def test_the_drawn_tree_is_the_real_one() -> None:
    _modules()
    doc = errors.__doc__ or ""
    drawn = doc.split("::\n\n", 1)[1].rstrip().splitlines()
    assert [line[4:].rstrip() for line in drawn] == [line.rstrip() for line in draw()]
