"""The composition root: builds the engine and its collaborators, in the order they observe.

Nothing is discovered or installed by magic: the daemon (and in-process users such as tests
and benchmarks) call ``compose``, which attaches the feature services to the engine as
observers in the order ``OBSERVER_ORDER`` declares, and ``rpc_methods`` lists every service
method the daemon serves beside the engine's own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ipykeep.checkpoints.service import CheckpointService
from ipykeep.engine.engine import Engine
from ipykeep.engine.observer import SessionObserver
from ipykeep.inspection.service import InspectionService
from ipykeep.project.config import Config
from ipykeep.project.layout import ProjectPaths
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
)


@dataclass(frozen=True)
class Composition:
    engine: Engine
    staleness: StalenessService
    checkpoints: CheckpointService
    inspection: InspectionService
    serve: ServeService

    def services(self) -> dict[str, SessionObserver]:
        """The feature services by the names ``OBSERVER_ORDER`` uses."""
        return {
            "staleness": self.staleness,
            "checkpoints": self.checkpoints,
            "inspection": self.inspection,
            "serve": self.serve,
        }

    def rpc_methods(self) -> dict[str, Callable[..., Any]]:
        """Daemon methods served by the collaborators (RPC name -> bound method)."""
        return {
            "run_stale": self.staleness.run_stale,
            "watch_file": self.staleness.watch_file,
            "plan_progress": self.staleness.plan_progress,
            "inspect": self.inspection.inspect,
            "namespace": self.inspection.namespace,
            "serve": self.serve.serve,
            "unserve": self.serve.unserve,
            "publish": self.serve.publish,
            "checkpoint": self.checkpoints.checkpoint,
            "restore": self.checkpoints.restore,
            "checkpoints": self.checkpoints.checkpoints,
        }


def compose(paths: ProjectPaths, config: Config) -> Composition:
    engine = Engine(paths, config)
    staleness = StalenessService(engine)
    composition = Composition(
        engine,
        staleness,
        CheckpointService(engine),
        InspectionService(engine, defining_cells=staleness.defining_cells),
        ServeService(engine),
    )
    services = composition.services()
    engine.attach(*(services[slot.name] for slot in OBSERVER_ORDER))
    return composition


def compose_for_daemon(
    paths: ProjectPaths, config: Config
) -> tuple[Engine, dict[str, Callable[..., Any]]]:
    """What ``core.daemon.Daemon`` needs: the engine and the extra RPC methods."""
    composition = compose(paths, config)
    return composition.engine, composition.rpc_methods()
