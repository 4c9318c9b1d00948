"""The composition root: builds the engine and its services, and collects what they serve.

Nothing is discovered or installed by magic: the daemon (and in-process users such as tests
and benchmarks) call ``compose``, which attaches the feature services to the engine as
observers in the order ``OBSERVER_ORDER`` declares; ``bindings`` gathers the declared methods
each of them serves, bound to the callables that serve them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ipykeep.api.spec import Bindings
from ipykeep.checkpoints.service import CheckpointService
from ipykeep.debugger.service import DebuggerService
from ipykeep.editing.service import EditService
from ipykeep.engine.engine import Engine
from ipykeep.engine.observer import SessionObserver
from ipykeep.environments.service import EnvironmentService
from ipykeep.inspection.service import InspectionService
from ipykeep.project.config import Config
from ipykeep.project.layout import ProjectPaths
from ipykeep.serve.console import ConsoleService
from ipykeep.serve.service import ServeService
from ipykeep.staleness.service import StalenessService


@dataclass(frozen=True)
class ObserverSlot:
    """One service's place among the engine's observers, and why it stands there."""

    name: str
    why: str
    #: services whose per-kernel records this one reads during the same event
    reads: tuple[str, ...] = ()


#: The order in which the engine calls its observers on every event (first to last).
OBSERVER_ORDER: tuple[ObserverSlot, ...] = (
    ObserverSlot("staleness", "records what each cell read, wrote and defined"),
    ObserverSlot(
        "checkpoints",
        "saves the values a cell wrote, as staleness recorded them",
        reads=("staleness",),
    ),
    ObserverSlot(
        "inspection",
        "names each variable's defining cell, from the staleness record",
        reads=("staleness",),
    ),
    ObserverSlot(
        "serve", "hands a browser's runs on after every record is complete", reads=("staleness",)
    ),
    ObserverSlot(
        "environments",
        "gives kernels import_path and records installs; names the cells that imported an"
        " upgraded package from the staleness record",
        reads=("staleness",),
    ),
    ObserverSlot(
        "debugger",
        "follows pauses of the main shell; installs after inspection, whose summarizers it uses",
    ),
)


@dataclass(frozen=True)
class Composition:
    engine: Engine
    staleness: StalenessService
    checkpoints: CheckpointService
    inspection: InspectionService
    serve: ServeService
    environments: EnvironmentService
    debugger: DebuggerService

    #: not an observer: it reacts to no engine event, it only serves ``edit_cell``
    editing: EditService
    #: not an observer either: it only serves ``console``
    console: ConsoleService

    def services(self) -> dict[str, SessionObserver]:
        """The feature services by the names ``OBSERVER_ORDER`` uses."""
        return {
            "staleness": self.staleness,
            "checkpoints": self.checkpoints,
            "inspection": self.inspection,
            "serve": self.serve,
            "environments": self.environments,
            "debugger": self.debugger,
        }

    def bindings(self) -> Bindings:
        """Every method the engine and its services serve (the daemon adds its own)."""
        return (
            *self.engine.bindings(),
            *self.staleness.bindings(),
            *self.inspection.bindings(),
            *self.serve.bindings(),
            *self.checkpoints.bindings(),
            *self.environments.bindings(),
            *self.debugger.bindings(),
            *self.editing.bindings(),
            *self.console.bindings(),
        )


def compose(paths: ProjectPaths, config: Config) -> Composition:
    engine = Engine(paths, config)
    staleness = StalenessService(engine)
    environments = EnvironmentService(
        engine,
        importing_cells=staleness.importing_cells,
        packages_installed=staleness.packages_installed,
    )
    # the engine asks the environments service which environment a local kernel runs in
    engine.environment_for = environments.environment_for
    checkpoints = CheckpointService(engine)
    composition = Composition(
        engine,
        staleness,
        checkpoints,
        InspectionService(engine, defining_cells=staleness.defining_cells),
        ServeService(engine),
        environments,
        DebuggerService(engine, load_before=checkpoints.load_before),
        EditService(engine, stale_reasons=staleness.stale_reasons),
        ConsoleService(engine),
    )
    services = composition.services()
    engine.attach(*(services[slot.name] for slot in OBSERVER_ORDER))
    return composition


def compose_for_daemon(paths: ProjectPaths, config: Config) -> tuple[Engine, Bindings]:
    """What ``ipykeep.daemon.server.Daemon`` needs: the engine and what it and its services
    serve."""
    composition = compose(paths, config)
    return composition.engine, composition.bindings()
