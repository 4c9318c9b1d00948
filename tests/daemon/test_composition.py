"""The composition root wires the engine and its collaborators explicitly, in a fixed order."""

from __future__ import annotations

from pathlib import Path

import pytest

from ipykeep.api import names
from ipykeep.checkpoints.service import CheckpointService
from ipykeep.daemon.composition import OBSERVER_ORDER, compose, compose_for_daemon
from ipykeep.daemon.server import Daemon
from ipykeep.debugger.service import DebuggerService
from ipykeep.editing.service import EditService
from ipykeep.engine.observer import SessionObserver
from ipykeep.environments.service import EnvironmentService
from ipykeep.inspection.service import InspectionService
from ipykeep.project.config import Config
from ipykeep.project.layout import ProjectPaths
from ipykeep.serve.console import ConsoleService
from ipykeep.serve.service import ServeService
from ipykeep.staleness.service import StalenessService

SERVICE_METHODS = {
    "run_stale": (StalenessService, "run_stale"),
    "watch_file": (StalenessService, "watch_file"),
    "plan_progress": (StalenessService, "plan_progress"),
    "inspect": (InspectionService, "inspect"),
    "namespace": (InspectionService, "namespace"),
    "serve": (ServeService, "serve"),
    "unserve": (ServeService, "unserve"),
    "publish": (ServeService, "publish"),
    "checkpoint": (CheckpointService, "checkpoint"),
    "restore": (CheckpointService, "restore"),
    "checkpoints": (CheckpointService, "checkpoints"),
    "fork_kernel": (CheckpointService, "fork_kernel"),
    "diff_fork": (CheckpointService, "diff_fork"),
    "add_packages": (EnvironmentService, "add_packages"),
    "debug": (DebuggerService, "debug"),
    "edit_cell": (EditService, "edit_cell"),
    "console": (ConsoleService, "console"),
}


def test_observers_are_attached_once_in_order(tmp_path: Path) -> None:
    comp = compose(ProjectPaths(tmp_path), Config(idle_timeout=0))
    assert comp.engine.observers == (
        comp.staleness,
        comp.checkpoints,
        comp.inspection,
        comp.serve,
        comp.environments,
        comp.debugger,
    )
    assert all(isinstance(o, SessionObserver) for o in comp.engine.observers)
    with pytest.raises(RuntimeError, match="already attached"):
        comp.engine.attach(SessionObserver())


def test_observer_order_is_declared_once_and_every_reader_comes_after_what_it_reads(
    tmp_path: Path,
) -> None:
    comp = compose(ProjectPaths(tmp_path), Config(idle_timeout=0))
    names_in_order = [slot.name for slot in OBSERVER_ORDER]
    assert set(names_in_order) == set(comp.services()), "every service has one slot"
    assert len(names_in_order) == len(set(names_in_order))
    services = comp.services()
    assert comp.engine.observers == tuple(services[n] for n in names_in_order)
    for position, slot in enumerate(OBSERVER_ORDER):
        assert slot.why, f"{slot.name}: say why it stands where it does"
        for read in slot.reads:
            assert names_in_order.index(read) < position, f"{slot.name} reads {read} first"


def test_service_methods_map_to_their_services(tmp_path: Path) -> None:
    comp = compose(ProjectPaths(tmp_path), Config(idle_timeout=0))
    served = {b.method.name: b.handler for b in comp.bindings()}
    assert len(served) == len(comp.bindings())  # each method is served once
    for name, (cls, attr) in SERVICE_METHODS.items():
        bound = served[name]
        assert isinstance(bound.__self__, cls) and bound.__name__ == attr  # type: ignore[attr-defined]
    engine = {n for n, h in served.items() if h.__self__ is comp.engine}  # type: ignore[attr-defined]
    assert engine | set(SERVICE_METHODS) == set(served)
    assert names.ALL - set(served) == {names.SHUTDOWN}  # the daemon serves that one itself


def test_daemon_serves_engine_and_service_methods(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    daemon = Daemon(tmp_path, compose_for_daemon)
    table = daemon.methods()
    assert set(table) == names.ALL
    for name, (cls, attr) in SERVICE_METHODS.items():
        handler = table[name].handler
        assert isinstance(handler.__self__, cls) and handler.__name__ == attr


def test_without_a_staleness_judge_no_stale_reasons(tmp_path: Path) -> None:
    from ipykeep.engine.engine import Engine

    engine = Engine(ProjectPaths(tmp_path), Config(idle_timeout=0))
    engine.attach(SessionObserver())
    assert engine.stale_reasons(None, None) is None  # type: ignore[arg-type]
