"""The one helper installer: installs once per source, adopts state, binds no user names."""

from __future__ import annotations

import sys

import pytest

from ipykeep.kernel.inkernel import DIGEST_ATTR, source_digest, source_install_expression

SOURCE = (
    "PROTOCOL = 3\ncalls = []\ndef _adopt(old):\n    global calls\n    if old is not None:\n"
    "        calls = old.calls\n"
)


@pytest.fixture
def name():
    module = "_ipykeep_test_helper"
    yield module
    sys.modules.pop(module, None)


def test_installs_once_and_evaluates_to_the_result(name: str) -> None:
    user_ns: dict = {}
    assert eval(source_install_expression(name, SOURCE, result="PROTOCOL"), user_ns) == 3
    mod = sys.modules[name]
    assert getattr(mod, DIGEST_ATTR) == source_digest(SOURCE)
    assert mod.__file__ == f"<ipykeep:{name}>"
    mod.calls.append("kept")
    assert eval(source_install_expression(name, SOURCE, result="PROTOCOL"), user_ns) == 3
    assert sys.modules[name] is mod and mod.calls == ["kept"]  # same source: untouched
    assert set(user_ns) <= {"__builtins__"}  # nothing bound in the caller's namespace


def test_new_source_replaces_the_module_and_adopts_its_state(name: str) -> None:
    eval(source_install_expression(name, SOURCE))
    sys.modules[name].calls.append("from the old copy")
    newer = SOURCE.replace("PROTOCOL = 3", "PROTOCOL = 4")
    assert eval(source_install_expression(name, newer, adopt="_adopt", result="PROTOCOL")) == 4
    assert sys.modules[name].calls == ["from the old copy"]


def test_works_as_a_statement(name: str) -> None:
    exec(source_install_expression(name, SOURCE), {})
    assert sys.modules[name].PROTOCOL == 3
